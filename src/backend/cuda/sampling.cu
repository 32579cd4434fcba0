// Greedy sampling on the device: the argmax of each f32 logits row (ties → the lowest id, as the CPU sampler),
// so a greedy decode step downloads num_seqs ids instead of num_seqs × vocab logits.
#include <cfloat>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"

namespace rl::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

__device__ inline bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// One block per row: each thread scans a strided slice, then a warp-shuffle and shared-memory reduction.
__global__ void argmax_rows_kernel(const float* logits, int64_t vocab, int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float bv = -FLT_MAX;
  int bi = INT_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    float v = row[i];
    if (v != v) continue;  // NaN never wins
    if (better(v, static_cast<int>(i), bv, bi)) {
      bv = v;
      bi = static_cast<int>(i);
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    float ov = __shfl_down_sync(0xffffffffu, bv, off);
    int oi = __shfl_down_sync(0xffffffffu, bi, off);
    if (better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int si[kArgmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x / 32;
    bv = lane < nw ? sv[lane] : -FLT_MAX;
    bi = lane < nw ? si[lane] : INT_MAX;
    for (int off = 16; off > 0; off >>= 1) {
      float ov = __shfl_down_sync(0xffffffffu, bv, off);
      int oi = __shfl_down_sync(0xffffffffu, bi, off);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) out[blockIdx.x] = bi == INT_MAX ? 0 : bi;
  }
}

}  // namespace

void launch_argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned int>(rows), kArgmaxThreads, 0, stream>>>(logits, vocab, out);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
