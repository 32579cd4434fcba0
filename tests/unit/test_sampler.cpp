// Sampler: greedy, each filter against a brute-force reference, seeded reproducibility and batch
// independence, draw frequencies, penalties and raw logprobs against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampler.h"

namespace rl {
namespace {

using Tokens = std::vector<TokenId>;

SamplerRow row_of(const SamplingParams& p, const Tokens& prompt, const Tokens& output, const Tokens& eos = {}) {
  return SamplerRow{&p, prompt, output, eos};
}

TokenId sample_one(Sampler& s, std::vector<float> logits, const SamplerRow& row) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  return s.sample(logits, vocab, std::span<const SamplerRow>(&row, 1))[0].token;
}

// Straightforward reference: full sort by (logit desc, id asc), then top-k (ties kept), renormalize, top-p
// (the crossing token kept), min-p relative to the most likely token.
std::map<TokenId, double> reference_distribution(const std::vector<float>& logits, int32_t top_k, float top_p,
                                                 float min_p) {
  std::vector<TokenId> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<TokenId>(i);
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  size_t num = order.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < num) {
    const float kth = logits[order[top_k - 1]];
    num = 0;
    while (num < order.size() && logits[order[num]] >= kth) ++num;
  }
  const float max_logit = logits[order[0]];
  double total = 0.0;
  // Weights as float exp(logit - max), summed in double, in sorted order.
  const auto weight = [&](TokenId t) { return double(std::exp(logits[t] - max_logit)); };
  for (size_t i = 0; i < num; ++i) total += weight(order[i]);
  if (top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < num && cum < top_p * total) cum += weight(order[keep++]);
    num = std::max<size_t>(keep, 1);
  }
  std::map<TokenId, double> out;
  double kept = 0.0;
  for (size_t i = 0; i < num; ++i) {
    const double w = weight(order[i]);
    if (w < min_p) continue;
    out[order[i]] = w;
    kept += w;
  }
  for (auto& [t, w] : out) w /= kept;
  return out;
}

TEST(Sampler, GreedyTakesTheLowestIdOnTies) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_one(s, {0.5f, 2.0f, -1.0f, 2.0f}, row_of(p, {}, {})), 1);
  p.logit_bias[3] = 0.25f;
  EXPECT_EQ(sample_one(s, {0.5f, 2.0f, -1.0f, 2.0f}, row_of(p, {}, {})), 3);
  p.logit_bias.clear();
}

// A numerically broken model is a per-request error, not an abort: NaN or +Inf anywhere in the row, or nothing
// left above -inf after the processors, sets SampleResult::error.
TEST(Sampler, NonFiniteLogitsAreAnErrorForThatRowOnly) {
  Sampler s;
  SamplingParams greedy, hot;
  greedy.temperature = 0.0f;
  hot.temperature = 0.8f;
  hot.top_p = 0.9f;
  const std::vector<SamplerRow> rows = {row_of(greedy, {}, {}), row_of(hot, {}, {}), row_of(greedy, {}, {}),
                                        row_of(hot, {}, {}), row_of(greedy, {}, {})};
  std::vector<float> logits = {NAN,       1.0f, 3.0f, 0.0f,  // NaN
                               INFINITY,  1.0f, 3.0f, 0.0f,  // +Inf
                               0.5f,      1.0f, 3.0f, 0.0f,  // fine
                               -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                               0.5f,      4.0f, 3.0f, 0.0f};  // fine
  const auto res = s.sample(logits, 4, rows);
  EXPECT_NE(res[0].error.find("non-finite logits"), std::string::npos);
  EXPECT_NE(res[1].error.find("non-finite logits"), std::string::npos);
  EXPECT_TRUE(res[2].error.empty());
  EXPECT_EQ(res[2].token, 2);
  EXPECT_FALSE(res[3].error.empty());
  EXPECT_TRUE(res[4].error.empty());
  EXPECT_EQ(res[4].token, 1);
  // min_tokens suppressing the only finite token leaves nothing to sample.
  SamplingParams p;
  p.min_tokens = 3;
  const Tokens eos = {1};
  std::vector<float> one = {-INFINITY, 2.0f, -INFINITY};
  const SamplerRow r = row_of(p, {}, {}, eos);
  EXPECT_NE(s.sample(one, 3, std::span<const SamplerRow>(&r, 1))[0].error.find("every logit is -inf"),
            std::string::npos);
}

TEST(Sampler, FiltersMatchBruteForce) {
  Sampler s;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t vocab = trial % 2 == 0 ? 1000 : 37;
    std::vector<float> logits(vocab);
    std::normal_distribution<float> normal(0.0f, trial % 3 == 0 ? 4.0f : 1.0f);
    for (float& v : logits) v = normal(rng);
    if (trial % 5 == 0) {
      for (float& v : logits) v = std::round(v);  // many exact ties
    }
    const int32_t top_k = std::vector<int32_t>{0, 1, 5, 40, vocab}[trial % 5];
    const float top_p = std::vector<float>{1.0f, 0.9f, 0.5f, 0.05f}[(trial / 5) % 4];
    const float min_p = std::vector<float>{0.0f, 0.0f, 0.1f}[(trial / 20) % 3];
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " k " << top_k << " p " << top_p << " min_p " << min_p);
    const std::map<TokenId, double> ref = reference_distribution(logits, top_k, top_p, min_p);
    const std::vector<TokenProb> got = s.filtered_distribution(logits, top_k, top_p, min_p);
    ASSERT_EQ(got.size(), ref.size());
    for (const TokenProb& tp : got) {
      auto it = ref.find(tp.token);
      ASSERT_NE(it, ref.end()) << "token " << tp.token << " should have been filtered out";
      EXPECT_NEAR(tp.prob, it->second, 1e-5);
    }
  }
}

TEST(Sampler, TopPOnALargeVocabularyMatchesBruteForce) {
  Sampler s;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(151936);
  for (float& v : logits) v = normal(rng);
  for (float top_p : {0.1f, 0.95f}) {
    const auto ref = reference_distribution(logits, 0, top_p, 0.0f);
    const auto got = s.filtered_distribution(logits, 0, top_p, 0.0f);
    ASSERT_EQ(got.size(), ref.size());
    for (const TokenProb& tp : got) ASSERT_EQ(ref.count(tp.token), 1u);
  }
}

TEST(Sampler, SeededDrawsAreReproducibleAndBatchIndependent) {
  Sampler s;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int32_t vocab = 500;
  std::vector<float> a(vocab), b(vocab), c(vocab);
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  for (float& v : c) v = normal(rng);
  SamplingParams seeded;
  seeded.seed = 1234;
  seeded.top_p = 0.9f;
  SamplingParams other;
  other.temperature = 0.7f;
  const Tokens out{1, 2, 3};
  const SamplerRow alone = row_of(seeded, {}, out);
  const TokenId t_alone = sample_one(s, a, alone);
  std::vector<float> batch;
  batch.insert(batch.end(), b.begin(), b.end());
  batch.insert(batch.end(), a.begin(), a.end());
  batch.insert(batch.end(), c.begin(), c.end());
  const std::vector<SamplerRow> rows{row_of(other, {}, {}), alone, row_of(other, {}, out)};
  EXPECT_EQ(s.sample(batch, vocab, rows)[1].token, t_alone);
  Sampler fresh;
  EXPECT_EQ(sample_one(fresh, a, alone), t_alone);
  // Different steps give different draws.
  std::set<TokenId> seen;
  Tokens grow;
  for (int step = 0; step < 20; ++step) {
    seen.insert(sample_one(s, a, row_of(seeded, {}, grow)));
    grow.push_back(0);
  }
  EXPECT_GT(seen.size(), 3u);
}

TEST(Sampler, DrawFrequenciesMatchTheDistribution) {
  Sampler s;
  const std::vector<float> logits{std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  const auto frequencies = [&](SamplingParams p) {
    std::vector<double> f(4, 0.0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      p.seed = static_cast<uint64_t>(i);
      f[sample_one(s, logits, row_of(p, {}, {}))] += 1.0 / n;
    }
    return f;
  };
  SamplingParams plain;
  std::vector<double> f = frequencies(plain);
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(f[t], 0.1 * (t + 1), 0.01) << t;
  SamplingParams top2;
  top2.top_k = 2;
  f = frequencies(top2);
  EXPECT_EQ(f[0] + f[1], 0.0);
  EXPECT_NEAR(f[2], 3.0 / 7.0, 0.01);
  SamplingParams cold;
  cold.temperature = 0.5f;  // p^2 renormalized: 1, 4, 9, 16 over 30
  f = frequencies(cold);
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(f[t], (t + 1) * (t + 1) / 30.0, 0.01) << t;
  SamplingParams unseeded;
  std::vector<double> g(4, 0.0);
  for (int i = 0; i < 20000; ++i) g[sample_one(s, logits, row_of(unseeded, {}, {}))] += 1.0 / 20000;
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(g[t], 0.1 * (t + 1), 0.015) << t;
}

TEST(Sampler, PenaltiesMatchHandComputedValues) {
  Sampler s;
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> logits{1.0f, -1.0f, 2.0f, 0.5f, 3.0f};
  const Tokens prompt{0, 1, 1};
  const Tokens output{2, 2, 3};
  s.apply_processors(logits, row_of(p, prompt, output));
  // rep: 1/2, -1*2, 2/2, 0.5/2, untouched; then token 2: -(0.5*2 + 0.25), token 3: -(0.5*1 + 0.25).
  const std::vector<float> expected{0.5f, -2.0f, -0.25f, -0.5f, 3.0f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << i;
  // The scratch state is clean for the next row: no penalties apply to a row without history.
  std::vector<float> again{1.0f, -1.0f, 2.0f, 0.5f, 3.0f};
  s.apply_processors(again, row_of(p, {}, {}));
  EXPECT_EQ(again, (std::vector<float>{1.0f, -1.0f, 2.0f, 0.5f, 3.0f}));
}

TEST(Sampler, BiasThenMinTokensThenPenalties) {
  Sampler s;
  SamplingParams p;
  p.logit_bias[1] = 10.0f;
  p.repetition_penalty = 2.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {0};
  std::vector<float> logits{5.0f, -1.0f, 2.0f, 4.0f};
  const Tokens eos{3};
  s.apply_processors(logits, row_of(p, {1}, {2}, eos));
  EXPECT_EQ(logits[0], -INFINITY);
  EXPECT_FLOAT_EQ(logits[1], 4.5f);  // (-1 + 10) / 2
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_EQ(logits[3], -INFINITY);
  // Once min_tokens outputs exist, EOS and stop ids are allowed again; ignore_eos keeps EOS allowed anyway.
  std::vector<float> later{5.0f, -1.0f, 2.0f, 4.0f};
  s.apply_processors(later, row_of(p, {}, {2, 2}, eos));
  EXPECT_EQ(later[0], 5.0f);
  EXPECT_EQ(later[3], 4.0f);
  p.ignore_eos = true;
  std::vector<float> ignoring{5.0f, -1.0f, 2.0f, 4.0f};
  s.apply_processors(ignoring, row_of(p, {}, {}, eos));
  EXPECT_EQ(ignoring[3], 4.0f);
  EXPECT_EQ(ignoring[0], -INFINITY);
}

TEST(Sampler, MinTokensSuppressesEosWhenSampling) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 1;
  EXPECT_EQ(sample_one(s, {0.0f, 9.0f, 1.0f}, row_of(p, {}, {}, {1})), 2);
  EXPECT_EQ(sample_one(s, {0.0f, 9.0f, 1.0f}, row_of(p, {}, {5}, {1})), 1);
}

TEST(Sampler, LogprobsComeFromTheRawLogits) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.logit_bias[0] = 100.0f;  // changes the choice, not the reported logprobs
  std::vector<float> logits{std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  const SamplerRow row = row_of(p, {}, {});
  SampleResult r = s.sample(logits, 4, std::span<const SamplerRow>(&row, 1))[0];
  EXPECT_EQ(r.token, 0);
  ASSERT_TRUE(r.logprob.has_value());
  EXPECT_NEAR(*r.logprob, std::log(0.1), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 3);
  EXPECT_NEAR(r.top_logprobs[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  EXPECT_NEAR(r.top_logprobs[1].logprob, std::log(0.3), 1e-5);
  SamplingParams none;
  const SamplerRow plain = row_of(none, {}, {});
  std::vector<float> l2{1.0f, 2.0f};
  SampleResult q = s.sample(l2, 2, std::span<const SamplerRow>(&plain, 1))[0];
  EXPECT_FALSE(q.logprob.has_value());
  EXPECT_TRUE(q.top_logprobs.empty());
}

TEST(Sampler, CounterBasedUniformIsDeterministicAndSpread) {
  EXPECT_EQ(sampler_uniform(5, 9), sampler_uniform(5, 9));
  EXPECT_NE(sampler_uniform(5, 9), sampler_uniform(5, 10));
  EXPECT_NE(sampler_uniform(5, 9), sampler_uniform(6, 9));
  double sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = sampler_uniform(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

}  // namespace
}  // namespace rl
