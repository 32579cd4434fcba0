// Kernels of the kAvx512 tier that the higher AVX-512 tiers reuse. Only callable on a CPU with
// AVX-512 F/BW/VL/DQ.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_kernels.h"

namespace rl::avx512 {

float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float s, const float* x, float* y, int64_t n);
float dot_bf16(const float* a, const uint16_t* b, int64_t n);
void axpy_bf16(float s, const uint16_t* x, float* y, int64_t n);
bool attn_group_f32(const AttnGroupArgs& a);
bool attn_group_bf16(const AttnGroupArgsBf16& a);
bool attn_span_f32(const AttnSpanArgs& a);  // cpu_attention_span_avx512.cpp
bool attn_span_bf16(const AttnSpanArgsBf16& a);
bool attn_span_fp8(const AttnSpanArgsFp8& a);

}  // namespace rl::avx512
