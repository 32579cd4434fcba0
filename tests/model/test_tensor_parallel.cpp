// Tensor parallelism on the CPU (issue 19, docs/distributed.md): the engine split over N rank threads (host group,
// rank-ordered f32 sums) against the one-rank engine on the embedded model and the golden fixtures. Greedy tokens
// must be identical, logits within f32 rounding of the reordered partial sums, and a TP run must reproduce itself
// bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine_test_util.h"
#include "../golden_fixture.h"
#include "runtime/engine.h"
#include "runtime/tp_model.h"

namespace rl {
namespace {

const std::string kTiny = std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny";
const std::string kGolden = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/golden/";

std::unique_ptr<Engine> make_engine(const std::string& dir, int32_t tp, bool dummy = false) {
  EngineConfig c;
  c.model_dir = dir;
  c.device = "cpu";
  c.weight_dtype = DType::kF32;
  c.num_threads = 2;
  c.kv_cache_memory_bytes = 64ll << 20;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  c.dummy_weights = dummy;
  c.tensor_parallel_size = tp;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

using test_util::greedy;

// Prompts over the whole vocabulary but token 0.
std::vector<std::vector<TokenId>> random_prompts(int n, int min_len, int max_len, int vocab, uint64_t seed) {
  return test_util::random_prompts(n, min_len, max_len, seed, 1, vocab - 1);
}

std::vector<std::vector<TokenId>> tokens_of(const std::vector<std::vector<Completion>>& out) {
  std::vector<std::vector<TokenId>> ids;
  for (const auto& c : out) ids.push_back(c[0].token_ids);
  return ids;
}

// max |a - b| / max |a|
double rel_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, static_cast<double>(std::abs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::abs(a[i])));
  }
  return den > 0 ? num / den : num;
}

// A batch of prompts (several chunks of prefill mixed with decode: 256 tokens per step) through TP=1 and TP=n.
void expect_same_greedy(const std::string& dir, int32_t n, int vocab, bool dummy = false) {
  auto one = make_engine(dir, 1, dummy);
  auto many = make_engine(dir, n, dummy);
  ASSERT_TRUE(one && many);
  EXPECT_EQ(many->tensor_parallel_size(), n);
  ASSERT_NE(many->tensor_parallel(), nullptr);
  const auto prompts = random_prompts(12, 3, 150, vocab, 7);
  const auto a = tokens_of(one->generate(prompts, greedy(16)));
  const auto b = tokens_of(many->generate(prompts, greedy(16)));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].size(), 16u);
    EXPECT_EQ(a[i], b[i]) << dir << ": prompt " << i << " at TP=" << n;
  }
  EXPECT_TRUE(many->check_integrity().is_ok()) << many->check_integrity().message();
}

TEST(TensorParallel, TinyGreedyTp2SameAsTp1) { expect_same_greedy(kTiny, 2, 6144); }

// 4 heads over 4 ranks with 2 KV heads: each KV head is replicated on two ranks.
TEST(TensorParallel, TinyGreedyTp4ReplicatedKvHeadsSameAsTp1) { expect_same_greedy(kTiny, 4, 6144); }

// Dummy weights: each rank takes its slice of the values the whole tensor gets, so TP=2 is TP=1 split (random
// weights decode nearly constant tokens, so the logits are compared too).
TEST(TensorParallel, DummyWeightsTp2SameAsTp1) {
  expect_same_greedy(kTiny, 2, 6144, /*dummy=*/true);
  auto one = make_engine(kTiny, 1, true);
  auto two = make_engine(kTiny, 2, true);
  ASSERT_TRUE(one && two);
  const std::vector<TokenId> prompt = random_prompts(1, 60, 60, 6144, 9)[0];
  auto a = one->prompt_logits(prompt);
  auto b = two->prompt_logits(prompt);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_LT(rel_max_diff(*a, *b), 1e-5);
}

TEST(TensorParallel, TinyLogitsTp2WithinF32RoundingOfTp1) {
  auto one = make_engine(kTiny, 1);
  auto two = make_engine(kTiny, 2);
  auto four = make_engine(kTiny, 4);
  ASSERT_TRUE(one && two && four);
  const std::vector<TokenId> prompt = random_prompts(1, 200, 200, 6144, 3)[0];
  auto a = one->prompt_logits(prompt);
  auto b = two->prompt_logits(prompt);
  auto c = four->prompt_logits(prompt);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_EQ(a->size(), 6144u);
  EXPECT_LT(rel_max_diff(*a, *b), 1e-5);
  EXPECT_LT(rel_max_diff(*a, *c), 1e-5);
  EXPECT_EQ(std::max_element(a->begin(), a->end()) - a->begin(), std::max_element(b->begin(), b->end()) - b->begin());
}

// The host group sums in rank order whatever the threads' timing: two TP=2 engines give the same bits.
TEST(TensorParallel, Tp2BitwiseReproducibleAcrossRuns) {
  const std::vector<TokenId> prompt = random_prompts(1, 120, 120, 6144, 11)[0];
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    auto e = make_engine(kTiny, 2);
    ASSERT_TRUE(e);
    auto l = e->prompt_logits(prompt);
    ASSERT_TRUE(l.is_ok()) << l.message();
    if (run == 0) {
      first = *l;
    } else {
      ASSERT_EQ(first.size(), l->size());
      EXPECT_EQ(std::memcmp(first.data(), l->data(), first.size() * sizeof(float)), 0);
    }
  }
  // And within one engine, a batch of requests decodes the same tokens twice.
  auto e = make_engine(kTiny, 2);
  ASSERT_TRUE(e);
  const auto prompts = random_prompts(6, 5, 40, 6144, 5);
  EXPECT_EQ(tokens_of(e->generate(prompts, greedy(12))), tokens_of(e->generate(prompts, greedy(12))));
}

using test::GoldenFixture;


float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

GoldenFixture load_fixture(const std::string& dir) { return test::load_golden_fixture(dir); }

// Every dense architecture at TP=2 and at the largest size its heads allow, against transformers: the logits of
// the prompt's last position and of the whole teacher-forced sequence's last position within the CPU golden
// tolerance (1e-4 absolute, as tests/model/test_golden.cpp), and the greedy continuation token for token.
// llama_headdim_tied_bias: attention and MLP biases (row-parallel biases added by rank 0 only), tied embeddings;
// qwen2_qkv_bias: q/k/v biases sharded with their heads; qwen3_bias_gqa at 8: each KV head on four ranks;
// mistral_sharded at 6: a vocabulary of 320 padded to 324 and KV heads replicated three times, read from 12 files.
TEST(TensorParallel, GoldenFixturesMatchTransformers) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"llama_gqa_llama3rope", {2, 4}}, {"llama_headdim_tied_bias", {2, 4}}, {"mistral_sharded", {2, 6}},
      {"qwen2_qkv_bias", {2, 4}},       {"qwen3_bias_gqa", {2, 8}},          {"qwen3_qknorm_tied", {2, 4}}};
  for (const auto& [name, sizes] : cases) {
    const GoldenFixture g = load_fixture(kGolden + name);
    for (int32_t n : sizes) {
      SCOPED_TRACE(name + " TP=" + std::to_string(n));
      auto e = make_engine(kGolden + name, n);
      ASSERT_TRUE(e);
      auto l = e->prompt_logits(g.prompt);
      ASSERT_TRUE(l.is_ok()) << l.message();
      EXPECT_LE(max_abs_diff(g.row(static_cast<int64_t>(g.prompt.size()) - 1), *l), 1e-4f);
      std::vector<TokenId> seq = g.prompt;
      seq.insert(seq.end(), g.greedy.begin(), g.greedy.end());
      auto e2 = make_engine(kGolden + name, n);  // prompt_logits needs an engine that never ran
      ASSERT_TRUE(e2);
      auto full = e2->prompt_logits(seq);
      ASSERT_TRUE(full.is_ok()) << full.message();
      EXPECT_LE(max_abs_diff(g.row(static_cast<int64_t>(seq.size()) - 1), *full), 1e-4f);
      auto out = e->generate({g.prompt}, greedy(static_cast<int>(g.greedy.size())));
      EXPECT_EQ(out[0][0].token_ids, g.greedy);
    }
  }
}

EngineConfig tiny_config(int32_t tp) {
  EngineConfig c;
  c.model_dir = kTiny;
  c.weight_dtype = DType::kF32;
  c.num_threads = 2;
  c.kv_cache_memory_bytes = 16ll << 20;
  c.tensor_parallel_size = tp;
  return c;
}

TEST(TensorParallel, SizeThatDoesNotDivideIsAClearError) {
  auto e = Engine::create(tiny_config(3));
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("tensor parallel size 3 does not divide num_attention_heads (4)"), std::string::npos)
      << e.message();
  auto z = Engine::create(tiny_config(0));
  ASSERT_FALSE(z.is_ok());
  EXPECT_NE(z.message().find("tensor parallel size must be in [1, 1024], got 0"), std::string::npos) << z.message();
  // 4 heads but 8 ranks.
  auto big = Engine::create(tiny_config(8));
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.message().find("num_attention_heads (4)"), std::string::npos) << big.message();
}

TEST(TensorParallel, IntermediateSizeThatDoesNotDivideIsAClearError) {
  // qwen2_qkv_bias: 4 heads, intermediate 176 (divisible by 2 and 4, not by 32): the heads fail first at 32,
  // so check the intermediate rule through the plan directly with a config whose heads divide.
  auto mc = load_model_config(kGolden + "qwen3_bias_gqa/config.json");
  ASSERT_TRUE(mc.is_ok());
  ModelConfig c = *mc;
  c.intermediate_size = 250;
  auto p = tp_plan_for(c, 4, 0);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.message().find("does not divide intermediate_size (250)"), std::string::npos) << p.message();
}

TEST(TensorParallel, ArchitecturesWithoutShardingRefuse) {
  for (const char* name : {"qwen3_moe", "gpt2_tied", "gpt_oss", "deepseek_v3"}) {
    EngineConfig c = tiny_config(2);
    c.model_dir = kGolden + name;
    auto e = Engine::create(c);
    ASSERT_FALSE(e.is_ok()) << name;
    EXPECT_NE(e.message().find("runs on one rank only"), std::string::npos) << name << ": " << e.message();
  }
}

TEST(TensorParallel, OneRankIsThePlainEngine) {
  auto e = make_engine(kTiny, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->tensor_parallel(), nullptr);
  EXPECT_EQ(dynamic_cast<const TpModel*>(&e->model()), nullptr);
}

TEST(TensorParallel, KvCacheHoldsEachRanksHeadsOnly) {
  auto one = make_engine(kTiny, 1);
  auto two = make_engine(kTiny, 2);
  ASSERT_TRUE(one && two);
  // The CPU ranks split the host budget, and each block holds half the KV heads: as many blocks as one rank.
  EXPECT_NEAR(static_cast<double>(two->num_kv_blocks()), static_cast<double>(one->num_kv_blocks()), 1.0);
  ASSERT_EQ(two->model().kv_spec().size(), 8u);
  EXPECT_EQ(two->model().kv_spec()[0].num_kv_heads, 1);
  EXPECT_EQ(two->model().config().num_kv_heads, 2);
  const TpModel* tp = two->tensor_parallel();
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->plan(1).vocab_begin, 3072);
  EXPECT_NE(tp->describe().find("2 ranks over host group of 2"), std::string::npos) << tp->describe();
}

}  // namespace
}  // namespace rl
