#include "model/rope.h"

#include <cmath>

namespace rl {

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int64_t d = c.head_dim, half = d / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  // transformers: 1 / base ** (arange(0, d, 2).float() / d), evaluated in f32.
  const float base = static_cast<float>(c.rope_theta);
  for (int64_t i = 0; i < half; ++i) {
    float expo = static_cast<float>(2 * i) / static_cast<float>(d);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, expo);
  }
  if (c.rope_scaling.type == RopeScalingType::kLlama3) {
    const auto& rs = c.rope_scaling;
    const float factor = static_cast<float>(rs.factor);
    const float low = static_cast<float>(rs.low_freq_factor), high = static_cast<float>(rs.high_freq_factor);
    const float old_ctx = static_cast<float>(rs.original_max_position_embeddings);
    const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    const float pi = 3.141592653589793f;
    for (auto& f : inv) {
      float wavelen = 2.0f * pi / f;
      float scaled = wavelen > low_wavelen ? f / factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        float smooth = (old_ctx / wavelen - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

}  // namespace rl
