#include "server/server_metrics.h"

#include "sched/request.h"
#include "sched/scheduler_output.h"

namespace rl::server {

ServerMetrics::ServerMetrics(const std::string& model_name) : engine_(registry_, model_name) {}

void ServerMetrics::observe_finished(const RequestOutput& out, FinishReason reason) {
  // EngineMetrics reads finished requests; rebuild the fields it uses from the finishing message.
  Request r;
  switch (reason) {
    case FinishReason::kStop: r.status = RequestStatus::kFinishedStopped; break;
    case FinishReason::kLength: r.status = RequestStatus::kFinishedLength; break;
    case FinishReason::kAbort: r.status = RequestStatus::kFinishedAborted; break;
    default: r.status = RequestStatus::kFinishedError; break;
  }
  r.num_prompt_tokens = out.num_prompt_tokens;
  r.token_ids.assign(static_cast<size_t>(out.num_prompt_tokens + out.num_output_tokens), 0);
  r.arrival_time = out.arrival_time;
  if (out.num_output_tokens > 0 && out.first_token_time > 0) {
    r.first_token_time = out.first_token_time;
    r.last_token_time = out.finish_time;
  }
  if (out.finish_time > 0) r.finished_time = out.finish_time;
  engine_.observe_finished(r);
}

void ServerMetrics::observe_inter_token(double seconds) {
  UpdateResult step;
  TokenUpdate t;
  t.inter_token_latency = seconds;
  step.tokens.push_back(std::move(t));
  engine_.observe_step(step);
}

std::string ServerMetrics::render(const SchedulerStats& stats) {
  {
    std::lock_guard<std::mutex> lock(update_mu_);
    engine_.update(stats);
  }
  return registry_.render();
}

}  // namespace rl::server
