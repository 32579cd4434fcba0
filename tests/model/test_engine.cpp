// Engine-level tests with the embedded default model (models/ridgeline-tiny), on the CPU in ctest and on CUDA
// when RIDGELINE_TEST_DEVICE=cuda (scripts/device/runtime.sh, with the deterministic kernels): batching does not
// change greedy output, seeds reproduce, n > 1 shares the prompt's blocks, preemption and resume give the same
// tokens, stop strings cut across token boundaries, aborts and admission errors, every block comes back, and
// 1,000 mixed requests (issue 13) give every request the tokens it gets alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <random>
#include <thread>

#include "../sanitized.h"
#include "engine_test_util.h"
#include "runtime/engine.h"

namespace rl {
namespace {

using test_util::test_device;
const std::string kTiny = test_util::tiny_model_dir();

std::unique_ptr<Engine> make_engine(int64_t num_kv_blocks = 0, int32_t max_num_seqs = 64,
                                    int32_t max_batched = 2048) {
  EngineConfig c = test_util::tiny_engine_config();
  c.deterministic = true;
  c.max_waiting = 4096;
  c.num_kv_blocks = num_kv_blocks;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_batched;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return std::move(e).value();
}

using test_util::greedy;
using test_util::random_prompts;

TEST(EngineTest, GreedyOutputSameAloneAndInBatchOf32) {
  auto engine = make_engine();
  auto prompts = random_prompts(32, 5, 60, 1);
  auto batch = engine->generate(prompts, greedy(24));
  ASSERT_EQ(batch.size(), 32u);
  for (int i : {0, 7, 31}) {
    auto alone = engine->generate({prompts[static_cast<size_t>(i)]}, greedy(24));
    EXPECT_EQ(alone[0][0].token_ids, batch[static_cast<size_t>(i)][0].token_ids) << "prompt " << i;
    EXPECT_EQ(batch[static_cast<size_t>(i)][0].token_ids.size(), 24u);
    EXPECT_EQ(batch[static_cast<size_t>(i)][0].finish, FinishReason::kLength);
  }
  EXPECT_TRUE(engine->check_integrity().is_ok()) << engine->check_integrity().message();
  EXPECT_EQ(engine->num_free_kv_blocks(), engine->num_kv_blocks() - 1);
}

TEST(EngineTest, SameSeedSameSampledOutputWhateverTheBatch) {
  auto engine = make_engine();
  auto prompts = random_prompts(8, 5, 30, 2);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 1234;
  p.max_tokens = 20;
  p.ignore_eos = true;
  auto a = engine->generate({prompts[3]}, p);
  auto b = engine->generate(prompts, p);
  EXPECT_EQ(a[0][0].token_ids, b[3][0].token_ids);
  p.seed = 999;
  auto c = engine->generate({prompts[3]}, p);
  EXPECT_NE(a[0][0].token_ids, c[0][0].token_ids);
}

TEST(EngineTest, NChoicesShareThePromptBlocks) {
  auto engine = make_engine();
  auto prompt = random_prompts(1, 70, 70, 3)[0];  // 4 full blocks of 16
  SamplingParams p;
  p.n = 4;
  p.temperature = 1.0f;
  p.seed = 7;
  p.max_tokens = 12;
  p.ignore_eos = true;
  auto ch = engine->submit("multi", prompt, p);
  std::vector<std::vector<TokenId>> toks(4);
  std::vector<RequestOutput> fin(4);
  while (auto m = ch->pop()) {
    for (const auto& t : m->tokens) toks[static_cast<size_t>(m->index)].push_back(t.token);
    if (m->finish != FinishReason::kNone) fin[static_cast<size_t>(m->index)] = *m;
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(toks[static_cast<size_t>(i)].size(), 12u);
    EXPECT_EQ(fin[static_cast<size_t>(i)].finish, FinishReason::kLength);
  }
  EXPECT_EQ(fin[0].num_cached_tokens, 0);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(fin[static_cast<size_t>(i)].num_cached_tokens, 64) << i;
  // Different seeds per choice: not all choices are the same text.
  EXPECT_FALSE(toks[0] == toks[1] && toks[1] == toks[2] && toks[2] == toks[3]);
  EXPECT_TRUE(engine->check_integrity().is_ok());
}

TEST(EngineTest, PreemptionAndResumeGiveTheSameGreedyOutput) {
  auto prompts = random_prompts(12, 20, 40, 4);
  auto roomy = make_engine();
  auto ref = roomy->generate(prompts, greedy(40));
  // 24 blocks of 16 = 384 tokens of KV for 12 sequences of up to 80 tokens: preemption is unavoidable.
  auto tight = make_engine(/*num_kv_blocks=*/24);
  auto got = tight->generate(prompts, greedy(40));
  EXPECT_GT(tight->stats().num_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i][0].token_ids, ref[i][0].token_ids) << i;
  EXPECT_TRUE(tight->check_integrity().is_ok()) << tight->check_integrity().message();
  EXPECT_EQ(tight->num_free_kv_blocks(), tight->num_kv_blocks() - 1);
}

TEST(EngineTest, ChunkedPrefillGivesTheSameOutput) {
  auto prompts = random_prompts(4, 100, 150, 5);
  auto a = make_engine()->generate(prompts, greedy(16));
  auto b = make_engine(0, 8, /*max_batched=*/32)->generate(prompts, greedy(16));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(a[i][0].token_ids, b[i][0].token_ids) << i;
}

TEST(EngineTest, StopStringsAcrossTokenBoundaries) {
  auto engine = make_engine();
  ASSERT_NE(engine->tokenizer(), nullptr);
  auto prompt = engine->tokenizer()->encode("In the beginning", true);
  auto full = engine->generate({prompt}, greedy(32))[0][0];
  ASSERT_GE(full.text.size(), 30u);
  // A stop that starts inside one token and ends inside a later one.
  const std::string stop = full.text.substr(11, 9);
  SamplingParams p = greedy(32);
  p.stop = {stop};
  auto cut = engine->generate({prompt}, p)[0][0];
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_LT(cut.token_ids.size(), full.token_ids.size());
}

TEST(EngineTest, AbortFreesEverything) {
  auto engine = make_engine();
  auto prompt = random_prompts(1, 300, 300, 6)[0];
  auto ch = engine->submit("long", prompt, greedy(500));
  auto first = ch->pop();  // wait until it runs
  ASSERT_TRUE(first.has_value());
  engine->abort("long");
  FinishReason last = FinishReason::kNone;
  while (auto m = ch->pop()) {
    if (m->finish != FinishReason::kNone) last = m->finish;
  }
  EXPECT_EQ(last, FinishReason::kAbort);
  EXPECT_TRUE(engine->check_integrity().is_ok());
  EXPECT_EQ(engine->num_free_kv_blocks(), engine->num_kv_blocks() - 1);
}

// Streams with a consumer thread blocked on each channel, as the server's workers wait: with the wake thread
// (EngineConfig::wake_thread "on") every request gets the tokens, finish and counts it gets when the engine thread
// wakes consumers itself, and the wakes went through the waker.
TEST(EngineTest, TheWakeThreadDeliversEveryStreamAsTheEngineThreadDoes) {
  auto prompts = random_prompts(24, 5, 40, 8);
  struct Stream {
    std::vector<TokenId> tokens;
    FinishReason finish = FinishReason::kNone;
    int32_t num_output_tokens = 0;
  };
  std::vector<std::vector<Stream>> runs;
  for (const char* wake : {"off", "on"}) {
    EngineConfig c = test_util::tiny_engine_config();
    c.deterministic = true;
    c.wake_thread = wake;
    auto created = Engine::create(c);
    ASSERT_TRUE(created.is_ok()) << created.message();
    std::unique_ptr<Engine> engine = std::move(created).value();
    std::vector<Stream> streams(prompts.size());
    std::vector<std::thread> consumers;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::string id = "s";
      id += std::to_string(i);
      auto ch = engine->submit(id, prompts[i], greedy(16 + static_cast<int32_t>(i % 5)));
      consumers.emplace_back([ch, s = &streams[i]] {
        while (std::optional<RequestOutput> m = ch->pop()) {
          for (const TokenOutput& t : m->tokens) s->tokens.push_back(t.token);
          if (m->finish != FinishReason::kNone) {
            s->finish = m->finish;
            s->num_output_tokens = m->num_output_tokens;
          }
        }
      });
    }
    for (std::thread& t : consumers) t.join();
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(streams[i].finish, FinishReason::kLength) << wake << " stream " << i;
      EXPECT_EQ(streams[i].tokens.size(), static_cast<size_t>(16 + i % 5)) << wake << " stream " << i;
      EXPECT_EQ(streams[i].num_output_tokens, static_cast<int32_t>(streams[i].tokens.size())) << wake;
    }
    const auto [spinning, sleeping] = engine->waker_posts();
    if (std::string(wake) == "on") {
      EXPECT_GT(spinning + sleeping, 0) << "no consumer was woken through the wake thread";
    } else {
      EXPECT_EQ(spinning + sleeping, 0);
    }
    EXPECT_TRUE(engine->check_integrity().is_ok()) << engine->check_integrity().message();
    EXPECT_EQ(engine->num_free_kv_blocks(), engine->num_kv_blocks() - 1);
    runs.push_back(std::move(streams));
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(runs[0][i].tokens, runs[1][i].tokens) << "stream " << i;
  EngineConfig bad = test_util::tiny_engine_config();
  bad.wake_thread = "sometimes";
  auto refused = Engine::create(bad);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("wake_thread \"sometimes\""), std::string::npos) << refused.message();
}

// A row that cannot be sampled fails its own request with a clear error; the other requests of the same batch
// finish normally, the engine keeps serving, and every block comes back.
TEST(EngineTest, AnUnsamplableRowFailsOnlyItsRequest) {
  auto engine = make_engine();
  auto prompts = random_prompts(3, 10, 20, 9);
  SamplingParams bad = greedy(6);
  // A finite bias that a repetition penalty (token 5 is in the prompt) pushes past FLT_MAX: the processed row
  // holds +Inf, so nothing can be sampled. (A numerically broken model gives NaN/Inf logits the same way.)
  prompts[1][0] = 5;
  bad.logit_bias[5] = 3e38f;
  bad.repetition_penalty = 0.01f;
  auto c0 = engine->submit("ok-0", prompts[0], greedy(6));
  auto cb = engine->submit("bad", prompts[1], bad);
  auto c1 = engine->submit("ok-1", prompts[2], greedy(6));
  const auto drain = [](const std::shared_ptr<OutputChannel>& ch, std::string* error) {
    FinishReason last = FinishReason::kNone;
    size_t tokens = 0;
    while (auto m = ch->pop()) {
      tokens += m->tokens.size();
      if (!m->error.empty()) *error = m->error;
      if (m->finish != FinishReason::kNone) last = m->finish;
    }
    return std::make_pair(last, tokens);
  };
  std::string e0, eb, e1;
  auto r0 = drain(c0, &e0), rb = drain(cb, &eb), r1 = drain(c1, &e1);
  EXPECT_EQ(rb.first, FinishReason::kError);
  EXPECT_NE(eb.find("no token can be sampled"), std::string::npos) << eb;
  EXPECT_EQ(r0.first, FinishReason::kLength);
  EXPECT_EQ(r0.second, 6u);
  EXPECT_EQ(r1.first, FinishReason::kLength);
  EXPECT_TRUE(e0.empty() && e1.empty());
  // The engine goes on serving.
  auto again = engine->generate({prompts[0]}, greedy(4));
  EXPECT_EQ(again[0][0].token_ids.size(), 4u);
  EXPECT_TRUE(engine->check_integrity().is_ok()) << engine->check_integrity().message();
  EXPECT_EQ(engine->num_free_kv_blocks(), engine->num_kv_blocks() - 1);
}

TEST(EngineTest, AdmissionErrorsAreReported) {
  auto engine = make_engine();
  std::vector<TokenId> too_long(static_cast<size_t>(engine->max_model_len() + 1), 11);
  auto ch = engine->submit("too-long", too_long, greedy(4));
  auto m = ch->pop();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->finish, FinishReason::kError);
  EXPECT_EQ(m->add_error, AddError::kRejected);
  EXPECT_FALSE(m->error.empty());
  EXPECT_FALSE(ch->pop().has_value());
  // Bad token ids are rejected too, never a crash.
  auto bad = engine->submit("bad-id", {1, 2, 999999}, greedy(4));
  auto bm = bad->pop();
  ASSERT_TRUE(bm.has_value());
  EXPECT_EQ(bm->finish, FinishReason::kError);
}

TEST(EngineTest, SystemFingerprintFollowsWhatChangesTokens) {
  auto a = make_engine(/*num_kv_blocks=*/64), b = make_engine(/*num_kv_blocks=*/64);
  EXPECT_EQ(a->system_fingerprint(), b->system_fingerprint());
  EXPECT_EQ(a->system_fingerprint().rfind("fp_", 0), 0u);
  EXPECT_EQ(a->system_fingerprint().size(), 15u);
  EngineConfig c;
  c.model_dir = kTiny;
  c.device = test_device();
  c.weight_dtype = DType::kBF16;
  c.num_kv_blocks = 64;
  c.deterministic = !a->backend().deterministic();
  auto other = Engine::create(c);
  ASSERT_TRUE(other.is_ok()) << other.message();
  // CPU: bf16 weights instead of f32; CUDA (always bf16): the other kernel family.
  EXPECT_NE((*other)->system_fingerprint(), a->system_fingerprint());
}

// An explicit KV size (kv_cache_memory_bytes, --kv-cache-gb) sizes the pool on both devices (on CUDA it replaces
// the gpu_memory_utilization rule), and one larger than the free memory fails naming the field.
TEST(EngineTest, KvCacheMemoryBytesSizesThePoolOnEveryDevice) {
  const auto create = [](int64_t bytes) {
    EngineConfig c = test_util::tiny_engine_config(bytes);
    c.max_num_seqs = 8;
    return Engine::create(c);
  };
  auto small = create(16ll << 20), large = create(64ll << 20);
  ASSERT_TRUE(small.is_ok()) << small.message();
  ASSERT_TRUE(large.is_ok()) << large.message();
  const int64_t n16 = (*small)->num_kv_blocks(), n64 = (*large)->num_kv_blocks();
  EXPECT_GT(n16, 1);
  EXPECT_GE(n64, 4 * n16);  // floor(64 MiB / b) >= 4 floor(16 MiB / b)
  EXPECT_LE(n64, 4 * n16 + 3);
  auto huge = create(1ll << 50);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.message().find("kv_cache_memory_bytes"), std::string::npos) << huge.message();
}

// Issue 13: 1,000 random requests (mixed prompt and output lengths, greedy and seeded sampling with every
// parameter, shared prefixes) through an engine whose KV pool forces preemption give every request exactly the
// tokens it gets alone on a roomy engine.
TEST(EngineDeterminism, ThousandMixedRequestsMatchThemselvesAlone) {
  // Under the sanitizers (about 20× slower here) 250 requests, which still preempt and share prefixes.
  const char* n_env = std::getenv("RIDGELINE_DETERMINISM_N");
  const int n = n_env ? std::atoi(n_env) : kSanitized ? 250 : 1000;
  std::mt19937_64 rng(13);
  const auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<TokenId>> prefixes;
  for (int i = 0; i < 24; ++i) prefixes.push_back(random_prompts(1, 16, 48, 100 + static_cast<uint64_t>(i))[0]);
  std::vector<std::vector<TokenId>> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < n; ++i) {
    std::vector<TokenId> p;
    if (uni(0, 9) < 6) p = prefixes[static_cast<size_t>(uni(0, 23))];
    const int suffix = uni(p.empty() ? 1 : 0, 40);
    for (int k = 0; k < suffix; ++k) p.push_back(uni(10, 6000));
    if (p.empty()) p.push_back(11);
    prompts.push_back(std::move(p));
    SamplingParams sp;
    sp.max_tokens = uni(1, 16);
    sp.ignore_eos = uni(0, 1) == 1;
    const int kind = uni(0, 9);
    if (kind < 4) {
      sp.temperature = 0.0f;
    } else {
      sp.temperature = 0.5f + 0.1f * static_cast<float>(uni(0, 8));
      sp.seed = static_cast<uint64_t>(uni(0, 1 << 30));
      if (uni(0, 1)) sp.top_k = uni(1, 100);
      if (uni(0, 1)) sp.top_p = 0.8f + 0.01f * static_cast<float>(uni(0, 19));
      if (uni(0, 3) == 0) sp.min_p = 0.05f;
    }
    if (kind == 6) {
      sp.repetition_penalty = 1.2f;
      sp.frequency_penalty = 0.3f;
      sp.presence_penalty = 0.1f;
    }
    if (kind == 7) sp.logprobs = uni(0, 5);
    if (kind == 8) {
      sp.logit_bias = {{static_cast<TokenId>(uni(10, 6000)), 3.0f}, {static_cast<TokenId>(uni(10, 6000)), -5.0f}};
      sp.min_tokens = std::min(*sp.max_tokens, uni(0, 8));
    }
    params.push_back(sp);
  }
  const auto collect = [](const std::shared_ptr<OutputChannel>& ch) {
    std::vector<TokenId> toks;
    while (auto m = ch->pop()) {
      EXPECT_TRUE(m->error.empty()) << m->error;
      for (const TokenOutput& t : m->tokens) toks.push_back(t.token);
    }
    return toks;
  };
  // 24 blocks of 16 = 384 tokens of KV for up to 32 running sequences of up to 104 tokens.
  auto tight = make_engine(/*num_kv_blocks=*/24, /*max_num_seqs=*/32, /*max_batched=*/256);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  for (int i = 0; i < n; ++i) chans.push_back(tight->submit(std::to_string(i) + "-batched", prompts[i], params[i]));
  std::vector<std::vector<TokenId>> batched;
  for (auto& ch : chans) batched.push_back(collect(ch));
  EXPECT_GT(tight->stats().num_preemptions, 0);
  EXPECT_GT(tight->stats().prefix_cache_hits, 0);
  EXPECT_TRUE(tight->check_integrity().is_ok()) << tight->check_integrity().message();
  EXPECT_EQ(tight->num_free_kv_blocks(), tight->num_kv_blocks() - 1);

  auto roomy = make_engine();
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<TokenId> alone = collect(roomy->submit(std::to_string(i) + "-alone", prompts[i], params[i]));
    if (alone != batched[static_cast<size_t>(i)]) {
      if (++mismatches <= 5) ADD_FAILURE() << "request " << i << " differs from itself alone";
    }
  }
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << n << " requests differ";
  std::printf("determinism: %d requests, %lld preemptions, %d differ from themselves alone\n", n,
              static_cast<long long>(tight->stats().num_preemptions), mismatches);
}

}  // namespace
}  // namespace rl
