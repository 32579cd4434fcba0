// KvCacheManager: prefix hits, the last-token rule, salts, no partial allocation, exact LRU eviction order.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace rl {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

Tokens iota_tokens(int32_t n, TokenId start) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

KvCacheManager make_manager(int32_t num_blocks, int32_t block_size) {
  KvCacheConfig config;
  config.num_blocks = num_blocks;
  config.block_size = block_size;
  return KvCacheManager(config);
}

Ids table(const KvCacheManager& m, uint64_t key) {
  auto t = m.block_table(key);
  return Ids(t.begin(), t.end());
}

// Admits a request as the scheduler does: prefix lookup, then allocate the rest of the prompt.
ComputedBlocks admit(KvCacheManager& m, uint64_t key, const Tokens& tokens, std::string_view salt = "") {
  KvRequestView view{key, tokens, 0, salt};
  ComputedBlocks hit = m.get_computed_blocks(view);
  auto fresh = m.allocate_slots(view, static_cast<int32_t>(tokens.size()) - hit.num_computed_tokens, &hit);
  EXPECT_TRUE(fresh.has_value());
  return hit;
}

void finish_prefill(KvCacheManager& m, uint64_t key, const Tokens& tokens, std::string_view salt = "") {
  m.cache_full_blocks(KvRequestView{key, tokens, static_cast<int32_t>(tokens.size()), salt});
}

TEST(KvCacheManager, PrefixHitAcrossRequestsWithTheSamePrompt) {
  KvCacheManager m = make_manager(11, 4);
  const Tokens prompt = iota_tokens(10, 100);
  EXPECT_EQ(admit(m, 1, prompt).block_ids, Ids{});
  EXPECT_EQ(table(m, 1), (Ids{1, 2, 3}));
  finish_prefill(m, 1, prompt);
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_TRUE(m.pool().is_cached(2));
  EXPECT_FALSE(m.pool().is_cached(3));  // the partial last block is never cached

  ComputedBlocks hit = admit(m, 2, prompt);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(table(m, 2), (Ids{1, 2, 4}));
  EXPECT_EQ(m.pool().ref_count(1), 2);
  EXPECT_EQ(m.pool().ref_count(3), 1);
  EXPECT_EQ(m.pool().prefix_cache_queries(), 20);
  EXPECT_EQ(m.pool().prefix_cache_hits(), 8);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

TEST(KvCacheManager, LastPromptTokenIsAlwaysRecomputed) {
  KvCacheManager m = make_manager(11, 4);
  const Tokens prompt = iota_tokens(8, 0);  // exactly two full blocks
  admit(m, 1, prompt);
  finish_prefill(m, 1, prompt);
  EXPECT_EQ(m.pool().num_cached_blocks(), 2);
  ComputedBlocks hit = admit(m, 2, prompt);
  EXPECT_EQ(hit.block_ids, (Ids{1}));  // (8 - 1) / 4 = 1 block at most
  EXPECT_EQ(table(m, 2), (Ids{1, 3}));
}

TEST(KvCacheManager, DifferentCacheSaltNeverHits) {
  KvCacheManager m = make_manager(11, 4);
  const Tokens prompt = iota_tokens(10, 0);
  admit(m, 1, prompt, "alice");
  finish_prefill(m, 1, prompt, "alice");
  EXPECT_EQ(admit(m, 2, prompt, "bob").block_ids, Ids{});
  EXPECT_EQ(admit(m, 3, prompt, "").block_ids, Ids{});
  EXPECT_EQ(admit(m, 4, prompt, "alice").block_ids, (Ids{1, 2}));
}

TEST(KvCacheManager, HashCollisionIsNeverAFalseHit) {
  KvCacheConfig config;
  config.num_blocks = 11;
  config.block_size = 4;
  // Test hook: every block of every request gets the same hash.
  config.hash_fn = [](const BlockHash*, std::span<const TokenId>, std::string_view) { return BlockHash{1, 2}; };
  KvCacheManager m(config);
  const Tokens a = iota_tokens(10, 0);
  Tokens b = a;
  b[5] = 999;  // same first block, different second block
  admit(m, 1, a);
  finish_prefill(m, 1, a);
  EXPECT_EQ(admit(m, 2, iota_tokens(10, 50)).block_ids, Ids{});
  EXPECT_EQ(admit(m, 3, b).block_ids, (Ids{1}));
  EXPECT_EQ(admit(m, 4, a).block_ids, (Ids{1, 2}));
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

TEST(KvCacheManager, HalfWrittenBlocksAreNotCached) {
  KvCacheManager m = make_manager(11, 4);
  const Tokens prompt = iota_tokens(12, 0);
  admit(m, 1, prompt);
  // Only 6 tokens were written when the request was aborted: block 1 is complete, block 2 is not.
  m.cache_full_blocks(KvRequestView{1, prompt, 6, ""});
  m.free(1);
  EXPECT_EQ(m.pool().num_cached_blocks(), 1);
  EXPECT_EQ(admit(m, 2, prompt).block_ids, (Ids{1}));
}

TEST(KvCacheManager, FailedAllocationChangesNothing) {
  KvCacheManager m = make_manager(5, 4);  // 4 usable blocks
  admit(m, 1, iota_tokens(12, 0));
  EXPECT_EQ(m.num_free_blocks(), 1);
  const Tokens b = iota_tokens(8, 100);
  KvRequestView view{2, b, 0, ""};
  ComputedBlocks hit = m.get_computed_blocks(view);
  EXPECT_EQ(m.allocate_slots(view, 8, &hit), std::nullopt);
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_EQ(table(m, 2), Ids{});
  // A decode step that crosses a block boundary takes the last block; the next one fails.
  const Tokens a = iota_tokens(17, 0);
  KvRequestView grow{1, a, 12, ""};
  EXPECT_EQ(m.allocate_slots(grow, 1), (Ids{4}));
  EXPECT_EQ(m.allocate_slots(KvRequestView{1, a, 16, ""}, 1), std::nullopt);
  EXPECT_EQ(table(m, 1), (Ids{1, 2, 3, 4}));
  m.free(2);
  m.free(1);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  EXPECT_EQ(m.num_free_blocks(), 4);
}

TEST(KvCacheManager, IdleHitBlocksDoNotCountAsFree) {
  KvCacheManager m = make_manager(4, 4);  // 3 usable blocks
  const Tokens prompt = iota_tokens(9, 0);
  admit(m, 1, prompt);
  finish_prefill(m, 1, prompt);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 3);
  // 2 hit blocks are idle; the request needs 4 blocks in total: 2 new, but only 1 other block is free.
  const Tokens longer = iota_tokens(13, 0);
  KvRequestView view{2, longer, 0, ""};
  ComputedBlocks hit = m.get_computed_blocks(view);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  EXPECT_EQ(m.allocate_slots(view, 5, &hit), std::nullopt);
  EXPECT_EQ(m.num_free_blocks(), 3);
  EXPECT_EQ(m.pool().ref_count(1), 0);
  m.free(2);
  EXPECT_TRUE(m.check_integrity().is_ok());
}

TEST(KvCacheManager, FreeIsTailFirstAndEvictionIsLru) {
  KvCacheManager m = make_manager(11, 4);
  const Tokens prompt = iota_tokens(10, 0);
  admit(m, 1, prompt);
  finish_prefill(m, 1, prompt);
  admit(m, 2, prompt);
  finish_prefill(m, 2, prompt);
  EXPECT_EQ(table(m, 1), (Ids{1, 2, 3}));
  EXPECT_EQ(table(m, 2), (Ids{1, 2, 4}));
  m.free(1);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{5, 6, 7, 8, 9, 10, 3}));
  m.free(2);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{5, 6, 7, 8, 9, 10, 3, 4, 2, 1}));

  // Unrelated work takes the never-used blocks first, then the uncached tails, then the prefix, child first.
  admit(m, 3, iota_tokens(28, 500));
  EXPECT_EQ(table(m, 3), (Ids{5, 6, 7, 8, 9, 10, 3}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{4, 2, 1}));
  EXPECT_EQ(admit(m, 4, prompt).block_ids, (Ids{1, 2}));  // hits leave the middle of the queue
  EXPECT_EQ(table(m, 4), (Ids{1, 2, 4}));
  m.free(4);
  m.free(3);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{4, 2, 1, 3, 10, 9, 8, 7, 6, 5}));
  admit(m, 5, iota_tokens(8, 900));
  EXPECT_EQ(table(m, 5), (Ids{4, 2}));
  EXPECT_FALSE(m.pool().is_cached(2));
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_EQ(admit(m, 6, prompt).block_ids, (Ids{1}));
  EXPECT_EQ(table(m, 6), (Ids{1, 3, 10}));
  m.free(5);
  m.free(6);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  EXPECT_EQ(m.num_free_blocks(), 10);
}

TEST(KvCacheManager, DecodeFillsAndCachesBlocks) {
  KvCacheManager m = make_manager(11, 4);
  Tokens tokens = iota_tokens(3, 0);
  admit(m, 1, tokens);
  EXPECT_EQ(table(m, 1), (Ids{1}));
  // Decode steps: each feeds the last sampled token; the block is cached once its 4th token is written.
  for (int32_t step = 0; step < 6; ++step) {
    tokens.push_back(100 + step);
    const int32_t num_computed = static_cast<int32_t>(tokens.size()) - 1;
    ASSERT_TRUE(m.allocate_slots(KvRequestView{1, tokens, num_computed, ""}, 1).has_value());
    m.cache_full_blocks(KvRequestView{1, tokens, num_computed + 1, ""});
  }
  EXPECT_EQ(table(m, 1), (Ids{1, 2, 3}));
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_TRUE(m.pool().is_cached(2));
  EXPECT_FALSE(m.pool().is_cached(3));
  m.free(1);
  EXPECT_EQ(admit(m, 2, tokens).block_ids, (Ids{1, 2}));
}

TEST(KvCacheManager, PrefixCachingCanBeDisabled) {
  KvCacheConfig config;
  config.num_blocks = 11;
  config.block_size = 4;
  config.enable_prefix_caching = false;
  KvCacheManager m(config);
  const Tokens prompt = iota_tokens(10, 0);
  admit(m, 1, prompt);
  finish_prefill(m, 1, prompt);
  EXPECT_EQ(admit(m, 2, prompt).block_ids, Ids{});
  EXPECT_EQ(m.pool().num_cached_blocks(), 0);
}

}  // namespace
}  // namespace rl
