// Prompt logprobs (SamplingParams::prompt_logprobs, vLLM's field) through the engine: every prompt token after the
// first gets the logprob of the model's distribution at the position before it, with its rank and the top-N
// alternatives. Checked against transformers' teacher-forced logits (a golden fixture, f32 on the CPU; the bf16
// rule on CUDA), across chunked prefills, prefix-cache hits, n > 1, and against the sampler's own logprobs.
// On CUDA when RIDGELINE_TEST_DEVICE=cuda (scripts/device/runtime.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/engine.h"
#include "engine_test_util.h"
#include "../golden_fixture.h"

namespace rl {
namespace {

const std::string kGolden = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/golden/qwen3_qknorm_tied";

using test_util::test_device;
bool on_cpu() { return test_device() == "cpu"; }

std::unique_ptr<Engine> make_engine(int32_t prompt_rows = 64, int32_t max_batched = 2048) {
  EngineConfig c;
  c.model_dir = kGolden;
  c.device = test_device();
  c.deterministic = true;
  c.weight_dtype = on_cpu() ? DType::kF32 : DType::kBF16;
  c.num_threads = 2;
  c.gpu_memory_utilization = 0.1;
  c.kv_cache_memory_bytes = 64ll << 20;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = max_batched;
  c.max_prompt_logprob_rows = prompt_rows;
  c.load_tokenizer = false;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// The golden sequence (prompt + transformers' greedy continuation) and its teacher-forced logits [36, vocab].
struct Golden {
  std::vector<TokenId> tokens;
  std::vector<float> logits;
  int64_t vocab = 0;
  // log_softmax(logits[pos])[token]
  double logprob(int64_t pos, TokenId token) const {
    const float* x = logits.data() + pos * vocab;
    const float m = *std::max_element(x, x + vocab);
    double s = 0.0;
    for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(x[i] - m));
    return x[token] - m - std::log(s);
  }
  int32_t rank(int64_t pos, TokenId token) const {
    const float* x = logits.data() + pos * vocab;
    int32_t r = 1;
    for (int64_t i = 0; i < vocab; ++i) r += x[i] > x[token] || (x[i] == x[token] && i < token);
    return r;
  }
};

Golden load() {
  test::GoldenFixture f = test::load_golden_fixture(kGolden);
  Golden g;
  g.tokens = f.sequence();
  g.logits = std::move(f.logits);
  g.vocab = f.vocab;
  return g;
}

SamplingParams params(int32_t n_top, int32_t max_tokens = 1) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.prompt_logprobs = n_top;
  return p;
}

// Every position of the golden sequence, scored against transformers' logits.
void expect_matches_golden(const Golden& g, const std::vector<TokenOutput>& got, int32_t n_top) {
  const double tol = on_cpu() ? 1e-4 : 0.15;  // f32 / bf16 weights and activations
  ASSERT_EQ(got.size(), g.tokens.size() - 1);
  for (size_t k = 1; k < g.tokens.size(); ++k) {
    const TokenOutput& t = got[k - 1];
    const int64_t pos = static_cast<int64_t>(k) - 1;
    EXPECT_EQ(t.token, g.tokens[k]) << k;
    ASSERT_TRUE(t.logprob.has_value()) << k;
    EXPECT_NEAR(*t.logprob, g.logprob(pos, g.tokens[k]), tol) << "position " << k;
    if (on_cpu()) {
      EXPECT_EQ(t.rank, g.rank(pos, g.tokens[k])) << "position " << k;
    }
    ASSERT_EQ(t.top_logprobs.size(), static_cast<size_t>(n_top)) << k;
    for (size_t a = 0; a < t.top_logprobs.size(); ++a) {
      EXPECT_NEAR(t.top_logprobs[a].logprob, g.logprob(pos, t.top_logprobs[a].token), tol) << k << " alt " << a;
      if (a > 0) {
        EXPECT_GE(t.top_logprobs[a - 1].logprob, t.top_logprobs[a].logprob);
      }
      if (on_cpu()) {
        EXPECT_EQ(g.rank(pos, t.top_logprobs[a].token), static_cast<int32_t>(a + 1)) << k;
      }
    }
  }
}

TEST(PromptLogprobs, MatchTransformersTeacherForcedLogits) {
  const Golden g = load();
  auto e = make_engine();
  ASSERT_TRUE(e);
  auto out = e->generate({g.tokens}, params(4));
  ASSERT_EQ(out[0][0].token_ids.size(), 1u);
  EXPECT_EQ(out[0][0].finish, FinishReason::kLength);
  expect_matches_golden(g, out[0][0].prompt_logprobs, 4);
  EXPECT_TRUE(e->check_integrity().is_ok());
  EXPECT_EQ(e->num_free_kv_blocks(), e->num_kv_blocks() - 1);
}

TEST(PromptLogprobs, ChunkedPrefillsPrefixHitsAndSiblingsGiveTheSameList) {
  const Golden g = load();
  // 5 logits rows per step: the 36-token prompt is scored over 8 steps, next to other requests' decodes.
  auto e = make_engine(/*prompt_rows=*/5, /*max_batched=*/16);
  ASSERT_TRUE(e);
  SamplingParams plain = params(0, 12);
  plain.prompt_logprobs.reset();
  // The prompt's blocks are in the prefix cache first: prompt logprobs must still cover every position.
  auto warm = e->generate({g.tokens}, plain);
  SamplingParams p = params(2, 3);
  p.n = 2;
  auto both = e->generate({g.tokens, std::vector<TokenId>(g.tokens.begin(), g.tokens.begin() + 20)}, p);
  expect_matches_golden(g, both[0][0].prompt_logprobs, 2);
  EXPECT_TRUE(both[0][1].prompt_logprobs.empty()) << "the prompt's list comes once, with choice 0";
  ASSERT_EQ(both[1][0].prompt_logprobs.size(), 19u);
  for (size_t k = 0; k < 19; ++k) {
    EXPECT_EQ(both[1][0].prompt_logprobs[k].token, g.tokens[k + 1]);
    EXPECT_NEAR(*both[1][0].prompt_logprobs[k].logprob, *both[0][0].prompt_logprobs[k].logprob,
                on_cpu() ? 1e-5 : 0.1);
  }
  // The greedy continuation is unchanged by the scoring rows around it.
  EXPECT_EQ(both[0][0].token_ids, std::vector<TokenId>(warm[0][0].token_ids.begin(), warm[0][0].token_ids.begin() + 3));
  EXPECT_TRUE(e->check_integrity().is_ok());
  EXPECT_EQ(e->num_free_kv_blocks(), e->num_kv_blocks() - 1);
}

TEST(PromptLogprobs, AgreeWithTheSamplersLogprobOfTheSameToken) {
  const Golden g = load();
  auto e = make_engine();
  ASSERT_TRUE(e);
  // Decode from a 12-token prompt with logprobs; then score prompt + those tokens as a prompt.
  const std::vector<TokenId> prompt(g.tokens.begin(), g.tokens.begin() + 12);
  SamplingParams s;
  s.temperature = 0.0f;
  s.max_tokens = 6;
  s.ignore_eos = true;
  s.logprobs = 1;
  auto gen = e->generate({prompt}, s);
  std::vector<TokenId> scored = prompt;
  scored.insert(scored.end(), gen[0][0].token_ids.begin(), gen[0][0].token_ids.end());
  auto sc = e->generate({scored}, params(1));
  ASSERT_EQ(sc[0][0].prompt_logprobs.size(), scored.size() - 1);
  for (size_t j = 0; j < 6; ++j) {
    const TokenOutput& a = gen[0][0].logprobs[j];
    const TokenOutput& b = sc[0][0].prompt_logprobs[prompt.size() - 1 + j];
    EXPECT_EQ(a.token, b.token);
    EXPECT_EQ(b.rank, 1) << "greedy tokens rank first";
    EXPECT_NEAR(*a.logprob, *b.logprob, on_cpu() ? 1e-4 : 0.1) << j;
  }
}

TEST(PromptLogprobs, OffWhenTheEngineHasNoRowsForThem) {
  auto e = make_engine(/*prompt_rows=*/0);
  ASSERT_TRUE(e);
  auto out = e->generate({{1, 2, 3}}, params(1));
  EXPECT_EQ(out[0][0].finish, FinishReason::kError);
  EXPECT_NE(out[0][0].error.find("prompt_logprobs"), std::string::npos) << out[0][0].error;
  SamplingParams bad = params(21);
  auto e2 = make_engine();
  ASSERT_TRUE(e2);
  auto out2 = e2->generate({{1, 2, 3}}, bad);
  EXPECT_EQ(out2[0][0].finish, FinishReason::kError);
  EXPECT_NE(out2[0][0].error.find("prompt_logprobs"), std::string::npos) << out2[0][0].error;
}

}  // namespace
}  // namespace rl
