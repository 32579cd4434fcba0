// One sequence's state as the scheduler sees it. Owned by the Scheduler while live; handed back to the
// engine (unique_ptr) when it finishes or is aborted.
//
// Invariants: token_ids = prompt (num_prompt_tokens) then outputs, append-only; the last num_pending outputs are
// kPendingToken placeholders for tokens sampled on the device that the host has not read yet (the step
// pipeline: Scheduler::advance appends them, Scheduler::resolve fills them in order); 0 <= num_computed_tokens
// <= num_tokens(); a running request's KV blocks cover at least num_computed_tokens tokens; a preempted request
// holds no blocks and has num_computed_tokens == 0.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "sched/sampling_params.h"

namespace rl {

// A token sampled on the device and not yet known to the host.
inline constexpr TokenId kPendingToken = -1;

enum class RequestStatus {
  kWaiting,
  kRunning,
  kPreempted,  // waiting again, to be recomputed from scratch
  kFinishedStopped,  // EOS or a stop token id (or a stop string, reported by the engine through finish())
  kFinishedLength,   // max_tokens or max_model_len
  kFinishedAborted,
  kFinishedError,
};

const char* request_status_name(RequestStatus status);
inline bool is_finished(RequestStatus s) { return s >= RequestStatus::kFinishedStopped; }

struct Request {
  std::string id;
  std::vector<TokenId> token_ids;
  int32_t num_prompt_tokens = 0;
  SamplingParams params;
  std::vector<TokenId> eos_token_ids;

  RequestStatus status = RequestStatus::kWaiting;
  int32_t num_computed_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;  // prefix-cache hit at the first admission
  int32_t num_preemptions = 0;
  int32_t num_pending = 0;               // trailing kPendingToken outputs
  std::optional<TokenId> stop_token;     // the EOS / stop id that finished it
  // Speculative decoding may propose draft tokens for it (set by the engine at admission: requests whose
  // sampling keeps state across positions, such as penalties or grammars, never speculate).
  bool speculate = false;
  // Prompt logprobs (params.prompt_logprobs): the next prompt position whose logprob is still to be delivered
  // (the engine advances it; position 0 has none). While it is below num_prompt_tokens, prefill chunks compute
  // a logits row per token (Scheduler::needs_prompt_rows).
  int32_t next_prompt_logprob = 1;
  // Structured outputs: this sequence's constraint state, made from params.constraint on its first sampled step
  // and advanced by the engine thread only (mutable: the scheduler hands requests out as const).
  mutable std::shared_ptr<TokenConstraint> constraint;

  // Set by the scheduler: the arrival order (also the KV key) and timestamps (seconds, Scheduler's clock).
  uint64_t arrival_seq = 0;
  double arrival_time = 0.0;
  std::optional<double> first_scheduled_time;
  std::optional<double> first_token_time;
  std::optional<double> last_token_time;
  std::optional<double> finished_time;

  Request() = default;
  Request(std::string request_id, std::vector<TokenId> prompt, SamplingParams sampling,
          std::vector<TokenId> eos = {});

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }  // pending ones included
  int32_t num_known_tokens() const { return num_tokens() - num_pending; }
  std::span<const TokenId> prompt_token_ids() const { return {token_ids.data(), size_t(num_prompt_tokens)}; }
  std::span<const TokenId> output_token_ids() const {
    return std::span<const TokenId>(token_ids).subspan(num_prompt_tokens);
  }
  int32_t max_tokens() const { return params.max_tokens.value_or(0); }
};

}  // namespace rl
