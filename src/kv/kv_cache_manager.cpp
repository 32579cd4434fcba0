#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "core/check.h"

namespace rl {

KvCacheManager::KvCacheManager(KvCacheConfig config)
    : config_(std::move(config)), pool_(config_.num_blocks, config_.block_size) {
  if (!config_.hash_fn) config_.hash_fn = hash_block;
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

int64_t KvCacheManager::max_blocks_held(int64_t num_tokens, int64_t max_step) const {
  const int64_t bs = block_size(), all = (num_tokens + bs - 1) / bs;
  if (config_.sliding_window <= 0) return all;
  return std::min<int64_t>(all, (config_.sliding_window - 1 + max_step + bs - 1) / bs + 1);
}

void KvCacheManager::release_out_of_window(RequestBlocks& state, int64_t next_pos) {
  if (config_.sliding_window <= 0) return;
  const int64_t first_needed = std::max<int64_t>(0, next_pos - config_.sliding_window + 1);
  const int32_t end = static_cast<int32_t>(
      std::min<int64_t>(first_needed / block_size(), static_cast<int64_t>(state.block_ids.size())));
  if (end <= state.num_released) return;
  std::vector<BlockId> gone;
  for (int32_t i = end - 1; i >= state.num_released; --i) {  // later blocks first, like free()
    gone.push_back(state.block_ids[i]);
    state.table[i] = kNullBlock;
  }
  pool_.release(gone);
  state.num_released = end;
}

ComputedBlocks KvCacheManager::get_computed_blocks(const KvRequestView& request) {
  ComputedBlocks out;
  if (!config_.enable_prefix_caching || request.token_ids.empty()) return out;
  const int32_t bs = block_size();
  const int32_t max_blocks = (static_cast<int32_t>(request.token_ids.size()) - 1) / bs;
  RequestBlocks& state = requests_[request.key];
  compute_hashes(state, request, max_blocks);
  BlockId parent = kNullBlock;
  for (int32_t i = 0; i < max_blocks; ++i) {
    std::optional<BlockId> hit = pool_.lookup(state.block_hashes[i],
                                              request.token_ids.subspan(static_cast<size_t>(i) * bs, bs),
                                              parent, request.cache_salt);
    if (!hit) break;
    out.block_ids.push_back(*hit);
    parent = *hit;
  }
  out.num_computed_tokens = static_cast<int32_t>(out.block_ids.size()) * bs;
  return out;
}

std::optional<std::vector<BlockId>> KvCacheManager::allocate_slots(const KvRequestView& request,
                                                                   int32_t num_new_tokens,
                                                                   const ComputedBlocks* computed) {
  RL_CHECK(num_new_tokens >= 0);
  RequestBlocks& state = requests_[request.key];
  const int32_t num_hit_blocks = computed ? static_cast<int32_t>(computed->block_ids.size()) : 0;
  RL_CHECK(computed == nullptr || state.block_ids.empty());
  const int64_t num_tokens = static_cast<int64_t>(request.num_computed_tokens) +
                             (computed ? computed->num_computed_tokens : 0) + num_new_tokens;
  // Blocks behind the window of the first new token are not needed again: released first, so they count as free.
  release_out_of_window(state, num_tokens - num_new_tokens);
  const int64_t num_required = (num_tokens + block_size() - 1) / block_size();
  const int64_t num_held = static_cast<int64_t>(state.block_ids.size()) + num_hit_blocks;
  const int32_t num_new_blocks = static_cast<int32_t>(std::max<int64_t>(0, num_required - num_held));
  // Hit blocks that sit idle in the free queue leave it when touched, so they do not count as free here.
  int32_t num_idle_hits = 0;
  for (int32_t i = 0; i < num_hit_blocks; ++i) num_idle_hits += pool_.ref_count(computed->block_ids[i]) == 0;
  if (num_new_blocks > pool_.num_free_blocks() - num_idle_hits) {
    if (state.block_ids.empty() && state.block_hashes.empty()) requests_.erase(request.key);
    return std::nullopt;
  }
  if (computed) {
    for (BlockId id : computed->block_ids) pool_.touch(id);
    state.block_ids = computed->block_ids;
    state.table = computed->block_ids;
    state.num_cached_blocks = num_hit_blocks;
    if (config_.enable_prefix_caching) {
      pool_.record_prefix_query(static_cast<int64_t>(request.token_ids.size()), computed->num_computed_tokens);
    }
  }
  std::vector<BlockId> fresh = pool_.allocate(num_new_blocks);
  state.block_ids.insert(state.block_ids.end(), fresh.begin(), fresh.end());
  state.table.insert(state.table.end(), fresh.begin(), fresh.end());
  if (computed) release_out_of_window(state, num_tokens - num_new_tokens);  // cached hits behind the window
  return fresh;
}

void KvCacheManager::cache_full_blocks(const KvRequestView& request) {
  if (!config_.enable_prefix_caching) return;
  auto it = requests_.find(request.key);
  if (it == requests_.end()) return;
  RequestBlocks& state = it->second;
  const int32_t bs = block_size();
  const int32_t num_full = std::min<int32_t>(request.num_computed_tokens / bs,
                                             static_cast<int32_t>(state.block_ids.size()));
  if (num_full <= state.num_cached_blocks) return;
  compute_hashes(state, request, num_full);
  // The scheduler caches a block when it schedules the step that completes it, before a later step can release
  // it; a released block that was never cached (no such path today) is simply not entered.
  for (int32_t i = std::max(state.num_cached_blocks, state.num_released); i < num_full; ++i) {
    const BlockId parent = i == 0 ? kNullBlock : state.block_ids[i - 1];
    pool_.cache(state.block_ids[i], state.block_hashes[i],
                request.token_ids.subspan(static_cast<size_t>(i) * bs, bs), parent, request.cache_salt);
  }
  state.num_cached_blocks = num_full;
}

void KvCacheManager::free(uint64_t key) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return;
  std::vector<BlockId>& ids = it->second.block_ids;
  ids.erase(ids.begin(), ids.begin() + it->second.num_released);  // already back in the pool
  std::reverse(ids.begin(), ids.end());
  pool_.release(ids);
  requests_.erase(it);
}

int32_t KvCacheManager::truncate(uint64_t key, int32_t num_tokens) {
  auto it = requests_.find(key);
  if (it == requests_.end()) return 0;
  RequestBlocks& state = it->second;
  const int32_t keep = std::max({state.num_cached_blocks, state.num_released,
                                 (num_tokens + block_size() - 1) / block_size()});
  const int32_t held = static_cast<int32_t>(state.block_ids.size());
  if (keep >= held) return 0;
  std::vector<BlockId> tail(state.block_ids.begin() + keep, state.block_ids.end());
  std::reverse(tail.begin(), tail.end());
  pool_.release(tail);
  state.block_ids.resize(static_cast<size_t>(keep));
  state.table.resize(static_cast<size_t>(keep));
  return held - keep;
}

std::span<const BlockId> KvCacheManager::block_table(uint64_t key) const {
  auto it = requests_.find(key);
  if (it == requests_.end()) return {};
  return it->second.table;
}

Status KvCacheManager::check_integrity() const {
  RL_RETURN_IF_ERROR(pool_.check_integrity());
  std::vector<int32_t> num_holders(pool_.num_blocks(), 0);
  for (const auto& [key, state] : requests_) {
    if (state.num_cached_blocks > static_cast<int32_t>(state.block_ids.size())) {
      return Status::error("kv cache: request " + std::to_string(key) + " caches more blocks than it holds");
    }
    if (state.table.size() != state.block_ids.size() || state.num_released < 0 ||
        state.num_released > static_cast<int32_t>(state.block_ids.size())) {
      return Status::error("kv cache: request " + std::to_string(key) + " has an inconsistent block table");
    }
    for (size_t i = 0; i < state.block_ids.size(); ++i) {
      const bool released = static_cast<int32_t>(i) < state.num_released;
      if (state.table[i] != (released ? kNullBlock : state.block_ids[i])) {
        return Status::error("kv cache: request " + std::to_string(key) + " block table entry " +
                             std::to_string(i) + " disagrees with its blocks");
      }
    }
    for (BlockId id : std::span<const BlockId>(state.block_ids).subspan(static_cast<size_t>(state.num_released))) {
      if (id <= kNullBlock || id >= pool_.num_blocks()) {
        return Status::error("kv cache: request " + std::to_string(key) + " holds invalid block " +
                             std::to_string(id));
      }
      ++num_holders[id];
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
