#include "runtime/kv_storage.h"

#include <algorithm>

namespace rl {

int64_t KvStorage::bytes_per_block(const ModelConfig& c, int64_t block_size, DType dtype, const KvGroupPlan* plan) {
  const int64_t elems = plan ? plan->elems_per_token() : c.kv_bytes_per_token(1);
  return elems * static_cast<int64_t>(dtype_size(dtype)) * block_size;
}

KvStorage::KvStorage(Backend* backend, const ModelConfig& c, int64_t num_blocks, int64_t block_size, DType dtype,
                     const KvGroupPlan* plan)
    : backend_(backend), plan_(plan ? *plan : plan_kv_groups(c.kv_spec, false, 1)), num_blocks_(num_blocks),
      block_size_(block_size) {
  RL_CHECK(static_cast<int64_t>(c.kv_spec.size()) == c.num_hidden_layers);
  RL_CHECK(plan_.layer_slot.size() == c.kv_spec.size() && plan_.num_groups() <= kMaxKvGroups);
  const size_t es = dtype_size(dtype);
  const size_t slots = static_cast<size_t>(num_blocks * block_size);
  // Zeroed so that reading a never-written slot (a bug) gives finite values rather than NaN garbage.
  buffer_ = DeviceBuffer(backend,
                         static_cast<size_t>(bytes_per_block(c, block_size, dtype, &plan_)) *
                             static_cast<size_t>(num_blocks),
                         DeviceBuffer::Zeroed{});
  // Slot s starts after the pages of slots 0..s-1.
  std::vector<char*> slot_base;
  char* p = static_cast<char*>(buffer_.data());
  for (int64_t elems : plan_.slot_elems) {
    slot_base.push_back(p);
    p += slots * static_cast<size_t>(elems) * es;
  }
  for (size_t i = 0; i < c.kv_spec.size(); ++i) {
    const KvLayerSpec& s = c.kv_spec[i];
    char* q = slot_base[static_cast<size_t>(plan_.layer_slot[i])];
    KvLayer layer;
    layer.group = plan_.layer_group[i];
    if (s.kind == KvKind::kLatent) {
      layer.k = Tensor(q, dtype, {num_blocks, block_size, 1, s.latent_dim});
    } else {
      layer.k = Tensor(q, dtype, {num_blocks, block_size, s.num_kv_heads, s.head_dim});
      q += slots * static_cast<size_t>(s.num_kv_heads * s.head_dim) * es;
      layer.v = Tensor(q, dtype, {num_blocks, block_size, s.num_kv_heads, s.v_head_dim});
    }
    layers_.push_back(layer);
  }
}

size_t KvStorage::prefault(int64_t num_blocks) {
  num_blocks = std::clamp<int64_t>(num_blocks, 0, num_blocks_);
  size_t bytes = 0;
  for (const KvLayer& l : layers_) {
    for (const Tensor* t : {&l.k, &l.v}) {
      if (t->data == nullptr) continue;
      const size_t n = t->nbytes() / static_cast<size_t>(num_blocks_) * static_cast<size_t>(num_blocks);
      backend_->fill_zero(t->data, n);
      bytes += n;
    }
  }
  return bytes;
}

}  // namespace rl
