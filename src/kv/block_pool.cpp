#include "kv/block_pool.h"

#include <algorithm>

#include "core/check.h"

namespace rl {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(num_blocks), free_queue_(num_blocks) {
  RL_CHECK(num_blocks >= 2);
  RL_CHECK(block_size >= 1);
  for (BlockId id = 1; id < num_blocks; ++id) free_queue_.push_back(id);
}

double BlockPool::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_usable_blocks());
}

std::vector<BlockId> BlockPool::allocate(int32_t num_blocks) {
  RL_CHECK(num_blocks >= 0 && num_blocks <= num_free_blocks());
  std::vector<BlockId> ids;
  ids.reserve(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) {
    const BlockId id = free_queue_.pop_front();
    Block& b = blocks_[id];
    RL_CHECK(b.ref_count == 0);
    if (b.cached) evict(id);
    ++b.generation;
    b.ref_count = 1;
    ids.push_back(id);
  }
  return ids;
}

void BlockPool::evict(BlockId id) {
  Block& b = blocks_[id];
  auto it = cache_.find(b.hash);
  RL_CHECK(it != cache_.end());
  std::vector<BlockId>& ids = it->second;
  auto pos = std::find(ids.begin(), ids.end(), id);
  RL_CHECK(pos != ids.end());
  ids.erase(pos);
  if (ids.empty()) cache_.erase(it);
  b.cached = false;
  b.hash = BlockHash{};
  b.parent = kNullBlock;
  b.group = 0;
  b.token_ids.clear();
  b.salt.clear();
  --num_cached_blocks_;
}

void BlockPool::touch(BlockId id) {
  RL_CHECK(id != kNullBlock);
  Block& b = blocks_.at(id);
  if (b.ref_count == 0) free_queue_.remove(id);
  ++b.ref_count;
}

void BlockPool::release(std::span<const BlockId> ids) {
  for (BlockId id : ids) {
    RL_CHECK(id != kNullBlock);
    Block& b = blocks_.at(id);
    RL_CHECK(b.ref_count > 0);
    if (--b.ref_count == 0) free_queue_.push_back(id);
  }
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& hash, std::span<const TokenId> token_ids,
                                         BlockId parent, std::string_view salt, int32_t group) const {
  auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  const uint32_t parent_generation = blocks_.at(parent).generation;
  for (BlockId id : it->second) {
    const Block& b = blocks_[id];
    if (b.parent != parent || b.parent_generation != parent_generation || b.group != group) continue;
    if (b.salt != salt) continue;
    if (!std::equal(b.token_ids.begin(), b.token_ids.end(), token_ids.begin(), token_ids.end())) continue;
    return id;
  }
  return std::nullopt;
}

void BlockPool::cache(BlockId id, const BlockHash& hash, std::span<const TokenId> token_ids, BlockId parent,
                      std::string_view salt, int32_t group) {
  RL_CHECK(id != kNullBlock);
  RL_CHECK(static_cast<int32_t>(token_ids.size()) == block_size_);
  Block& b = blocks_.at(id);
  RL_CHECK(b.ref_count > 0);
  if (b.cached) return;
  b.cached = true;
  b.hash = hash;
  b.parent = parent;
  b.parent_generation = blocks_.at(parent).generation;
  b.group = group;
  b.token_ids.assign(token_ids.begin(), token_ids.end());
  b.salt.assign(salt);
  cache_[hash].push_back(id);
  ++num_cached_blocks_;
}

std::optional<BlockHash> BlockPool::cached_hash(BlockId id) const {
  const Block& b = blocks_.at(id);
  if (!b.cached) return std::nullopt;
  return b.hash;
}

void BlockPool::record_prefix_query(int64_t num_query_tokens, int64_t num_hit_tokens) {
  num_query_tokens_ += num_query_tokens;
  num_hit_tokens_ += num_hit_tokens;
}

Status BlockPool::check_integrity() const {
  const auto fail = [](BlockId id, const std::string& what) {
    return Status::error("block pool: block " + std::to_string(id) + ": " + what);
  };
  const Block& null_block = blocks_[kNullBlock];
  if (null_block.ref_count != 0 || null_block.cached || free_queue_.contains(kNullBlock)) {
    return fail(kNullBlock, "the null block was handed out, cached or freed");
  }
  int32_t num_in_queue = 0;
  int32_t num_cached = 0;
  for (BlockId id = 1; id < num_blocks(); ++id) {
    const Block& b = blocks_[id];
    const bool in_queue = free_queue_.contains(id);
    if (b.ref_count < 0) return fail(id, "negative ref count");
    if (in_queue && b.ref_count > 0) return fail(id, "in the free queue with ref_count > 0");
    if (!in_queue && b.ref_count == 0) return fail(id, "neither free nor held (leaked)");
    num_in_queue += in_queue ? 1 : 0;
    if (!b.cached) continue;
    ++num_cached;
    if (static_cast<int32_t>(b.token_ids.size()) != block_size_) return fail(id, "cached without full tokens");
    auto it = cache_.find(b.hash);
    if (it == cache_.end() || std::count(it->second.begin(), it->second.end(), id) != 1) {
      return fail(id, "cached but not in the hash map exactly once");
    }
  }
  if (num_in_queue != free_queue_.size()) return Status::error("block pool: free queue size mismatch");
  if (num_cached != num_cached_blocks_) return Status::error("block pool: cached block count mismatch");
  int32_t num_map_entries = 0;
  for (const auto& [hash, ids] : cache_) {
    if (ids.empty()) return Status::error("block pool: empty hash map entry");
    for (BlockId id : ids) {
      if (id <= kNullBlock || id >= num_blocks()) return fail(id, "hash map entry out of range");
      const Block& b = blocks_[id];
      if (!b.cached || !(b.hash == hash)) return fail(id, "hash map entry does not match the block's hash");
      ++num_map_entries;
    }
  }
  if (num_map_entries != num_cached_blocks_) return Status::error("block pool: hash map has stale entries");
  return Status::ok();
}

}  // namespace rl
