// Chained block hashes for the prefix cache (design.md §4): the hash of full block i covers the hash of block
// i-1, the block's token ids and extra keys (a cache salt), so equal hashes mean equal prefixes up to a
// collision. The cache never trusts a hash alone: block_pool.h verifies token ids and the parent block on hits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "kv/kv_types.h"

namespace rl {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

// parent: the previous block's hash, or nullptr for the first block of a sequence.
using BlockHashFn = std::function<BlockHash(const BlockHash* parent, std::span<const TokenId> token_ids,
                                            std::string_view extra_keys)>;

// XXH3-128 over (parent hash, token ids, extra keys).
BlockHash hash_block(const BlockHash* parent, std::span<const TokenId> token_ids, std::string_view extra_keys);

}  // namespace rl
