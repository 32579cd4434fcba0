// The KV cache manager (vLLM v1 KVCacheManager): the sole owner of blocks. The scheduler asks it for a
// request's cached prefix, for slots for new tokens, to cache blocks once their KV is written, and to free.
//
// Invariants:
// - block tables are append-only while a request holds blocks (no deduplication after the fact);
// - a request's block i is cached only once tokens [0, (i + 1) * block_size) have their KV written
//   (cache_full_blocks with the post-step num_computed_tokens), so an aborted or preempted half-written prefill
//   never enters the cache;
// - the ref count of a block equals the number of block tables that hold it (check_integrity());
// - with a sliding window W (every layer attends to at most W positions), a request whose next token sits at
//   position p holds no block that lies wholly before p - W + 1: allocate_slots releases such blocks to the
//   pool (they stay cached for prefix hits until reused) and their block-table entries read kNullBlock, so
//   a long sequence holds at most ceil((W - 1 + num_new_tokens) / block_size) + 1 blocks;
// - hybrid KV (KvCacheConfig::window_groups, vLLM's hybrid allocator): the layers form KV groups (group 0 the
//   full-attention layers, one group per window); every group has its own block table per request, of the
//   same length, drawn from the one pool (a block id means different layers' memory in different groups: the
//   runtime lays a block out as one page per layer *slot*, shared by the i-th layer of every group). Group 0
//   keeps every block; a window group releases its blocks as above. A window group's cached block is anchored
//   to group 0's block of the same position (its lookup parent), so a prefix hit is exact in every group; a
//   hit needs, in each window group, only the blocks inside the window of the hit's end.
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
#include "kv/block_pool.h"
#include "kv/kv_types.h"

namespace rl {

struct KvCacheConfig {
  int32_t num_blocks = 0;  // including the null block
  int32_t block_size = kDefaultBlockSize;
  bool enable_prefix_caching = true;
  // Group 0's window. > 0: every attention layer of the model reads at most this many positions
  // (KvKind::kSliding everywhere), so blocks that fall out of the window are released as the request advances.
  // 0: full attention.
  int32_t sliding_window = 0;
  // Hybrid KV: the windows (> 0) of KV groups 1.. ; group 0 (sliding_window 0) holds the full-attention layers.
  // Empty: one group.
  std::vector<int32_t> window_groups;
  // Replaceable so that tests can force hash collisions; defaults to hash_block (XXH3-128).
  BlockHashFn hash_fn;

  int32_t num_groups() const { return 1 + static_cast<int32_t>(window_groups.size()); }
  int32_t group_window(int32_t group) const {
    return group == 0 ? sliding_window : window_groups[static_cast<size_t>(group - 1)];
  }
  Status validate() const;
};

// What the manager needs to know about a request; the scheduler's Request stays out of kv/.
struct KvRequestView {
  uint64_t key = 0;                      // unique per live request
  std::span<const TokenId> token_ids;    // all known tokens: prompt, then outputs
  int32_t num_computed_tokens = 0;       // tokens whose KV is written (or hit in the cache)
  std::string_view cache_salt;           // extra key: requests with different salts never share blocks
};

// The cached prefix of a new request: full blocks only, never the last token (its logits are needed).
struct ComputedBlocks {
  std::vector<BlockId> block_ids;  // group 0
  // Hybrid KV: per window group g >= 1 (index g - 1), its table for the hit, as long as block_ids: kNullBlock
  // for the blocks wholly behind the window of the token at num_computed_tokens, then the hit blocks.
  std::vector<std::vector<BlockId>> window_block_ids;
  int32_t num_computed_tokens = 0;
};

class KvCacheManager {
 public:
  explicit KvCacheManager(KvCacheConfig config);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_usable_blocks() const { return pool_.num_usable_blocks(); }
  double usage() const { return pool_.usage(); }
  const BlockPool& pool() const { return pool_; }
  int32_t num_groups() const { return config_.num_groups(); }

  // Longest cached prefix of full blocks: at most (num_tokens - 1) / block_size blocks, and (hybrid KV) the
  // longest whose window groups also hit the blocks inside their windows of its end. Takes no references.
  ComputedBlocks get_computed_blocks(const KvRequestView& request);

  // Grows the request's block table to hold num_computed_tokens (+ computed->num_computed_tokens on the
  // request's first allocation) + num_new_tokens tokens. Returns the newly allocated block ids, or nullopt
  // when the free blocks do not suffice; a failure changes nothing. computed (from get_computed_blocks, only
  // on a request's first allocation) is taken into the table and counted in the prefix-cache statistics.
  std::optional<std::vector<BlockId>> allocate_slots(const KvRequestView& request, int32_t num_new_tokens,
                                                     const ComputedBlocks* computed = nullptr);

  // Blocks a request of num_tokens KV slots holds at most at once, over all groups, when each step adds at most
  // max_step tokens.
  int64_t max_blocks_held(int64_t num_tokens, int64_t max_step) const;
  int32_t sliding_window() const { return config_.sliding_window; }

  // Caches the request's blocks that are completely written, i.e. those inside [0, num_computed_tokens).
  void cache_full_blocks(const KvRequestView& request);

  // Releases the request's blocks, last block first, so its prefix is evicted last; window groups before group 0.
  // Unknown keys are a no-op.
  void free(uint64_t key);

  // Speculative decoding's rollback: keeps the blocks that hold the first num_tokens tokens and releases the
  // rest (last first). Only blocks past the cached ones can go: a cached block holds verified KV. Returns the
  // number of blocks released.
  int32_t truncate(uint64_t key, int32_t num_tokens);

  // The request's block table in `group` (empty if it holds none); released entries (sliding window) read
  // kNullBlock.
  std::span<const BlockId> block_table(uint64_t key, int32_t group = 0) const;

  // Pool invariants, plus: ref counts equal the number of block tables holding each block.
  Status check_integrity() const;

 private:
  struct GroupBlocks {
    // Every block the request was given, in order (the hash chain's parents); a window group's prefix hit
    // leaves kNullBlock for the blocks behind its window.
    std::vector<BlockId> block_ids;
    std::vector<BlockId> table;     // block_ids with the released ones replaced by kNullBlock
    int32_t num_released = 0;       // block_ids[0, num_released) went back to the pool (sliding window)
    int32_t num_cached_blocks = 0;  // block_ids[0, num_cached_blocks) have been entered into the cache
  };
  struct RequestBlocks {
    std::vector<GroupBlocks> groups;      // [num_groups]
    std::vector<BlockHash> block_hashes;  // chained hashes of the known full blocks, computed lazily
    bool empty() const { return groups[0].block_ids.empty() && block_hashes.empty(); }
  };

  RequestBlocks& state_of(uint64_t key);
  // Index of the first block that the token at position `pos` needs in a group of window `window` (0: full).
  int64_t first_needed_block(int64_t pos, int32_t window) const;
  // Releases the group's blocks that lie wholly before the window of the token at position `next_pos`.
  void release_out_of_window(int32_t group, GroupBlocks& blocks, int64_t next_pos);
  // Extends state.block_hashes to cover the first num_blocks full blocks of the request.
  void compute_hashes(RequestBlocks& state, const KvRequestView& request, int32_t num_blocks) const;

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<uint64_t, RequestBlocks> requests_;
};

}  // namespace rl
