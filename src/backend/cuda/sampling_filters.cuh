// Device sampling helpers (sampling.cu): order-preserving float keys, the counter-based uniform shared with the
// CPU (core/random.h), and block-wide reductions over 1024 threads.
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

namespace rl::cuda {

constexpr int kSampleThreads = 1024;

// Maps floats to unsigned keys with the same order (larger float → larger key).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ uint64_t mix64_sample(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1]: 24 random bits, shifted by half a step so that -log(u) is finite.
__device__ __forceinline__ float uniform_open(uint64_t stream, uint64_t i) {
  const uint64_t r = mix64_sample(stream ^ mix64_sample(i));
  return (static_cast<float>(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// Block max of v (all threads get it). scratch: >= 32 floats of shared memory.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : -FLT_MAX;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block argmax of (v, i), ties → the lowest i; every thread gets the winner's value and index (index INT_MAX:
// no thread had a candidate). sv, si: >= 32 entries of shared memory.
__device__ __forceinline__ void block_argmax_vi(float* pv, int* pi, float* sv, int* si) {
  float v = *pv;
  int i = *pi;
  const auto merge = [&] {
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, i, o);
      if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
      }
    }
  };
  merge();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? sv[lane] : -FLT_MAX;
  i = lane < static_cast<int>(blockDim.x / 32) ? si[lane] : INT_MAX;
  merge();
  *pv = v;
  *pi = i;
}

// Block argmax of (v, i), ties → the lowest i; every thread gets the index.
__device__ __forceinline__ int block_argmax(float v, int i, float* sv, int* si) {
  block_argmax_vi(&v, &i, sv, si);
  return i;
}

}  // namespace rl::cuda
