// The one sampling path (runtime/sampler + Backend::sample) on the CPU backend, the reference the CUDA kernel
// is checked against: greedy ties, processors in order against hand-computed values (logits are processed in
// place), raw logprobs, min_tokens, the allowed-token mask, penalty state that follows sampled tokens on the
// device, seeded reproducibility and batch independence, draw frequencies, and per-row failure.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "runtime/sampler.h"

namespace rl {
namespace {

using Tokens = std::vector<TokenId>;

SamplerRow row_of(const SamplingParams& p, const Tokens& prompt, const Tokens& output, const Tokens& eos = {}) {
  SamplerRow r;
  r.params = &p;
  r.prompt_token_ids = prompt;
  r.output_token_ids = output;
  r.num_outputs = static_cast<int64_t>(output.size());
  r.eos_token_ids = eos;
  r.seed = p.seed.value_or(0);
  return r;
}

// Runs the sampler on host logits (the CPU backend's memory is host memory). Rows with penalties get slot i,
// initialized from their known tokens unless keep_slots.
struct Harness {
  CpuBackend be{1};
  int64_t vocab;
  std::unique_ptr<Sampler> sampler;
  Harness(int64_t rows, int64_t v) : vocab(v), sampler(std::make_unique<Sampler>(&be, rows, v, rows)) {}

  std::vector<SampleResult> run(std::vector<float>& logits, std::vector<SamplerRow> rows, bool keep_slots = false) {
    const int64_t n = static_cast<int64_t>(rows.size());
    for (int64_t i = 0; i < n; ++i) {
      if (needs_penalty_slot(*rows[static_cast<size_t>(i)].params)) {
        rows[static_cast<size_t>(i)].penalty_slot = static_cast<int32_t>(i);
        rows[static_cast<size_t>(i)].init_slot = !keep_slots;
      }
    }
    sampler->prepare(rows, n, 0);
    sampler->sample(Tensor(logits.data(), DType::kF32, {n, vocab}), n);
    sampler->fetch(n, 0);
    std::vector<SampleResult> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(sampler->result(0, i));
    return out;
  }
  TokenId one(std::vector<float> logits, const SamplerRow& row) { return run(logits, {row})[0].token; }
};

TEST(Sampler, GreedyTakesTheLowestIdOnTies) {
  Harness h(1, 4);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(h.one({0.5f, 2.0f, -1.0f, 2.0f}, row_of(p, {}, {})), 1);
  p.logit_bias[3] = 0.25f;
  EXPECT_EQ(h.one({0.5f, 2.0f, -1.0f, 2.0f}, row_of(p, {}, {})), 3);
  p.logit_bias.clear();
}

// The engine's step staging (ModelRunner::launch): prepare() hands the parameters' upload back instead of enqueuing
// it, the caller enqueues it with the input ids in one upload_many_async that resolves the pending ids, and the
// sampled tokens reach the parity's host results with no download (SampleRowParams::host_token). Two steps, so a
// token left from the first cannot pass for the second's.
TEST(Sampler, DeferredParametersAndPendingIdsInOneUpload) {
  CpuBackend be{1};
  Sampler s(&be, 2, 4, 2);
  SamplingParams greedy, biased;
  greedy.temperature = 0.0f;
  biased.temperature = 0.0f;
  biased.logit_bias[0] = 10.0f;
  int32_t* ids_host = static_cast<int32_t*>(be.alloc_pinned(3 * 4));
  DeviceBuffer ids(&be, 3 * 4);
  std::vector<int32_t> prev = {11, 22};
  const std::vector<std::vector<float>> steps = {{0.5f, 2.0f, -1.0f, 0.0f, 0.5f, 2.0f, -1.0f, 0.0f},
                                                 {0.5f, -2.0f, -1.0f, 3.0f, 0.5f, 2.0f, -1.0f, 0.0f}};
  const std::vector<std::vector<TokenId>> want = {{1, 0}, {3, 0}};
  for (size_t step = 0; step < steps.size(); ++step) {
    const std::vector<SamplerRow> rows = {row_of(greedy, {}, {}), row_of(biased, {}, {})};
    Backend::PinnedUpload params;
    s.prepare(rows, 2, 0, &params);
    EXPECT_EQ(params.nbytes, 2 * sizeof(SampleRowParams));
    ids_host[0] = -1;  // the previous step's row 0
    ids_host[1] = 7;
    ids_host[2] = -2;  // its row 1
    const Backend::PinnedUpload uploads[2] = {{ids.data(), ids_host, 3 * 4}, params};
    const Backend::PendingIds pending{Tensor(ids.data(), DType::kI32, {3}), Tensor(prev.data(), DType::kI32, {2})};
    be.upload_many_async(uploads, 2, &pending);
    std::vector<float> logits = steps[step];
    s.sample(Tensor(logits.data(), DType::kF32, {2, 4}), 2);
    s.fetch(2, 0);
    EXPECT_EQ(s.result(0, 0).token, want[step][0]) << "step " << step;
    EXPECT_EQ(s.result(0, 1).token, want[step][1]) << "step " << step;
    const int32_t* staged = static_cast<const int32_t*>(ids.data());
    EXPECT_EQ(std::vector<int32_t>(staged, staged + 3), (std::vector<int32_t>{prev[0], 7, prev[1]}));
    prev = {want[step][0], want[step][1]};
  }
  be.free_pinned(ids_host);
}

// A numerically broken model is a per-request error, not an abort: NaN or +Inf anywhere in the raw row gives
// kSampleNonFinite; nothing finite left after the processors gives kSampleNothingLeft. Other rows are untouched.
TEST(Sampler, NonFiniteLogitsAreAnErrorForThatRowOnly) {
  Harness h(5, 4);
  SamplingParams greedy, hot;
  greedy.temperature = 0.0f;
  hot.temperature = 0.8f;
  hot.top_p = 0.9f;
  std::vector<float> logits = {NAN,       1.0f,      3.0f,      0.0f,        // NaN
                               INFINITY,  1.0f,      3.0f,      0.0f,        // +Inf
                               0.5f,      1.0f,      3.0f,      0.0f,        // fine
                               -INFINITY, -INFINITY, -INFINITY, -INFINITY,  // nothing above -inf
                               0.5f,      4.0f,      3.0f,      0.0f};       // fine
  const auto res = h.run(logits, {row_of(greedy, {}, {}), row_of(hot, {}, {}), row_of(greedy, {}, {}),
                                  row_of(hot, {}, {}), row_of(greedy, {}, {})});
  EXPECT_EQ(res[0].token, kSampleNonFinite);
  EXPECT_NE(res[0].error.find("non-finite logits"), std::string::npos) << res[0].error;
  EXPECT_EQ(res[1].token, kSampleNonFinite);
  EXPECT_NE(res[1].error.find("non-finite logits"), std::string::npos) << res[1].error;
  EXPECT_TRUE(res[2].error.empty());
  EXPECT_EQ(res[2].token, 2);
  EXPECT_EQ(res[3].token, kSampleNothingLeft);
  EXPECT_NE(res[3].error.find("no token can be sampled"), std::string::npos) << res[3].error;
  EXPECT_TRUE(res[4].error.empty());
  EXPECT_EQ(res[4].token, 1);
  // min_tokens suppressing the only finite token leaves nothing to sample.
  Harness h1(1, 3);
  SamplingParams p;
  p.min_tokens = 3;
  const Tokens eos = {1};
  std::vector<float> one = {-INFINITY, 2.0f, -INFINITY};
  const auto r = h1.run(one, {row_of(p, {}, {}, eos)});
  EXPECT_EQ(r[0].token, kSampleNothingLeft);
  EXPECT_NE(r[0].error.find("every logit is -inf"), std::string::npos) << r[0].error;
  // An infinite bias makes the processed row non-finite: nothing can be sampled either.
  SamplingParams inf_bias;
  inf_bias.temperature = 0.5f;
  inf_bias.logit_bias[0] = INFINITY;
  std::vector<float> three = {0.0f, 1.0f, 2.0f};
  EXPECT_EQ(h1.run(three, {row_of(inf_bias, {}, {})})[0].token, kSampleNothingLeft);
}

TEST(Sampler, PenaltiesMatchHandComputedValues) {
  Harness h(1, 5);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> logits{1.0f, -1.0f, 2.0f, 0.5f, 3.0f};
  const Tokens prompt{0, 1, 1};
  const Tokens output{2, 2, 3};
  EXPECT_EQ(h.run(logits, {row_of(p, prompt, output)})[0].token, 4);
  // rep: 1/2, -1*2, 2/2, 0.5/2, untouched; then token 2: -(0.5*2 + 0.25), token 3: -(0.5*1 + 0.25).
  const std::vector<float> expected{0.5f, -2.0f, -0.25f, -0.5f, 3.0f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << i;
  // A freshly initialized slot of a row without history penalizes nothing.
  std::vector<float> again{1.0f, -1.0f, 2.0f, 0.5f, 3.0f};
  h.run(again, {row_of(p, {}, {})});
  EXPECT_EQ(again, (std::vector<float>{1.0f, -1.0f, 2.0f, 0.5f, 3.0f}));
}

TEST(Sampler, PenaltyStateFollowsSampledTokensOnTheDevice) {
  // The host never tells the sampler which token it chose: the slot's counts are updated where it sampled.
  Harness h(1, 3);
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 2.0f;
  std::vector<float> first{1.0f, 2.5f, 2.0f};
  EXPECT_EQ(h.run(first, {row_of(p, {}, {})})[0].token, 1);
  std::vector<float> second{1.0f, 2.5f, 2.0f};
  SamplerRow next = row_of(p, {}, {});
  next.num_outputs = 1;  // the output is still pending on the host
  EXPECT_EQ(h.run(second, {next}, /*keep_slots=*/true)[0].token, 2);
  EXPECT_FLOAT_EQ(second[1], 0.5f);
}

TEST(Sampler, BiasThenMinTokensThenPenalties) {
  Harness h(1, 4);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias[1] = 10.0f;
  p.repetition_penalty = 2.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {0};
  std::vector<float> logits{5.0f, -1.0f, 2.0f, 4.0f};
  const Tokens eos{3};
  h.run(logits, {row_of(p, {1}, {2}, eos)});
  EXPECT_EQ(logits[0], -INFINITY);
  EXPECT_FLOAT_EQ(logits[1], 4.5f);  // (-1 + 10) / 2
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_EQ(logits[3], -INFINITY);
  // Once min_tokens outputs exist, EOS and stop ids are allowed again; ignore_eos keeps EOS allowed anyway.
  std::vector<float> later{5.0f, -1.0f, 2.0f, 4.0f};
  h.run(later, {row_of(p, {}, {2, 2}, eos)});
  EXPECT_EQ(later[0], 5.0f);
  EXPECT_EQ(later[3], 4.0f);
  p.ignore_eos = true;
  std::vector<float> ignoring{5.0f, -1.0f, 2.0f, 4.0f};
  h.run(ignoring, {row_of(p, {}, {}, eos)});
  EXPECT_EQ(ignoring[3], 4.0f);
  EXPECT_EQ(ignoring[0], -INFINITY);
}

TEST(Sampler, MinTokensSuppressesEosWhenSampling) {
  Harness h(1, 3);
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 1;
  EXPECT_EQ(h.one({0.0f, 9.0f, 1.0f}, row_of(p, {}, {}, {1})), 2);
  EXPECT_EQ(h.one({0.0f, 9.0f, 1.0f}, row_of(p, {}, {5}, {1})), 1);
}

TEST(Sampler, AllowedMaskKeepsOnlyItsTokens) {
  Harness h(1, 40);
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> logits(40, 0.0f);
  logits[3] = 5.0f;
  logits[33] = 1.0f;
  std::vector<uint32_t> mask(2, 0u);
  mask[33 / 32] |= 1u << (33 % 32);
  mask[7 / 32] |= 1u << 7;
  SamplerRow row = row_of(p, {}, {});
  row.allowed_mask = mask.data();
  EXPECT_EQ(h.run(logits, {row})[0].token, 33);
  EXPECT_EQ(logits[3], -INFINITY);
}

TEST(Sampler, EveryLogitMinusInfFailsOnlyThatRow) {
  Harness h(2, 3);
  SamplingParams p;
  p.temperature = 0.0f;
  SamplingParams banned = p;
  banned.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  std::vector<float> logits{1.0f, 2.0f, -INFINITY, 1.0f, 2.0f, 0.5f};
  const auto res = h.run(logits, {row_of(banned, {}, {}), row_of(p, {}, {})});
  EXPECT_EQ(res[0].token, kSampleNothingLeft);
  EXPECT_FALSE(res[0].error.empty());
  EXPECT_EQ(res[1].token, 1);
}

TEST(Sampler, LogprobsComeFromTheRawLogits) {
  Harness h(1, 4);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.logit_bias[0] = 100.0f;  // changes the choice, not the reported logprobs
  std::vector<float> logits{std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  SampleResult r = h.run(logits, {row_of(p, {}, {})})[0];
  EXPECT_EQ(r.token, 0);
  ASSERT_TRUE(r.logprob.has_value());
  EXPECT_NEAR(*r.logprob, std::log(0.1), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 3);
  EXPECT_NEAR(r.top_logprobs[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  EXPECT_NEAR(r.top_logprobs[1].logprob, std::log(0.3), 1e-5);
  SamplingParams none;
  std::vector<float> l2{1.0f, 2.0f, 0.0f, 0.0f};
  SampleResult q = h.run(l2, {row_of(none, {}, {})})[0];
  EXPECT_FALSE(q.logprob.has_value());
  EXPECT_TRUE(q.top_logprobs.empty());
}

TEST(Sampler, ForcedRowsScoreTheGivenTokenAndTouchNothing) {
  Harness h(2, 5);
  SamplingParams p;
  p.temperature = 1.0f;
  p.repetition_penalty = 2.0f;  // a penalty slot exists; a forced row must not count its token
  p.logit_bias[4] = 50.0f;      // and no processor changes what it reports
  std::vector<float> logits{std::log(1.0f), std::log(4.0f), std::log(2.0f), std::log(2.0f), std::log(1.0f),
                            std::log(1.0f), std::log(4.0f), std::log(2.0f), std::log(2.0f), std::log(1.0f)};
  SamplerRow forced = row_of(p, {}, {});
  forced.forced_token = 3;
  forced.forced_num_logprobs = 3;
  SamplerRow rank1 = forced;
  rank1.forced_token = 1;
  rank1.forced_num_logprobs = 0;
  const auto res = h.run(logits, {forced, rank1});
  EXPECT_EQ(res[0].token, 3);
  ASSERT_TRUE(res[0].logprob.has_value());
  EXPECT_NEAR(*res[0].logprob, std::log(0.2), 1e-5);
  EXPECT_EQ(res[0].rank, 3);  // after token 1 (4) and token 2 (2, the lower id of the tie)
  ASSERT_EQ(res[0].top_logprobs.size(), 3u);
  EXPECT_EQ(res[0].top_logprobs[0].token, 1);
  EXPECT_EQ(res[0].top_logprobs[1].token, 2);
  EXPECT_EQ(res[0].top_logprobs[2].token, 3);
  EXPECT_NEAR(res[0].top_logprobs[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(res[1].token, 1);
  EXPECT_EQ(res[1].rank, 1);
  EXPECT_TRUE(res[1].top_logprobs.empty());
  EXPECT_NEAR(*res[1].logprob, std::log(0.4), 1e-5);
  // The rows were scored on their raw logits, which stay as they were (no bias, no penalty applied).
  EXPECT_EQ(logits[4], std::log(1.0f));
}

TEST(Sampler, SeededDrawsAreReproducibleAndBatchIndependent) {
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
  seeded.frequency_penalty = 0.5f;
  SamplingParams other;
  other.temperature = 0.7f;
  other.seed = 5;
  const Tokens out{1, 2, 3};
  Harness alone_h(1, vocab);
  const TokenId t_alone = alone_h.one(a, row_of(seeded, {}, out));
  Harness batch_h(3, vocab);
  std::vector<float> batch;
  batch.insert(batch.end(), b.begin(), b.end());
  batch.insert(batch.end(), a.begin(), a.end());
  batch.insert(batch.end(), c.begin(), c.end());
  EXPECT_EQ(batch_h.run(batch, {row_of(other, {}, {}), row_of(seeded, {}, out), row_of(other, {}, out)})[1].token,
            t_alone);
  // Different steps give different draws.
  std::set<TokenId> seen;
  Tokens grow;
  for (int step = 0; step < 20; ++step) {
    seen.insert(alone_h.one(a, row_of(seeded, {}, grow)));
    grow.push_back(0);
  }
  EXPECT_GT(seen.size(), 3u);
}

TEST(Sampler, DrawFrequenciesMatchTheDistribution) {
  Harness h(1, 4);
  const std::vector<float> logits{std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  const auto frequencies = [&](SamplingParams p) {
    std::vector<double> f(4, 0.0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      p.seed = static_cast<uint64_t>(i);
      f[static_cast<size_t>(h.one(logits, row_of(p, {}, {})))] += 1.0 / n;
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
}

}  // namespace
}  // namespace rl
