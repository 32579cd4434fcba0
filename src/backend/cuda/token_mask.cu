// apply_token_bitmask on the device: one thread per 32-token word; a word of all ones (the common case outside
// structured output, and for most of a JSON string's vocabulary) is skipped after one load.
#include <cuda_runtime.h>

#include <cmath>

#include "backend/cuda/cuda_kernels.h"

namespace rl::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void apply_token_bitmask_kernel(float* logits, int64_t vocab, const int32_t* bitmask, int64_t words) {
  const int64_t r = blockIdx.y;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const uint32_t m = static_cast<uint32_t>(bitmask[r * words + w]);
  if (m == 0xffffffffu) return;
  float* row = logits + r * vocab;
  const int64_t base = w * 32;
  for (int b = 0; b < 32 && base + b < vocab; ++b)
    if (!((m >> b) & 1u)) row[base + b] = -INFINITY;
}
}  // namespace

void launch_apply_token_bitmask(float* logits, int64_t rows, int64_t vocab, const int32_t* bitmask, int64_t words,
                                cudaStream_t stream) {
  if (rows == 0) return;
  dim3 grid(static_cast<unsigned int>((words + kThreads - 1) / kThreads), static_cast<unsigned int>(rows));
  apply_token_bitmask_kernel<<<grid, kThreads, 0, stream>>>(logits, vocab, bitmask, words);
}

}  // namespace rl::cuda
