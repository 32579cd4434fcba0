// Scheduler and KV manager under speculative decoding: decoding requests reserve draft slots (capped by the token
// budget, max_tokens and max_model_len, off above speculative_max_running), verified drafts are appended with
// their stop conditions checked one by one, and rejected drafts' slots are rolled back to the exact block table
// (only verified blocks enter the prefix cache).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace rl {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

SchedulerConfig spec_config(int32_t k, int32_t budget = 64) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.max_waiting = 8;
  c.kv.num_blocks = 32;
  c.kv.block_size = 4;
  c.num_speculative_tokens = k;
  return c;
}

Request spec_request(const std::string& id, int32_t prompt_len, int32_t max_tokens, Tokens eos = {99}) {
  Tokens prompt(static_cast<size_t>(prompt_len));
  std::iota(prompt.begin(), prompt.end(), 10);
  SamplingParams p;
  p.max_tokens = max_tokens;
  Request r(id, std::move(prompt), p, std::move(eos));
  r.speculate = true;
  return r;
}

void check(const Scheduler& s) { EXPECT_TRUE(s.check_integrity().is_ok()) << s.check_integrity().message(); }

// Runs the prefill step of a fresh scheduler (one request), sampling `token`.
void prefill(Scheduler& s, TokenId token) {
  SchedulerOutput out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_draft_slots, 0);  // a prefill never reserves drafts
  std::vector<TokenId> sampled = {token};
  s.update_from_output(out, sampled);
  check(s);
}

TEST(SchedulerSpec, DecodeReservesDraftSlotsAndRollsBackRejectedOnes) {
  Scheduler s(spec_config(4));
  ASSERT_TRUE(s.add_request(spec_request("a", 6, 20)).ok());
  prefill(s, 50);  // 7 tokens, 6 computed; blocks [1, 2]
  SchedulerOutput out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  const ScheduledRequest& e = out.scheduled[0];
  EXPECT_EQ(e.num_draft_slots, 4);
  EXPECT_EQ(e.num_scheduled_tokens, 1);
  // Positions 6..10 need slots: 11 tokens → 3 blocks.
  EXPECT_EQ(e.block_table, (Ids{1, 2, 3}));
  const Tokens drafts = {60, 61, 62, 63};
  s.set_drafts(&out, 0, drafts);
  EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 5);
  EXPECT_EQ(out.num_scheduled_tokens, 5);
  EXPECT_EQ(Tokens(out.scheduled[0].token_ids.begin(), out.scheduled[0].token_ids.end()), (Tokens{50, 60, 61, 62, 63}));
  s.advance(out);
  // Two drafts verified, then the target's own token 77.
  std::vector<std::vector<TokenId>> accepted = {{60, 61}};
  std::vector<TokenId> sampled = {77};
  UpdateResult res = s.resolve(out, sampled, &accepted);
  ASSERT_EQ(res.tokens.size(), 3u);
  EXPECT_EQ(res.tokens[0].token, 60);
  EXPECT_EQ(res.tokens[1].position, 1);
  EXPECT_EQ(res.tokens[2].token, 77);
  const Request* r = s.find("a");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Tokens(r->token_ids.begin() + 6, r->token_ids.end()), (Tokens{50, 60, 61, 77}));
  // KV verified for positions 0..8 (the last token, 77 at position 9, is fed next step).
  EXPECT_EQ(r->num_computed_tokens, 9);
  EXPECT_EQ(s.kv().block_table(r->arrival_seq).size(), 3u);
  check(s);

  // Next step: reject every draft; the rollback frees the block reserved past the verified tokens.
  out = s.schedule();
  EXPECT_EQ(out.scheduled[0].num_draft_slots, 4);
  EXPECT_EQ(out.scheduled[0].block_table, (Ids{1, 2, 3, 4}));  // positions 9..13: 14 tokens
  s.set_drafts(&out, 0, Tokens{70, 71, 72, 73});
  s.advance(out);
  accepted = {{}};
  sampled = {88};
  res = s.resolve(out, sampled, &accepted);
  ASSERT_EQ(res.tokens.size(), 1u);
  EXPECT_EQ(r->num_computed_tokens, 10);
  EXPECT_EQ(Ids(s.kv().block_table(r->arrival_seq).begin(), s.kv().block_table(r->arrival_seq).end()), (Ids{1, 2, 3}));
  EXPECT_EQ(s.kv().num_free_blocks(), 31 - 3);
  check(s);
}

TEST(SchedulerSpec, DraftSlotsAreCappedByMaxTokensModelLenAndBudget) {
  {
    Scheduler s(spec_config(8));
    ASSERT_TRUE(s.add_request(spec_request("a", 6, 3)).ok());
    prefill(s, 50);  // 1 of 3 outputs: at most 2 more, so 1 draft
    SchedulerOutput out = s.schedule();
    EXPECT_EQ(out.scheduled[0].num_draft_slots, 1);
  }
  {
    SchedulerConfig c = spec_config(8);
    c.max_model_len = 10;
    Scheduler s(c);
    ASSERT_TRUE(s.add_request(spec_request("a", 6, 4)).ok());
    prefill(s, 50);  // 7 tokens: room for 3 more, so 2 drafts
    SchedulerOutput out = s.schedule();
    EXPECT_EQ(out.scheduled[0].num_draft_slots, 2);
  }
  {
    Scheduler s(spec_config(8, 8));
    ASSERT_TRUE(s.add_request(spec_request("a", 6, 20)).ok());
    prefill(s, 50);
    SchedulerOutput out = s.schedule();
    EXPECT_EQ(out.scheduled[0].num_draft_slots, 7);  // budget 8 = 1 + 7
  }
}

TEST(SchedulerSpec, NoDraftsAboveTheRunningLimitOrWithoutSpeculate) {
  SchedulerConfig c = spec_config(4);
  c.speculative_max_running = 1;
  Scheduler s(c);
  ASSERT_TRUE(s.add_request(spec_request("a", 6, 20)).ok());
  ASSERT_TRUE(s.add_request(spec_request("b", 6, 20)).ok());
  SchedulerOutput out = s.schedule();
  std::vector<TokenId> sampled(out.scheduled.size(), 50);
  s.update_from_output(out, sampled);
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  for (const ScheduledRequest& e : out.scheduled) EXPECT_EQ(e.num_draft_slots, 0);

  Scheduler t(spec_config(4));
  Request r = spec_request("c", 6, 20);
  r.speculate = false;
  ASSERT_TRUE(t.add_request(std::move(r)).ok());
  prefill(t, 50);
  EXPECT_EQ(t.schedule().scheduled[0].num_draft_slots, 0);
}

TEST(SchedulerSpec, TheDraftLimitCapsEachRequestsSlots) {
  Scheduler s(spec_config(4));
  ASSERT_TRUE(s.add_request(spec_request("a", 6, 20)).ok());
  ASSERT_TRUE(s.add_request(spec_request("b", 6, 3)).ok());
  SchedulerOutput out = s.schedule();
  std::vector<TokenId> sampled(out.scheduled.size(), 50);
  s.update_from_output(out, sampled);
  ASSERT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.max_draft_slots(*s.running()[0]), 4);
  EXPECT_EQ(s.max_draft_slots(*s.running()[1]), 1);  // max_tokens 3: one output so far, then 1 + 1 more
  // The engine's plan: "a" gets 2 drafts, "b" none.
  s.set_draft_limit([](const Request& r) { return r.id == "a" ? 2 : 0; });
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_draft_slots, 2);
  EXPECT_EQ(out.scheduled[1].num_draft_slots, 0);
  // A limit above what the request may take is capped by max_tokens.
  s.set_draft_limit([](const Request&) { return 16; });
  s.set_drafts(&out, 0, Tokens{60});
  s.advance(out);
  std::vector<std::vector<TokenId>> accepted = {{}, {}};
  std::vector<TokenId> next = {61, 62};
  s.resolve(out, next, &accepted);
  check(s);
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_draft_slots, 4);  // K
  EXPECT_EQ(out.scheduled[1].num_draft_slots, 0);  // "b" has 2 of its 3 tokens: no room for a draft
}

TEST(SchedulerSpec, StopInsideVerifiedDraftsDropsTheRest) {
  Scheduler s(spec_config(4));
  ASSERT_TRUE(s.add_request(spec_request("a", 6, 20)).ok());
  prefill(s, 50);
  SchedulerOutput out = s.schedule();
  s.set_drafts(&out, 0, Tokens{60, 99, 62});
  s.advance(out);
  std::vector<std::vector<TokenId>> accepted = {{60, 99, 62}};
  std::vector<TokenId> sampled = {63};
  UpdateResult res = s.resolve(out, sampled, &accepted);
  ASSERT_EQ(res.finished.size(), 1u);
  EXPECT_EQ(Tokens(res.finished[0]->token_ids.begin() + 6, res.finished[0]->token_ids.end()), (Tokens{50, 60, 99}));
  EXPECT_EQ(res.finished[0]->status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(res.tokens.size(), 2u);
  EXPECT_EQ(s.kv().num_free_blocks(), 31);
  check(s);
}

TEST(SchedulerSpec, MinTokensHoldsInsideVerifiedDrafts) {
  Scheduler s(spec_config(4));
  Request r = spec_request("a", 6, 20);
  r.params.min_tokens = 3;
  ASSERT_TRUE(s.add_request(std::move(r)).ok());
  prefill(s, 50);
  SchedulerOutput out = s.schedule();
  s.set_drafts(&out, 0, Tokens{99, 61, 99});
  s.advance(out);
  // EOS as the 2nd output does not stop (min_tokens 3); as the 4th it does.
  std::vector<std::vector<TokenId>> accepted = {{99, 61, 99}};
  std::vector<TokenId> sampled = {5};
  UpdateResult res = s.resolve(out, sampled, &accepted);
  ASSERT_EQ(res.finished.size(), 1u);
  EXPECT_EQ(Tokens(res.finished[0]->token_ids.begin() + 6, res.finished[0]->token_ids.end()), (Tokens{50, 99, 61, 99}));
}

TEST(SchedulerSpec, OnlyVerifiedBlocksEnterThePrefixCache) {
  Scheduler s(spec_config(4));
  ASSERT_TRUE(s.add_request(spec_request("a", 7, 20)).ok());
  prefill(s, 50);  // 8 tokens, 7 computed: block 1 cached
  EXPECT_EQ(s.kv().pool().num_cached_blocks(), 1);
  SchedulerOutput out = s.schedule();  // positions 7..11, blocks [1, 2, 3]
  s.set_drafts(&out, 0, Tokens{60, 61, 62, 63});
  s.advance(out);
  // Nothing accepted: positions 8..11 held rejected drafts; only block 2 (positions 4..7) is verified.
  std::vector<std::vector<TokenId>> accepted = {{}};
  std::vector<TokenId> sampled = {70};
  s.resolve(out, sampled, &accepted);
  EXPECT_EQ(s.kv().pool().num_cached_blocks(), 2);
  const Request* r = s.find("a");
  EXPECT_EQ(Ids(s.kv().block_table(r->arrival_seq).begin(), s.kv().block_table(r->arrival_seq).end()), (Ids{1, 2}));
  check(s);
}

}  // namespace
}  // namespace rl
