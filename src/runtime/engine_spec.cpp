// Speculative decoding in the engine step (issue 18; design.md §8 "Speculation is a proposer"):
//   schedule (decoding requests reserve KV slots and budget for up to k drafts) → propose (the proposer fills
//   each such row's drafts) → launch (the runner samples every position of a row with drafts) → verify and
//   apply (Engine::process: the longest prefix of drafts that the target's own draws agree with is appended
//   with the target's next token; the scheduler rolls back the slots of the rest).
// The proposer needs the verified tokens of step n to propose for step n + 1, so with speculation on every step
// is applied before the next is scheduled; the engine without a proposer keeps its pipelined step() untouched.
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

}  // namespace rl
