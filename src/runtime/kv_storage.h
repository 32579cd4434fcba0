// The KV cache memory of all layers: per layer K and V as [num_blocks, block_size, num_kv_heads, head_dim]
// in one backend allocation. The KV manager (src/kv) hands out block ids; this only holds the bytes.
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
  // Bytes one block takes across all layers (K and V).
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size, DType dtype);

 private:
  DeviceBuffer buffer_;
  std::vector<KvLayer> layers_;
  int64_t num_blocks_, block_size_;
};

}  // namespace rl
