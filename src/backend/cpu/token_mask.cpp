// The CPU reference of apply_token_bitmask (backend.h).
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"

namespace rl {

void CpuBackend::apply_token_bitmask(const Tensor& logits, const Tensor& bitmask) {
  RL_CHECK(logits.dtype == DType::kF32 && bitmask.dtype == DType::kI32 && logits.ndim == 2 && bitmask.ndim == 2);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), words = bitmask.dim(1);
  RL_CHECK(bitmask.dim(0) == rows && words * 32 >= vocab);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.as<float>() + r * vocab;
    const uint32_t* m = reinterpret_cast<const uint32_t*>(bitmask.as<int32_t>()) + r * words;
    for (int64_t t = 0; t < vocab; ++t)
      if (!((m[t >> 5] >> (t & 31)) & 1u)) row[t] = neg_inf;
  }
}

}  // namespace rl
