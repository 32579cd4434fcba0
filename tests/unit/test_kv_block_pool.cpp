// BlockPool and FreeBlockQueue: exact block ids, exact eviction order, verified cache hits.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/free_block_queue.h"

namespace rl {
namespace {

using Ids = std::vector<BlockId>;

TEST(KvFreeBlockQueue, RemoveFromMiddleKeepsOrder) {
  FreeBlockQueue q(6);
  for (BlockId id : {1, 2, 3, 4, 5}) q.push_back(id);
  q.remove(3);
  q.remove(1);
  q.remove(5);
  EXPECT_EQ(q.to_vector(), (Ids{2, 4}));
  EXPECT_EQ(q.size(), 2);
  q.push_back(3);
  EXPECT_EQ(q.pop_front(), 2);
  EXPECT_EQ(q.to_vector(), (Ids{4, 3}));
  EXPECT_FALSE(q.contains(2));
  EXPECT_TRUE(q.contains(3));
}

TEST(KvBlockPool, AllocationOrderSkipsNullBlock) {
  BlockPool pool(8, 4);
  EXPECT_EQ(pool.num_free_blocks(), 7);
  EXPECT_EQ(pool.allocate(3), (Ids{1, 2, 3}));
  EXPECT_EQ(pool.allocate(2), (Ids{4, 5}));
  EXPECT_EQ(pool.free_queue_order(), (Ids{6, 7}));
  EXPECT_DOUBLE_EQ(pool.usage(), 5.0 / 7.0);
  EXPECT_TRUE(pool.check_integrity().is_ok()) << pool.check_integrity().message();
}

TEST(KvBlockPool, ReleasedBlocksJoinTheTailInOrder) {
  BlockPool pool(8, 4);
  Ids a = pool.allocate(3);
  pool.release(Ids{3, 2, 1});
  EXPECT_EQ(pool.free_queue_order(), (Ids{4, 5, 6, 7, 3, 2, 1}));
  EXPECT_EQ(pool.allocate(7), (Ids{4, 5, 6, 7, 3, 2, 1}));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_TRUE(pool.check_integrity().is_ok());
}

TEST(KvBlockPool, SharedBlockIsFreedOnlyByItsLastHolder) {
  BlockPool pool(4, 4);
  Ids a = pool.allocate(1);
  pool.touch(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.release(a);
  EXPECT_EQ(pool.free_queue_order(), (Ids{2, 3}));
  pool.release(a);
  EXPECT_EQ(pool.free_queue_order(), (Ids{2, 3, 1}));
  EXPECT_TRUE(pool.check_integrity().is_ok());
}

TEST(KvBlockPool, CachedFreeBlockKeepsItsHashUntilReused) {
  BlockPool pool(3, 2);
  const std::vector<TokenId> toks{7, 8};
  const BlockHash h = hash_block(nullptr, toks, "");
  Ids a = pool.allocate(1);
  pool.cache(a[0], h, toks, kNullBlock, "");
  pool.release(a);
  EXPECT_EQ(pool.lookup(h, toks, kNullBlock, ""), a[0]);  // free but still cached
  EXPECT_EQ(pool.free_queue_order(), (Ids{2, 1}));
  pool.touch(a[0]);  // a hit takes it out of the middle of the queue
  EXPECT_EQ(pool.free_queue_order(), (Ids{2}));
  pool.release(a);
  EXPECT_EQ(pool.allocate(1), (Ids{2}));
  EXPECT_TRUE(pool.is_cached(1));
  EXPECT_EQ(pool.allocate(1), (Ids{1}));  // reuse evicts
  EXPECT_FALSE(pool.is_cached(1));
  EXPECT_EQ(pool.lookup(h, toks, kNullBlock, ""), std::nullopt);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_TRUE(pool.check_integrity().is_ok()) << pool.check_integrity().message();
}

TEST(KvBlockPool, LookupVerifiesTokensSaltAndParent) {
  BlockPool pool(4, 2);
  const std::vector<TokenId> t1{1, 2};
  const std::vector<TokenId> t2{3, 4};
  const BlockHash same{42, 42};  // every block under one hash: lookups must still be exact
  Ids a = pool.allocate(2);
  pool.cache(a[0], same, t1, kNullBlock, "");
  pool.cache(a[1], same, t2, a[0], "");
  EXPECT_EQ(pool.lookup(same, t1, kNullBlock, ""), a[0]);
  EXPECT_EQ(pool.lookup(same, t2, a[0], ""), a[1]);
  EXPECT_EQ(pool.lookup(same, std::vector<TokenId>{1, 3}, kNullBlock, ""), std::nullopt);
  EXPECT_EQ(pool.lookup(same, t1, kNullBlock, "salt"), std::nullopt);
  EXPECT_EQ(pool.lookup(same, t2, kNullBlock, ""), std::nullopt);  // right tokens, wrong parent
  EXPECT_TRUE(pool.check_integrity().is_ok());
}

TEST(KvBlockPool, ChildOfAReusedParentNeverHits) {
  BlockPool pool(3, 2);
  const std::vector<TokenId> t1{1, 2};
  const std::vector<TokenId> t2{3, 4};
  const BlockHash h1 = hash_block(nullptr, t1, "");
  const BlockHash h2 = hash_block(&h1, t2, "");
  Ids a = pool.allocate(2);
  pool.cache(a[0], h1, t1, kNullBlock, "");
  pool.cache(a[1], h2, t2, a[0], "");
  pool.release(Ids{a[0]});
  pool.release(Ids{a[1]});
  Ids b = pool.allocate(1);  // the parent is reused (its KV overwritten) while the child stays cached
  ASSERT_EQ(b, (Ids{a[0]}));
  pool.cache(b[0], h1, t1, kNullBlock, "");  // same content again, but a new incarnation
  EXPECT_EQ(pool.lookup(h1, t1, kNullBlock, ""), b[0]);
  EXPECT_EQ(pool.lookup(h2, t2, b[0], ""), std::nullopt);
  EXPECT_TRUE(pool.check_integrity().is_ok());
}

TEST(KvBlockHash, ChainedAndSalted) {
  const std::vector<TokenId> t{1, 2, 3, 4};
  const BlockHash a = hash_block(nullptr, t, "");
  EXPECT_EQ(a, hash_block(nullptr, t, ""));
  EXPECT_NE(a, hash_block(nullptr, t, "x"));
  EXPECT_NE(a, hash_block(&a, t, ""));
  EXPECT_NE(a, hash_block(nullptr, std::vector<TokenId>{1, 2, 3, 5}, ""));
  const BlockHash zero{};
  EXPECT_NE(a, hash_block(&zero, t, ""));
}

}  // namespace
}  // namespace rl
