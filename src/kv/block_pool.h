// The pool of KV blocks: ref counts, the LRU free queue and the prefix cache (hash → block ids). It sees only
// integers; the KV tensors themselves live in runtime/ and are indexed by these block ids.
//
// Invariants (check_integrity() verifies them):
// - block 0 (kNullBlock) is never handed out, never in the free queue, never cached;
// - every other block is either in the free queue (ref_count == 0) or held (ref_count > 0), never both;
// - a cached block appears exactly once in the hash map, under its own stored hash; cached free blocks stay in
//   the free queue with their hash and are evicted only when allocate() reuses them (popping the LRU head);
// - a cache hit is exact, never a hash collision: the block's stored token ids, cache salt and KV group equal
//   the request's, and its parent is the block the request hit just before (a hybrid model's window groups:
//   the full group's block of the same position), unchanged since (same generation).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/free_block_queue.h"
#include "kv/kv_types.h"

namespace rl {

class BlockPool {
 public:
  // num_blocks includes the null block, so num_blocks - 1 blocks are usable. Requires num_blocks >= 2.
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_usable_blocks() const { return num_blocks() - 1; }
  int32_t num_free_blocks() const { return free_queue_.size(); }
  // Fraction of usable blocks held by requests (cached free blocks count as free).
  double usage() const;

  // Pops num_blocks blocks from the free-queue head (evicting their cached hashes); each gets ref_count 1.
  // The caller checks num_free_blocks() first: running out here is a bug.
  std::vector<BlockId> allocate(int32_t num_blocks);
  // A prefix hit takes another reference; an idle cached block leaves the free queue.
  void touch(BlockId id);
  // Drops one reference from each block; blocks reaching zero join the free-queue tail in the order given.
  void release(std::span<const BlockId> ids);
  int32_t ref_count(BlockId id) const { return blocks_.at(id).ref_count; }

  // The cached block for (hash, token_ids, parent, salt, group), verified as described above, or nullopt.
  // parent is the block hit for the previous position (kNullBlock for the first block), or for a window group
  // of a hybrid KV cache the full group's block of the same position; group is the KV group (kv_cache_manager.h)
  // whose layers the block holds.
  std::optional<BlockId> lookup(const BlockHash& hash, std::span<const TokenId> token_ids, BlockId parent,
                                std::string_view salt, int32_t group = 0) const;
  // Enters a held, completely written block into the cache. No-op if it is cached already.
  void cache(BlockId id, const BlockHash& hash, std::span<const TokenId> token_ids, BlockId parent,
             std::string_view salt, int32_t group = 0);
  bool is_cached(BlockId id) const { return blocks_.at(id).cached; }
  std::optional<BlockHash> cached_hash(BlockId id) const;
  int32_t num_cached_blocks() const { return num_cached_blocks_; }

  // Prefix-cache statistics, counted in tokens like vLLM: queries = tokens looked up, hits = tokens found.
  void record_prefix_query(int64_t num_query_tokens, int64_t num_hit_tokens);
  int64_t prefix_cache_queries() const { return num_query_tokens_; }
  int64_t prefix_cache_hits() const { return num_hit_tokens_; }

  // Free-queue order, LRU head first (tests assert exact eviction order with this).
  std::vector<BlockId> free_queue_order() const { return free_queue_.to_vector(); }

  Status check_integrity() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    // Bumped on every reuse, so a child cached under an older incarnation of its parent never hits.
    uint32_t generation = 0;
    bool cached = false;
    BlockHash hash;
    BlockId parent = kNullBlock;
    uint32_t parent_generation = 0;
    int32_t group = 0;  // the KV group whose layers it holds (when cached)
    std::vector<TokenId> token_ids;  // [block_size] when cached
    std::string salt;
  };

  void evict(BlockId id);

  int32_t block_size_;
  std::vector<Block> blocks_;
  FreeBlockQueue free_queue_;
  // hash → cached block ids in caching order (several blocks may share a hash: duplicates or collisions).
  std::unordered_map<BlockHash, std::vector<BlockId>, BlockHashHasher> cache_;
  int32_t num_cached_blocks_ = 0;
  int64_t num_query_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace rl
