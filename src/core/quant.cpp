#include "core/quant.h"

#include <algorithm>
#include <cmath>

namespace rl {

void quantize_row_i8(const float* w, int64_t cols, int8_t* q, float* scale, int32_t* row_sum) {
  float amax = 0;
  for (int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(w[i]));
  const float s = amax > 0 ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / s;
  int32_t sum = 0;
  for (int64_t i = 0; i < cols; ++i) {
    const float v = std::nearbyint(w[i] * inv);
    const int32_t qi = static_cast<int32_t>(std::clamp(v, -127.0f, 127.0f));
    q[i] = static_cast<int8_t>(qi);
    sum += qi;
  }
  *scale = s;
  *row_sum = sum;
}

float quantize_act_row_i8(const float* x, int64_t cols, int8_t* q) {
  float amax = 0;
  for (int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0)) {
    std::fill(q, q + cols, static_cast<int8_t>(0));
    return 0;
  }
  const float inv = 127.0f / amax;
  for (int64_t i = 0; i < cols; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
  }
  return amax / 127.0f;
}

}  // namespace rl
