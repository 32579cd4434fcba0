// Speculative decoding through the engine (issue 18) with the embedded default model: on the CPU in ctest and on
// CUDA when RIDGELINE_TEST_DEVICE=cuda (scripts/device/runtime.sh, deterministic kernels). Greedy output equals
// plain decoding token for token with n-gram and draft-model proposals; seeded sampled output equals plain
// decoding's too (the verification accepts a draft exactly when it equals the target's own draw at that
// position); max_tokens, min_tokens, stop ids and stop strings hold exactly; chunked prefill, preemption and
// n > 1 keep working; every KV block comes back; the vllm:spec_decode_* metrics count what happened.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file.h"
#include "engine_test_util.h"
#include "runtime/engine.h"

namespace rl {
namespace {

const std::string kTiny = test_util::tiny_model_dir();

using test_util::test_device;

struct SpecOptions {
  std::string method;  // "": plain decoding
  int32_t k = 4;
  int64_t num_kv_blocks = 0;
  int32_t max_batched = 2048;
  int32_t max_running = 0;
  bool adaptive = false;  // most tests pin k to see every step speculate
};

std::unique_ptr<Engine> make_engine(const SpecOptions& o = {}) {
  EngineConfig c;
  c.model_dir = kTiny;
  c.device = test_device();
  c.deterministic = true;
  c.max_waiting = 4096;
  c.gpu_memory_utilization = 0.1;
  c.weight_dtype = DType::kF32;
  c.num_threads = 2;
  // A fixed cache (1,024 blocks of 16 tokens): tests hold a plain and a speculative engine at once, and on CUDA
  // sizing from memory would leave the second one nothing.
  c.num_kv_blocks = o.num_kv_blocks > 0 ? o.num_kv_blocks : 1024;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = o.max_batched;
  c.speculative = o.method;
  c.num_speculative_tokens = o.k;
  c.draft_model_dir = kTiny;  // the default model drafts for itself: every draft is accepted
  c.speculative_max_running = o.max_running;
  c.speculative_adaptive = o.adaptive;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return std::move(e).value();
}

// Copy-heavy prompts (a passage twice, then its start again) and random ones.
std::vector<std::vector<TokenId>> prompts(const Engine& e, int num_random) {
  std::vector<std::vector<TokenId>> out;
  const std::string passage =
      "And God said, Let there be light: and there was light. And God saw the light, that "
      "it was good. ";
  out.push_back(e.tokenizer()->encode(passage + passage + "And God said,", true));
  out.push_back(e.tokenizer()->encode("In the beginning God created the heaven and the earth.", true));
  for (auto& p : test_util::random_prompts(num_random, 5, 40, 5)) out.push_back(std::move(p));
  return out;
}

using test_util::greedy;

void expect_same(const std::vector<std::vector<Completion>>& a, const std::vector<std::vector<Completion>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t c = 0; c < a[i].size(); ++c) {
      EXPECT_EQ(a[i][c].token_ids, b[i][c].token_ids) << "prompt " << i << " choice " << c;
      EXPECT_EQ(a[i][c].finish, b[i][c].finish) << "prompt " << i << " choice " << c;
      EXPECT_EQ(a[i][c].text, b[i][c].text) << "prompt " << i << " choice " << c;
    }
  }
}

void expect_clean(Engine& e) {
  EXPECT_TRUE(e.check_integrity().is_ok()) << e.check_integrity().message();
  EXPECT_EQ(e.num_free_kv_blocks(), e.num_kv_blocks() - 1);
}

TEST(SpecEngine, GreedyNgramEqualsPlainDecodingTokenForToken) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 6);
  auto ref = plain->generate(ps, greedy(48));
  for (int32_t k : {1, 4, 7}) {
    auto spec = make_engine({.method = "ngram", .k = k});
    expect_same(spec->generate(ps, greedy(48)), ref);
    const spec::SpecDecodeCounters c = spec->spec_counters();
    EXPECT_GT(c.num_drafts, 0) << k;
    EXPECT_GT(c.num_accepted_tokens, 0) << k;
    EXPECT_LT(c.num_accepted_tokens, c.num_draft_tokens) << k;  // rejections were exercised too
    expect_clean(*spec);
  }
}

TEST(SpecEngine, GreedyDraftModelEqualsPlainDecodingTokenForToken) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 4);
  auto ref = plain->generate(ps, greedy(40));
  auto spec = make_engine({.method = "draft", .k = 3});
  expect_same(spec->generate(ps, greedy(40)), ref);
  const spec::SpecDecodeCounters c = spec->spec_counters();
  EXPECT_GT(c.num_drafts, 0);
  EXPECT_GT(c.mean_accepted_length(), 3.0);  // the model drafting for itself agrees almost always
  expect_clean(*spec);
}

TEST(SpecEngine, SeededSampledOutputEqualsPlainDecoding) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 4);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.top_k = 50;
  p.seed = 4242;
  p.max_tokens = 40;
  p.ignore_eos = true;
  p.logprobs = 2;
  auto ref = plain->generate(ps, p);
  for (const char* method : {"ngram", "draft"}) {
    auto spec = make_engine({.method = method, .k = 4});
    auto got = spec->generate(ps, p);
    expect_same(got, ref);
    // Logprobs of accepted drafts come from the target's own rows.
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_EQ(got[i][0].logprobs.size(), ref[i][0].logprobs.size());
      for (size_t t = 0; t < ref[i][0].logprobs.size(); ++t) {
        EXPECT_NEAR(*got[i][0].logprobs[t].logprob, *ref[i][0].logprobs[t].logprob, 1e-4) << method << i << t;
      }
    }
    EXPECT_GT(spec->spec_counters().num_accepted_tokens, 0) << method;
    expect_clean(*spec);
  }
}

TEST(SpecEngine, MaxTokensMinTokensAndStopsHoldExactly) {
  auto plain = make_engine();
  auto spec = make_engine({.method = "ngram", .k = 6});
  auto ps = prompts(*plain, 2);
  // max_tokens that is not a multiple of anything k + 1 produces.
  for (int n : {1, 2, 7, 13}) expect_same(spec->generate(ps, greedy(n)), plain->generate(ps, greedy(n)));
  // A stop id: the first repeated token of the plain output of the copy prompt.
  auto full = plain->generate({ps[0]}, greedy(40))[0][0];
  ASSERT_GE(full.token_ids.size(), 10u);
  SamplingParams stop_id = greedy(40);
  stop_id.stop_token_ids = {full.token_ids[6]};
  auto a = plain->generate(ps, stop_id), b = spec->generate(ps, stop_id);
  expect_same(b, a);
  EXPECT_EQ(b[0][0].finish, FinishReason::kStop);
  // min_tokens keeps the stop id from ending it early.
  stop_id.min_tokens = 8;
  expect_same(spec->generate(ps, stop_id), plain->generate(ps, stop_id));
  // A stop string cutting through the middle of the text.
  SamplingParams stop_str = greedy(40);
  stop_str.stop = {full.text.substr(full.text.size() / 2, 5)};
  auto c = plain->generate(ps, stop_str), d = spec->generate(ps, stop_str);
  expect_same(d, c);
  EXPECT_EQ(d[0][0].finish, FinishReason::kStop);
  // EOS not ignored.
  SamplingParams eos = greedy(60);
  eos.ignore_eos = false;
  expect_same(spec->generate(ps, eos), plain->generate(ps, eos));
  expect_clean(*spec);
}

TEST(SpecEngine, ChunkedPrefillPreemptionAndNChoicesKeepWorking) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 10);
  auto ref = plain->generate(ps, greedy(40));
  // Chunks of 24 tokens: prefills are split, and the budget caps drafts.
  expect_same(make_engine({.method = "ngram", .k = 4, .max_batched = 24})->generate(ps, greedy(40)), ref);
  // The draft model catches up on a long prompt in several steps too: its first chained draft step then reads
  // the drafts of earlier steps from the host, not from the previous step's sampled ids on the device.
  {
    auto chunked = make_engine({.method = "draft", .k = 4, .max_batched = 24});
    expect_same(chunked->generate(ps, greedy(40)), ref);
    const spec::SpecDecodeCounters c = chunked->spec_counters();
    EXPECT_GT(c.num_draft_tokens, 0);
    // The model drafting for itself: a draft fed the wrong token would be rejected.
    EXPECT_GE(static_cast<double>(c.num_accepted_tokens), 0.9 * static_cast<double>(c.num_draft_tokens));
    expect_clean(*chunked);
  }
  // 20 blocks of 16 for 12 sequences of up to 100 tokens: preemption is unavoidable.
  for (const char* method : {"ngram", "draft"}) {
    auto tight = make_engine({.method = method, .k = 4, .num_kv_blocks = 20});
    expect_same(tight->generate(ps, greedy(40)), ref);
    EXPECT_GT(tight->stats().num_preemptions, 0) << method;
    expect_clean(*tight);
  }
  // n = 3 sampled choices: each choice equals plain decoding's choice.
  SamplingParams p;
  p.n = 3;
  p.temperature = 1.0f;
  p.seed = 11;
  p.max_tokens = 24;
  p.ignore_eos = true;
  auto spec = make_engine({.method = "ngram", .k = 4});
  expect_same(spec->generate({ps[0], ps[1]}, p), plain->generate({ps[0], ps[1]}, p));
  expect_clean(*spec);
}

TEST(SpecEngine, SpeculationStopsAboveTheRunningLimit) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 8);
  auto spec = make_engine({.method = "ngram", .k = 4, .max_running = 2});
  expect_same(spec->generate(ps, greedy(24)), plain->generate(ps, greedy(24)));
  const int64_t batched = spec->spec_counters().num_drafts;
  // Alone, the same prompts speculate at every step.
  for (size_t i = 0; i < 2; ++i) spec->generate({ps[i]}, greedy(24));
  EXPECT_GT(spec->spec_counters().num_drafts - batched, 0);
  expect_clean(*spec);
}

// Adaptive speculation chooses k per step and request (0 included: plain pipelined steps between speculative
// ones, probes, shadowed n-gram guesses); whatever it chooses, greedy and seeded sampled outputs stay those of
// plain decoding, and every block comes back.
TEST(SpecEngine, AdaptiveSpeculationKeepsOutputsExact) {
  auto plain = make_engine();
  auto ps = prompts(*plain, 10);
  auto ref = plain->generate(ps, greedy(40));
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 99;
  p.max_tokens = 40;
  p.ignore_eos = true;
  auto ref_sampled = plain->generate(ps, p);
  for (const char* method : {"ngram", "draft"}) {
    auto spec = make_engine({.method = method, .k = 4, .adaptive = true});
    expect_same(spec->generate(ps, greedy(40)), ref);
    expect_same(spec->generate(ps, p), ref_sampled);
    const spec::SpecDecodeCounters c = spec->spec_counters();
    EXPECT_GT(c.num_decode_steps, 0) << method;
    // The first decoding steps explore speculation (the draft model always has drafts; n-gram may have none
    // for these prompts then, and later steps may find plain decoding cheaper).
    if (std::string(method) == "draft") {
      EXPECT_GT(c.num_drafts, 0);
    }
    EXPECT_GE(c.mean_k(), 0.0) << method;
    EXPECT_LE(c.mean_k(), 4.0) << method;
    expect_clean(*spec);
  }
}

TEST(SpecEngine, MetricsUseVllmNames) {
  auto spec = make_engine({.method = "ngram", .k = 3});
  auto ps = prompts(*spec, 0);
  spec->generate(ps, greedy(32));
  const std::string m = spec->metrics().render();
  const spec::SpecDecodeCounters c = spec->spec_counters();
  EXPECT_NE(m.find("vllm:spec_decode_num_drafts_total{model_name=\"ridgeline-tiny\"} " + std::to_string(c.num_drafts)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("vllm:spec_decode_num_draft_tokens_total{model_name=\"ridgeline-tiny\"} " +
                   std::to_string(c.num_draft_tokens)),
            std::string::npos);
  EXPECT_NE(m.find("vllm:spec_decode_num_accepted_tokens_total{model_name=\"ridgeline-tiny\"} " +
                   std::to_string(c.num_accepted_tokens)),
            std::string::npos);
  EXPECT_NE(m.find("vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"ridgeline-tiny\",position=\"0\"}"),
            std::string::npos);
}

TEST(SpecEngine, BadConfigurationsAreClearErrors) {
  EngineConfig c;
  c.model_dir = kTiny;
  c.device = test_device();
  c.speculative = "medusa";
  EXPECT_FALSE(Engine::create(c).is_ok());
  c.speculative = "draft";
  auto no_dir = Engine::create(c);
  ASSERT_FALSE(no_dir.is_ok());
  EXPECT_NE(no_dir.message().find("--draft-model"), std::string::npos);
  // A draft with another vocabulary.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "rl_spec_bad_draft";
  std::filesystem::create_directories(dir);
  auto cfg = read_file(kTiny + "/config.json");
  ASSERT_TRUE(cfg.is_ok());
  std::string text = *cfg;
  const size_t at = text.find("\"vocab_size\": 6144");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "\"vocab_size\": 6000");
  std::ofstream(dir / "config.json") << text;
  c.draft_model_dir = dir.string();
  auto bad = Engine::create(c);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("vocab_size"), std::string::npos) << bad.message();
  // Same vocabulary size, another tokenizer.
  std::ofstream(dir / "config.json") << *cfg;
  std::ofstream(dir / "tokenizer.json") << "{}";
  auto other = Engine::create(c);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.message().find("tokenizer"), std::string::npos) << other.message();
  std::filesystem::remove_all(dir);
  c.speculative = "ngram";
  c.num_speculative_tokens = 0;
  EXPECT_FALSE(Engine::create(c).is_ok());
}

}  // namespace
}  // namespace rl
