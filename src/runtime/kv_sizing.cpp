#include "runtime/kv_sizing.h"

#include <algorithm>
#include <climits>
#include <string>

#include "runtime/kv_storage.h"
#include "sched/sampling_params.h"

namespace rl {

int64_t sampler_device_bytes(int64_t rows, int64_t vocab) {
  const int64_t words = (vocab + 31) / 32;
  return rows * (static_cast<int64_t>(sizeof(SampleRowParams)) + 8 * kMaxLogitBias + 4 * (kMaxStopTokenIds + 64) +
                 4 * words /* mask */ + 4 * vocab /* counts */ + 4 * words /* prompt bits */ +
                 4 * vocab /* raw scratch */ + 8 + 8 * kMaxTopLogprobs);
}

Result<KvSizing> size_kv_cache(const KvSizingInput& in, const ModelConfig& mc, Backend& backend, DType kv_dtype,
                               const KvGroupPlan* plan) {
  if (in.block_size <= 0 || in.block_size > 1024) return Status::error("block size must be in [1, 1024]");
  KvSizing s;
  s.block_bytes = KvStorage::bytes_per_block(mc, in.block_size, kv_dtype, plan);
  s.num_blocks = in.num_kv_blocks;
  if (s.num_blocks <= 0) {
    size_t free_b = 0, total_b = 0;
    backend.memory_info(&free_b, &total_b);
    const auto too_big = [&](int64_t others) {
      return Status::error("kv_cache_memory_bytes " + std::to_string(in.kv_cache_memory_bytes) +
                           " does not fit the free memory (" + std::to_string(free_b) + " bytes, of which " +
                           std::to_string(others) + " are needed for the workspace and sampler)");
    };
    if (backend.device() == DeviceKind::kCuda) {
      // Workspace with 50 % headroom (allocator rounding, cuBLASLt plans), and 256 MiB for everything else.
      const int64_t others = in.workspace_bytes * 3 / 2 + in.sampler_bytes + (256ll << 20);
      if (in.kv_cache_memory_bytes > 0) {
        // An explicit KV size (vLLM's kv_cache_memory_bytes) replaces the utilisation rule, but must fit.
        if (in.kv_cache_memory_bytes + others > static_cast<int64_t>(free_b)) return too_big(others);
        s.budget_bytes = in.kv_cache_memory_bytes;
      } else {
        if (!(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1)) {
          return Status::error("--gpu-memory-utilization must be in (0, 1]");
        }
        const int64_t used = static_cast<int64_t>(total_b - free_b);
        s.budget_bytes =
            static_cast<int64_t>(in.gpu_memory_utilization * static_cast<double>(total_b)) - used - others;
      }
    } else {
      if (in.kv_cache_memory_bytes > static_cast<int64_t>(free_b)) return too_big(0);
      s.budget_bytes = in.kv_cache_memory_bytes > 0
                           ? in.kv_cache_memory_bytes
                           : std::min<int64_t>(2ll << 30, static_cast<int64_t>(free_b / 4));
      s.budget_bytes /= std::max(1, in.num_host_ranks);
    }
    s.num_blocks = s.budget_bytes / (s.block_bytes + in.extra_block_bytes);
  }
  if (s.num_blocks < 2) {
    return Status::error("not enough memory for the KV cache: " + std::to_string(s.num_blocks) + " blocks of " +
                         std::to_string(s.block_bytes) + " bytes (budget " + std::to_string(s.budget_bytes) +
                         " bytes after weights, " + std::to_string(in.workspace_bytes) + " bytes of workspace and " +
                         std::to_string(in.sampler_bytes) + " bytes of sampler buffers)");
  }
  s.num_blocks = std::min<int64_t>(s.num_blocks, INT32_MAX / 2);
  return s;
}

}  // namespace rl
