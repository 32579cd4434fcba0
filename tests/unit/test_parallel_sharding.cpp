// Tensor-parallel sharding rules: every element of every weight is held by exactly the ranks that need it, GQA
// groups stay on one rank, and models that do not divide are refused with the dimension named.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/sharding.h"

namespace rl::parallel {
namespace {

const ShardDims kLlama8B{4096, 32, 8, 128, 14336, 128256};
const ShardDims kLlama70B{8192, 64, 8, 128, 28672, 128256};
const ShardDims kQwen3_0_6B{1024, 16, 8, 128, 3072, 151936};

TpPlan plan_of(const ShardDims& d, int n, int r) {
  Result<TpPlan> p = make_tp_plan(d, n, r);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return *p;
}

// Counts, for each row (or column) of a [rows, cols] weight, how many ranks hold it.
std::vector<int> coverage(const ShardDims& d, int n, WeightRole role, int64_t rows, int64_t cols, bool by_col,
                          bool valid_only) {
  std::vector<int> held(by_col ? cols : rows, 0);
  for (int r = 0; r < n; ++r) {
    Slice s = shard_slice(plan_of(d, n, r), d, role, rows, cols);
    if (by_col) {
      EXPECT_EQ(s.num_rows, rows);
      for (int64_t c = s.col_begin; c < s.col_begin + s.num_cols; ++c) ++held[c];
    } else {
      EXPECT_EQ(s.num_cols, cols);
      const int64_t end = s.row_begin + (valid_only ? s.valid_rows : s.num_rows);
      for (int64_t i = s.row_begin; i < end && i < rows; ++i) ++held[i];
    }
  }
  return held;
}

void expect_all(const std::vector<int>& held, int times, const char* what) {
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(held[i], times) << what << " index " << i;
  }
}

void check_model(const ShardDims& d, int n) {
  SCOPED_TRACE("tp=" + std::to_string(n));
  const int64_t q = d.num_heads * d.head_dim, kv = d.num_kv_heads * d.head_dim;
  const int kv_times = n > d.num_kv_heads ? static_cast<int>(n / d.num_kv_heads) : 1;
  expect_all(coverage(d, n, WeightRole::kQProj, q, d.hidden_size, false, true), 1, "q_proj rows");
  expect_all(coverage(d, n, WeightRole::kKProj, kv, d.hidden_size, false, true), kv_times, "k_proj rows");
  expect_all(coverage(d, n, WeightRole::kVBias, kv, 1, false, true), kv_times, "v bias");
  expect_all(coverage(d, n, WeightRole::kOProj, d.hidden_size, q, true, true), 1, "o_proj cols");
  expect_all(coverage(d, n, WeightRole::kGateProj, d.intermediate_size, d.hidden_size, false, true), 1, "gate rows");
  expect_all(coverage(d, n, WeightRole::kDownProj, d.hidden_size, d.intermediate_size, true, true), 1, "down cols");
  expect_all(coverage(d, n, WeightRole::kEmbedding, d.vocab_size, d.hidden_size, false, true), 1, "embedding rows");
  expect_all(coverage(d, n, WeightRole::kReplicated, d.hidden_size, 1, false, true), n, "norm");
  // Every query head's KV head is on the query head's rank.
  const int64_t group = d.num_heads / d.num_kv_heads;
  for (int r = 0; r < n; ++r) {
    TpPlan p = plan_of(d, n, r);
    for (int64_t h = p.head_begin; h < p.head_begin + p.num_heads; ++h) {
      const int64_t kvh = h / group;
      EXPECT_GE(kvh, p.kv_head_begin);
      EXPECT_LT(kvh, p.kv_head_begin + p.num_kv_heads);
    }
    // Per-rank shapes add up: the sum of KV over ranks is the model's KV times the replication.
    EXPECT_EQ(p.kv_elems_per_token_per_layer() * n, 2 * kv * kv_times);
  }
}

TEST(TpSharding, Llama8BAtOneTwoFourEight) {
  for (int n : {1, 2, 4, 8}) check_model(kLlama8B, n);
}

TEST(TpSharding, Llama70BAtFourAndEight) {
  for (int n : {4, 8}) check_model(kLlama70B, n);
}

TEST(TpSharding, Qwen3SmallAtTwoFourEight) {
  for (int n : {2, 4, 8}) check_model(kQwen3_0_6B, n);
}

TEST(TpSharding, KvHeadsReplicatedWhenRanksOutnumberThem) {
  const ShardDims d{512, 8, 2, 64, 1024, 1000};
  check_model(d, 4);
  check_model(d, 8);
  std::vector<int64_t> begins;
  for (int r = 0; r < 4; ++r) begins.push_back(plan_of(d, 4, r).kv_head_begin);
  EXPECT_EQ(begins, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(plan_of(d, 4, 3).kv_replicas, 2);
}

TEST(TpSharding, VocabPaddedToAMultipleOfTheRanks) {
  const ShardDims d{64, 4, 4, 16, 128, 10};
  std::vector<int64_t> begin, valid;
  for (int r = 0; r < 4; ++r) {
    TpPlan p = plan_of(d, 4, r);
    EXPECT_EQ(p.padded_vocab, 12);
    Slice s = shard_slice(p, d, WeightRole::kLmHead, 10, 64);
    EXPECT_EQ(s.num_rows, 3);
    begin.push_back(s.row_begin);
    valid.push_back(s.valid_rows);
  }
  EXPECT_EQ(begin, (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(valid, (std::vector<int64_t>{3, 3, 3, 1}));
  // 3 vocab rows over 4 ranks: the last rank holds only padding.
  const ShardDims tiny{64, 4, 4, 16, 128, 3};
  EXPECT_EQ(shard_slice(plan_of(tiny, 4, 3), tiny, WeightRole::kEmbedding, 3, 64).valid_rows, 0);
}

TEST(TpSharding, IndivisibleModelsAreRefusedNamingTheDimension) {
  Result<TpPlan> heads = make_tp_plan(kLlama8B, 3, 0);
  ASSERT_FALSE(heads.is_ok());
  EXPECT_NE(heads.status().message().find("num_attention_heads (32)"), std::string::npos);
  Result<TpPlan> kv = make_tp_plan({512, 24, 6, 64, 1024, 100}, 4, 0);
  ASSERT_FALSE(kv.is_ok());
  EXPECT_NE(kv.status().message().find("num_key_value_heads (6)"), std::string::npos);
  Result<TpPlan> kv_small = make_tp_plan({512, 24, 4, 64, 1536, 100}, 6, 0);
  ASSERT_FALSE(kv_small.is_ok());
  EXPECT_NE(kv_small.status().message().find("not a multiple"), std::string::npos);
  Result<TpPlan> inter = make_tp_plan({512, 8, 8, 64, 1000, 100}, 16, 0);
  EXPECT_FALSE(inter.is_ok());
  EXPECT_FALSE(make_tp_plan(kLlama8B, 2, 2).is_ok());
  EXPECT_FALSE(make_tp_plan(kLlama8B, 0, 0).is_ok());
}

TEST(TpSharding, OnlyRowParallelLayersAllReduce) {
  EXPECT_TRUE(needs_all_reduce(WeightRole::kOProj));
  EXPECT_TRUE(needs_all_reduce(WeightRole::kDownProj));
  EXPECT_FALSE(needs_all_reduce(WeightRole::kQProj));
  EXPECT_FALSE(needs_all_reduce(WeightRole::kGateProj));
  EXPECT_FALSE(needs_all_reduce(WeightRole::kLmHead));
}

}  // namespace
}  // namespace rl::parallel
