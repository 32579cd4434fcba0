// Kernels of tensor parallelism (docs/distributed.md): the vocab-parallel embedding lookup.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace rl::cuda {

// out[t] = table[ids[t] - vocab_begin] (bf16) when that row is one of the table's `rows`, zeros otherwise.
void launch_embedding_shard(const int32_t* ids, int64_t n, const void* table, DType table_dt, int64_t rows,
                            int64_t hidden, int64_t vocab_begin, uint16_t* out, cudaStream_t stream);

}  // namespace rl::cuda
