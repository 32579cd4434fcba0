// Golden fixtures on the CUDA backend through ModelRunner: bf16 weights, activations and KV cache against the
// transformers logits of tests/data/golden (teacher-forced, relative RMS within bf16 tolerance; argmax equal
// wherever transformers' top-1 leads top-2 by a clear margin), and greedy decoding through the decode kernel and
// CUDA graphs (single sequence, and three copies in one padded bucket of 4) against transformers' greedy ids up
// to the first step whose margin is small; graphs with a padded bucket equal eager exactly. The tiny default model decodes its three golden prompts together.
// Named test_model_*: built into rl_tests_ops only (it needs rl_runtime), not rl_cuda_ops_tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "core/json.h"
#include "model/model.h"
#include "runtime/kv_storage.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "sched/sampling_params.h"
#include "../golden_fixture.h"

namespace rl {
namespace {

// RIDGELINE_SOURCE_ROOT overrides the compiled-in source folder (the GPU machine runs a copy elsewhere).
const std::string kSourceDir =
    std::getenv("RIDGELINE_SOURCE_ROOT") ? std::getenv("RIDGELINE_SOURCE_ROOT") : RIDGELINE_SOURCE_DIR;
// Logit gaps (top-1 minus top-2 in transformers' f32 run) above which bf16 must not change the argmax.
constexpr double kClearMargin = 0.1;
// Top-k routing is discontinuous: where two expert scores nearly tie, bf16 may choose the other expert and that
// position's logits legitimately move by O(1) (tests/model/test_golden.cpp). Positions whose routing margin in
// transformers' f32 run is below this are skipped (wider than the CPU's 0.02: here activations, attention and
// the KV cache are all bf16); greedy comparisons stop before the first such step.
constexpr double kClearRouting = 0.03;

Backend& cuda_backend() {
  static std::unique_ptr<Backend> be = [] {
    auto b = create_cuda_backend(0);
    RL_CHECK_MSG(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
  }();
  return *be;
}

struct Harness {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Sampler> sampler;  // one per runner: captured graphs keep its buffers

  Harness(const std::string& dir, bool enforce_eager) {
    LoadOptions opts;
    opts.weight_dtype = DType::kBF16;
    auto m = load_model(dir, &cuda_backend(), opts);
    RL_CHECK_MSG(m.is_ok(), "%s", m.message().c_str());
    model = std::move(m).value();
    // The engine's KV groups: GPT-OSS runs on a hybrid cache whose window layers read their own block table.
    const KvGroupPlan plan = plan_kv_groups(model->config().kv_spec, true, kMaxKvGroups);
    if (plan.num_groups() > 1) window = plan.windows[1];
    kv = std::make_unique<KvStorage>(&cuda_backend(), model->config(), 112, 16, DType::kBF16, &plan);
    RunnerLimits lim;
    lim.max_num_tokens = 128;
    lim.max_num_seqs = 4;
    lim.max_model_len = 128;
    lim.max_num_logits = 128;
    lim.enforce_eager = enforce_eager;
    runner = std::make_unique<ModelRunner>(model.get(), kv.get(), lim);
    sampler = std::make_unique<Sampler>(&cuda_backend(), lim.max_num_seqs, model->config().vocab_size,
                                        lim.max_num_seqs);
  }

  int64_t vocab() const { return model->config().vocab_size; }

  int64_t window = 0;  // hybrid: the window group's window (0: one group)
  // Hybrid: the window group's table (group 0's ids + 56) for a step whose first token is at `begin`, blocks
  // wholly behind that token's window set to block 0 as the KV manager releases them.
  std::vector<int32_t> window_table(const std::vector<int32_t>& table, int64_t begin) const {
    std::vector<int32_t> t;
    const int64_t first = std::max<int64_t>(0, begin - window + 1) / 16;
    for (size_t b = 0; b < table.size(); ++b) t.push_back(static_cast<int64_t>(b) < first ? 0 : table[b] + 56);
    return t;
  }

  // Teacher-forced logits of every token of `seq` (all), or of its last token only, fed as one prefill.
  std::vector<float> all_logits(const std::vector<int32_t>& seq, bool all = true) {
    const std::vector<int32_t> table = {9, 3, 5, 12, 1, 7, 20, 15};
    SeqStep s;
    s.token_ids = seq.data();
    s.num_new_tokens = static_cast<int64_t>(seq.size());
    s.block_table = table.data();
    s.num_blocks = static_cast<int64_t>(table.size());
    const std::vector<int32_t> wt = window_table(table, 0);
    if (window > 0) s.window_tables[0] = wt.data();
    s.all_logits = all;
    std::vector<float> logits;
    runner->step({s}, &logits);
    return logits;
  }

  // Greedy continuation of every prompt, decoded together (prefill in one step, then one decode step per token).
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& prompts, int64_t num_new) {
    const size_t n = prompts.size();
    std::vector<std::vector<int32_t>> seqs = prompts, tables(n);
    for (size_t i = 0; i < n; ++i) {
      for (int32_t j = 0; j < 8; ++j) tables[i].push_back(static_cast<int32_t>(1 + 8 * (n - 1 - i)) + (j * 5) % 8);
    }
    std::vector<int64_t> computed(n, 0);
    std::vector<std::vector<int32_t>> out(n);
    SamplingParams greedy_params;
    greedy_params.temperature = 0.0f;
    int parity = 0;
    for (int64_t step = 0; step <= num_new; ++step) {
      std::vector<SeqStep> steps(n);
      std::vector<std::vector<int32_t>> wts(n);
      for (size_t i = 0; i < n; ++i) {
        wts[i] = window_table(tables[i], computed[i]);
        if (window > 0) steps[i].window_tables[0] = wts[i].data();
        steps[i].token_ids = seqs[i].data() + computed[i];
        steps[i].num_new_tokens = static_cast<int64_t>(seqs[i].size()) - computed[i];
        steps[i].num_computed = computed[i];
        steps[i].block_table = tables[i].data();
        steps[i].num_blocks = static_cast<int64_t>(tables[i].size());
      }
      if (step == num_new) break;
      // The engine's path: the pipelined launch samples on the device (greedy: argmax, ties to the lower id),
      // and an all-decode step replays a CUDA graph unless enforce_eager.
      std::vector<SamplerRow> rows(n);
      for (size_t i = 0; i < n; ++i) {
        rows[i].params = &greedy_params;
        rows[i].prompt_token_ids = prompts[i];
        rows[i].num_outputs = static_cast<int64_t>(out[i].size());
      }
      runner->launch(steps, rows, sampler.get(), parity);
      cuda_backend().wait_fence(cuda_backend().record_fence());
      for (size_t i = 0; i < n; ++i) {
        const int32_t next = sampler->result(parity, static_cast<int64_t>(i)).token;
        computed[i] = static_cast<int64_t>(seqs[i].size());
        seqs[i].push_back(next);
        out[i].push_back(next);
      }
      parity ^= 1;
    }
    return out;
  }
};

// A fixture and whether position p's MoE routing is clear of a tie.
using Golden = test::GoldenFixture;
bool routing_clear(const Golden& g, size_t position) {
  return g.routing_margins.empty() || g.routing_margins.at(position) >= kClearRouting;
}

Golden load_golden(const std::string& dir) { return test::load_golden_fixture(dir); }

// Greedy steps before the first one whose logit margin or routing is not clear (after it, bf16 may legitimately
// diverge). Step i is predicted at position prompt_len - 1 + i.
size_t num_clear_steps(const Golden& g) {
  size_t i = 0;
  while (i < g.margins.size() && g.margins[i] > kClearMargin && routing_clear(g, g.prompt.size() - 1 + i)) ++i;
  return i;
}

std::vector<int32_t> prefix(const std::vector<int32_t>& v, size_t n) {
  return std::vector<int32_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}

class CudaGolden : public ::testing::TestWithParam<std::string> {};

// The first g.logits.size() / v of `logits` (teacher-forced, vocabulary v) against transformers: relative RMS within
// bf16 tolerance over the positions with a clear routing, argmax equal where the margin is clear.
void expect_teacher_forced_close(const Golden& g, const std::vector<float>& logits, int64_t v) {
  ASSERT_GE(logits.size(), g.logits.size());
  const size_t positions = g.logits.size() / static_cast<size_t>(v);
  double num = 0, den = 0;
  size_t used = 0;
  std::string per_position;
  for (size_t p = 0; p < positions; ++p) {
    double pn = 0, pd = 0;
    for (size_t i = p * static_cast<size_t>(v); i < (p + 1) * static_cast<size_t>(v); ++i) {
      pn += (logits[i] - g.logits[i]) * (logits[i] - g.logits[i]);
      pd += static_cast<double>(g.logits[i]) * g.logits[i];
    }
    char buf[48];  // snprintf: GCC 12 warns falsely on " " + std::to_string(...)
    std::snprintf(buf, sizeof(buf), " %zu%s:%.4f", p, routing_clear(g, p) ? "" : "(routing tie)",
                  std::sqrt(pn / pd));
    per_position += buf;
    if (!routing_clear(g, p)) continue;
    num += pn;
    den += pd;
    ++used;
  }
  EXPECT_GE(used * 3, positions) << "fewer than a third of the positions have a clear routing";
  EXPECT_LT(std::sqrt(num / den), 3e-2) << "relative error per position:" << per_position;
  // Position prompt_len - 1 + i predicts greedy[i].
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    if (g.margins[i] <= kClearMargin || !routing_clear(g, g.prompt.size() - 1 + i)) continue;
    const float* row = logits.data() + (static_cast<int64_t>(g.prompt.size()) - 1 + static_cast<int64_t>(i)) * v;
    EXPECT_EQ(std::max_element(row, row + v) - row, g.greedy[i]) << "step " << i << " margin " << g.margins[i];
  }
}

TEST_P(CudaGolden, TeacherForcedLogitsWithinBf16Tolerance) {
  const std::string dir = kSourceDir + "/tests/data/golden/" + GetParam();
  const Golden g = load_golden(dir);
  Harness h(dir, /*enforce_eager=*/true);
  const std::vector<int32_t> seq = g.sequence();
  const std::vector<float> logits = h.all_logits(seq);
  ASSERT_EQ(logits.size(), g.logits.size());
  expect_teacher_forced_close(g, logits, h.vocab());
}

// The golden prompt and greedy tokens, then as many of them again (from the start) as make len tokens.
std::vector<int32_t> golden_tokens(const Golden& g, size_t len) {
  std::vector<int32_t> seq = g.sequence();
  const size_t golden_len = seq.size();
  for (size_t i = 0; seq.size() < len; ++i) seq.push_back(seq[i % golden_len]);
  return seq;
}

// ‖a − b‖ / ‖b‖ over n values.
double rel_rms(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// A 100-token prefill, where bias-free o_proj / down_proj add the residual in cuBLASLt's epilogue and the pre-norms
// run plain (Backend::fuses_linear_add): the golden tokens then filler tokens in one prefill. The golden positions'
// logits depend on the golden tokens only (causal), so they are checked against transformers as above; every
// position within bf16 rounding of the composed path (set_gemm_residual(false)).
TEST_P(CudaGolden, LongPrefillWithTheResidualInTheGemmEpilogue) {
  const std::string dir = kSourceDir + "/tests/data/golden/" + GetParam();
  const Golden g = load_golden(dir);
  Harness h(dir, /*enforce_eager=*/true);
  const std::vector<int32_t> seq = golden_tokens(g, 100);
  auto& cuda = dynamic_cast<CudaBackend&>(cuda_backend());
  ASSERT_TRUE(cuda.fuses_linear_add(static_cast<int64_t>(seq.size())));
  const std::vector<float> fused = h.all_logits(seq);
  expect_teacher_forced_close(g, fused, h.vocab());
  cuda.set_gemm_residual(false);
  const std::vector<float> composed = h.all_logits(seq);
  cuda.set_gemm_residual(true);
  ASSERT_EQ(fused.size(), composed.size());
  EXPECT_LT(rel_rms(fused.data(), composed.data(), fused.size()), 2e-2);
}

// A prefill that wants its last row only runs the last layer's attention (one query row: the decode kernel), o_proj
// and feed-forward on that row alone (Decoder::forward): the row within bf16 tolerance of the last row of the
// all-rows prefill, whose golden rows are checked above, at 36 tokens (golden) and at 100 (the residual epilogue).
// A top-k routing near a tie may flip between the two (the last attention runs in another kernel), so MoE fixtures
// check the golden length where its routing is clear, and not the 100 filler tokens, whose margins are unknown.
TEST_P(CudaGolden, LastRowPrefillMatchesTheAllRowsPrefill) {
  const std::string dir = kSourceDir + "/tests/data/golden/" + GetParam();
  const Golden g = load_golden(dir);
  Harness h(dir, /*enforce_eager=*/true);
  const size_t golden_len = g.prompt.size() + g.greedy.size(), v = static_cast<size_t>(h.vocab());
  for (size_t len : {golden_len, size_t{100}}) {
    if (len == golden_len ? !routing_clear(g, len - 1) : !g.routing_margins.empty()) continue;
    const std::vector<int32_t> seq = golden_tokens(g, len);
    const std::vector<float> all = h.all_logits(seq), last = h.all_logits(seq, /*all=*/false);
    ASSERT_EQ(all.size(), len * v);
    ASSERT_EQ(last.size(), v);
    EXPECT_LT(rel_rms(last.data(), all.data() + (len - 1) * v, v), 2e-2) << len << " tokens";
  }
}

TEST_P(CudaGolden, GreedyDecodeEagerAndGraphsMatchTransformers) {
  const std::string dir = kSourceDir + "/tests/data/golden/" + GetParam();
  const Golden g = load_golden(dir);
  const size_t clear = num_clear_steps(g);
  const int64_t num_new = static_cast<int64_t>(g.greedy.size());
  Harness eager(dir, /*enforce_eager=*/true), graphs(dir, /*enforce_eager=*/false);
  const std::vector<std::vector<int32_t>> three_prompts = {g.prompt, g.prompt, g.prompt};
  const auto e1 = eager.greedy({g.prompt}, num_new);
  const auto g1 = graphs.greedy({g.prompt}, num_new);
  // Three rows: eager runs M = 3, the graph a bucket of 4 with one padding row. Row results do not depend on
  // the other rows in any kernel, so both must agree exactly (a batched prefill may round differently from a
  // single one, hence no exact comparison with the single-sequence run beyond the clear steps).
  const auto e3 = eager.greedy(three_prompts, num_new);
  const auto g3 = graphs.greedy(three_prompts, num_new);
  EXPECT_EQ(eager.runner->num_graph_steps(), 0);
  EXPECT_GT(graphs.runner->num_graph_steps(), 0);
  EXPECT_EQ(prefix(e1[0], clear), prefix(g.greedy, clear)) << clear << " clear steps";
  EXPECT_EQ(g1[0], e1[0]) << "graph replay differs from eager";
  EXPECT_EQ(g3, e3) << "a padded bucket changed a sequence";
  for (const auto& s : g3) EXPECT_EQ(prefix(s, clear), prefix(g.greedy, clear)) << clear << " clear steps";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGolden,
                         ::testing::Values("llama_gqa_llama3rope", "llama_headdim_tied_bias", "mistral_sharded",
                                           "qwen2_qkv_bias", "qwen3_qknorm_tied", "qwen3_bias_gqa", "gpt2_tied", "qwen3_moe",
                                           "qwen3_moe_step2", "gpt_oss", "gpt_oss_mxfp4", "deepseek_v3",
                                           "deepseek_v3_fp8"));

TEST(CudaTinyModel, GreedyIdsOfTheThreeGoldenPromptsDecodedTogether) {
  auto j = load_json_file(kSourceDir + "/tests/data/tiny_golden.json");
  ASSERT_TRUE(j.is_ok()) << j.message();
  std::vector<std::vector<int32_t>> prompts, expected;
  for (const auto& p : (*j)["prompts"]) {
    prompts.push_back(p["prompt_ids"].get<std::vector<int32_t>>());
    expected.push_back(p["greedy_ids"].get<std::vector<int32_t>>());
  }
  ASSERT_EQ(prompts.size(), 3u);
  Harness h(kSourceDir + "/models/ridgeline-tiny", /*enforce_eager=*/false);
  const auto out = h.greedy(prompts, static_cast<int64_t>(expected[0].size()));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out[i], expected[i]) << "prompt " << i;
  EXPECT_GT(h.runner->num_graph_steps(), 0);
}

}  // namespace
}  // namespace rl
