// KvCacheManager: prefix hits, the last-token rule, salts, no partial allocation, exact LRU eviction order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace rl {
namespace {

using test::Ids;
using test::iota_tokens;
using test::Tokens;

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

// Every layer a sliding window of 6 positions, blocks of 4: a request whose next token is at position p needs
// only positions p - 5 .. p, so blocks wholly before that go back to the pool as it decodes, and a sequence far
// longer than the cache keeps decoding with a bounded number of blocks.
TEST(KvCacheManager, SlidingWindowReleasesBlocksBehindTheWindow) {
  KvCacheConfig config;
  config.num_blocks = 6;  // 5 usable: 20 token slots
  config.block_size = 4;
  config.sliding_window = 6;
  KvCacheManager m(config);
  EXPECT_EQ(m.max_blocks_held(1000, 1), 3);  // ceil((6 - 1 + 1) / 4) + 1
  EXPECT_EQ(m.max_blocks_held(7, 1), 2);     // a short request: all of its blocks
  Tokens tokens = iota_tokens(10, 0);
  admit(m, 1, tokens);
  finish_prefill(m, 1, tokens);
  EXPECT_EQ(table(m, 1), (Ids{1, 2, 3}));
  const auto decode = [&](TokenId next) {
    tokens.push_back(next);
    const int32_t num_computed = static_cast<int32_t>(tokens.size()) - 1;
    const bool ok = m.allocate_slots(KvRequestView{1, tokens, num_computed, ""}, 1).has_value();
    m.cache_full_blocks(KvRequestView{1, tokens, num_computed + 1, ""});
    return ok;
  };
  // Position 10 sees 5..10: block 0 (positions 0-3) is released, cached, to the free queue's tail.
  ASSERT_TRUE(decode(100));
  EXPECT_EQ(table(m, 1), (Ids{0, 2, 3}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{4, 5, 1}));
  EXPECT_TRUE(m.pool().is_cached(1));
  ASSERT_TRUE(decode(101));  // position 11: sees 6..11, block 1 (4-7) still needed
  ASSERT_TRUE(decode(102));  // position 12: sees 7..12 in blocks 1-3; block 3 is new
  EXPECT_EQ(table(m, 1), (Ids{0, 2, 3, 4}));
  ASSERT_TRUE(decode(103));  // position 13: sees 8..13, block 1 (4-7) released
  EXPECT_EQ(table(m, 1), (Ids{0, 0, 3, 4}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{5, 1, 2}));
  // 300 more tokens: far beyond the 20 slots of the cache, never more than 3 blocks held.
  for (int32_t i = 0; i < 300; ++i) {
    ASSERT_TRUE(decode(200 + i)) << "step " << i;
    int32_t held = 0;
    for (BlockId id : table(m, 1)) held += id != kNullBlock;
    ASSERT_LE(held, 3) << "step " << i;
    ASSERT_EQ(held + m.num_free_blocks(), 5);
    ASSERT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  }
  EXPECT_EQ(table(m, 1).size(), (tokens.size() + 3) / 4);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 5);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();

  // The same cache without a window runs out after 20 tokens.
  config.sliding_window = 0;
  KvCacheManager full(config);
  Tokens t = iota_tokens(10, 0);
  admit(full, 1, t);
  int32_t steps = 0;
  for (; steps < 100; ++steps) {
    t.push_back(7);
    if (!full.allocate_slots(KvRequestView{1, t, static_cast<int32_t>(t.size()) - 1, ""}, 1)) break;
  }
  EXPECT_EQ(steps, 10);
}

// A chunked prefill under a window: each chunk's first token decides what is released, hits behind the window
// of the first new token are released right after they are taken.
TEST(KvCacheManager, SlidingWindowChunkedPrefillAndPrefixHits) {
  KvCacheConfig config;
  config.num_blocks = 9;
  config.block_size = 4;
  config.sliding_window = 4;
  KvCacheManager m(config);
  const Tokens prompt = iota_tokens(21, 0);
  KvRequestView v{1, prompt, 0, ""};
  ASSERT_TRUE(m.allocate_slots(v, 8).has_value());  // positions 0-7
  m.cache_full_blocks(KvRequestView{1, prompt, 8, ""});
  EXPECT_EQ(table(m, 1), (Ids{1, 2}));
  v.num_computed_tokens = 8;
  ASSERT_TRUE(m.allocate_slots(v, 8).has_value());  // positions 8-15: the first sees 5..8, block 0 released
  m.cache_full_blocks(KvRequestView{1, prompt, 16, ""});
  EXPECT_EQ(table(m, 1), (Ids{0, 2, 3, 4}));
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  // A second request with the same prompt hits blocks 1-4 (cached, block 1 idle in the free queue); its first
  // new token is at position 16 (sees 13..16), so blocks 0-2 are released again at once.
  KvRequestView w{2, prompt, 0, ""};
  ComputedBlocks hit = m.get_computed_blocks(w);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2, 3, 4}));
  ASSERT_TRUE(m.allocate_slots(w, 21 - hit.num_computed_tokens, &hit).has_value());
  EXPECT_EQ(table(m, 2), (Ids{0, 0, 0, 4, 5, 6}));
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 8);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

}  // namespace
}  // namespace rl
