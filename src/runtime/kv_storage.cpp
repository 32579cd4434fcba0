#include "runtime/kv_storage.h"

namespace rl {

int64_t KvStorage::bytes_per_block(const ModelConfig& c, int64_t block_size, DType dtype) {
  return c.kv_bytes_per_token(static_cast<int64_t>(dtype_size(dtype))) * block_size;
}

KvStorage::KvStorage(Backend* backend, const ModelConfig& c, int64_t num_blocks, int64_t block_size, DType dtype)
    : num_blocks_(num_blocks), block_size_(block_size) {
  RL_CHECK(static_cast<int64_t>(c.kv_spec.size()) == c.num_hidden_layers);
  const size_t es = dtype_size(dtype);
  const size_t slots = static_cast<size_t>(num_blocks * block_size);
  buffer_ = DeviceBuffer(backend, static_cast<size_t>(bytes_per_block(c, block_size, dtype)) *
                                      static_cast<size_t>(num_blocks));
  // Zeroed so that reading a never-written slot (a bug) gives finite values rather than NaN garbage.
  backend->fill_zero(buffer_.data(), buffer_.size());
  char* p = static_cast<char*>(buffer_.data());
  for (const KvLayerSpec& s : c.kv_spec) {
    KvLayer layer;
    if (s.kind == KvKind::kLatent) {
      layer.k = Tensor(p, dtype, {num_blocks, block_size, 1, s.latent_dim});
      p += slots * static_cast<size_t>(s.latent_dim) * es;
    } else {
      layer.k = Tensor(p, dtype, {num_blocks, block_size, s.num_kv_heads, s.head_dim});
      p += slots * static_cast<size_t>(s.num_kv_heads * s.head_dim) * es;
      layer.v = Tensor(p, dtype, {num_blocks, block_size, s.num_kv_heads, s.v_head_dim});
      p += slots * static_cast<size_t>(s.num_kv_heads * s.v_head_dim) * es;
    }
    layers_.push_back(layer);
  }
}

}  // namespace rl
