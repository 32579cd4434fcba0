#include "sched/scheduler.h"

#include <algorithm>

#include "core/check.h"
#include "core/log.h"

namespace rl {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool contains(const std::vector<TokenId>& ids, TokenId t) {
  return std::find(ids.begin(), ids.end(), t) != ids.end();
}

}  // namespace

Status SchedulerConfig::validate() const {
  if (max_num_batched_tokens < 1) return Status::error("scheduler: max_num_batched_tokens must be >= 1");
  if (max_num_seqs < 1) return Status::error("scheduler: max_num_seqs must be >= 1");
  if (max_model_len < 2) return Status::error("scheduler: max_model_len must be >= 2");
  if (max_waiting < 1) return Status::error("scheduler: max_waiting must be >= 1");
  if (long_prefill_token_threshold < 0) return Status::error("scheduler: long_prefill_token_threshold < 0");
  if (num_speculative_tokens < 0 || num_speculative_tokens > 32) {
    return Status::error("scheduler: num_speculative_tokens must be in [0, 32]");
  }
  if (speculative_max_running < 0) return Status::error("scheduler: speculative_max_running < 0");
  if (max_prompt_logprob_rows < 0) return Status::error("scheduler: max_prompt_logprob_rows < 0");
  if (kv.block_size < 1) return Status::error("scheduler: block_size must be >= 1");
  if (kv.num_blocks < 2) return Status::error("scheduler: num_blocks must be >= 2 (block 0 is reserved)");
  RL_RETURN_IF_ERROR(kv.validate());
  return Status::ok();
}

Scheduler::Scheduler(SchedulerConfig config, Clock clock)
    : config_(std::move(config)), clock_(std::move(clock)), kv_(config_.kv) {
  const Status st = config_.validate();
  RL_CHECK_MSG(st.is_ok(), "%s", st.message().c_str());
  if (!clock_) clock_ = now_seconds;
}

KvRequestView Scheduler::kv_view(const Request& r, bool known_only) const {
  const int32_t known = r.num_known_tokens();
  return KvRequestView{r.arrival_seq, std::span<const TokenId>(r.token_ids).first(static_cast<size_t>(known)),
                       known_only ? std::min(r.num_computed_tokens, known) : r.num_computed_tokens,
                       r.params.cache_salt};
}

bool Scheduler::length_done(const Request& r) const {
  return r.num_output_tokens() >= r.max_tokens() || r.num_tokens() >= config_.max_model_len;
}

AddResult Scheduler::add_request(Request request) {
  const auto reject = [&](const std::string& why) {
    return AddResult{AddError::kRejected, Status::error("request '" + request.id + "': " + why)};
  };
  if (request.id.empty()) return reject("empty request id");
  if (requests_.count(request.id) != 0) return reject("duplicate request id");
  if (request.num_prompt_tokens != request.num_tokens()) return reject("must not carry output tokens");
  if (request.num_prompt_tokens == 0) return reject("empty prompt");
  if (Status st = request.params.validate(); !st.is_ok()) return reject(st.message());
  if (request.params.prompt_logprobs && config_.max_prompt_logprob_rows <= 0) {
    return reject("prompt_logprobs is not available (this engine computes no per-token prompt logits)");
  }
  const int64_t prompt = request.num_prompt_tokens;
  if (prompt >= config_.max_model_len) {
    return reject("prompt has " + str(prompt) + " tokens, max_model_len is " + str(config_.max_model_len));
  }
  if (!request.params.max_tokens) {
    request.params.max_tokens = config_.max_model_len - static_cast<int32_t>(prompt);
  }
  const int64_t total = prompt + *request.params.max_tokens;
  if (total > config_.max_model_len) {
    return reject("prompt (" + str(prompt) + " tokens) + max_tokens (" + str(*request.params.max_tokens) +
                  ") exceeds max_model_len (" + str(config_.max_model_len) + ")");
  }
  // The last sampled token never needs a KV slot, so a request needs room for total - 1 tokens (with a sliding
  // window, only for the window and one step's tokens at a time).
  const int64_t num_blocks_needed = kv_.max_blocks_held(total - 1, config_.max_num_batched_tokens);
  if (num_blocks_needed > kv_.num_usable_blocks()) {
    return reject("needs " + str(num_blocks_needed) + " KV blocks, only " + str(kv_.num_usable_blocks()) +
                  " exist");
  }
  if (!config_.enable_chunked_prefill && prompt > config_.max_num_batched_tokens) {
    return reject("prompt has " + str(prompt) + " tokens, more than max_num_batched_tokens (" +
                  str(config_.max_num_batched_tokens) + ") without chunked prefill");
  }
  if (num_waiting() >= config_.max_waiting) {
    return AddResult{AddError::kQueueFull, Status::error("request '" + request.id + "': the waiting queue is full (" +
                                                         str(config_.max_waiting) + " requests)")};
  }
  auto owned = std::make_unique<Request>(std::move(request));
  owned->status = RequestStatus::kWaiting;
  owned->num_computed_tokens = 0;
  owned->arrival_seq = next_arrival_seq_++;
  // The caller may have started the request's clock earlier (at submit); never later than now.
  if (!(owned->arrival_time > 0.0)) owned->arrival_time = clock_();
  waiting_.push_back(owned.get());
  by_seq_[owned->arrival_seq] = owned.get();
  requests_.emplace(owned->id, std::move(owned));
  return AddResult{};
}

void Scheduler::preempt(Request* r) {
  kv_.free(r->arrival_seq);
  r->status = RequestStatus::kPreempted;
  r->num_computed_tokens = 0;
  ++r->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(r);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.finished_request_ids = std::move(finished_since_schedule_);
  finished_since_schedule_.clear();
  int32_t budget = config_.max_num_batched_tokens;
  const double now = clock_();

  const auto emit = [&](Request* r, int32_t num_new, bool is_new, int32_t num_draft_slots = 0) {
    ScheduledRequest s;
    s.num_draft_slots = num_draft_slots;
    s.request = r;
    s.arrival_seq = r->arrival_seq;
    s.num_computed_tokens = r->num_computed_tokens;
    s.num_scheduled_tokens = num_new;
    s.token_ids = std::span<const TokenId>(r->token_ids).subspan(r->num_computed_tokens, num_new);
    auto table = kv_.block_table(r->arrival_seq);
    s.block_table.assign(table.begin(), table.end());
    s.window_tables.resize(static_cast<size_t>(kv_.num_groups() - 1));
    for (int32_t g = 1; g < kv_.num_groups(); ++g) {
      auto t = kv_.block_table(r->arrival_seq, g);
      s.window_tables[static_cast<size_t>(g - 1)].assign(t.begin(), t.end());
    }
    s.samples = r->num_computed_tokens + num_new == r->num_tokens();
    s.is_new = is_new;
    // Cache the blocks this step completes (their KV is written before any attention of the step reads it).
    KvRequestView view = kv_view(*r, true);
    view.num_computed_tokens = std::min(r->num_computed_tokens + num_new, r->num_known_tokens());
    kv_.cache_full_blocks(view);
    out.scheduled.push_back(std::move(s));
    out.num_scheduled_tokens += num_new;
    budget -= num_new + num_draft_slots;
  };
  // Prompt-logprob chunks spend a second budget: one logits row per token.
  int32_t row_budget = config_.max_prompt_logprob_rows;
  const auto clamp = [&](int32_t num_new, const Request& r) {
    if (config_.long_prefill_token_threshold > 0) {
      num_new = std::min(num_new, config_.long_prefill_token_threshold);
    }
    if (needs_prompt_rows(r)) num_new = std::min(num_new, row_budget);
    return std::min(num_new, budget);
  };
  const auto spend_rows = [&](const Request& r, int32_t num_new) {
    if (needs_prompt_rows(r)) row_budget -= num_new;
  };

  // Speculation: how many draft slots a decoding request may reserve this step (0: none).
  const bool speculating = this->speculating();
  const auto draft_slots = [&](const Request& r) {
    if (!speculating || r.num_pending > 0) return 0;
    int32_t k = std::min(max_draft_slots(r), budget - 1);
    if (draft_limit_) k = std::min(k, draft_limit_(r));
    return std::max(0, k);
  };

  // Running requests first, oldest first; preemption takes the newest, which has not been scheduled yet.
  bool preempted_any = false;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    // Its pending tokens already reach its length limit, or it has no token to compute: wait for resolve().
    if ((r->num_pending > 0 && length_done(*r)) || r->num_computed_tokens >= r->num_tokens()) {
      ++i;
      continue;
    }
    // Draft slots only when the blocks are free now: speculation never preempts anyone.
    if (const int32_t k = draft_slots(*r); k > 0 && kv_.allocate_slots(kv_view(*r), 1 + k)) {
      emit(r, 1, false, k);
      ++i;
      continue;
    }
    const int32_t num_new = clamp(r->num_tokens() - r->num_computed_tokens, *r);
    if (num_new == 0) {  // a prompt-logprob chunk with no logits rows left this step
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!kv_.allocate_slots(kv_view(*r), num_new)) {
      Request* victim = running_.back();
      running_.pop_back();
      preempt(victim);
      out.preempted_request_ids.push_back(victim->id);
      preempted_any = true;
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    spend_rows(*r, num_new);
    emit(r, num_new, false);
    ++i;
  }

  // Then waiting requests in order, unless this step had to preempt (blocks are scarce).
  while (!preempted_any && !waiting_.empty() && budget > 0 && num_running() < config_.max_num_seqs) {
    Request* r = waiting_.front();
    RL_CHECK(r->num_computed_tokens == 0);
    if (r->num_pending > 0) break;  // preempted with a token still in flight: resolve() first
    // A request that wants prompt logprobs computes every prompt position: no prefix-cache hit.
    ComputedBlocks hit = needs_prompt_rows(*r) ? ComputedBlocks{} : kv_.get_computed_blocks(kv_view(*r));
    const int32_t num_remaining = r->num_tokens() - hit.num_computed_tokens;
    // Without chunked prefill a prompt waits for a step with room for all of it; only a resumed request that
    // has outgrown max_num_batched_tokens is chunked, or it could never run again.
    if (!config_.enable_chunked_prefill && num_remaining > budget &&
        num_remaining <= config_.max_num_batched_tokens) {
      break;
    }
    const int32_t num_new = clamp(num_remaining, *r);
    if (num_new == 0) break;  // no logits rows left this step for its prompt logprobs
    if (!kv_.allocate_slots(kv_view(*r), num_new, &hit)) break;
    waiting_.pop_front();
    running_.push_back(r);
    if (!r->first_scheduled_time) {
      r->first_scheduled_time = now;
      r->num_cached_prompt_tokens = hit.num_computed_tokens;
    }
    r->status = RequestStatus::kRunning;
    r->num_computed_tokens = hit.num_computed_tokens;
    spend_rows(*r, num_new);
    emit(r, num_new, true);
  }
  return out;
}

std::optional<RequestStatus> Scheduler::stop_status(const Request& r) const {
  // Judged at the newest known token (later ones are still pending).
  const int32_t num_known = r.num_known_tokens();
  const TokenId last = r.token_ids[static_cast<size_t>(num_known - 1)];
  const int32_t num_outputs = num_known - r.num_prompt_tokens;
  // The sampler suppresses EOS and stop ids while fewer than min_tokens outputs exist; agree with it here.
  if (num_outputs > r.params.min_tokens) {
    if (!r.params.ignore_eos && contains(r.eos_token_ids, last)) return RequestStatus::kFinishedStopped;
    if (contains(r.params.stop_token_ids, last)) return RequestStatus::kFinishedStopped;
  }
  if (num_outputs >= r.max_tokens()) return RequestStatus::kFinishedLength;
  if (num_known >= config_.max_model_len) return RequestStatus::kFinishedLength;
  return std::nullopt;
}

UpdateResult Scheduler::update_from_output(const SchedulerOutput& output,
                                           std::span<const TokenId> sampled_token_ids) {
  advance(output);
  return resolve(output, sampled_token_ids);
}

void Scheduler::advance(const SchedulerOutput& output) {
  for (const ScheduledRequest& s : output.scheduled) {
    Request* r = live(s);
    if (r == nullptr) continue;
    if (r->status != RequestStatus::kRunning || r->num_computed_tokens != s.num_computed_tokens) continue;
    // Drafts count as computed only once verified (resolve).
    r->num_computed_tokens += s.num_scheduled_tokens - s.num_draft_tokens;
    if (s.samples) {
      r->token_ids.push_back(kPendingToken);
      ++r->num_pending;
    }
  }
}

int32_t Scheduler::max_draft_slots(const Request& r) const {
  if (!r.speculate || r.num_computed_tokens != r.num_tokens() - 1) return 0;
  // After the step the request holds up to k + 1 more tokens: within max_model_len and max_tokens.
  return std::max(0, std::min({config_.num_speculative_tokens, config_.max_model_len - r.num_tokens() - 1,
                               r.max_tokens() - r.num_output_tokens() - 1}));
}

void Scheduler::set_drafts(SchedulerOutput* output, size_t i, std::span<const TokenId> drafts) const {
  ScheduledRequest& s = output->scheduled.at(i);
  RL_CHECK(static_cast<int32_t>(drafts.size()) <= s.num_draft_slots && s.num_draft_tokens == 0 &&
           s.num_scheduled_tokens == 1);
  if (drafts.empty()) return;
  s.spec_input.assign(1, s.token_ids[0]);
  s.spec_input.insert(s.spec_input.end(), drafts.begin(), drafts.end());
  s.token_ids = s.spec_input;
  s.num_draft_tokens = static_cast<int32_t>(drafts.size());
  s.num_scheduled_tokens += s.num_draft_tokens;
  output->num_scheduled_tokens += s.num_draft_tokens;
}

UpdateResult Scheduler::resolve(const SchedulerOutput& output, std::span<const TokenId> sampled_token_ids,
                                const std::vector<std::vector<TokenId>>* accepted) {
  RL_CHECK(sampled_token_ids.size() == output.scheduled.size());
  RL_CHECK(accepted == nullptr || accepted->size() == output.scheduled.size());
  UpdateResult result;
  const double now = clock_();
  for (size_t i = 0; i < output.scheduled.size(); ++i) {
    const ScheduledRequest& s = output.scheduled[i];
    Request* r = live(s);
    if (r == nullptr) continue;  // finished since this output was made: its chunk no longer counts
    const size_t index =
        static_cast<size_t>(s.num_computed_tokens + s.num_scheduled_tokens - s.num_draft_tokens);
    std::optional<RequestStatus> finished;
    if (s.samples) {
      // The placeholder advance() appended for this row: the oldest pending one (a preempted request keeps it).
      if (r->num_pending == 0 || index != static_cast<size_t>(r->num_known_tokens()) ||
          r->token_ids[index] != kPendingToken) {
        continue;
      }
      // The verified drafts, then the sampled token; each may end the request, which drops the rest.
      const std::vector<TokenId>* drafts = accepted ? &(*accepted)[i] : nullptr;
      const size_t num_drafts = drafts ? drafts->size() : 0;
      RL_CHECK(static_cast<int32_t>(num_drafts) <= s.num_draft_tokens);
      for (size_t j = 0; j <= num_drafts && !finished; ++j) {
        const TokenId token = j < num_drafts ? (*drafts)[j] : sampled_token_ids[i];
        if (j == 0) {
          r->token_ids[index] = token;
          --r->num_pending;
        } else {
          // Each verified draft before this token had its KV written by this step.
          r->token_ids.push_back(token);
          ++r->num_computed_tokens;
        }
        if (!r->first_token_time) {
          r->first_token_time = now;
          num_prompt_tokens_ += r->num_prompt_tokens;
        }
        std::optional<double> inter_token_latency;
        if (r->last_token_time) inter_token_latency = now - *r->last_token_time;
        r->last_token_time = now;
        ++num_generation_tokens_;
        finished = stop_status(*r);
        if (finished && *finished == RequestStatus::kFinishedStopped) r->stop_token = token;
        result.tokens.push_back(TokenUpdate{r->id, static_cast<int32_t>(i), static_cast<int32_t>(j), token,
                                            finished.value_or(RequestStatus::kRunning), inter_token_latency});
      }
    }
    // Rollback: the slots reserved for drafts past the verified tokens go back to the pool.
    if (s.num_draft_slots > 0 && r->status == RequestStatus::kRunning) {
      kv_.truncate(r->arrival_seq, r->num_computed_tokens);
    }
    if (r->status == RequestStatus::kRunning) kv_.cache_full_blocks(kv_view(*r, true));
    if (finished) result.finished.push_back(release(r, *finished));
  }
  return result;
}

std::unique_ptr<Request> Scheduler::release(Request* r, RequestStatus status) {
  RL_CHECK(is_finished(status));
  if (r->status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), r));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
  }
  kv_.free(r->arrival_seq);
  // Tokens still in flight for it are dropped: its outputs end at the last known token.
  r->token_ids.resize(static_cast<size_t>(r->num_known_tokens()));
  r->num_pending = 0;
  r->num_computed_tokens = std::min(r->num_computed_tokens, r->num_tokens());
  r->status = status;
  r->finished_time = clock_();
  finished_since_schedule_.push_back(r->id);
  by_seq_.erase(r->arrival_seq);
  auto it = requests_.find(r->id);
  std::unique_ptr<Request> owned = std::move(it->second);
  requests_.erase(it);
  return owned;
}

std::unique_ptr<Request> Scheduler::finish_request(const std::string& id, RequestStatus status) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  return release(it->second.get(), status);
}

Request* Scheduler::live(const ScheduledRequest& s) const {
  auto it = by_seq_.find(s.arrival_seq);
  return it == by_seq_.end() ? nullptr : it->second;
}

const Request* Scheduler::find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = num_running();
  s.num_waiting = num_waiting();
  s.kv_usage = kv_.usage();
  s.prefix_cache_queries = kv_.pool().prefix_cache_queries();
  s.prefix_cache_hits = kv_.pool().prefix_cache_hits();
  s.num_preemptions = num_preemptions_;
  s.num_prompt_tokens = num_prompt_tokens_;
  s.num_generation_tokens = num_generation_tokens_;
  return s;
}

Status Scheduler::check_integrity() const {
  RL_RETURN_IF_ERROR(kv_.check_integrity());
  if (running_.size() + waiting_.size() != requests_.size()) {
    return Status::error("scheduler: live requests are not exactly the running plus the waiting ones");
  }
  const int32_t bs = kv_.block_size();
  for (const Request* r : running_) {
    if (r->status != RequestStatus::kRunning) return Status::error("scheduler: '" + r->id + "' in running_");
    for (int32_t g = 0; g < kv_.num_groups(); ++g) {
      const int64_t num_slots = static_cast<int64_t>(kv_.block_table(r->arrival_seq, g).size()) * bs;
      if (num_slots < r->num_computed_tokens || r->num_computed_tokens > r->num_tokens()) {
        return Status::error("scheduler: '" + r->id + "' has fewer KV slots than computed tokens");
      }
    }
  }
  for (const Request* r : waiting_) {
    if (r->status != RequestStatus::kWaiting && r->status != RequestStatus::kPreempted) {
      return Status::error("scheduler: '" + r->id + "' in waiting_ with status " + request_status_name(r->status));
    }
    if (r->num_computed_tokens != 0 || !kv_.block_table(r->arrival_seq).empty()) {
      return Status::error("scheduler: waiting '" + r->id + "' holds KV state");
    }
  }
  return Status::ok();
}

}  // namespace rl
