// Device helpers shared by the kernels: bf16 conversion, 16-byte vectors, warp and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rl::cuda {

// A step's input id as the graph reads it: a pending id v < 0 is the previous step's sampled id of row -v - 1
// (CudaBackend::resolve_pending_ids, and the staging copy that resolves as it writes, launch_copy_segments). A failed
// row's code (< 0) becomes token 0: that request is finished when the step is processed, and its pending input must
// still be a valid embedding row meanwhile.
__device__ __forceinline__ int32_t resolve_pending_id(int32_t v, const int32_t* sampled) {
  return v < 0 ? max(sampled[-static_cast<int64_t>(v) - 1], 0) : v;
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
// Round to nearest even (as torch and rl::f32_to_bf16 do).
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

// 8 bf16 in one 16-byte vector <-> 8 floats.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = uint32_t(f32_to_bf16_bits(f[2 * i])) | (uint32_t(f32_to_bf16_bits(f[2 * i + 1])) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// FP8 e4m3fn (the FP8 KV cache; host side: core/dtype.h). Every e4m3 value is exact in f16, f32 and bf16.
// f32 -> e4m3: round to nearest even, saturating to ±448, NaN -> 0x7f (rl::f32_to_fp8_e4m3 on the host).
__device__ __forceinline__ uint8_t f32_to_fp8_bits(float f) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}
// Two e4m3 codes (low byte: element 0) -> two f16 (low half: element 0): one cvt.rn.f16x2.e4m3x2 on sm_89+.
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
// 8 e4m3 codes (8 bytes, element 0 in the low byte of v.x) -> 8 f16 in one 16-byte vector, in the same element order
// as 8 bf16 of a bf16 row (so fragment layouts built for bf16 loads hold the same elements).
__device__ __forceinline__ uint4 fp8x8_to_f16x8(uint2 v) {
  return make_uint4(fp8x2_to_f16x2(v.x), fp8x2_to_f16x2(v.x >> 16), fp8x2_to_f16x2(v.y), fp8x2_to_f16x2(v.y >> 16));
}
// The same 8 codes as bf16 (exact: through f16 and f32; a pair takes one e4m3x2 -> f16x2, two f16 -> f32 and one
// f32x2 -> bf16x2 conversion).
__device__ __forceinline__ uint4 fp8x8_to_bf16x8(uint2 v) {
  const uint4 h = fp8x8_to_f16x8(v);
  const uint32_t w[4] = {h.x, h.y, h.z, h.w};
  uint32_t r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
    const float hi = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);  // .x = lo: the low half
    r[i] = uint32_t(__bfloat16_as_ushort(b.x)) | (uint32_t(__bfloat16_as_ushort(b.y)) << 16);
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}
// 2 e4m3 codes (the low 16 bits, element 0 lowest) -> 2 floats (exact).
__device__ __forceinline__ void unpack2_fp8(uint32_t two_codes, float* f) {
  const uint32_t h = fp8x2_to_f16x2(two_codes);
  f[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
  f[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(h >> 16)));
}
// 8 e4m3 codes -> 8 floats (exact).
__device__ __forceinline__ void unpack8_fp8(uint2 v, float* f) {
  unpack2_fp8(v.x, f);
  unpack2_fp8(v.x >> 16, f + 2);
  unpack2_fp8(v.y, f + 4);
  unpack2_fp8(v.y >> 16, f + 6);
}
// 8 floats -> 8 e4m3 codes (8 bytes, element 0 lowest), each as f32_to_fp8_bits.
__device__ __forceinline__ uint2 pack8_fp8(const float* f) {
  uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    w[i] = uint32_t(f32_to_fp8_bits(f[4 * i])) | (uint32_t(f32_to_fp8_bits(f[4 * i + 1])) << 8) |
           (uint32_t(f32_to_fp8_bits(f[4 * i + 2])) << 16) | (uint32_t(f32_to_fp8_bits(f[4 * i + 3])) << 24);
  }
  return make_uint2(w[0], w[1]);
}

// Element i of a KV cache that holds bf16 (fp8 false) or FP8 e4m3 bytes (fp8 true, the same element index), as f32:
// the one-element read of the simple kernels (naive, sliding window).
__device__ __forceinline__ float kv_cache_elem(const uint16_t* cache, int64_t i, bool fp8) {
  if (fp8) {
    const uint32_t h = fp8x2_to_f16x2(reinterpret_cast<const uint8_t*>(cache)[i]);
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
  }
  return bf16_bits_to_f32(cache[i]);
}

// An 8-byte load of data read exactly once (an FP8 KV page's 8 elements), bypassing L1 as load_stream does.
__device__ __forceinline__ uint2 load_stream8(const void* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// A 16-byte load of data read exactly once (weights, KV pages): bypasses L1 so it keeps reused data.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Loads element i of a weight vector stored as bf16 (is_f32 false) or f32.
__device__ __forceinline__ float load_param(const void* p, bool is_f32, int64_t i) {
  return is_f32 ? static_cast<const float*>(p)[i] : bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, ≤ 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < num_warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

// Programmatic dependent launch (sm_90; no-ops on older targets). A kernel launched with the programmatic
// stream serialization attribute may start while its predecessor in the stream still runs: before pdl_wait() it
// may only read data no kernel of the step writes (weights); pdl_wait() returns once the predecessor has completed
// and its writes are visible. pdl_launch_dependents() lets such a successor be scheduled before this kernel ends
// (the successor's pdl_wait() still waits for this kernel's completion, so calling it early is always safe).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline unsigned int ceil_div(int64_t a, int64_t b) { return static_cast<unsigned int>((a + b - 1) / b); }

}  // namespace rl::cuda
