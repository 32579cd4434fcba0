#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "core/check.h"

namespace rl {

Status KvCacheConfig::validate() const {
  if (sliding_window < 0) return Status::error("kv cache: sliding_window must be >= 0");
  if (!window_groups.empty() && sliding_window != 0) {
    return Status::error("kv cache: with window groups, group 0 holds the full-attention layers (sliding_window 0)");
  }
  for (int32_t w : window_groups) {
    if (w <= 0) return Status::error("kv cache: a window group's window must be > 0, got " + std::to_string(w));
  }
  return Status::ok();
}

KvCacheManager::KvCacheManager(KvCacheConfig config)
    : config_(std::move(config)), pool_(config_.num_blocks, config_.block_size) {
  const Status st = config_.validate();
  RL_CHECK_MSG(st.is_ok(), "%s", st.message().c_str());
  if (!config_.hash_fn) config_.hash_fn = hash_block;
}

KvCacheManager::RequestBlocks& KvCacheManager::state_of(uint64_t key) {
  RequestBlocks& state = requests_[key];
  if (state.groups.empty()) state.groups.resize(static_cast<size_t>(num_groups()));
  return state;
}

void KvCacheManager::compute_hashes(RequestBlocks& state, const KvRequestView& request, int32_t num_blocks) const {
  const int32_t bs = block_size();
  RL_CHECK(static_cast<int64_t>(num_blocks) * bs <= static_cast<int64_t>(request.token_ids.size()));
  for (int32_t i = static_cast<int32_t>(state.block_hashes.size()); i < num_blocks; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &state.block_hashes[i - 1];
    state.block_hashes.push_back(
        config_.hash_fn(parent, request.token_ids.subspan(static_cast<size_t>(i) * bs, bs), request.cache_salt));
  }
}

int64_t KvCacheManager::first_needed_block(int64_t pos, int32_t window) const {
  if (window <= 0) return 0;
  return std::max<int64_t>(0, pos - window + 1) / block_size();
}

int64_t KvCacheManager::max_blocks_held(int64_t num_tokens, int64_t max_step) const {
  const int64_t bs = block_size(), all = (num_tokens + bs - 1) / bs;
  int64_t total = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int64_t w = config_.group_window(g);
    total += w <= 0 ? all : std::min<int64_t>(all, (w - 1 + max_step + bs - 1) / bs + 1);
  }
  return total;
}

void KvCacheManager::release_out_of_window(int32_t group, GroupBlocks& blocks, int64_t next_pos) {
  const int32_t window = config_.group_window(group);
  if (window <= 0) return;
  const int32_t end = static_cast<int32_t>(
      std::min<int64_t>(first_needed_block(next_pos, window), static_cast<int64_t>(blocks.block_ids.size())));
  if (end <= blocks.num_released) return;
  std::vector<BlockId> gone;
  for (int32_t i = end - 1; i >= blocks.num_released; --i) {  // later blocks first, like free()
    gone.push_back(blocks.block_ids[i]);
    blocks.table[i] = kNullBlock;
  }
  pool_.release(gone);
  blocks.num_released = end;
}

ComputedBlocks KvCacheManager::get_computed_blocks(const KvRequestView& request) {
  ComputedBlocks out;
  if (!config_.enable_prefix_caching || request.token_ids.empty()) return out;
  const int32_t bs = block_size();
  const int32_t max_blocks = (static_cast<int32_t>(request.token_ids.size()) - 1) / bs;
  RequestBlocks& state = state_of(request.key);
  compute_hashes(state, request, max_blocks);
  const auto tokens = [&](int32_t i) { return request.token_ids.subspan(static_cast<size_t>(i) * bs, bs); };
  BlockId parent = kNullBlock;
  for (int32_t i = 0; i < max_blocks; ++i) {
    std::optional<BlockId> hit = pool_.lookup(state.block_hashes[i], tokens(i), parent, request.cache_salt);
    if (!hit) break;
    out.block_ids.push_back(*hit);
    parent = *hit;
  }
  // Hybrid KV: the longest hit of m <= n blocks for which every window group has the blocks inside its window
  // of position m * bs, anchored to group 0's hit blocks. A missing block i rules out every m > i whose window
  // reaches back to it, which (windows only move forward) is every m > i: the next candidate is m = i.
  const int32_t num_window_groups = num_groups() - 1;
  int32_t m = static_cast<int32_t>(out.block_ids.size());
  std::vector<std::vector<BlockId>> hits(static_cast<size_t>(num_window_groups),
                                         std::vector<BlockId>(static_cast<size_t>(m), -1));  // -1: not looked up
  const auto hit = [&](int32_t g, int32_t i) {
    BlockId& h = hits[static_cast<size_t>(g - 1)][static_cast<size_t>(i)];
    if (h < 0) {
      h = pool_.lookup(state.block_hashes[i], tokens(i), out.block_ids[i], request.cache_salt, g).value_or(kNullBlock);
    }
    return h;
  };
  while (m > 0) {
    int32_t miss = -1;
    for (int32_t g = 1; g <= num_window_groups && miss < 0; ++g) {
      const int32_t first = static_cast<int32_t>(first_needed_block(int64_t{m} * bs, config_.group_window(g)));
      for (int32_t i = m - 1; i >= first && miss < 0; --i) {
        if (hit(g, i) == kNullBlock) miss = i;
      }
    }
    if (miss < 0) break;
    m = miss;
  }
  out.block_ids.resize(static_cast<size_t>(m));
  for (int32_t g = 1; g <= num_window_groups; ++g) {
    const int32_t first = static_cast<int32_t>(first_needed_block(int64_t{m} * bs, config_.group_window(g)));
    std::vector<BlockId> table(static_cast<size_t>(m), kNullBlock);
    for (int32_t i = first; i < m; ++i) table[static_cast<size_t>(i)] = hit(g, i);
    out.window_block_ids.push_back(std::move(table));
  }
  out.num_computed_tokens = m * bs;
  return out;
}

std::optional<std::vector<BlockId>> KvCacheManager::allocate_slots(const KvRequestView& request,
                                                                   int32_t num_new_tokens,
                                                                   const ComputedBlocks* computed) {
  RL_CHECK(num_new_tokens >= 0);
  RequestBlocks& state = state_of(request.key);
  const int32_t num_hit_blocks = computed ? static_cast<int32_t>(computed->block_ids.size()) : 0;
  RL_CHECK(computed == nullptr || state.groups[0].block_ids.empty());
  RL_CHECK(computed == nullptr || num_hit_blocks == 0 ||
           static_cast<int32_t>(computed->window_block_ids.size()) == num_groups() - 1);
  // The hit's table in group g (nullptr: none).
  const auto hit_table = [&](int32_t g) -> const std::vector<BlockId>* {
    if (num_hit_blocks == 0) return nullptr;
    return g == 0 ? &computed->block_ids : &computed->window_block_ids[static_cast<size_t>(g - 1)];
  };
  const int64_t num_tokens = static_cast<int64_t>(request.num_computed_tokens) +
                             (computed ? computed->num_computed_tokens : 0) + num_new_tokens;
  // Blocks behind the window of the first new token are not needed again: released first, so they count as free.
  for (int32_t g = 0; g < num_groups(); ++g) release_out_of_window(g, state.groups[g], num_tokens - num_new_tokens);
  const int64_t num_required = (num_tokens + block_size() - 1) / block_size();
  std::vector<int32_t> num_new_blocks(static_cast<size_t>(num_groups()));
  int64_t total_new = 0;
  // Hit blocks that sit idle in the free queue leave it when touched, so they do not count as free here.
  int32_t num_idle_hits = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>* hits = hit_table(g);
    const int64_t num_held = static_cast<int64_t>(state.groups[g].block_ids.size()) + num_hit_blocks;
    num_new_blocks[g] = static_cast<int32_t>(std::max<int64_t>(0, num_required - num_held));
    total_new += num_new_blocks[g];
    if (hits) {
      for (BlockId id : *hits) num_idle_hits += id != kNullBlock && pool_.ref_count(id) == 0;
    }
  }
  if (total_new > pool_.num_free_blocks() - num_idle_hits) {
    if (state.empty()) requests_.erase(request.key);
    return std::nullopt;
  }
  // Every group's hits leave the free queue before any group allocates, so no hit is handed out again.
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& blocks = state.groups[g];
    if (const std::vector<BlockId>* hits = hit_table(g)) {
      for (BlockId id : *hits) {
        if (id != kNullBlock) pool_.touch(id);
      }
      blocks.block_ids = *hits;
      blocks.table = *hits;
      // A window group's hit starts with the blocks behind its window, which it never holds.
      blocks.num_released = static_cast<int32_t>(
          std::find_if(hits->begin(), hits->end(), [](BlockId id) { return id != kNullBlock; }) - hits->begin());
      blocks.num_cached_blocks = num_hit_blocks;
    }
  }
  std::vector<BlockId> fresh_all;
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& blocks = state.groups[g];
    std::vector<BlockId> fresh = pool_.allocate(num_new_blocks[g]);
    blocks.block_ids.insert(blocks.block_ids.end(), fresh.begin(), fresh.end());
    blocks.table.insert(blocks.table.end(), fresh.begin(), fresh.end());
    fresh_all.insert(fresh_all.end(), fresh.begin(), fresh.end());
  }
  if (computed && config_.enable_prefix_caching) {
    pool_.record_prefix_query(static_cast<int64_t>(request.token_ids.size()), computed->num_computed_tokens);
  }
  if (num_hit_blocks > 0) {  // cached hits behind the window (one all-window group)
    for (int32_t g = 0; g < num_groups(); ++g) release_out_of_window(g, state.groups[g], num_tokens - num_new_tokens);
  }
  return fresh_all;
}

void KvCacheManager::cache_full_blocks(const KvRequestView& request) {
  if (!config_.enable_prefix_caching) return;
  auto it = requests_.find(request.key);
  if (it == requests_.end()) return;
  RequestBlocks& state = it->second;
  const int32_t bs = block_size();
  const int32_t num_full = std::min<int32_t>(request.num_computed_tokens / bs,
                                             static_cast<int32_t>(state.groups[0].block_ids.size()));
  compute_hashes(state, request, std::max<int32_t>(num_full, 0));
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& blocks = state.groups[g];
    if (num_full <= blocks.num_cached_blocks) continue;
    // The scheduler caches a block when it schedules the step that completes it, before a later step can
    // release it; a released block that was never cached (no such path today) is simply not entered.
    for (int32_t i = std::max(blocks.num_cached_blocks, blocks.num_released); i < num_full; ++i) {
      // Group 0 chains to its previous block; a window group anchors to group 0's block of the same position.
      const BlockId parent = g > 0 ? state.groups[0].block_ids[i] : i == 0 ? kNullBlock : blocks.block_ids[i - 1];
      pool_.cache(blocks.block_ids[i], state.block_hashes[i],
                  request.token_ids.subspan(static_cast<size_t>(i) * bs, bs), parent, request.cache_salt, g);
    }
    blocks.num_cached_blocks = num_full;
  }
}

void KvCacheManager::free(uint64_t key) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return;
  for (int32_t g = num_groups() - 1; g >= 0; --g) {
    GroupBlocks& blocks = it->second.groups[g];
    std::vector<BlockId>& ids = blocks.block_ids;
    ids.erase(ids.begin(), ids.begin() + blocks.num_released);  // already back in the pool
    std::reverse(ids.begin(), ids.end());
    pool_.release(ids);
  }
  requests_.erase(it);
}

int32_t KvCacheManager::truncate(uint64_t key, int32_t num_tokens) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return 0;
  int32_t num_released = 0;
  for (int32_t g = num_groups() - 1; g >= 0; --g) {
    GroupBlocks& blocks = it->second.groups[g];
    const int32_t keep = std::max({blocks.num_cached_blocks, blocks.num_released,
                                   (num_tokens + block_size() - 1) / block_size()});
    const int32_t held = static_cast<int32_t>(blocks.block_ids.size());
    if (keep >= held) continue;
    std::vector<BlockId> tail(blocks.block_ids.begin() + keep, blocks.block_ids.end());
    std::reverse(tail.begin(), tail.end());
    pool_.release(tail);
    blocks.block_ids.resize(static_cast<size_t>(keep));
    blocks.table.resize(static_cast<size_t>(keep));
    num_released += held - keep;
  }
  return num_released;
}

std::span<const BlockId> KvCacheManager::block_table(uint64_t key, int32_t group) const {
  RL_CHECK(group >= 0 && group < num_groups());
  auto it = requests_.find(key);
  if (it == requests_.end() || it->second.groups.empty()) return {};
  return it->second.groups[group].table;
}

Status KvCacheManager::check_integrity() const {
  RL_RETURN_IF_ERROR(pool_.check_integrity());
  std::vector<int32_t> num_holders(pool_.num_blocks(), 0);
  for (const auto& [key, state] : requests_) {
    const std::string who = "kv cache: request " + std::to_string(key);
    if (static_cast<int32_t>(state.groups.size()) != num_groups()) return Status::error(who + " lacks groups");
    for (int32_t g = 0; g < num_groups(); ++g) {
      const GroupBlocks& blocks = state.groups[g];
      const std::string where = who + " group " + std::to_string(g);
      if (blocks.block_ids.size() != state.groups[0].block_ids.size()) {
        return Status::error(where + " has a block table of another length than group 0's");
      }
      if (blocks.num_cached_blocks > static_cast<int32_t>(blocks.block_ids.size())) {
        return Status::error(where + " caches more blocks than it holds");
      }
      if (blocks.table.size() != blocks.block_ids.size() || blocks.num_released < 0 ||
          blocks.num_released > static_cast<int32_t>(blocks.block_ids.size()) ||
          (config_.group_window(g) <= 0 && blocks.num_released != 0)) {
        return Status::error(where + " has an inconsistent block table");
      }
      for (size_t i = 0; i < blocks.block_ids.size(); ++i) {
        const bool released = static_cast<int32_t>(i) < blocks.num_released;
        if (blocks.table[i] != (released ? kNullBlock : blocks.block_ids[i])) {
          return Status::error(where + " block table entry " + std::to_string(i) + " disagrees with its blocks");
        }
      }
      for (BlockId id :
           std::span<const BlockId>(blocks.block_ids).subspan(static_cast<size_t>(blocks.num_released))) {
        if (id <= kNullBlock || id >= pool_.num_blocks()) {
          return Status::error(where + " holds invalid block " + std::to_string(id));
        }
        ++num_holders[id];
      }
    }
  }
  for (BlockId id = 1; id < pool_.num_blocks(); ++id) {
    if (num_holders[id] != pool_.ref_count(id)) {
      return Status::error("kv cache: block " + std::to_string(id) + " has ref_count " +
                           std::to_string(pool_.ref_count(id)) + " but " + std::to_string(num_holders[id]) +
                           " holders");
    }
  }
  return Status::ok();
}

}  // namespace rl
