// KvCacheManager with hybrid KV groups (GPT-OSS: full-attention and sliding-window layers): group 0 keeps every
// block, the window group (window 6, blocks of 4) releases its blocks as the window slides; both draw from one
// pool, admission counts both, free() returns both, prefix hits need only the window group's blocks inside the
// window of the hit's end. Exact block ids and free-queue order throughout.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv_test_util.h"

namespace rl {
namespace {

using test::Ids;
using test::iota_tokens;
using test::Tokens;

KvCacheManager make_hybrid(int32_t num_blocks) {
  KvCacheConfig config;
  config.num_blocks = num_blocks;
  config.block_size = 4;
  config.window_groups = {6};
  return KvCacheManager(config);
}

Ids table(const KvCacheManager& m, uint64_t key, int32_t group) {
  auto t = m.block_table(key, group);
  return Ids(t.begin(), t.end());
}

ComputedBlocks admit(KvCacheManager& m, uint64_t key, const Tokens& tokens) {
  KvRequestView view{key, tokens, 0, ""};
  ComputedBlocks hit = m.get_computed_blocks(view);
  EXPECT_TRUE(m.allocate_slots(view, static_cast<int32_t>(tokens.size()) - hit.num_computed_tokens, &hit));
  m.cache_full_blocks(KvRequestView{key, tokens, static_cast<int32_t>(tokens.size()), ""});
  return hit;
}

// One decode step of `key`: the token appended to `tokens` gets a slot, then its block is cached when full.
bool decode(KvCacheManager& m, uint64_t key, Tokens& tokens, TokenId next) {
  tokens.push_back(next);
  const int32_t num_computed = static_cast<int32_t>(tokens.size()) - 1;
  const bool ok = m.allocate_slots(KvRequestView{key, tokens, num_computed, ""}, 1).has_value();
  if (ok) m.cache_full_blocks(KvRequestView{key, tokens, num_computed + 1, ""});
  return ok;
}

TEST(KvHybrid, ConfigIsValidated) {
  KvCacheConfig c;
  c.num_blocks = 4;
  c.window_groups = {0};
  EXPECT_FALSE(c.validate().is_ok());
  c.window_groups = {8};
  c.sliding_window = 8;
  EXPECT_FALSE(c.validate().is_ok());
  c.sliding_window = 0;
  EXPECT_TRUE(c.validate().is_ok());
  EXPECT_EQ(c.num_groups(), 2);
}

TEST(KvHybrid, WindowGroupReleasesAsItSlidesAndItsBlocksAreReused) {
  KvCacheManager m = make_hybrid(11);  // 10 usable blocks
  EXPECT_EQ(m.max_blocks_held(1000, 1), 250 + 3);  // group 0 all; window: ceil((6 - 1 + 1) / 4) + 1
  EXPECT_EQ(m.max_blocks_held(7, 1), 2 + 2);
  Tokens a = iota_tokens(10, 0);
  admit(m, 1, a);
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2, 3}));
  EXPECT_EQ(table(m, 1, 1), (Ids{4, 5, 6}));
  ASSERT_TRUE(decode(m, 1, a, 100));  // position 10 sees 5..10: the window group's block 0 goes
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2, 3}));
  EXPECT_EQ(table(m, 1, 1), (Ids{0, 5, 6}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{7, 8, 9, 10, 4}));
  EXPECT_TRUE(m.pool().is_cached(4));  // released, still cached until reused
  ASSERT_TRUE(decode(m, 1, a, 101));  // position 11: sees 6..11
  ASSERT_TRUE(decode(m, 1, a, 102));  // position 12: a new block in both groups
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2, 3, 7}));
  EXPECT_EQ(table(m, 1, 1), (Ids{0, 5, 6, 8}));
  ASSERT_TRUE(decode(m, 1, a, 103));  // position 13: sees 8..13, block 1 (4-7) goes
  EXPECT_EQ(table(m, 1, 1), (Ids{0, 0, 6, 8}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{9, 10, 4, 5}));
  ASSERT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();

  // Another request takes the free blocks, the released ones included (their cached hashes are evicted).
  Tokens b = iota_tokens(8, 500);
  admit(m, 2, b);
  EXPECT_EQ(table(m, 2, 0), (Ids{9, 10}));
  EXPECT_EQ(table(m, 2, 1), (Ids{4, 5}));
  EXPECT_EQ(m.num_free_blocks(), 0);
  ASSERT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();

  // Request 1 decodes positions 14 and 15 in the blocks it has; position 16 needs a new block in both groups
  // (its window 11..16 still reaches block 2): none is free, nothing is allocated.
  ASSERT_TRUE(decode(m, 1, a, 104));
  ASSERT_TRUE(decode(m, 1, a, 105));
  EXPECT_FALSE(decode(m, 1, a, 106));
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2, 3, 7}));
  EXPECT_EQ(table(m, 1, 1), (Ids{0, 0, 6, 8}));
  EXPECT_TRUE(m.pool().free_queue_order().empty());

  // Preemption frees both groups: the window group's blocks first, then group 0's, last block first.
  m.free(1);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{8, 6, 7, 3, 2, 1}));
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 10);
  EXPECT_TRUE(m.block_table(1, 1).empty());
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

TEST(KvHybrid, AdmissionCountsBothGroupsAndAFailureAllocatesNothing) {
  KvCacheManager m = make_hybrid(6);  // 5 usable blocks
  const Tokens p = iota_tokens(12, 0);  // 3 blocks in each group: 6 > 5
  KvRequestView view{1, p, 0, ""};
  EXPECT_FALSE(m.allocate_slots(view, 12).has_value());
  EXPECT_EQ(m.num_free_blocks(), 5);
  EXPECT_TRUE(m.block_table(1).empty());
  EXPECT_TRUE(m.allocate_slots(view, 8).has_value());  // 2 + 2
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2}));
  EXPECT_EQ(table(m, 1, 1), (Ids{3, 4}));
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

TEST(KvHybrid, PrefixHitNeedsOnlyTheWindowBlocksOfItsEnd) {
  KvCacheManager m = make_hybrid(21);  // 20 usable blocks
  Tokens a = iota_tokens(21, 0);
  admit(m, 1, a);  // 6 blocks per group; full blocks 0-4 cached in both
  EXPECT_EQ(table(m, 1, 0), (Ids{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(table(m, 1, 1), (Ids{7, 8, 9, 10, 11, 12}));
  ASSERT_TRUE(decode(m, 1, a, 900));  // position 21 sees 16..21: window blocks 0-3 go (cached, idle)
  EXPECT_EQ(table(m, 1, 1), (Ids{0, 0, 0, 0, 11, 12}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{13, 14, 15, 16, 17, 18, 19, 20, 10, 9, 8, 7}));

  // The same 21-token prompt: group 0 hits blocks 0-4 (positions 0-19); the token at 20 sees 15..20, so the
  // window group needs only its blocks 3 and 4, both cached (block 10 idle in the free queue).
  Tokens b(a.begin(), a.begin() + 21);
  ComputedBlocks hit = admit(m, 2, b);
  EXPECT_EQ(hit.num_computed_tokens, 20);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2, 3, 4, 5}));
  ASSERT_EQ(hit.window_block_ids.size(), 1u);
  EXPECT_EQ(hit.window_block_ids[0], (Ids{0, 0, 0, 10, 11}));
  EXPECT_EQ(table(m, 2, 0), (Ids{1, 2, 3, 4, 5, 13}));
  EXPECT_EQ(table(m, 2, 1), (Ids{0, 0, 0, 10, 11, 14}));
  EXPECT_EQ(m.pool().ref_count(10), 1);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{15, 16, 17, 18, 19, 20, 9, 8, 7}));
  ASSERT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();

  // A filler request evicts window blocks 9 and 8 (positions 8-15 of the prompt).
  admit(m, 3, iota_tokens(13, 700));
  EXPECT_EQ(table(m, 3, 0), (Ids{15, 16, 17, 18}));
  EXPECT_EQ(table(m, 3, 1), (Ids{19, 20, 9, 8}));
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{7}));

  // A 13-token prefix of the prompt: group 0 hits blocks 0-2, but a hit of 3 blocks needs window blocks 1-2
  // and of 2 blocks window blocks 0-1, both partly evicted; a hit of 1 block needs window block 0 (block 7,
  // still cached, idle). Its 3 + 3 new blocks do not fit until the filler is freed.
  Tokens c(a.begin(), a.begin() + 13);
  KvRequestView view{4, c, 0, ""};
  ComputedBlocks short_hit = m.get_computed_blocks(view);
  EXPECT_EQ(short_hit.num_computed_tokens, 4);
  EXPECT_EQ(short_hit.block_ids, (Ids{1}));
  EXPECT_EQ(short_hit.window_block_ids[0], (Ids{7}));
  EXPECT_FALSE(m.allocate_slots(view, 9, &short_hit).has_value());  // 3 + 3 new blocks, 0 free besides hit 7
  m.free(3);
  ASSERT_TRUE(m.allocate_slots(view, 9, &short_hit).has_value());
  EXPECT_EQ(table(m, 4, 0), (Ids{1, 8, 9, 20}));
  EXPECT_EQ(table(m, 4, 1), (Ids{7, 19, 18, 17}));
  ASSERT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
  for (uint64_t key : {1, 2, 4}) m.free(key);
  EXPECT_EQ(m.num_free_blocks(), 20);
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

// Window blocks are freed before group 0's, so they are evicted first: a prompt whose window blocks are gone
// gets no hit even though group 0's blocks are still cached.
TEST(KvHybrid, EvictedWindowBlocksEndTheHit) {
  KvCacheManager m = make_hybrid(7);  // 6 usable
  Tokens a = iota_tokens(9, 0);
  admit(m, 1, a);  // group 0 {1, 2, 3}, window {4, 5, 6}; blocks 0-1 cached in both
  m.free(1);
  EXPECT_EQ(m.pool().free_queue_order(), (Ids{6, 5, 4, 3, 2, 1}));
  ComputedBlocks hit = m.get_computed_blocks(KvRequestView{2, a, 0, ""});
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  EXPECT_EQ(hit.window_block_ids[0], (Ids{4, 5}));
  admit(m, 3, iota_tokens(8, 300));  // takes 6, 5 (group 0) and 4, 3 (window): 4 and 5 are evicted
  m.free(3);
  hit = m.get_computed_blocks(KvRequestView{4, a, 0, ""});
  EXPECT_EQ(hit.num_computed_tokens, 0);
  EXPECT_TRUE(hit.block_ids.empty());
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_TRUE(m.pool().is_cached(2));
  EXPECT_TRUE(m.check_integrity().is_ok()) << m.check_integrity().message();
}

}  // namespace
}  // namespace rl
