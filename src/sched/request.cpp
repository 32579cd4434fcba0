#include "sched/request.h"

namespace rl {

Request::Request(std::string request_id, std::vector<TokenId> prompt, SamplingParams sampling,
                 std::vector<TokenId> eos)
    : id(std::move(request_id)),
      token_ids(std::move(prompt)),
      num_prompt_tokens(static_cast<int32_t>(token_ids.size())),
      params(std::move(sampling)),
      eos_token_ids(std::move(eos)) {}

const char* request_status_name(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinishedStopped: return "finished_stopped";
    case RequestStatus::kFinishedLength: return "finished_length";
    case RequestStatus::kFinishedAborted: return "finished_aborted";
    case RequestStatus::kFinishedError: return "finished_error";
  }
  return "unknown";
}

}  // namespace rl
