// The token-budget scheduler (vLLM v1 style, phase-agnostic): every step spends max_num_batched_tokens and
// max_num_seqs on running requests first (a decode is 1 token, a chunked prefill continues), then admits waiting
// requests (prefix-cache hits skip computed tokens; a prompt larger than the remaining budget is chunked). When
// blocks run out for a running request, the newest running request is preempted (recompute) and put back at
// the front of the waiting queue; scheduling never fails. The scheduler owns no tensors.
//
// Prefix sharing within a step (vLLM): a request's full blocks are cached as soon as they are scheduled, since a
// step writes every token's KV before any attention of that layer reads it; a request admitted later in the
// same step hits them.
//
// Invariants: every live request is in exactly one of waiting_ (statuses waiting/preempted) or running_;
// running_ is in admission order (oldest first); only running requests hold KV blocks; only blocks whose tokens
// are all known (no kPendingToken) are ever cached.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

namespace rl {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;
  int32_t max_num_seqs = 256;
  int32_t max_model_len = 4096;
  int32_t max_waiting = 1024;
  bool enable_chunked_prefill = true;
  // > 0: a prefill chunk never exceeds this many tokens, so long prompts do not starve the batch.
  int32_t long_prefill_token_threshold = 0;
  // Speculative decoding: decoding requests with Request::speculate reserve up to this many draft slots per step
  // (capped by the token budget, max_model_len and max_tokens); 0 = off.
  int32_t num_speculative_tokens = 0;
  // Speculation pays only while decoding is bandwidth bound: with more running requests than this, no drafts
  // are reserved (0 = no limit).
  int32_t speculative_max_running = 0;
  // Prompt logprobs: logits rows per step for prefill chunks that need one per token (needs_prompt_rows); such
  // a chunk is capped to what is left of it. 0: requests with prompt_logprobs are rejected.
  int32_t max_prompt_logprob_rows = 0;
  KvCacheConfig kv;

  Status validate() const;
};

enum class AddError { kNone, kRejected, kQueueFull };

// The outcome of add_request: kRejected means the request can never run as given (HTTP 400); kQueueFull means
// try again later (HTTP 503).
struct AddResult {
  AddError error = AddError::kNone;
  Status status;
  bool ok() const { return error == AddError::kNone; }
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  double kv_usage = 0.0;
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens = 0;      // prompts of requests that produced their first token
  int64_t num_generation_tokens = 0;  // sampled tokens
};

class Scheduler {
 public:
  using Clock = std::function<double()>;
  // config must validate (a bad config is a bug of the caller, checked). clock defaults to now_seconds().
  explicit Scheduler(SchedulerConfig config, Clock clock = nullptr);

  // Admission control: rejects prompts that can never fit (empty, prompt + max_tokens > max_model_len, more
  // blocks than exist, bad sampling params, duplicate id) and reports a full waiting queue distinctly.
  // An unset max_tokens becomes max_model_len - prompt length.
  AddResult add_request(Request request);

  SchedulerOutput schedule();

  // sampled_token_ids[i] is the token sampled for output.scheduled[i]; entries whose `samples` is false are
  // ignored. Appends tokens, advances num_computed_tokens, caches newly full blocks, applies stop conditions and
  // frees finished requests. The same as advance() then resolve().
  UpdateResult update_from_output(const SchedulerOutput& output, std::span<const TokenId> sampled_token_ids);

  // The step pipeline (design.md §8), in two halves:
  // advance(): right after the step is launched, before the next schedule(): advances num_computed_tokens and
  //   appends a kPendingToken for every sampling row, so the next step can be scheduled (its decode input is
  //   read on the device from this step's output). A request whose length limit is reached by its pending
  //   tokens is not scheduled again until they are resolved.
  // resolve(): once the step's tokens are on the host, fills its placeholders in order, applies stop
  //   conditions, caches newly full blocks and frees finished requests (dropping any later placeholders: the
  //   work of a step already in flight for them is discarded). Preempted requests keep their resolved tokens;
  //   a waiting request is not admitted while it has pending tokens.
  void advance(const SchedulerOutput& output);
  // accepted (speculative decoding, optional): per scheduled row, the verified draft tokens that precede
  // sampled_token_ids[i]; they are appended first, each checked against the stop conditions, then the KV slots
  // of rejected drafts are rolled back (num_computed_tokens and the block table; only verified blocks are ever
  // cached).
  UpdateResult resolve(const SchedulerOutput& output, std::span<const TokenId> sampled_token_ids,
                       const std::vector<std::vector<TokenId>>* accepted = nullptr);

  // Speculative decoding: gives row i of output (which reserved num_draft_slots) its draft tokens, at most
  // that many. Before the step is launched.
  void set_drafts(SchedulerOutput* output, size_t i, std::span<const TokenId> drafts) const;
  // Whether r's next chunk computes a logits row per token (prompt logprobs still to be delivered and prompt
  // positions left to compute). The engine stages such a chunk with all_logits.
  static bool needs_prompt_rows(const Request& r) {
    return r.params.prompt_logprobs.has_value() && r.next_prompt_logprob < r.num_prompt_tokens &&
           r.num_computed_tokens + 1 < r.num_prompt_tokens;
  }
  // Speculative decoding: the most drafts r may reserve in a step (K, within max_model_len and max_tokens; the
  // step's token budget caps it further); 0 when r is not a decoding request that speculates.
  int32_t max_draft_slots(const Request& r) const;
  // Adaptive speculation (spec/adaptive.h): the engine's per-step choice of drafts per request, consulted by
  // schedule() as a further cap on max_draft_slots; unset: no further cap.
  using DraftLimit = std::function<int32_t(const Request&)>;
  void set_draft_limit(DraftLimit limit) { draft_limit_ = std::move(limit); }
  // The running requests, oldest first.
  std::span<Request* const> running() const { return running_; }
  // Whether the next schedule() may reserve draft slots (speculation on, and not above its running limit).
  bool speculating() const {
    return config_.num_speculative_tokens > 0 &&
           (config_.speculative_max_running == 0 || num_running() <= config_.speculative_max_running);
  }

  // Finishes a request in any state (waiting, running mid-prefill, preempted) with a finished status, freeing
  // its blocks without caching anything not yet completely written. nullptr if the id is unknown.
  std::unique_ptr<Request> finish_request(const std::string& id, RequestStatus status);
  std::unique_ptr<Request> abort(const std::string& id) {
    return finish_request(id, RequestStatus::kFinishedAborted);
  }

  const Request* find(const std::string& id) const;
  // The live request a scheduled row refers to, or null once it finished.
  Request* live(const ScheduledRequest& s) const;
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_unfinished() const { return !requests_.empty(); }
  SchedulerStats stats() const;
  const KvCacheManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

  // KV integrity plus the scheduler's own invariants (every block table matches its request's state).
  Status check_integrity() const;

 private:
  // known_only: the view ends at the last known token and num_computed_tokens is clamped to it (for hashing).
  KvRequestView kv_view(const Request& r, bool known_only = false) const;
  bool length_done(const Request& r) const;
  void preempt(Request* r);
  std::optional<RequestStatus> stop_status(const Request& r) const;
  std::unique_ptr<Request> release(Request* r, RequestStatus status);

  SchedulerConfig config_;
  Clock clock_;
  KvCacheManager kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::unordered_map<uint64_t, Request*> by_seq_;  // live requests by arrival_seq
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;
  DraftLimit draft_limit_;
  std::vector<std::string> finished_since_schedule_;
  uint64_t next_arrival_seq_ = 1;
  int64_t num_preemptions_ = 0;
  int64_t num_prompt_tokens_ = 0;
  int64_t num_generation_tokens_ = 0;
};

}  // namespace rl
