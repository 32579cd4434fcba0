// The KV cache memory of all layers, shaped by the model's KV spec (ModelConfig::kv_spec, Model::kv_spec()) and
// its KV groups (loader/kv_groups.h): per layer K [num_blocks, block_size, num_kv_heads, head_dim] and V
// [.., v_head_dim] (a latent layer: one tensor [num_blocks, block_size, 1, latent_dim] in k, v empty), in one
// backend allocation. With one group (the default) every layer has its own memory. With hybrid groups the
// layers of slot s (the s-th layer of each group) share the memory of slot s: a block id then belongs to one
// group, which the KV manager (src/kv) guarantees; this only holds the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "loader/kv_groups.h"
#include "loader/model_config.h"

namespace rl {

class KvStorage {
 public:
  // plan: the KV groups (null: one group of every layer, plan_kv_groups(spec, false, 1)).
  KvStorage(Backend* backend, const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype,
            const KvGroupPlan* plan = nullptr);

  const std::vector<KvLayer>& layers() const { return layers_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  const KvGroupPlan& plan() const { return plan_; }
  // Writes zeros over blocks [0, num_blocks) of every layer (clamped to the pool), which hold zeros already: their
  // pages become resident now. The CPU backend maps the pool lazily (CpuBackend::alloc_zeroed), so a block's first
  // write otherwise faults its pages in during a step (a fresh huge page took 1-3 ms on the 2-vCPU build machine).
  // Benchmarks call it before they measure. Returns the bytes written.
  size_t prefault(int64_t num_blocks);
  int32_t num_groups() const { return plan_.num_groups(); }
  // Bytes one block takes across all layer slots (plan null: all layers).
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size, DType dtype,
                                 const KvGroupPlan* plan = nullptr);

 private:
  Backend* backend_;
  DeviceBuffer buffer_;
  KvGroupPlan plan_;
  std::vector<KvLayer> layers_;
  int64_t num_blocks_, block_size_;
};

}  // namespace rl
