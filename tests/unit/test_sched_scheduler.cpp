// Scheduler: exact per-step token assignments and block tables, chunked prefill, running-first budget,
// prefix hits, preemption (newest first) and resume, abort mid-prefill, stop conditions, admission errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "kv_test_util.h"

namespace rl {
namespace {

using test::Ids;
using test::iota_tokens;
using test::Tokens;

SchedulerConfig small_config(int32_t num_blocks, int32_t budget) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.max_waiting = 4;
  c.kv.num_blocks = num_blocks;
  c.kv.block_size = 4;
  return c;
}

Request make_request(const std::string& id, Tokens prompt, int32_t max_tokens, Tokens eos = {99}) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return Request(id, std::move(prompt), p, std::move(eos));
}

void add(Scheduler& s, Request r) {
  AddResult res = s.add_request(std::move(r));
  ASSERT_TRUE(res.ok()) << res.status.message();
}

// (id, first position, num tokens, samples) of each scheduled request, for exact comparisons.
struct Chunk {
  std::string id;
  int32_t start;
  int32_t num;
  bool samples;
  bool operator==(const Chunk&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Chunk& c) {
  return os << "{" << c.id << " @" << c.start << " +" << c.num << (c.samples ? " S" : "") << "}";
}

std::vector<Chunk> chunks(const SchedulerOutput& out) {
  std::vector<Chunk> v;
  for (const ScheduledRequest& s : out.scheduled) {
    v.push_back(Chunk{s.request->id, s.num_computed_tokens, s.num_scheduled_tokens, s.samples});
  }
  return v;
}

const ScheduledRequest& entry(const SchedulerOutput& out, const std::string& id) {
  for (const ScheduledRequest& s : out.scheduled) {
    if (s.request->id == id) return s;
  }
  ADD_FAILURE() << id << " not scheduled";
  return out.scheduled.front();
}

// Every sampling request gets `token`.
UpdateResult step_with(Scheduler& s, const SchedulerOutput& out, TokenId token) {
  std::vector<TokenId> sampled(out.scheduled.size(), token);
  UpdateResult r = s.update_from_output(out, sampled);
  EXPECT_TRUE(s.check_integrity().is_ok()) << s.check_integrity().message();
  return r;
}

TEST(SchedScheduler, ChunkedPrefillAcrossSteps) {
  Scheduler s(small_config(11, 8));
  add(s, make_request("a", iota_tokens(20, 0), 3));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 8, false}}));
  EXPECT_EQ(o1.scheduled[0].block_table, (Ids{1, 2}));
  EXPECT_EQ(Tokens(o1.scheduled[0].token_ids.begin(), o1.scheduled[0].token_ids.end()), iota_tokens(8, 0));
  EXPECT_TRUE(o1.scheduled[0].is_new);
  EXPECT_TRUE(step_with(s, o1, 7).tokens.empty());
  EXPECT_TRUE(s.kv().pool().is_cached(2));

  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 8, 8, false}}));
  EXPECT_EQ(o2.scheduled[0].block_table, (Ids{1, 2, 3, 4}));
  EXPECT_FALSE(o2.scheduled[0].is_new);
  step_with(s, o2, 7);

  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"a", 16, 4, true}}));
  EXPECT_EQ(o3.scheduled[0].block_table, (Ids{1, 2, 3, 4, 5}));
  UpdateResult u3 = step_with(s, o3, 7);
  ASSERT_EQ(u3.tokens.size(), 1u);
  EXPECT_EQ(u3.tokens[0].token, 7);
  EXPECT_EQ(u3.tokens[0].status, RequestStatus::kRunning);
  EXPECT_TRUE(s.kv().pool().is_cached(5));  // positions 16..19 are written: the whole prompt is cached

  SchedulerOutput o4 = s.schedule();
  EXPECT_EQ(chunks(o4), (std::vector<Chunk>{{"a", 20, 1, true}}));
  EXPECT_EQ(o4.scheduled[0].token_ids[0], 7);
  EXPECT_EQ(o4.scheduled[0].block_table, (Ids{1, 2, 3, 4, 5, 6}));
}

TEST(SchedScheduler, RunningRequestsSpendTheBudgetFirst) {
  Scheduler s(small_config(30, 10));
  add(s, make_request("a", iota_tokens(6, 0), 5));
  add(s, make_request("b", iota_tokens(6, 100), 5));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 6, true}, {"b", 0, 4, false}}));
  step_with(s, o1, 50);
  add(s, make_request("c", iota_tokens(9, 200), 5));
  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 6, 1, true}, {"b", 4, 2, true}, {"c", 0, 7, false}}));
  step_with(s, o2, 51);
  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"a", 7, 1, true}, {"b", 6, 1, true}, {"c", 7, 2, true}}));
  EXPECT_EQ(o3.num_scheduled_tokens, 4);
}

TEST(SchedScheduler, SequenceBudgetLimitsAdmission) {
  SchedulerConfig c = small_config(30, 100);
  c.max_num_seqs = 2;
  Scheduler s(c);
  add(s, make_request("a", iota_tokens(3, 0), 5));
  add(s, make_request("b", iota_tokens(3, 10), 5));
  add(s, make_request("c", iota_tokens(3, 20), 5));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 3, true}, {"b", 0, 3, true}}));
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(SchedScheduler, LongPrefillThresholdCapsChunks) {
  SchedulerConfig c = small_config(30, 100);
  c.long_prefill_token_threshold = 5;
  Scheduler s(c);
  add(s, make_request("a", iota_tokens(12, 0), 5));
  add(s, make_request("b", iota_tokens(3, 50), 5));
  EXPECT_EQ(chunks(s.schedule()), (std::vector<Chunk>{{"a", 0, 5, false}, {"b", 0, 3, true}}));
}

TEST(SchedScheduler, WithoutChunkedPrefillAPromptWaitsForRoom) {
  SchedulerConfig c = small_config(30, 10);
  c.enable_chunked_prefill = false;
  Scheduler s(c);
  add(s, make_request("a", iota_tokens(6, 0), 5));
  add(s, make_request("b", iota_tokens(6, 100), 5));
  EXPECT_EQ(s.add_request(make_request("big", iota_tokens(11, 0), 5)).error, AddError::kRejected);
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 6, true}}));
  step_with(s, o1, 50);
  EXPECT_EQ(chunks(s.schedule()), (std::vector<Chunk>{{"a", 6, 1, true}, {"b", 0, 6, true}}));
}

TEST(SchedScheduler, PrefixHitSkipsComputedTokensAndSaltSeparates) {
  Scheduler s(small_config(30, 100));
  add(s, make_request("a", iota_tokens(10, 0), 1));
  SchedulerOutput o1 = s.schedule();
  UpdateResult u1 = step_with(s, o1, 50);
  ASSERT_EQ(u1.finished.size(), 1u);
  EXPECT_EQ(u1.finished[0]->status, RequestStatus::kFinishedLength);
  EXPECT_EQ(s.kv().num_free_blocks(), 29);

  add(s, make_request("b", iota_tokens(10, 0), 2));
  Request salted = make_request("c", iota_tokens(10, 0), 2);
  salted.params.cache_salt = "tenant-2";
  add(s, std::move(salted));
  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"b", 8, 2, true}, {"c", 0, 10, true}}));
  EXPECT_EQ(entry(o2, "b").block_table, (Ids{1, 2, 4}));
  EXPECT_EQ(entry(o2, "c").block_table, (Ids{5, 6, 7}));
  EXPECT_EQ(s.find("b")->num_cached_prompt_tokens, 8);
  EXPECT_EQ(s.stats().prefix_cache_hits, 8);
  EXPECT_EQ(s.stats().prefix_cache_queries, 30);
}

TEST(SchedScheduler, PreemptsTheNewestAndResumes) {
  Scheduler s(small_config(7, 100));  // 6 usable blocks of 4 tokens
  add(s, make_request("a", iota_tokens(8, 0), 10));
  add(s, make_request("b", iota_tokens(8, 100), 10));
  add(s, make_request("c", iota_tokens(8, 200), 10));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(entry(o1, "a").block_table, (Ids{1, 2}));
  EXPECT_EQ(entry(o1, "b").block_table, (Ids{3, 4}));
  EXPECT_EQ(entry(o1, "c").block_table, (Ids{5, 6}));
  step_with(s, o1, 50);
  EXPECT_EQ(s.kv().num_free_blocks(), 0);

  // Each decode needs a 3rd block: c (newest) is preempted; its freed blocks go to a, then b (tail first).
  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 8, 1, true}, {"b", 8, 1, true}}));
  EXPECT_EQ(o2.preempted_request_ids, (std::vector<std::string>{"c"}));
  EXPECT_EQ(entry(o2, "a").block_table, (Ids{1, 2, 6}));
  EXPECT_EQ(entry(o2, "b").block_table, (Ids{3, 4, 5}));
  const Request* c = s.find("c");
  EXPECT_EQ(c->status, RequestStatus::kPreempted);
  EXPECT_EQ(c->num_computed_tokens, 0);
  EXPECT_EQ(c->num_tokens(), 9);  // the sampled token is kept and recomputed
  EXPECT_EQ(s.stats().num_preemptions, 1);
  step_with(s, o2, 51);

  // Freeing b lets c resume at the front of the queue: its cached prompt was evicted, so it recomputes all.
  ASSERT_NE(s.abort("b"), nullptr);
  add(s, make_request("d", iota_tokens(4, 300), 10));
  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"a", 9, 1, true}, {"c", 0, 9, true}}));
  EXPECT_EQ(entry(o3, "c").block_table, (Ids{5, 4, 3}));
  EXPECT_TRUE(entry(o3, "c").is_new);
  EXPECT_EQ(o3.finished_request_ids, (std::vector<std::string>{"b"}));
  UpdateResult u3 = step_with(s, o3, 52);
  ASSERT_EQ(u3.tokens.size(), 2u);
  EXPECT_EQ(s.find("c")->output_token_ids()[0], 50);
  EXPECT_EQ(s.find("c")->output_token_ids()[1], 52);
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(SchedScheduler, PreemptedRequestHitsItsOwnCachedPrefix) {
  Scheduler s(small_config(5, 100));  // 4 usable blocks
  add(s, make_request("a", iota_tokens(8, 0), 4));
  add(s, make_request("b", iota_tokens(8, 100), 4));
  step_with(s, s.schedule(), 50);
  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 8, 1, true}}));
  EXPECT_EQ(o2.preempted_request_ids, (std::vector<std::string>{"b"}));
  EXPECT_EQ(entry(o2, "a").block_table, (Ids{1, 2, 4}));
  step_with(s, o2, 51);
  // b's first block (3) is still cached in the free queue: b resumes from it.
  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"a", 9, 1, true}}));
  step_with(s, o3, 52);
  ASSERT_EQ(s.abort("a")->status, RequestStatus::kFinishedAborted);
  SchedulerOutput o4 = s.schedule();
  EXPECT_EQ(chunks(o4), (std::vector<Chunk>{{"b", 4, 5, true}}));
  EXPECT_EQ(entry(o4, "b").block_table, (Ids{3, 4, 2}));
}

// Blocks are cached when the chunk that completes them is scheduled (the engine launches every scheduled step,
// and a step writes its KV before any attention reads it); an abort afterwards keeps them.
TEST(SchedScheduler, AScheduledChunkCachesItsBlocksAndAnAbortKeepsThem) {
  Scheduler s(small_config(11, 4));
  add(s, make_request("a", iota_tokens(12, 0), 3));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(s.kv().pool().num_cached_blocks(), 1);
  EXPECT_TRUE(s.kv().pool().is_cached(1));
  step_with(s, o1, 50);
  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 4, 4, false}}));
  EXPECT_TRUE(s.kv().pool().is_cached(2));
  std::unique_ptr<Request> aborted = s.abort("a");
  ASSERT_NE(aborted, nullptr);
  EXPECT_EQ(aborted->status, RequestStatus::kFinishedAborted);
  EXPECT_TRUE(step_with(s, o2, 50).tokens.empty());  // a late update for it is ignored
  EXPECT_EQ(s.kv().pool().num_cached_blocks(), 2);
  EXPECT_EQ(s.kv().num_free_blocks(), 10);
  EXPECT_EQ(s.abort("a"), nullptr);

  add(s, make_request("b", iota_tokens(12, 0), 3));
  add(s, make_request("w", iota_tokens(12, 0), 3));
  EXPECT_NE(s.abort("w"), nullptr);  // aborting a waiting request
  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"b", 8, 4, true}}));
  // a freed 2 then 1 to the queue's tail (3..10, 2, 1): b takes both back and the head, 3.
  EXPECT_EQ(entry(o3, "b").block_table, (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(o3.finished_request_ids, (std::vector<std::string>{"a", "w"}));
}

TEST(SchedScheduler, ABlockNotCompletedByAScheduledChunkIsNeverCached) {
  Scheduler s(small_config(11, 100));
  add(s, make_request("a", iota_tokens(10, 0), 3));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 10, true}}));
  EXPECT_EQ(entry(o1, "a").block_table, (std::vector<BlockId>{1, 2, 3}));
  EXPECT_NE(s.abort("a"), nullptr);
  EXPECT_EQ(s.kv().pool().num_cached_blocks(), 2);
  EXPECT_FALSE(s.kv().pool().is_cached(3));  // tokens 8, 9 only
  EXPECT_EQ(s.kv().num_free_blocks(), 10);
  EXPECT_TRUE(s.check_integrity().is_ok());
}

// Issue 12.3: a request admitted in the same step as its prefix's first writer hits it.
TEST(SchedScheduler, APrefixIsSharedWithinTheStepThatWritesIt) {
  Scheduler s(small_config(20, 100));
  Tokens b_prompt = iota_tokens(8, 0);
  b_prompt.push_back(50);
  b_prompt.push_back(51);
  add(s, make_request("a", iota_tokens(10, 0), 3));
  add(s, make_request("b", b_prompt, 3));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 10, true}, {"b", 8, 2, true}}));
  EXPECT_EQ(entry(o1, "a").block_table, (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(entry(o1, "b").block_table, (std::vector<BlockId>{1, 2, 4}));
  EXPECT_EQ(s.stats().prefix_cache_hits, 8);
  step_with(s, o1, 60);
  EXPECT_TRUE(s.check_integrity().is_ok());
}

// The step pipeline: advance() right after launch lets the next step be scheduled with the sampled token still
// pending on the device; resolve() fills it in order and applies stop conditions.
TEST(SchedScheduler, PipelinedStepsAdvanceThenResolve) {
  Scheduler s(small_config(20, 100));
  add(s, make_request("a", iota_tokens(5, 0), 2));
  add(s, make_request("e", iota_tokens(6, 20), 5));
  SchedulerOutput o1 = s.schedule();
  EXPECT_EQ(chunks(o1), (std::vector<Chunk>{{"a", 0, 5, true}, {"e", 0, 6, true}}));
  s.advance(o1);
  SchedulerOutput o2 = s.schedule();  // decodes of the pending tokens
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"a", 5, 1, true}, {"e", 6, 1, true}}));
  EXPECT_EQ(entry(o2, "a").token_ids[0], kPendingToken);
  s.advance(o2);
  // a's two pending outputs reach its max_tokens: it is not scheduled again before they resolve.
  SchedulerOutput o3 = s.schedule();
  EXPECT_EQ(chunks(o3), (std::vector<Chunk>{{"e", 7, 1, true}}));
  s.advance(o3);
  UpdateResult r1 = s.resolve(o1, std::vector<TokenId>{7, 8});
  ASSERT_EQ(r1.tokens.size(), 2u);
  EXPECT_EQ(s.find("a")->token_ids[5], 7);
  EXPECT_EQ(s.find("a")->num_pending, 1);
  UpdateResult r2 = s.resolve(o2, std::vector<TokenId>{9, 99});  // e's second token is EOS
  ASSERT_EQ(r2.finished.size(), 2u);
  EXPECT_EQ(r2.finished[0]->id, "a");
  EXPECT_EQ(r2.finished[0]->status, RequestStatus::kFinishedLength);
  EXPECT_EQ(Tokens(r2.finished[0]->output_token_ids().begin(), r2.finished[0]->output_token_ids().end()), (Tokens{7, 9}));
  EXPECT_EQ(r2.finished[1]->id, "e");
  EXPECT_EQ(r2.finished[1]->status, RequestStatus::kFinishedStopped);
  // e's third token was in flight (o3): it is dropped, and the late resolve ignores it.
  EXPECT_EQ(Tokens(r2.finished[1]->output_token_ids().begin(), r2.finished[1]->output_token_ids().end()), (Tokens{8, 99}));
  EXPECT_TRUE(s.resolve(o3, std::vector<TokenId>{5}).tokens.empty());
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.kv().num_free_blocks(), 19);
  EXPECT_TRUE(s.check_integrity().is_ok());
}

TEST(SchedScheduler, StopConditions) {
  Scheduler s(small_config(30, 100));
  add(s, make_request("eos", iota_tokens(3, 0), 10));
  Request ignore = make_request("ignore", iota_tokens(3, 0), 2);
  ignore.params.ignore_eos = true;
  add(s, std::move(ignore));
  Request stop_id = make_request("stop_id", iota_tokens(3, 0), 10);
  stop_id.params.stop_token_ids = {42};
  add(s, std::move(stop_id));
  Request min = make_request("min", iota_tokens(3, 0), 10);
  min.params.min_tokens = 2;
  add(s, std::move(min));

  SchedulerOutput o1 = s.schedule();
  ASSERT_EQ(o1.scheduled.size(), 4u);
  UpdateResult u1 = s.update_from_output(o1, std::vector<TokenId>{99, 99, 42, 99});
  ASSERT_EQ(u1.finished.size(), 2u);
  EXPECT_EQ(u1.finished[0]->id, "eos");
  EXPECT_EQ(u1.finished[0]->status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(u1.finished[0]->stop_token, 99);
  EXPECT_EQ(u1.finished[1]->id, "stop_id");
  EXPECT_EQ(u1.finished[1]->stop_token, 42);

  SchedulerOutput o2 = s.schedule();
  EXPECT_EQ(chunks(o2), (std::vector<Chunk>{{"ignore", 3, 1, true}, {"min", 3, 1, true}}));
  UpdateResult u2 = s.update_from_output(o2, std::vector<TokenId>{99, 99});
  ASSERT_EQ(u2.finished.size(), 1u);
  EXPECT_EQ(u2.finished[0]->id, "ignore");
  EXPECT_EQ(u2.finished[0]->status, RequestStatus::kFinishedLength);
  EXPECT_EQ(u2.finished[0]->output_token_ids().size(), 2u);
  SchedulerOutput o3 = s.schedule();
  UpdateResult u3 = s.update_from_output(o3, std::vector<TokenId>{99});
  ASSERT_EQ(u3.finished.size(), 1u);
  EXPECT_EQ(u3.finished[0]->id, "min");
  EXPECT_EQ(u3.finished[0]->num_output_tokens(), 3);
  EXPECT_EQ(u3.tokens[0].status, RequestStatus::kFinishedStopped);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.kv().num_free_blocks(), 29);
  EXPECT_TRUE(s.check_integrity().is_ok());
}

TEST(SchedScheduler, AdmissionErrors) {
  Scheduler s(small_config(5, 100));  // 4 usable blocks = 16 slots; max_model_len 64
  const auto error_of = [&](Request r) { return s.add_request(std::move(r)); };
  AddResult empty = error_of(make_request("e", {}, 4));
  EXPECT_EQ(empty.error, AddError::kRejected);
  EXPECT_NE(empty.status.message().find("empty prompt"), std::string::npos);
  AddResult too_long = error_of(make_request("l", iota_tokens(60, 0), 5));
  EXPECT_EQ(too_long.error, AddError::kRejected);
  EXPECT_NE(too_long.status.message().find("exceeds max_model_len (64)"), std::string::npos)
      << too_long.status.message();
  AddResult too_big = error_of(make_request("b", iota_tokens(10, 0), 8));
  EXPECT_EQ(too_big.error, AddError::kRejected);
  EXPECT_NE(too_big.status.message().find("needs 5 KV blocks, only 4 exist"), std::string::npos)
      << too_big.status.message();
  EXPECT_TRUE(error_of(make_request("fits", iota_tokens(10, 0), 7)).ok());  // 16 slots: the last token needs none
  Request bad_params = make_request("p", iota_tokens(4, 0), 4);
  bad_params.params.top_p = 0.0f;
  AddResult bad = error_of(std::move(bad_params));
  EXPECT_EQ(bad.error, AddError::kRejected);
  EXPECT_NE(bad.status.message().find("top_p"), std::string::npos);
  AddResult dup = error_of(make_request("fits", iota_tokens(4, 0), 4));
  EXPECT_EQ(dup.error, AddError::kRejected);
  EXPECT_NE(dup.status.message().find("duplicate"), std::string::npos);
  Request unset = make_request("unset", iota_tokens(4, 0), 1);
  unset.params.max_tokens.reset();
  EXPECT_EQ(error_of(std::move(unset)).error, AddError::kRejected);  // 4 + 60 tokens need 16 blocks
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(SchedScheduler, BoundedWaitingQueue) {
  Scheduler s(small_config(30, 100));  // max_waiting 4
  for (const char* id : {"r0", "r1", "r2", "r3"}) add(s, make_request(id, iota_tokens(3, 0), 2));
  AddResult full = s.add_request(make_request("r4", iota_tokens(3, 0), 2));
  EXPECT_EQ(full.error, AddError::kQueueFull);
  EXPECT_NE(full.status.message().find("waiting queue is full"), std::string::npos);
  step_with(s, s.schedule(), 1);
  EXPECT_TRUE(s.add_request(make_request("r4", iota_tokens(3, 0), 2)).ok());
}

TEST(SchedScheduler, UnsetMaxTokensRunsToMaxModelLen) {
  Scheduler s(small_config(30, 100));
  Request r = make_request("a", iota_tokens(60, 0), 1);
  r.params.max_tokens.reset();
  add(s, std::move(r));
  EXPECT_EQ(s.find("a")->max_tokens(), 4);
  int32_t num_steps = 0;
  while (s.has_unfinished()) {
    step_with(s, s.schedule(), 1);
    ++num_steps;
  }
  EXPECT_EQ(num_steps, 4);
}

TEST(SchedSamplingParams, Validation) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(100).is_ok());
  p.temperature = -1.0f;
  EXPECT_NE(p.validate().message().find("temperature"), std::string::npos);
  p = SamplingParams{};
  p.logprobs = 21;
  EXPECT_NE(p.validate().message().find("logprobs"), std::string::npos);
  p = SamplingParams{};
  p.logit_bias[100] = 1.0f;
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_NE(p.validate(100).message().find("logit_bias"), std::string::npos);
  p = SamplingParams{};
  p.min_tokens = 5;
  p.max_tokens = 4;
  EXPECT_NE(p.validate().message().find("min_tokens"), std::string::npos);
  p = SamplingParams{};
  p.stop = {""};
  EXPECT_FALSE(p.validate().is_ok());
}

}  // namespace
}  // namespace rl
