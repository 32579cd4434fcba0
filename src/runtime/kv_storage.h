// The KV cache memory of all layers, shaped by the model's KV spec (ModelConfig::kv_spec, Model::kv_spec()):
// per layer K [num_blocks, block_size, num_kv_heads, head_dim] and V [.., v_head_dim] (a latent layer: one
// tensor [num_blocks, block_size, 1, latent_dim] in k, v empty), in one backend allocation. The KV manager
// (src/kv) hands out block ids; this only holds the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "loader/model_config.h"

namespace rl {

class KvStorage {
 public:
  KvStorage(Backend* backend, const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype);

  const std::vector<KvLayer>& layers() const { return layers_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  // Bytes one block takes across all layers.
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size, DType dtype);

 private:
  DeviceBuffer buffer_;
  std::vector<KvLayer> layers_;
  int64_t num_blocks_, block_size_;
};

}  // namespace rl
