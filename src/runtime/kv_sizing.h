// KV sizing, its own step of engine creation (issue 12.7): after the weights are loaded, the blocks that fit
// the memory left once everything else a step needs is reserved: the model's activation workspace and the
// sampler's buffers. CPU: a fixed budget (default min(2 GiB, a quarter of free memory)).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/status.h"
#include "loader/kv_groups.h"
#include "loader/model_config.h"

namespace rl {

struct KvSizingInput {
  int64_t block_size = 16;
  int64_t num_kv_blocks = 0;          // > 0: use exactly this many
  int64_t kv_cache_memory_bytes = 0;  // > 0: the KV budget (both devices); 0 = the device default
  double gpu_memory_utilization = 0.9;
  int64_t workspace_bytes = 0;        // the model's activations for the largest step
  int64_t sampler_bytes = 0;          // Sampler's device buffers
  int64_t extra_block_bytes = 0;      // per block, KV kept beside the target's (a draft model's)
  // CPU tensor parallelism: this many ranks keep their caches in the same host memory, so each gets this
  // fraction of the CPU budget (GPU ranks each size from their own device).
  int32_t num_host_ranks = 1;
};

struct KvSizing {
  int64_t num_blocks = 0;   // including the null block 0
  int64_t block_bytes = 0;
  int64_t budget_bytes = 0;  // what the blocks were sized from (0 when num_kv_blocks was given)
};

// An error says what did not fit. plan: the KV groups whose slots a block holds (null: every layer).
Result<KvSizing> size_kv_cache(const KvSizingInput& in, const ModelConfig& mc, Backend& backend, DType kv_dtype,
                               const KvGroupPlan* plan = nullptr);

// The sampler's device bytes for max_rows rows (see runtime/sampler.h): parameters, sparse lists, penalty
// state, raw-logit scratch and outputs.
int64_t sampler_device_bytes(int64_t max_rows, int64_t vocab_size);

}  // namespace rl
