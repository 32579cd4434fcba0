// What one scheduling step decided, for the model runner (which flattens it into a ForwardBatch) and for
// Scheduler::advance / resolve. token_ids spans stay valid until advance() for this output; `request` may
// dangle once the request finished: identify it by arrival_seq (Scheduler::live).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "sched/request.h"

namespace rl {

struct ScheduledRequest {
  const Request* request = nullptr;
  uint64_t arrival_seq = 0;  // unique per request: tells a live request from a finished one
  // The chunk covers positions [num_computed_tokens, num_computed_tokens + num_scheduled_tokens).
  int32_t num_computed_tokens = 0;
  int32_t num_scheduled_tokens = 0;
  std::span<const TokenId> token_ids;  // [num_scheduled_tokens]: the tokens at those positions
  std::vector<BlockId> block_table;    // covers at least num_computed_tokens + num_scheduled_tokens slots
  // Hybrid KV: the block tables of KV groups 1.. (the window layers'), as long as block_table; entries behind
  // the window read kNullBlock.
  std::vector<std::vector<BlockId>> window_tables;
  // The chunk reaches the end of the known tokens, so the last position's logits are sampled this step.
  bool samples = false;
  // First step since admission or since a preemption: per-request state in the runner starts afresh.
  bool is_new = false;
  // Speculative decoding: a decode row reserves KV slots and budget for up to num_draft_slots draft tokens
  // after its last known token; Scheduler::set_drafts fills the num_draft_tokens (<= num_draft_slots) actually
  // proposed. The row then feeds spec_input = [last known token, drafts...] (token_ids points into it) and the
  // runner samples every one of its positions.
  int32_t num_draft_slots = 0;
  int32_t num_draft_tokens = 0;
  std::vector<TokenId> spec_input;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running requests first, then newly admitted ones
  int32_t num_scheduled_tokens = 0;         // sum over scheduled
  std::vector<std::string> preempted_request_ids;  // preempted in this step (they hold no blocks now)
  std::vector<std::string> finished_request_ids;   // finished or aborted since the previous schedule()
};

// One sampled token applied by update_from_output.
struct TokenUpdate {
  std::string request_id;
  int32_t scheduled_index = 0;  // the row of SchedulerOutput::scheduled that sampled it
  int32_t position = 0;         // its position within that row's sampled positions (> 0: after accepted drafts)
  TokenId token = 0;
  RequestStatus status = RequestStatus::kRunning;  // a finished status if this token ended the request
  std::optional<double> inter_token_latency;        // seconds since the request's previous token
};

struct UpdateResult {
  std::vector<TokenUpdate> tokens;
  std::vector<std::unique_ptr<Request>> finished;  // ownership returns to the caller
};

}  // namespace rl
