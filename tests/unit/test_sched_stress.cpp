// Randomized scheduler workload against a simulated KV store: many requests with shared prefixes, random
// lengths, stop tokens and aborts, a small block pool (so preemption happens). After every step the integrity
// checks run, and every position a request treats as computed must hold that request's own KV in the slot
// its block table names: this catches a wrong prefix hit, a shared block overwritten, or a lost token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace rl {
namespace {

// The "KV" of position p of a sequence: a digest of tokens [0, p], so equal KV means equal prefix.
std::vector<uint64_t> prefix_digests(std::span<const TokenId> tokens) {
  std::vector<uint64_t> d(tokens.size());
  uint64_t h = 0x12345;
  for (size_t i = 0; i < tokens.size(); ++i) {
    h = (h ^ static_cast<uint64_t>(tokens[i] + 1)) * 0x100000001B3ull;
    d[i] = h;
  }
  return d;
}

// The token a deterministic "model" produces after a given prefix (so recompute after preemption must
// reproduce the same continuation).
TokenId next_token(std::span<const TokenId> tokens, int32_t vocab) {
  return static_cast<TokenId>(prefix_digests(tokens).back() % static_cast<uint64_t>(vocab));
}

std::string request_id(int32_t n) {
  std::string id = std::to_string(n);
  id.insert(id.begin(), 'r');
  return id;
}

struct StressParams {
  uint32_t seed;
  int32_t block_size;
  int32_t num_blocks;
  int32_t budget;
  int32_t threshold;
};

void run_stress(const StressParams& sp) {
  std::mt19937 rng(sp.seed);
  SchedulerConfig c;
  c.max_num_batched_tokens = sp.budget;
  c.max_num_seqs = 12;
  c.max_model_len = 160;
  c.max_waiting = 64;
  c.long_prefill_token_threshold = sp.threshold;
  c.kv.num_blocks = sp.num_blocks;
  c.kv.block_size = sp.block_size;
  Scheduler s(c);
  const int32_t vocab = 50;
  const int32_t bs = sp.block_size;
  std::vector<uint64_t> kv_store(static_cast<size_t>(sp.num_blocks) * bs, 0);

  // Prompts share one of a few prefixes so that prefix hits and shared blocks are common.
  std::vector<std::vector<TokenId>> prefixes(4);
  for (auto& p : prefixes) {
    p.resize(std::uniform_int_distribution<int>(0, 40)(rng));
    for (TokenId& t : p) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  int32_t num_submitted = 0;
  int32_t num_finished = 0;
  const int32_t num_requests = 150;
  std::map<std::string, std::vector<TokenId>> expected_prompt;

  for (int32_t step = 0; step < 20000 && (num_submitted < num_requests || s.has_unfinished()); ++step) {
    // Arrivals.
    const int32_t num_arrivals = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int32_t a = 0; a < num_arrivals && num_submitted < num_requests; ++a) {
      std::vector<TokenId> prompt = prefixes[rng() % prefixes.size()];
      const int32_t num_suffix = std::uniform_int_distribution<int>(1, 30)(rng);
      for (int32_t i = 0; i < num_suffix; ++i) prompt.push_back(std::uniform_int_distribution<int>(0, vocab - 1)(rng));
      SamplingParams p;
      p.max_tokens = std::uniform_int_distribution<int>(1, 40)(rng);
      p.min_tokens = std::min(*p.max_tokens, std::uniform_int_distribution<int>(0, 2)(rng));
      if (rng() % 4 == 0) p.cache_salt = "salt";
      if (rng() % 3 == 0) p.stop_token_ids = {7};
      const std::string id = request_id(num_submitted);
      expected_prompt[id] = prompt;
      AddResult res = s.add_request(Request(id, prompt, p, {3}));
      if (res.error == AddError::kQueueFull) {
        break;  // the client retries later
      }
      ASSERT_TRUE(res.ok()) << res.status.message();
      ++num_submitted;
    }
    // Random aborts, in any state.
    if (s.has_unfinished() && rng() % 10 == 0) {
      const std::string id = request_id(std::uniform_int_distribution<int>(0, num_submitted - 1)(rng));
      if (s.abort(id) != nullptr) ++num_finished;
    }

    SchedulerOutput out = s.schedule();
    ASSERT_LE(out.num_scheduled_tokens, c.max_num_batched_tokens);
    ASSERT_LE(static_cast<int32_t>(out.scheduled.size()), c.max_num_seqs);
    ASSERT_TRUE(s.check_integrity().is_ok()) << s.check_integrity().message();
    if (s.has_unfinished()) {
      ASSERT_FALSE(out.scheduled.empty()) << "no progress at step " << step;
    }

    std::vector<TokenId> sampled(out.scheduled.size(), 0);
    int32_t total = 0;
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const ScheduledRequest& e = out.scheduled[i];
      const Request& r = *e.request;
      total += e.num_scheduled_tokens;
      ASSERT_GT(e.num_scheduled_tokens, 0);
      if (sp.threshold > 0) {
        ASSERT_LE(e.num_scheduled_tokens, sp.threshold);
      }
      const int32_t end = e.num_computed_tokens + e.num_scheduled_tokens;
      ASSERT_LE(end, r.num_tokens());
      ASSERT_GE(static_cast<int64_t>(e.block_table.size()) * bs, end);
      ASSERT_EQ(e.samples, end == r.num_tokens());
      const std::vector<uint64_t> digests = prefix_digests(r.token_ids);
      // Positions before the chunk (prefix hits and earlier chunks) must already hold this sequence's KV.
      for (int32_t p = 0; p < e.num_computed_tokens; ++p) {
        const size_t slot = static_cast<size_t>(e.block_table[p / bs]) * bs + p % bs;
        ASSERT_EQ(kv_store[slot], digests[p]) << r.id << " position " << p << " step " << step;
      }
      for (int32_t p = e.num_computed_tokens; p < end; ++p) {
        ASSERT_EQ(e.token_ids[p - e.num_computed_tokens], r.token_ids[p]);
        ASSERT_NE(e.block_table[p / bs], kNullBlock);
        kv_store[static_cast<size_t>(e.block_table[p / bs]) * bs + p % bs] = digests[p];
      }
      if (e.samples) sampled[i] = next_token(r.token_ids, vocab);
    }
    ASSERT_EQ(total, out.num_scheduled_tokens);

    UpdateResult u = s.update_from_output(out, sampled);
    ASSERT_TRUE(s.check_integrity().is_ok()) << s.check_integrity().message();
    for (const std::unique_ptr<Request>& f : u.finished) {
      ++num_finished;
      // The output is exactly what the deterministic model produces, whatever preemptions happened.
      std::vector<TokenId> replay = expected_prompt[f->id];
      ASSERT_EQ(std::vector<TokenId>(f->prompt_token_ids().begin(), f->prompt_token_ids().end()), replay);
      for (TokenId t : f->output_token_ids()) {
        ASSERT_EQ(t, next_token(replay, vocab)) << f->id;
        replay.push_back(t);
      }
      ASSERT_LE(f->num_output_tokens(), f->max_tokens());
      if (f->status == RequestStatus::kFinishedStopped) {
        ASSERT_TRUE(f->stop_token == 3 || f->stop_token == 7);
        ASSERT_GT(f->num_output_tokens(), f->params.min_tokens);
      } else {
        ASSERT_EQ(f->status, RequestStatus::kFinishedLength);
        ASSERT_EQ(f->num_output_tokens(), f->max_tokens());
      }
    }
  }
  ASSERT_FALSE(s.has_unfinished());
  EXPECT_EQ(num_finished, num_requests);
  EXPECT_EQ(s.kv().num_free_blocks(), sp.num_blocks - 1);
  EXPECT_EQ(static_cast<int32_t>(s.kv().pool().free_queue_order().size()), sp.num_blocks - 1);
  EXPECT_TRUE(s.check_integrity().is_ok());
  const SchedulerStats st = s.stats();
  EXPECT_GT(st.prefix_cache_hits, 0);
  EXPECT_GT(st.num_preemptions, 0) << "the pool should be small enough to force preemption";
}

TEST(SchedStress, SmallBlocksTightPool) { run_stress({1, 4, 30, 48, 0}); }
TEST(SchedStress, DefaultBlocksWithThreshold) { run_stress({2, 16, 13, 64, 20}); }
TEST(SchedStress, ManySeeds) {
  for (uint32_t seed = 10; seed < 20; ++seed) {
    SCOPED_TRACE(seed);
    run_stress({seed, 8, 24, 40 + static_cast<int32_t>(seed), static_cast<int32_t>(seed % 3) * 7});
  }
}

}  // namespace
}  // namespace rl
