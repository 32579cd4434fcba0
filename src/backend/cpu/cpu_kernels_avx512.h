// Kernels of the kAvx512 tier that the higher AVX-512 tiers reuse. Only callable on a CPU with
// AVX-512 F/BW/VL/DQ.
#pragma once

#include <cstdint>

namespace rl::avx512 {

float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float s, const float* x, float* y, int64_t n);

}  // namespace rl::avx512
