// KV groups (hybrid KV cache, the idea of vLLM's hybrid allocator): a model that mixes full-attention and
// sliding-window layers (GPT-OSS) keeps one block table per request for each kind of layer, so the window
// layers hold only the blocks of their window. All groups draw block ids from one pool; a block is laid out as
// one page per layer *slot*, and slot i holds the i-th layer of every group, so a block id in group g means the
// memory of g's layers only and a block costs max(layers per group) pages, not num_layers. A long sequence then
// costs about (full layers) pages per token instead of (all layers): half for GPT-OSS.
//
// Invariants: group 0 holds the full-attention (and latent) layers when there are several groups; every layer
// has exactly one (group, slot), and no two layers of one group share a slot; slot_elems[s] is the largest
// elems_per_token of the layers in slot s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/model_config.h"

namespace rl {

// At most this many KV groups (more kinds of layers fall back to one group): the runner stages one slot
// mapping and one block table per group.
inline constexpr int32_t kMaxKvGroups = 4;

struct KvGroupPlan {
  std::vector<int64_t> windows;      // per group: 0 = keeps every position, > 0 its sliding window
  std::vector<int32_t> layer_group;  // per layer
  std::vector<int32_t> layer_slot;   // per layer: its page within a block
  std::vector<int64_t> slot_elems;   // per slot: elements per token position

  int32_t num_groups() const { return static_cast<int32_t>(windows.size()); }
  int32_t num_slots() const { return static_cast<int32_t>(slot_elems.size()); }
  int64_t group_num_layers(int32_t group) const;
  // Elements one token position of a block holds over all slots: the KV cache's cost per token of group 0.
  int64_t elems_per_token() const;
  // Elements the cache holds for one sequence of `context` tokens in blocks of block_size, steps of max_step
  // tokens: whole blocks per group, a window group at most the blocks of its window (KvCacheManager's bound).
  int64_t elems_at(int64_t context, int64_t block_size, int64_t max_step) const;
  // "full: 12 layers; window 128: 12 layers" (inspect, logs).
  std::string describe() const;
};

// hybrid: one group per kind of layer (full and latent layers together as group 0, then one group per distinct
// window, ascending) when the model mixes kinds and has at most max_groups of them. Otherwise one group of
// every layer, each in its own slot: window 0, or the largest window when every layer has one (the KV manager
// may then release blocks behind it; see KvCacheConfig::sliding_window).
KvGroupPlan plan_kv_groups(const std::vector<KvLayerSpec>& spec, bool hybrid, int32_t max_groups);

}  // namespace rl
