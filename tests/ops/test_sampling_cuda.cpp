// The one sampling path (runtime/sampler + Backend::sample) on the GPU against the CPU backend's reference, with
// every parameter mixed in one batch: temperature, top-k, top-p, min-p, logit_bias, min_tokens suppression,
// repetition/frequency/presence penalties (device penalty slots), logprobs, the allowed-token mask, and a row
// whose logits are all -inf. Float rounding of exp/log may flip a near-tie race now and then, so 99 % of sampled
// rows must agree; greedy rows must all agree; logprobs agree to 1e-3.
#include "ops_test_util.h"
#include "runtime/sampler.h"

namespace rl::ops_test {
namespace {

// Samples every row of x [rows, vocab] on `be` through the engine's Sampler (parity 0) and returns the results.
std::vector<SampleResult> sample_rows(Backend& be, const std::vector<float>& x, int64_t rows, int64_t vocab,
                                      const std::vector<SamplerRow>& sr) {
  Sampler s(&be, rows, vocab, rows);
  auto lx = make_f32(be, x, {rows, vocab});
  s.prepare(sr, rows, 0);
  s.sample(lx.t, rows);
  s.fetch(rows, 0);
  be.synchronize();
  std::vector<SampleResult> res;
  for (int64_t r = 0; r < rows; ++r) res.push_back(s.result(0, r));
  return res;
}

// rows × vocab logits drawn from N(0, stddev²) by a generator seeded with seed.
std::vector<float> normal_logits(int64_t rows, int64_t vocab, uint32_t seed, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  for (float& v : x) v = normal(gen);
  return x;
}

TEST(CudaSampling, EveryParameterMatchesTheCpuReference) {
  const int64_t rows = 256, vocab = 151936;
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  std::normal_distribution<float> d(0, 2.5f);
  for (auto& v : x) v = d(rng());
  x[5 * vocab + 17] = NAN;  // row 5 fails alone
  for (int64_t i = 0; i < vocab; ++i) x[static_cast<size_t>(9 * vocab + i)] = -INFINITY;  // row 9 fails alone
  std::vector<SamplingParams> params(static_cast<size_t>(rows));
  std::vector<std::vector<TokenId>> outputs(static_cast<size_t>(rows));
  const std::vector<TokenId> prompt{1, 2, 3, 500, 600};
  const std::vector<TokenId> eos{7, 8};
  std::vector<uint32_t> mask(static_cast<size_t>((vocab + 31) / 32), 0u);
  for (int64_t t = 0; t < vocab; t += 3) mask[static_cast<size_t>(t >> 5)] |= 1u << (t & 31);
  std::vector<SamplerRow> sr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    SamplingParams& p = params[static_cast<size_t>(r)];
    const int kind = static_cast<int>(r % 8);
    p.temperature = kind == 4 ? 0.0f : 0.7f + 0.1f * static_cast<float>(kind);
    if (kind == 1) p.top_k = 50;
    if (kind == 2) p.top_p = 0.95f;
    if (kind == 3) {
      p.top_k = 40;
      p.top_p = 0.9f;
      p.min_p = 0.05f;
    }
    if (kind == 5) {
      p.repetition_penalty = 1.3f;
      p.frequency_penalty = 0.5f;
      p.presence_penalty = 0.2f;
      p.logprobs = 5;
    }
    if (kind == 6) {
      p.logit_bias = {{11, 4.0f}, {12, -100.0f}};
      p.min_tokens = 10;
      p.stop_token_ids = {13};
    }
    outputs[static_cast<size_t>(r)] = {static_cast<TokenId>(r), 42, 42, static_cast<TokenId>(r * 3)};
    SamplerRow& row = sr[static_cast<size_t>(r)];
    row.params = &p;
    row.prompt_token_ids = prompt;
    row.output_token_ids = outputs[static_cast<size_t>(r)];
    row.num_outputs = 4;
    row.eos_token_ids = eos;
    row.seed = 1000 + static_cast<uint64_t>(r);
    if (needs_penalty_slot(p)) {
      row.penalty_slot = static_cast<int32_t>(r);
      row.init_slot = true;
    }
    if (kind == 7) row.allowed_mask = mask.data();
  }
  const auto run = [&](Backend& be) { return sample_rows(be, x, rows, vocab, sr); };
  const std::vector<SampleResult> got = run(cuda()), want = run(cpu());
  int same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const SampleResult& g = got[static_cast<size_t>(r)];
    const SampleResult& w = want[static_cast<size_t>(r)];
    same += g.token == w.token;
    if (r == 5 || r == 9) {  // a NaN logit: the model is broken; every logit -inf: nothing to sample
      const int32_t code = r == 5 ? kSampleNonFinite : kSampleNothingLeft;
      EXPECT_EQ(g.token, code) << r;
      EXPECT_EQ(w.token, code) << r;
      EXPECT_FALSE(g.error.empty()) << r;
      continue;
    }
    if (r % 8 == 4) {
      EXPECT_EQ(g.token, w.token) << "greedy row " << r;
    }
    ASSERT_GE(g.token, 0) << r;
    ASSERT_LT(g.token, vocab) << r;
    if (r % 8 == 6) {
      EXPECT_NE(g.token, 12);
      EXPECT_NE(g.token, 13);
      EXPECT_NE(g.token, 7);
    }
    if (r % 8 == 7) {
      EXPECT_EQ(g.token % 3, 0) << "masked row " << r;
    }
    ASSERT_EQ(g.logprob.has_value(), w.logprob.has_value());
    if (g.logprob && g.token == w.token) {
      EXPECT_NEAR(*g.logprob, *w.logprob, 1e-3);
      ASSERT_EQ(g.top_logprobs.size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(g.top_logprobs[k].token, w.top_logprobs[k].token);
        EXPECT_NEAR(g.top_logprobs[k].logprob, w.top_logprobs[k].logprob, 1e-3);
      }
    }
  }
  EXPECT_GE(same, rows * 99 / 100) << same << " of " << rows << " rows agree";
  // Deterministic: the same call gives the same tokens.
  const std::vector<SampleResult> again = run(cuda());
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(again[static_cast<size_t>(r)].token, got[static_cast<size_t>(r)].token);
  // The blocks a row gets depend on the batch (sampling.cu, sample_cluster_for: 256 rows one block each, 48 rows
  // two, 16 rows eight on an H200); a row's token and logprobs must not.
  for (int64_t n : {int64_t{16}, int64_t{48}}) {
    const std::vector<SamplerRow> part_rows(sr.begin(), sr.begin() + n);
    const std::vector<float> part_x(x.begin(), x.begin() + n * vocab);
    const std::vector<SampleResult> part = sample_rows(cuda(), part_x, n, vocab, part_rows);
    for (int64_t r = 0; r < n; ++r) {
      const SampleResult& p = part[static_cast<size_t>(r)];
      const SampleResult& g = got[static_cast<size_t>(r)];
      EXPECT_EQ(p.token, g.token) << n << " rows, row " << r;
      ASSERT_EQ(p.logprob.has_value(), g.logprob.has_value()) << n << " rows, row " << r;
      if (p.logprob) {
        EXPECT_EQ(*p.logprob, *g.logprob) << n << " rows, row " << r;
        ASSERT_EQ(p.top_logprobs.size(), g.top_logprobs.size());
        for (size_t k = 0; k < p.top_logprobs.size(); ++k) {
          EXPECT_EQ(p.top_logprobs[k].token, g.top_logprobs[k].token);
          EXPECT_EQ(p.top_logprobs[k].logprob, g.top_logprobs[k].logprob);
        }
      }
    }
  }
}

// Teacher-forced rows (prompt logprobs): the forced token, its logprob, rank and top-N as the CPU reference.
TEST(CudaSampling, ForcedRowsMatchTheCpuReference) {
  const int64_t rows = 64, vocab = 151936;
  const std::vector<float> x = normal_logits(rows, vocab, 5, 3.0f);
  SamplingParams p;
  p.repetition_penalty = 1.3f;
  std::vector<SamplerRow> sr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    SamplerRow& row = sr[static_cast<size_t>(r)];
    row.params = &p;
    row.forced_token = static_cast<int32_t>((r * 7919) % vocab);
    row.forced_num_logprobs = static_cast<int32_t>(r % 6);
  }
  const auto run = [&](Backend& be) { return sample_rows(be, x, rows, vocab, sr); };
  const std::vector<SampleResult> got = run(cuda()), want = run(cpu());
  for (int64_t r = 0; r < rows; ++r) {
    const SampleResult& g = got[static_cast<size_t>(r)];
    const SampleResult& w = want[static_cast<size_t>(r)];
    EXPECT_EQ(g.token, sr[static_cast<size_t>(r)].forced_token) << r;
    EXPECT_EQ(g.token, w.token) << r;
    EXPECT_EQ(g.rank, w.rank) << r;
    EXPECT_GE(g.rank, 1);
    ASSERT_TRUE(g.logprob && w.logprob) << r;
    EXPECT_NEAR(*g.logprob, *w.logprob, 1e-3) << r;
    ASSERT_EQ(g.top_logprobs.size(), w.top_logprobs.size()) << r;
    for (size_t k = 0; k < g.top_logprobs.size(); ++k) {
      EXPECT_EQ(g.top_logprobs[k].token, w.top_logprobs[k].token) << r;
      EXPECT_NEAR(g.top_logprobs[k].logprob, w.top_logprobs[k].logprob, 1e-3) << r;
    }
  }
}


// Plain rows (no processor before the choice, no logprobs: sampling.cu skips their raw pass) find NaN and +Inf in the
// choosing pass and fail with the raw code, kSampleNonFinite, in any slice of the cluster; a row with nothing above
// -inf fails with kSampleNothingLeft; a biased row (not plain) with NaN still fails in the raw pass. Every row as the
// CPU reference gives it, greedy and sampled.
TEST(CudaSampling, PlainRowsFindBrokenLogitsWhileChoosing) {
  const int64_t rows = 16, vocab = 151936;
  std::vector<float> x = normal_logits(rows, vocab, 11, 2.0f);
  const auto at = [&](int64_t r, int64_t i) -> float& { return x[static_cast<size_t>(r * vocab + i)]; };
  // Rows 2k greedy, 2k + 1 at temperature 0.8; row pairs: NaN in the last slice, +Inf in the first, NaN in the
  // middle, all -inf, fine, fine with the largest logit in the last slice, NaN beside a bias, -inf beside a bias.
  for (int64_t r : {0, 1}) at(r, vocab - 3) = NAN;
  for (int64_t r : {2, 3}) at(r, 5) = INFINITY;
  for (int64_t r : {4, 5}) at(r, vocab / 2) = NAN;
  for (int64_t r : {6, 7}) {
    for (int64_t i = 0; i < vocab; ++i) at(r, i) = -INFINITY;
  }
  for (int64_t r : {10, 11}) at(r, vocab - 1) = 30.0f;
  for (int64_t r : {12, 13}) at(r, 77) = NAN;
  for (int64_t r : {14, 15}) {
    for (int64_t i = 0; i < vocab; ++i) at(r, i) = -INFINITY;
  }
  SamplingParams greedy, hot, greedy_bias, hot_bias;
  greedy.temperature = 0.0f;
  hot.temperature = 0.8f;
  greedy_bias = greedy;
  hot_bias = hot;
  greedy_bias.logit_bias = {{3, 1.0f}};
  hot_bias.logit_bias = {{3, 1.0f}};
  std::vector<SamplerRow> sr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    SamplerRow& row = sr[static_cast<size_t>(r)];
    row.params = r >= 12 ? (r % 2 ? &hot_bias : &greedy_bias) : (r % 2 ? &hot : &greedy);
    row.seed = 500 + static_cast<uint64_t>(r);
  }
  const std::vector<SampleResult> got = sample_rows(cuda(), x, rows, vocab, sr);
  const std::vector<SampleResult> want = sample_rows(cpu(), x, rows, vocab, sr);
  const int32_t last = static_cast<int32_t>(vocab - 1), bad = kSampleNonFinite, none = kSampleNothingLeft;
  const std::vector<int32_t> codes = {bad, bad, bad, bad, bad, bad, none, none, 0, 0, last, last, bad, bad, none, none};
  for (int64_t r = 0; r < rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (r == 8 || r == 9) {  // fine rows: the greedy one as the reference, the sampled one a valid id
      EXPECT_GE(got[i].token, 0) << "row " << r;
      if (r == 8) {
        EXPECT_EQ(got[i].token, want[i].token);
      }
    } else {
      EXPECT_EQ(got[i].token, codes[i]) << "row " << r;
      EXPECT_EQ(want[i].token, codes[i]) << "row " << r << " (CPU reference)";
    }
  }
}


// A row is sampled by a cluster of blocks, each owning a slice of the vocabulary (sampling.cu): vocabularies
// smaller than the cluster (empty slices), not a multiple of it, and the winner, a biased token, a suppressed
// one or the whole top-k/top-p set lying in any slice give the CPU reference's tokens.
class CudaSamplingVocab : public ::testing::TestWithParam<int64_t> {};

TEST_P(CudaSamplingVocab, ClusterSlicesMatchTheCpuReference) {
  const int64_t vocab = GetParam();
  const int64_t rows = 48;
  std::vector<float> x = normal_logits(rows, vocab, static_cast<uint32_t>(vocab), 2.0f);
  // Rows 0-7: the largest logit in the last slice; rows 8-15: in the first; others random.
  for (int64_t r = 0; r < 16; ++r) x[static_cast<size_t>(r * vocab + (r < 8 ? vocab - 1 : 0))] = 25.0f;
  std::vector<SamplingParams> params(static_cast<size_t>(rows));
  const std::vector<TokenId> none;
  const std::vector<TokenId> eos{static_cast<TokenId>(vocab - 1)};
  std::vector<SamplerRow> sr(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    SamplingParams& p = params[static_cast<size_t>(r)];
    const int kind = static_cast<int>(r % 6);
    p.temperature = kind == 0 ? 0.0f : 0.9f;
    if (kind == 1) p.top_k = 2;
    if (kind == 2) p.top_p = 0.5f;
    if (kind == 3) {
      p.top_k = 5;
      p.top_p = 0.8f;
    }
    if (kind == 4) {  // greedy onto a biased token in the middle of the vocabulary
      p.temperature = 0.0f;
      p.logit_bias = {{static_cast<TokenId>(vocab / 2), 100.0f}};
    }
    if (kind == 5) {  // the eos token (the last id) suppressed by min_tokens: never drawn, even at the top
      p.temperature = 0.0f;
      p.min_tokens = 4;
    }
    SamplerRow& row = sr[static_cast<size_t>(r)];
    row.params = &p;
    row.prompt_token_ids = none;
    row.output_token_ids = none;
    row.eos_token_ids = eos;
    row.seed = 77 + static_cast<uint64_t>(r);
  }
  const auto run = [&](Backend& be) {
    std::vector<TokenId> res;
    for (const SampleResult& r : sample_rows(be, x, rows, vocab, sr)) res.push_back(r.token);
    return res;
  };
  const std::vector<TokenId> got = run(cuda()), want = run(cpu());
  int same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const TokenId g = got[static_cast<size_t>(r)];
    ASSERT_GE(g, 0) << "vocab " << vocab << " row " << r;
    ASSERT_LT(g, vocab) << "vocab " << vocab << " row " << r;
    same += g == want[static_cast<size_t>(r)];
    const int kind = static_cast<int>(r % 6);
    if (kind == 0 || kind == 4 || kind == 5) {
      EXPECT_EQ(g, want[static_cast<size_t>(r)]) << "greedy, vocab " << vocab << " row " << r;
    }
    if (kind == 4) {
      EXPECT_EQ(g, vocab / 2) << "vocab " << vocab << " row " << r;
    }
    if (kind == 5) {
      EXPECT_NE(g, vocab - 1) << "vocab " << vocab << " row " << r;
    }
    if (kind == 0 && r < 16) {
      EXPECT_EQ(g, r < 8 ? vocab - 1 : 0) << "vocab " << vocab << " row " << r;
    }
  }
  EXPECT_GE(same, rows - 1) << "vocab " << vocab << ": " << same << " of " << rows << " rows agree";
}

// Small vocabularies too (the compute-sanitizer runs take these: scripts/device/test.sh).
INSTANTIATE_TEST_SUITE_P(Sizes, CudaSamplingVocab, ::testing::Values(3, 37, 1000, 4099, 151936),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string("v").append(std::to_string(info.param));
                         });

}  // namespace
}  // namespace rl::ops_test
