// Golden tests: our CPU forward pass against transformers on tiny random checkpoints (tests/data/golden).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "core/file.h"
#include "core/json.h"
#include "model/model.h"
#include "runtime/kv_storage.h"
#include "runtime/model_runner.h"
#include "../golden_fixture.h"

namespace rl {
namespace {

const std::string kGoldenDir = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/golden/";

using Golden = test::GoldenFixture;


// Top-k routing is discontinuous: where two expert scores nearly tie, bf16 rounding may choose the other expert
// and that position's logits legitimately move by O(1) (on this machine's bf16 path the GPT-OSS fixture flips at
// positions whose margin is 0.013 and 0.006). bf16 comparisons skip positions whose routing margin in the f32
// run is below this.
constexpr double kClearRouting = 0.02;

Golden load_golden(const std::string& dir) { return test::load_golden_fixture(dir); }

// A model with a KV cache of 24 blocks of 16 and a runner able to return logits for every token. The cache
// has the engine's KV groups: a model that mixes window and full layers (GPT-OSS) gets a hybrid cache whose
// window layers read their own block table.
struct Harness {
  CpuBackend backend{2};
  std::unique_ptr<Model> model;
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> block_table;
  std::vector<int32_t> window_table;  // hybrid: group 1's blocks (empty otherwise)
  int64_t window = 0;                 // hybrid: group 1's window

  explicit Harness(const std::string& dir, DType wdt = DType::kF32) {
    LoadOptions opts;
    opts.weight_dtype = wdt;
    auto m = load_model(dir, &backend, opts);
    EXPECT_TRUE(m.is_ok()) << m.message();
    model = std::move(m).value();
    const KvGroupPlan plan = plan_kv_groups(model->config().kv_spec, true, kMaxKvGroups);
    kv = std::make_unique<KvStorage>(&backend, model->config(), 24, 16, DType::kF32, &plan);
    RunnerLimits lim;
    lim.max_num_tokens = 64;
    lim.max_num_seqs = 4;
    lim.max_model_len = 64;
    lim.max_num_logits = 64;
    runner = std::make_unique<ModelRunner>(model.get(), kv.get(), lim);
    // Non-contiguous, descending block ids: exercises the block table rather than a flat layout.
    block_table = {13, 7, 2, 11};
    if (plan.num_groups() > 1) {
      EXPECT_EQ(plan.num_groups(), 2);
      window_table = {4, 10, 15, 8};
      window = plan.windows[1];
    }
  }

  // The window group's table for a step whose first token is at `begin`: blocks wholly behind that token's
  // window read block 0 (as the KV manager releases them), so a stale read would change the logits.
  std::vector<int32_t> window_table_from(int64_t begin, const std::vector<int32_t>& table) const {
    std::vector<int32_t> t = table;
    const int64_t first = std::max<int64_t>(0, begin - window + 1) / 16;
    for (int64_t b = 0; b < first && b < static_cast<int64_t>(t.size()); ++b) t[static_cast<size_t>(b)] = 0;
    return t;
  }

  // Feeds tokens[begin, end) as one step after `begin` computed tokens; returns all their logits.
  std::vector<float> feed(const std::vector<int32_t>& tokens, int64_t begin, int64_t end, bool all) {
    SeqStep s;
    s.token_ids = tokens.data() + begin;
    s.num_new_tokens = end - begin;
    s.num_computed = begin;
    s.block_table = block_table.data();
    s.num_blocks = static_cast<int64_t>(block_table.size());
    const std::vector<int32_t> wt = window_table_from(begin, window_table);
    if (!window_table.empty()) s.window_tables[0] = wt.data();
    s.all_logits = all;
    std::vector<float> logits;
    runner->step({s}, &logits);
    return logits;
  }

  // Two sequences in one step from nothing computed: tokens[0, a) through block_table and all of tokens through
  // other block tables; their logits (every row of the first with `all`, of the second with `all_second`, else
  // each one's last).
  std::vector<float> feed_two(const std::vector<int32_t>& tokens, int64_t a, bool all, bool all_second = true) {
    const std::vector<int32_t> other_table = {5, 9, 1, 14}, other_window_table = {3, 6, 12, 20};
    SeqStep s1, s2;
    s1.token_ids = tokens.data();
    s1.num_new_tokens = a;
    s1.block_table = block_table.data();
    s1.num_blocks = static_cast<int64_t>(block_table.size());
    s1.all_logits = all;
    if (!window_table.empty()) s1.window_tables[0] = window_table.data();
    s2 = s1;
    s2.num_new_tokens = static_cast<int64_t>(tokens.size());
    s2.all_logits = all && all_second;
    s2.block_table = other_table.data();
    if (!window_table.empty()) s2.window_tables[0] = other_window_table.data();
    std::vector<float> logits;
    runner->step({s1, s2}, &logits);
    return logits;
  }
};

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, TeacherForcedLogitsMatchTransformers) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness h(dir);
  const std::vector<int32_t> seq = g.sequence();
  const int64_t n = static_cast<int64_t>(seq.size());
  std::vector<float> logits = h.feed(seq, 0, n, /*all=*/true);
  ASSERT_EQ(logits.size(), g.logits.size());
  EXPECT_LE(max_abs_diff(logits.data(), g.logits.data(), logits.size()), 1e-4f);
}

TEST_P(GoldenTest, ChunkedPrefillThroughPagedCacheGivesSameLogits) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness h(dir);
  const std::vector<int32_t> seq = g.sequence();
  const int64_t n = static_cast<int64_t>(seq.size());
  // Chunks of 5 cross the 16-token block boundaries at different offsets.
  for (int64_t b = 0; b < n; b += 5) {
    int64_t e = std::min(n, b + 5);
    std::vector<float> logits = h.feed(seq, b, e, /*all=*/true);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), (e - b) * g.vocab);
    EXPECT_LE(max_abs_diff(logits.data(), g.logits.data() + b * g.vocab, logits.size()), 1e-4f)
        << "chunk starting at " << b;
  }
}

// Two sequences in one step (a 20-token prefill and the whole 36-token sequence, different block tables): each
// gets exactly its own logits (MoE routing, windows and sinks included).
TEST_P(GoldenTest, BatchedSequencesGiveTheirOwnLogits) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness h(dir);
  const std::vector<int32_t> seq = g.sequence();
  const int64_t n = static_cast<int64_t>(seq.size()), a = 20;
  std::vector<float> logits = h.feed_two(seq, a, /*all=*/true);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), (a + n) * g.vocab);
  EXPECT_LE(max_abs_diff(logits.data(), g.logits.data(), static_cast<size_t>(a * g.vocab)), 1e-4f);
  EXPECT_LE(max_abs_diff(logits.data() + a * g.vocab, g.logits.data(), static_cast<size_t>(n * g.vocab)), 1e-4f);
}

// A prefill step that wants fewer logits rows than it computes runs its last layer's attention (MLA: from o_proj),
// o_proj and feed-forward on those rows alone (Decoder::forward). Two sequences wanting their last rows (a 20-token
// prefill and the whole 36 tokens), then every row of the first and the last of the second: each row matches
// transformers. Then a step that wants no logits (a chunk of 10 tokens) and one that wants the last row of the
// remaining chunk: its row matches too, so the first chunk's K/V were all written.
TEST_P(GoldenTest, PrefillComputesTheLastLayerForTheLogitsRowsOnly) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness h(dir);
  const std::vector<int32_t> seq = g.sequence();
  const int64_t n = static_cast<int64_t>(seq.size()), a = 20, v = g.vocab;
  std::vector<float> logits = h.feed_two(seq, a, /*all=*/false);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), 2 * v);
  EXPECT_LE(max_abs_diff(logits.data(), g.logits.data() + (a - 1) * v, static_cast<size_t>(v)), 1e-4f);
  EXPECT_LE(max_abs_diff(logits.data() + v, g.logits.data() + (n - 1) * v, static_cast<size_t>(v)), 1e-4f);
  logits = h.feed_two(seq, a, /*all=*/true, /*all_second=*/false);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), (a + 1) * v);
  EXPECT_LE(max_abs_diff(logits.data(), g.logits.data(), static_cast<size_t>(a * v)), 1e-4f);
  EXPECT_LE(max_abs_diff(logits.data() + a * v, g.logits.data() + (n - 1) * v, static_cast<size_t>(v)), 1e-4f);

  SeqStep chunk;
  chunk.token_ids = seq.data();
  chunk.num_new_tokens = 10;
  chunk.block_table = h.block_table.data();
  chunk.num_blocks = static_cast<int64_t>(h.block_table.size());
  if (!h.window_table.empty()) chunk.window_tables[0] = h.window_table.data();
  chunk.want_logits = false;
  logits.assign(3, 1.0f);
  h.runner->step({chunk}, &logits);
  EXPECT_TRUE(logits.empty());
  logits = h.feed(seq, 10, n, /*all=*/false);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), v);
  EXPECT_LE(max_abs_diff(logits.data(), g.logits.data() + (n - 1) * v, static_cast<size_t>(v)), 1e-4f);
}

TEST_P(GoldenTest, GreedyTokensIdentical) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness h(dir);
  std::vector<int32_t> seq = g.prompt;
  std::vector<float> logits = h.feed(seq, 0, static_cast<int64_t>(seq.size()), false);
  std::vector<int32_t> out;
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    seq.push_back(next);
    int64_t len = static_cast<int64_t>(seq.size());
    logits = h.feed(seq, len - 1, len, false);
  }
  EXPECT_EQ(out, g.greedy);
}

// The model's fused decode path (Backend::fuses_norm_linear: residual adds inside the projections, pre-norms
// folded into the next projection, RoPE with the KV write), here composed of the reference ops, gives bitwise the
// logits of the unfused path: for a prefill and for decode steps.
TEST_P(GoldenTest, FusedDecodePathGivesTheSameLogits) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  Harness plain(dir), fused(dir);
  fused.backend.set_fused_path(true);
  const std::vector<int32_t> seq = g.sequence();
  const int64_t n = static_cast<int64_t>(seq.size()), p = static_cast<int64_t>(g.prompt.size());
  EXPECT_EQ(fused.feed(seq, 0, p, true), plain.feed(seq, 0, p, true));
  for (int64_t i = p; i < n; ++i) {
    std::vector<float> want = plain.feed(seq, i, i + 1, false);
    ASSERT_EQ(fused.feed(seq, i, i + 1, false), want) << "decode step at position " << i;
  }
}

TEST_P(GoldenTest, Bf16WeightsStayCloseToTransformers) {
  const std::string dir = kGoldenDir + GetParam();
  Golden g = load_golden(dir);
  // An MoE fixture without routing margins (deepseek_v3*: made before margins were recorded) cannot tell a routing
  // tie from an error (on the scalar tier deepseek_v3's position 32 flips an expert: 0.22 there, 0.011 elsewhere).
  auto cfg = load_json_file(dir + "/config.json");
  ASSERT_TRUE(cfg.is_ok());
  if (g.routing_margins.empty() && cfg->contains("n_routed_experts")) {
    GTEST_SKIP() << "no routing_margins in golden.json: regenerate with tools/make_fixtures.py";
  }
  Harness h(dir, DType::kBF16);
  const std::vector<int32_t> seq = g.sequence();
  std::vector<float> logits = h.feed(seq, 0, static_cast<int64_t>(seq.size()), true);
  ASSERT_EQ(logits.size(), g.logits.size());
  // bf16 has 8 bits of mantissa: relative error of the whole logit tensor around 1e-2, over the positions
  // whose expert routing is clear (all of them for dense models).
  const size_t v = static_cast<size_t>(g.vocab), positions = logits.size() / v;
  double num = 0, den = 0;
  size_t used = 0;
  std::string per_position;
  for (size_t p = 0; p < positions; ++p) {
    const bool clear = g.routing_margins.empty() || g.routing_margins.at(p) >= kClearRouting;
    double pn = 0, pd = 0;
    for (size_t i = p * v; i < (p + 1) * v; ++i) {
      pn += (logits[i] - g.logits[i]) * (logits[i] - g.logits[i]);
      pd += g.logits[i] * g.logits[i];
    }
    char buf[48];  // snprintf: GCC 12 warns falsely on " " + std::to_string(...)
    std::snprintf(buf, sizeof(buf), " %zu%s:%.4f", p, clear ? "" : "(routing tie)", std::sqrt(pn / pd));
    per_position += buf;
    if (!clear) continue;
    num += pn;
    den += pd;
    ++used;
  }
  EXPECT_GE(used * 2, positions) << "fewer than half of the positions have a clear routing";
  EXPECT_LT(std::sqrt(num / den), 2e-2) << "relative error per position:" << per_position;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         ::testing::Values("llama_gqa_llama3rope", "llama_headdim_tied_bias", "mistral_sharded",
                                           "qwen2_qkv_bias", "qwen3_qknorm_tied", "qwen3_bias_gqa", "gpt2_tied",
                                           "qwen3_moe", "qwen3_moe_step2", "gpt_oss", "gpt_oss_mxfp4", "deepseek_v3",
                                           "deepseek_v3_fp8"));

}  // namespace
}  // namespace rl
