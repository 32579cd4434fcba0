// The KV cache's dtype (runtime/kv_dtype.h): the rule (CPU: f32 weights keep an f32 cache, bf16 and int8 weights get
// a bf16 one; CUDA: bf16 only) and the engine built with it. On the default model, greedy decoding with a bf16 cache
// gives the tokens the f32 cache gives, and the prompt's log-probabilities stay close.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "engine_test_util.h"
#include "runtime/engine.h"
#include "runtime/kv_dtype.h"

namespace rl {
namespace {

using test_util::greedy;
using test_util::test_device;

TEST(KvCacheDtype, ParsesTheFlagsValues) {
  KvCacheDtype d;
  ASSERT_TRUE(parse_kv_cache_dtype("auto", &d));
  EXPECT_EQ(d, KvCacheDtype::kAuto);
  ASSERT_TRUE(parse_kv_cache_dtype("f32", &d));
  EXPECT_EQ(d, KvCacheDtype::kF32);
  ASSERT_TRUE(parse_kv_cache_dtype("bf16", &d));
  EXPECT_EQ(d, KvCacheDtype::kBF16);
  EXPECT_FALSE(parse_kv_cache_dtype("f16", &d));
  EXPECT_FALSE(parse_kv_cache_dtype("", &d));
  for (KvCacheDtype k : {KvCacheDtype::kAuto, KvCacheDtype::kF32, KvCacheDtype::kBF16}) {
    ASSERT_TRUE(parse_kv_cache_dtype(kv_cache_dtype_name(k), &d));
    EXPECT_EQ(d, k);
  }
}

TEST(KvCacheDtype, CpuFollowsTheWeightsUnlessTold) {
  const auto cpu = [](DType w, bool int8, KvCacheDtype r) {
    Result<DType> d = select_kv_dtype(DeviceKind::kCpu, w, int8, r);
    EXPECT_TRUE(d.is_ok()) << d.message();
    return d.is_ok() ? *d : DType::kF16;
  };
  EXPECT_EQ(cpu(DType::kF32, false, KvCacheDtype::kAuto), DType::kF32);
  EXPECT_EQ(cpu(DType::kBF16, false, KvCacheDtype::kAuto), DType::kBF16);
  EXPECT_EQ(cpu(DType::kBF16, true, KvCacheDtype::kAuto), DType::kBF16);
  EXPECT_EQ(cpu(DType::kF32, true, KvCacheDtype::kAuto), DType::kBF16);  // int8 from an f32 checkpoint
  EXPECT_EQ(cpu(DType::kBF16, false, KvCacheDtype::kF32), DType::kF32);
  EXPECT_EQ(cpu(DType::kF32, false, KvCacheDtype::kBF16), DType::kBF16);
}

TEST(KvCacheDtype, CudaIsBf16AndRefusesF32) {
  for (KvCacheDtype r : {KvCacheDtype::kAuto, KvCacheDtype::kBF16}) {
    Result<DType> d = select_kv_dtype(DeviceKind::kCuda, DType::kBF16, false, r);
    ASSERT_TRUE(d.is_ok()) << d.message();
    EXPECT_EQ(*d, DType::kBF16);
  }
  Result<DType> f = select_kv_dtype(DeviceKind::kCuda, DType::kBF16, false, KvCacheDtype::kF32);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.message().find("--kv-cache-dtype f32"), std::string::npos) << f.message();
}

std::unique_ptr<Engine> make_engine(DType weights, bool int8, KvCacheDtype kv) {
  EngineConfig c = test_util::tiny_engine_config(64ll << 20);
  c.weight_dtype = weights;
  c.quantize_int8 = int8;
  c.kv_cache_dtype = kv;
  c.max_num_seqs = 8;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

TEST(KvCacheDtype, EngineBuildsTheCacheItSelects) {
  if (test_device() != "cpu") GTEST_SKIP() << "the CPU rule";
  for (auto [weights, int8, want] : {std::tuple{DType::kF32, false, DType::kF32},
                                     std::tuple{DType::kBF16, false, DType::kBF16},
                                     std::tuple{DType::kBF16, true, DType::kBF16}}) {
    auto e = make_engine(weights, int8, KvCacheDtype::kAuto);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->kv_dtype(), want) << dtype_name(weights) << (int8 ? " int8" : "");
  }
  auto forced = make_engine(DType::kBF16, false, KvCacheDtype::kF32);
  ASSERT_NE(forced, nullptr);
  EXPECT_EQ(forced->kv_dtype(), DType::kF32);
}

// bf16 weights (the default): greedy tokens with the bf16 cache (auto) equal those with the f32 cache, and the
// log-probability of every prompt and generated token moves by little: the cache rounds K and V to 8 significant
// bits (measured on this model, 2026-12-02: at most 0.0106 nats, recorded as the test's max_logprob_diff).
TEST(KvCacheDtype, Bf16CacheDecodesAsTheF32Cache) {
  if (test_device() != "cpu") GTEST_SKIP() << "CUDA has a bf16 cache only";
  auto bf16 = make_engine(DType::kBF16, false, KvCacheDtype::kAuto);
  auto f32 = make_engine(DType::kBF16, false, KvCacheDtype::kF32);
  ASSERT_NE(bf16, nullptr);
  ASSERT_NE(f32, nullptr);
  ASSERT_EQ(bf16->kv_dtype(), DType::kBF16);
  ASSERT_EQ(f32->kv_dtype(), DType::kF32);
  const std::vector<std::vector<TokenId>> prompts = {
      {1153, 261, 2061}, {1153, 261, 2061, 271, 261, 2850, 451, 271, 261, 1172, 14, 202, 1153}};
  SamplingParams p = greedy(24);
  p.logprobs = 0;
  p.prompt_logprobs = 0;
  const auto a = bf16->generate(prompts, p), b = f32->generate(prompts, p);
  ASSERT_EQ(a.size(), prompts.size());
  ASSERT_EQ(b.size(), prompts.size());
  double max_diff = 0;
  const auto compare = [&](const std::vector<TokenOutput>& x, const std::vector<TokenOutput>& y) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t j = 0; j < x.size(); ++j) {
      ASSERT_TRUE(x[j].logprob.has_value() && y[j].logprob.has_value());
      max_diff = std::max(max_diff, std::abs(static_cast<double>(*x[j].logprob - *y[j].logprob)));
    }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(a[i][0].token_ids, b[i][0].token_ids) << "prompt " << i;
    compare(a[i][0].prompt_logprobs, b[i][0].prompt_logprobs);
    compare(a[i][0].logprobs, b[i][0].logprobs);
  }
  RecordProperty("max_logprob_diff", std::to_string(max_diff));
  EXPECT_LT(max_diff, 0.05);
}

}  // namespace
}  // namespace rl
