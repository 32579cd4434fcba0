// Kernels of tensor parallelism: the vocab-parallel embedding (one block per token row). A plain launch (no PDL):
// it follows the step's staging copy and precedes an all-reduce, so there is no neighbour to overlap with.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/tp_kernels.h"

namespace rl::cuda {
namespace {

__global__ void embedding_shard_kernel(const int32_t* ids, const void* table, bool table_f32, int64_t rows,
                                       int64_t hidden, int64_t vocab_begin, uint16_t* out) {
  const int64_t t = blockIdx.x;
  const int64_t r = static_cast<int64_t>(ids[t]) - vocab_begin;
  uint16_t* o = out + t * hidden;
  if (r < 0 || r >= rows) {  // another rank's row: this rank contributes zeros to the all-reduce
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = 0;
    return;
  }
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    o[i] = f32_to_bf16_bits(load_param(table, table_f32, r * hidden + i));
  }
}

}  // namespace

void launch_embedding_shard(const int32_t* ids, int64_t n, const void* table, DType table_dt, int64_t rows,
                            int64_t hidden, int64_t vocab_begin, uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  embedding_shard_kernel<<<static_cast<unsigned int>(n), kRowThreads, 0, stream>>>(
      ids, table, table_dt == DType::kF32, rows, hidden, vocab_begin, out);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
