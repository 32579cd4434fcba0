// The fast CPU kernels, one table per instruction-set tier (cpu_isa.h). CpuBackend picks the table
// once, at construction; every entry computes the same thing as the readable reference in
// cpu_gemm.cpp, which is also the kScalar table. A kernel computes output columns [n0, n1) of y [m,
// n] = x [m, k] · wᵀ (w [n, k], the PyTorch/HF weight layout) on the calling thread; cpu_linear.cpp
// prepares the activations once per call and splits n over the pool.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/quant.h"

namespace rl {

// Activations as the kernels read them: x in f32, and, when the table asks for it, the same rows
// rounded to bf16 (for vdpbf16ps) or quantised per row to int8 with one f32 scale each (for the
// int8 weights). Row stride ld (elements) is k rounded up to 64, zero-padded, so kernels may read
// whole vectors past k.
struct LinearActs {
  const float* x = nullptr;          // [m, k], stride k
  const uint16_t* x_bf16 = nullptr;  // [m, ld]
  const int8_t* x_i8 = nullptr;      // [m, ld]
  const float* x_scale = nullptr;    // [m]
  int64_t ld = 0;
};

using LinearF32Fn = void (*)(const LinearActs& a, const float* w, float* y, int64_t m, int64_t n,
                             int64_t k, int64_t n0, int64_t n1);
using LinearBf16Fn = void (*)(const LinearActs& a, const uint16_t* w, float* y, int64_t m,
                              int64_t n, int64_t k, int64_t n0, int64_t n1);
using LinearI8Fn = void (*)(const LinearActs& a, const I8WeightView& w, float* y, int64_t m,
                            int64_t n, int64_t k, int64_t n0, int64_t n1);

// Causal attention of the `group` query heads that share one KV head, for one query token: keys [0, nk) of its
// sequence, read through the block table (slot = table[j / bs] * bs + j % bs; a slot's K and V rows start at
// slot * slot_stride in k and v, which already point at the KV head). q and out: group rows of d, contiguous, f32.
// KV: the cache's element type, float (f32 cache) or uint16_t (bf16 cache: raw bf16 bits, widened exactly to f32
// as they are read, so a bf16 cache computes what an f32 cache holding the same values computes).
template <typename KV>
struct AttnGroupArgsT {
  const float* q = nullptr;
  float* out = nullptr;
  const KV* k = nullptr;
  const KV* v = nullptr;
  const int32_t* table = nullptr;
  int64_t group = 0, d = 0, bs = 0, nk = 0, slot_stride = 0;
  float scale = 1.0f;
};
using AttnGroupArgs = AttnGroupArgsT<float>;
using AttnGroupArgsBf16 = AttnGroupArgsT<uint16_t>;

// One query token's attention for all num_heads heads over keys [j0, j1) of its sequence (j0 a multiple of 16),
// not yet normalised: m[h] = the largest scaled score, l[h] = Σ_j p_j and o[h] = Σ_j p_j v_j with p_j = exp(s_j -
// m[h]). Spans of one token's keys combine as partial softmaxes do (cpu_attention.cpp). k and v point at KV head
// 0 of slot 0; a slot's rows start at slot * num_kv_heads * d. q: [num_heads, d]; o: [num_heads, d]; f32.
// j1 == j0 computes nothing: the call only says whether the kernel takes the shape.
template <typename KV>
struct AttnSpanArgsT {
  const float* q = nullptr;
  const KV* k = nullptr;
  const KV* v = nullptr;
  const int32_t* table = nullptr;
  int64_t num_heads = 0, num_kv_heads = 0, d = 0, bs = 0, j0 = 0, j1 = 0;
  float scale = 1.0f;
  float* o = nullptr;
  float* m = nullptr;
  float* l = nullptr;
};
using AttnSpanArgs = AttnSpanArgsT<float>;
using AttnSpanArgsBf16 = AttnSpanArgsT<uint16_t>;
using AttnSpanArgsFp8 = AttnSpanArgsT<uint8_t>;

struct CpuKernels {
  CpuIsa isa = CpuIsa::kScalar;
  bool bf16_acts = false;  // linear_bf16 reads LinearActs::x_bf16 (x rounded to bf16) instead of x
  LinearF32Fn linear_f32 =
      nullptr;  // fast tiers: their own GEMV for m <= kGemvMaxRows, else OpenBLAS sgemm
  LinearBf16Fn linear_bf16 = nullptr;
  LinearI8Fn linear_i8 = nullptr;  // reads x_i8 / x_scale
  // dot(a, b) over n f32 values (attention scores).
  float (*dot_f32)(const float* a, const float* b, int64_t n) = nullptr;
  // y[i] += s * x[i] (attention's weighted sum of V rows).
  void (*axpy_f32)(float s, const float* x, float* y, int64_t n) = nullptr;
  // The same over a bf16 row b / x (a bf16 KV cache), each element widened exactly to f32 (bits << 16) and then
  // multiplied in f32: equal to dot_f32 / axpy_f32 on the widened values.
  float (*dot_bf16)(const float* a, const uint16_t* b, int64_t n) = nullptr;
  void (*axpy_bf16)(float s, const uint16_t* x, float* y, int64_t n) = nullptr;
  // One query token's attention for a group of query heads (AttnGroupArgs), with an online softmax over chunks
  // of 16 keys; false when the shape is not supported. Null: the reference loop (cpu_attention.cpp) only.
  bool (*attn_group_f32)(const AttnGroupArgs& a) = nullptr;
  bool (*attn_group_bf16)(const AttnGroupArgsBf16& a) = nullptr;  // the same over a bf16 KV cache
  // A token's span of keys for all its heads (AttnSpanArgs); false when the shape is not supported. Null: none
  // (then attn_group, else the reference).
  bool (*attn_span_f32)(const AttnSpanArgs& a) = nullptr;
  bool (*attn_span_bf16)(const AttnSpanArgsBf16& a) = nullptr;
  bool (*attn_span_fp8)(const AttnSpanArgsFp8& a) = nullptr;  // an fp8 e4m3 cache
  // SwiGLU: out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i], i < n (silu_mul and the fused
  // linear_silu_mul both call it, so they agree bitwise).
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
};

// The reference attention loops read a KV row through these: an f32 row as it is, a bf16 row widened.
inline float kv_dot(const CpuKernels& k, const float* q, const float* row, int64_t n) { return k.dot_f32(q, row, n); }
inline float kv_dot(const CpuKernels& k, const float* q, const uint16_t* row, int64_t n) {
  return k.dot_bf16(q, row, n);
}
inline void kv_axpy(const CpuKernels& k, float s, const float* row, float* y, int64_t n) { k.axpy_f32(s, row, y, n); }
inline void kv_axpy(const CpuKernels& k, float s, const uint16_t* row, float* y, int64_t n) {
  k.axpy_bf16(s, row, y, n);
}
// An fp8 e4m3 row (an FP8 KV cache) is widened exactly into f32 first, so these equal dot_f32 / axpy_f32 on the
// widened values, as the bf16 forms do. n <= kKvRowMax.
constexpr int64_t kKvRowMax = 1024;
inline void widen_fp8_row(const uint8_t* row, float* out, int64_t n) {
  RL_CHECK(n <= kKvRowMax);
  for (int64_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(row[i]);
}
inline float kv_dot(const CpuKernels& k, const float* q, const uint8_t* row, int64_t n) {
  float w[kKvRowMax];
  widen_fp8_row(row, w, n);
  return k.dot_f32(q, w, n);
}
inline void kv_axpy(const CpuKernels& k, float s, const uint8_t* row, float* y, int64_t n) {
  float w[kKvRowMax];
  widen_fp8_row(row, w, n);
  k.axpy_f32(s, w, y, n);
}
// The tier's kernel for the cache's element type (null: none; an fp8 cache has a span kernel but no grouped one).
inline auto attn_group_kernel(const CpuKernels& k, const float*) { return k.attn_group_f32; }
inline auto attn_group_kernel(const CpuKernels& k, const uint16_t*) { return k.attn_group_bf16; }
inline auto attn_group_kernel(const CpuKernels&, const uint8_t*) {
  return static_cast<bool (*)(const AttnGroupArgsT<uint8_t>&)>(nullptr);
}
inline auto attn_span_kernel(const CpuKernels& k, const float*) { return k.attn_span_f32; }
inline auto attn_span_kernel(const CpuKernels& k, const uint16_t*) { return k.attn_span_bf16; }
inline auto attn_span_kernel(const CpuKernels& k, const uint8_t*) { return k.attn_span_fp8; }

// Up to this many rows, the f32 path streams the weights with the GEMV instead of calling sgemm.
constexpr int64_t kGemvMaxRows = 4;

// OpenBLAS sgemm (single-threaded) on output columns [n0, n1): the f32 GEMM of every tier.
void cpu_sgemm_slice(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                     int64_t n0, int64_t n1);

// The table of a tier; a tier above the CPU's must never be called (its instructions would fault).
const CpuKernels& cpu_kernels(CpuIsa isa);

// Per-tier tables (cpu_kernels_<tier>.cpp).
const CpuKernels& cpu_kernels_scalar();
const CpuKernels& cpu_kernels_avx2();
const CpuKernels& cpu_kernels_avx512();
const CpuKernels& cpu_kernels_avx512_bf16();
const CpuKernels& cpu_kernels_avx512_fp16();

}  // namespace rl
