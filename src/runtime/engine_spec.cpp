// Speculative decoding in the engine step (issue 18; design.md §8 "Speculation is a proposer"):
//   schedule (decoding requests reserve KV slots and budget for up to k drafts) → propose (the proposer fills
//   each such row's drafts) → launch (the runner samples every position of a row with drafts) → verify and
//   apply (Engine::process: the longest prefix of drafts that the target's own draws agree with is appended
//   with the target's next token; the scheduler rolls back the slots of the rest).
// The proposer needs the verified tokens of step n to propose for step n + 1, so with speculation on every step
// is applied before the next is scheduled; the engine without a proposer keeps its pipelined step() untouched.
//
// Adaptive speculation (spec/adaptive.h): before each step, plan_step() chooses every decoding request's drafts
// from the measured step times and the request's acceptance; a plan without drafts runs the pipelined plain
// step. Whatever k a step uses, the tokens are those plain decoding draws (verification keeps a draft exactly
// when it equals the target's own draw), and a verification of R rows is an all-decode step of R rows, which
// maps to the CUDA-graph bucket of R (the runner's limit covers max_num_seqs * (1 + K) rows).
#include <algorithm>
#include <unordered_map>

#include "core/log.h"
#include "runtime/engine.h"

namespace rl {

void Engine::spec_step() {
  const double t0 = now_seconds();
  if (inflight_) {
    process(std::move(*inflight_), 0.0);
    inflight_.reset();
  }
  SchedulerOutput out = scheduler_->schedule();
  const double t_sched = now_seconds() - t0;
  profile_.span("schedule", t0, t_sched, 0, step_index_);
  for (const std::string& id : out.preempted_request_ids) {
    release_slot(id);
    if (const Request* r = scheduler_->find(id)) proposer_->forget(r->arrival_seq);
  }
  for (const std::string& id : out.finished_request_ids) release_slot(id);
  if (out.scheduled.empty()) return;

  const double t1 = now_seconds();
  std::vector<spec::ProposalInput> inputs;
  std::vector<size_t> which;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    if (s.is_new) proposer_->forget(s.arrival_seq);  // admitted or resumed: any proposer state is stale
    if (s.num_draft_slots == 0) continue;
    const Request& r = *s.request;
    spec::ProposalInput in;
    in.prompt = r.prompt_token_ids();
    in.output = r.output_token_ids();
    in.max_draft_tokens = s.num_draft_slots;
    in.key = s.arrival_seq;
    in.block_table = s.block_table;
    inputs.push_back(in);
    which.push_back(i);
  }
  if (!inputs.empty()) {
    std::vector<spec::Proposal> proposals;
    proposer_->propose(inputs, &proposals);
    for (size_t j = 0; j < which.size(); ++j) scheduler_->set_drafts(&out, which[j], proposals[j].tokens);
  }
  const double t_propose = now_seconds() - t1;
  profile_.span("propose", t1, t_propose, 0, step_index_);

  double t_launch = 0.0;
  InFlight f = launch_step(std::move(out), /*keep_pending=*/false, &t_launch);  // applied right away below
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    timing_.num_steps++;
    timing_.scheduler_seconds += t_sched;
    timing_.host_seconds += t_sched + t_propose + t_launch;
    timing_.max_running = std::max<int64_t>(timing_.max_running, static_cast<int64_t>(f.out.scheduled.size()));
  }
  process(std::move(f), 0.0);
}

namespace {

// A request whose plan gave it no drafts for this many steps proposes one draft at the next step whose index is
// a multiple of it (all such requests together, so probing un-pipelines one step in kProbeIntervalSteps at most):
// its acceptance is measured again, at a cost of at most one verification row per request every 16 steps.
// Proposers that can shadow (n-gram) never need it.
constexpr int64_t kProbeIntervalSteps = 16;

}  // namespace

bool Engine::plan_step() {
  std::unordered_map<uint64_t, SpecRequestState> next;
  std::vector<spec::DraftCandidate> cands;
  std::vector<uint64_t> keys;
  int64_t batch = 0;
  double other_tokens = 0;
  const bool shadow = proposer_->free_to_shadow();
  bool any_probe = false;
  for (const Request* r : scheduler_->running()) {
    auto it = spec_state_.find(r->arrival_seq);
    SpecRequestState& st =
        next.emplace(r->arrival_seq, it != spec_state_.end() ? it->second : SpecRequestState{{}, step_index_})
            .first->second;
    if (r->num_computed_tokens != r->num_tokens() - 1 || r->num_computed_tokens < r->num_prompt_tokens) continue;
    ++batch;
    const int32_t max_k = scheduler_->max_draft_slots(*r);
    if (max_k == 0) {
      other_tokens += 1;
      continue;
    }
    spec::DraftCandidate c;
    c.rate = st.stats.rate();
    c.max_k = max_k;
    c.probe = !shadow && step_index_ % kProbeIntervalSteps == 0 &&
              step_index_ - st.last_draft_step >= kProbeIntervalSteps;
    any_probe |= c.probe;
    cands.push_back(c);
    keys.push_back(r->arrival_seq);
  }
  spec_state_ = std::move(next);
  draft_plan_.clear();
  if (any_probe) {
    // Probe only where a draft could pay at all: with every draft accepted, would speculation beat plain here?
    std::vector<spec::DraftCandidate> perfect = cands;
    for (spec::DraftCandidate& c : perfect) {
      c.rate = 1.0;
      c.probe = false;
    }
    if (!spec::plan_drafts(perfect, batch, other_tokens, step_times_, batch).speculate) {
      for (spec::DraftCandidate& c : cands) c.probe = false;
    }
  }
  const spec::DraftPlan plan = spec::plan_drafts(cands, batch, other_tokens, step_times_, batch);
  if (!plan.speculate) return false;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (plan.k[i] == 0) continue;
    draft_plan_[keys[i]] = plan.k[i];
    spec_state_[keys[i]].last_draft_step = step_index_;
  }
  return true;
}

void Engine::observe_step_time(bool speculative, double seconds) {
  const int mode = speculative ? 1 : 0;
  if (!last_launch_.all_decode || last_launch_.batch == 0) {
    prev_step_mode_ = -1;
    return;
  }
  // The first step after a switch of mode also applied the other mode's step (or filled the pipeline): only
  // steady-state steps are measured.
  if (prev_step_mode_ == mode) step_times_.observe(speculative, last_launch_.batch, last_launch_.rows, seconds);
  prev_step_mode_ = mode;
}

void Engine::observe_acceptance(const SchedulerOutput& out, const std::vector<int32_t>& sample_row,
                                const std::vector<TokenId>& sampled,
                                const std::vector<std::vector<TokenId>>& accepted) {
  int64_t num_decode_steps = 0;
  std::vector<spec::ProposalInput> shadow_in;
  std::vector<std::pair<uint64_t, TokenId>> shadow_of;  // per shadow input: request and the token it drew
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    if (sample_row[i] < 0 || sampled[i] < 0) continue;
    const Request* r = scheduler_->live(s);
    if (r == nullptr || !r->speculate || s.num_computed_tokens < r->num_prompt_tokens ||
        s.num_scheduled_tokens - s.num_draft_tokens != 1) {
      continue;  // not a decoding request that may speculate
    }
    ++num_decode_steps;
    if (!config_.speculative_adaptive) continue;
    auto it = spec_state_.find(s.arrival_seq);
    if (it == spec_state_.end()) continue;
    if (s.num_draft_tokens > 0) {
      it->second.stats.record(s.num_draft_tokens, static_cast<int32_t>(accepted[i].size()));
    } else if (s.num_draft_slots > 0) {
      it->second.stats.record(1, 0);  // drafts were planned and the proposer had none: a failed draft
    } else if (proposer_->free_to_shadow()) {
      // The context before the drawn token: position num_computed was fed, its successor was drawn.
      const size_t len = static_cast<size_t>(s.num_computed_tokens) + 1;
      const std::span<const TokenId> ctx(r->token_ids.data(), len);
      if (std::find(ctx.begin(), ctx.end(), kPendingToken) != ctx.end()) continue;
      spec::ProposalInput in;
      in.prompt = ctx.first(static_cast<size_t>(r->num_prompt_tokens));
      in.output = ctx.subspan(static_cast<size_t>(r->num_prompt_tokens));
      in.max_draft_tokens = 1;
      in.key = s.arrival_seq;
      shadow_in.push_back(in);
      shadow_of.emplace_back(s.arrival_seq, sampled[i]);
    }
  }
  if (!shadow_in.empty()) {
    std::vector<spec::Proposal> props;
    proposer_->propose(shadow_in, &props);
    for (size_t j = 0; j < props.size(); ++j) {
      const bool hit = !props[j].tokens.empty() && props[j].tokens[0] == shadow_of[j].second;
      spec_state_[shadow_of[j].first].stats.record(1, hit ? 1 : 0);
    }
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  spec_counters_.num_decode_steps += num_decode_steps;
}

}  // namespace rl
