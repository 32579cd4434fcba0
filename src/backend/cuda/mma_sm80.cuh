// The warp-level tensor-core and async-copy primitives (sm_80 and later) that the attention and GEMM kernels
// share: cp.async 16-byte copies into shared memory, ldmatrix fragment loads, the bf16 m16n8k16 MMA with f32
// accumulators, the special-function-unit 2^x, bf16 packing, and the quad transpose that gives a lane 8 consecutive
// columns of an accumulator row (16-byte stores).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace rl::cuda {

// A 16-byte global → shared copy; valid = false writes zeros (the source is not read).
__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// 16-byte shared-memory load / store at a shared-space address (volatile: they keep their program order).
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a · b for one m16n8k16 tile (bf16 inputs, f32 accumulators).
__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 operands (the FP8 KV cache's decode path: e4m3 converts to f16 with one instruction per pair).
__device__ __forceinline__ void mma_f16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the special-function unit (callers pass x ≤ 0 or -inf; flush-to-zero is harmless for softmax weights).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(f32_to_bf16_bits(lo)) | (uint32_t(f32_to_bf16_bits(hi)) << 16);
}
// The 4 × 4 transpose across a quad (the 4 lanes that share a row of an MMA accumulator; q = lane % 4): lane q
// holds v[j], the bf16 pair at columns 8 j + 2 q of column group j (j < 4); it returns lane p's v[q] as word p, the
// 8 consecutive columns of group q. Two butterfly steps of two shuffles; every lane of the warp must take part.
__device__ __forceinline__ uint4 quad_transpose(const uint32_t (&v)[4], int q) {
  const bool b = q & 1, c = q & 2;
  // With lane q ^ 1: the groups j with j % 2 == q % 2, from both lanes. x<s><h>: from the lane whose bit 0 is s
  // (bit 1 as q's), group 2 h + q % 2.
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, b ? v[0] : v[1], 1);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, b ? v[2] : v[3], 1);
  const uint32_t x00 = b ? r0 : v[0], x10 = b ? v[1] : r0, x01 = b ? r1 : v[2], x11 = b ? v[3] : r1;
  // With lane q ^ 2: group q, from all four lanes.
  const uint32_t y0 = __shfl_xor_sync(0xffffffffu, c ? x00 : x01, 2);
  const uint32_t y1 = __shfl_xor_sync(0xffffffffu, c ? x10 : x11, 2);
  const uint32_t k0 = c ? x01 : x00, k1 = c ? x11 : x10;
  return c ? make_uint4(y0, y1, k0, k1) : make_uint4(k0, k1, y0, y1);
}

// Two floats as f16 (round to nearest even; past ±65504 -> ±inf), lo in the low half: one cvt.rn.f16x2.f32.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // .x = lo
  return uint32_t(__half_as_ushort(h.x)) | (uint32_t(__half_as_ushort(h.y)) << 16);
}

}  // namespace rl::cuda
