// Tensor parallelism's plain pieces (issue 19): the rank threads (each rank on its own thread, every run joined)
// and the roofline of a split model (per-rank bytes, KV heads, all-reduce time).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "perf/tp_cost.h"
#include "runtime/tp_model.h"

namespace rl {
namespace {

TEST(RankThreads, EachRankOnItsOwnThreadRankZeroOnTheCaller) {
  RankThreads t(4);
  EXPECT_EQ(t.size(), 4);
  std::vector<std::thread::id> ids(4);
  t.run([&](int32_t r) { ids[static_cast<size_t>(r)] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), 4u);
  // The same threads serve every run, and run() returns only after every rank finished.
  std::vector<std::thread::id> again(4);
  std::atomic<int> done{0};
  for (int round = 0; round < 500; ++round) {
    t.run([&](int32_t r) {
      again[static_cast<size_t>(r)] = std::this_thread::get_id();
      done.fetch_add(1);
    });
    ASSERT_EQ(done.load(), 4 * (round + 1));
  }
  EXPECT_EQ(again, ids);
}

TEST(RankThreads, OneRankRunsOnTheCallerOnly) {
  RankThreads t(1);
  int calls = 0;
  t.run([&](int32_t r) {
    EXPECT_EQ(r, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

// The CPU reference of the two tensor-parallel ops (tests/ops/test_tp_ops_cuda.cpp holds CUDA to it).
TEST(TpOps, CpuEmbeddingShardAndCopyColumns) {
  CpuBackend be(1);
  const int64_t rows = 3, hidden = 4;
  std::vector<float> table(rows * hidden), out(4 * hidden, -1.0f);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i + 1);
  std::vector<int32_t> ids = {9, 10, 12, 13};  // before, first, last, after the rank's rows [10, 13)
  be.embedding_shard(Tensor(ids.data(), DType::kI32, {4}), Tensor(table.data(), DType::kF32, {rows, hidden}), 10,
                     Tensor(out.data(), DType::kF32, {4, hidden}));
  const std::vector<float> want = {0, 0, 0, 0, 1, 2, 3, 4, 9, 10, 11, 12, 0, 0, 0, 0};
  EXPECT_EQ(out, want);
  std::vector<float> src = {1, 2, 3, 4, 5, 6}, dst(2 * 5, 0.0f);
  be.copy_columns(Tensor(src.data(), DType::kF32, {2, 3}), 1, Tensor(dst.data(), DType::kF32, {2, 5}), 3, 2);
  EXPECT_EQ(dst, (std::vector<float>{0, 0, 0, 2, 3, 0, 0, 0, 5, 6}));
}

ModelConfig llama8b() {
  auto c = load_model_config(std::string(RIDGELINE_SOURCE_DIR) + "/models/configs/Llama-3.1-8B/config.json");
  EXPECT_TRUE(c.is_ok()) << c.message();
  return *c;
}

TEST(TpCost, RankHoldsItsShareOfWeightsKvAndFlops) {
  const ModelConfig c = llama8b();
  const perf::ModelCost whole = perf::make_model_cost(c, perf::Precision::kBf16, perf::Precision::kBf16);
  const perf::ModelCost two = perf::tp_rank_cost(whole, c, 2);
  EXPECT_EQ(two.kv_bytes_per_token, whole.kv_bytes_per_token / 2);  // 4 of 8 KV heads
  EXPECT_EQ(two.matmul_params, whole.matmul_params / 2);
  // Norms stay whole on each rank: a little over half.
  EXPECT_GT(two.weight_bytes, whole.weight_bytes / 2);
  EXPECT_LT(two.weight_bytes, whole.weight_bytes / 2 + 1'000'000);
  // 16 ranks over 8 KV heads: one replicated head each, an eighth of the KV.
  const perf::ModelCost sixteen = perf::tp_rank_cost(whole, c, 16);
  EXPECT_EQ(sixteen.kv_bytes_per_token, whole.kv_bytes_per_token / 8);
  EXPECT_EQ(perf::tp_rank_cost(whole, c, 1).weight_bytes, whole.weight_bytes);
}

TEST(TpCost, DecodeStepAddsTheAllReduces) {
  const ModelConfig c = llama8b();
  const perf::ModelCost whole = perf::make_model_cost(c, perf::Precision::kBf16, perf::Precision::kBf16);
  const perf::Roof roof{4.8e12, 989e12};
  perf::AllReduceLink link;
  link.bus_bytes_per_s = 400e9;
  link.latency_s = 10e-6;
  // 2 ranks: 2 (N - 1) / N = 1, so an all-reduce of B bytes takes latency + B / busbw.
  EXPECT_DOUBLE_EQ(link.all_reduce_s(4e6, 2), 10e-6 + 4e6 / 400e9);
  EXPECT_DOUBLE_EQ(link.all_reduce_s(4e6, 1), 0.0);
  const perf::TpStepCost s = perf::tp_decode_step(perf::tp_rank_cost(whole, c, 2), c, roof, 2, link, 1, 1024);
  EXPECT_EQ(s.num_all_reduces, 65);  // 2 per layer + the embedding
  EXPECT_DOUBLE_EQ(s.all_reduce_bytes, 4096.0 * 2);
  EXPECT_GT(s.collective_s, 65 * 10e-6);
  EXPECT_DOUBLE_EQ(s.time_s, s.rank.time_s + s.collective_s);
  // At batch 1 the rank reads half the weights: faster than TP=1 despite the all-reduces.
  const perf::StepCost one = perf::decode_step(whole, roof, 1, 1024);
  EXPECT_LT(s.time_s, one.time_s);
  EXPECT_GT(s.time_s, one.time_s / 2);
}

}  // namespace
}  // namespace rl
