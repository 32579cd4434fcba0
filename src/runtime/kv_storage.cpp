#include "runtime/kv_storage.h"

namespace rl {

int64_t KvStorage::bytes_per_block(const ModelConfig& c, int64_t block_size, DType dtype) {
  return c.kv_bytes_per_token(static_cast<int64_t>(dtype_size(dtype))) * block_size;
}

KvStorage::KvStorage(Backend* backend, const ModelConfig& c, int64_t num_blocks, int64_t block_size, DType dtype)
    : num_blocks_(num_blocks), block_size_(block_size) {
  const int64_t per_tensor = num_blocks * block_size * c.num_kv_heads * c.head_dim;
  const size_t bytes_per_tensor = static_cast<size_t>(per_tensor) * dtype_size(dtype);
  buffer_ = DeviceBuffer(backend, bytes_per_tensor * 2 * static_cast<size_t>(c.num_hidden_layers));
  // Zeroed so that reading a never-written slot (a bug) gives finite values rather than NaN garbage.
  backend->fill_zero(buffer_.data(), buffer_.size());
  char* base = static_cast<char*>(buffer_.data());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    KvLayer layer;
    layer.k = Tensor(base + (2 * l) * bytes_per_tensor, dtype, {num_blocks, block_size, c.num_kv_heads, c.head_dim});
    layer.v =
        Tensor(base + (2 * l + 1) * bytes_per_tensor, dtype, {num_blocks, block_size, c.num_kv_heads, c.head_dim});
    layers_.push_back(layer);
  }
}

}  // namespace rl
