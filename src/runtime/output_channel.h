// What the engine thread sends to the consumer of one request (an HTTP worker, the offline API, the CLI), and
// the thread-safe channel that carries it. One channel per submitted request; with n > 1 every message names
// the choice it belongs to.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "sched/scheduler.h"

namespace rl {

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error", ""

struct TokenOutput {
  TokenId token = 0;
  std::optional<float> logprob;
  std::vector<TokenLogprob> top_logprobs;
  int32_t rank = 0;  // prompt logprobs only: 1 + the number of tokens the model ranked before this one
};

struct RequestOutput {
  int32_t index = 0;                  // choice index (0 .. n-1)
  std::vector<TokenOutput> tokens;    // new tokens since the previous message of this choice
  // Prompt logprobs (choice 0 of a request with params.prompt_logprobs): the next prompt positions' entries, in
  // order from position 1 (position 0 has none), all delivered by the message with the first token at the latest.
  std::vector<TokenOutput> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
  AddError add_error = AddError::kNone;  // set when admission failed (finish == kError)
  std::string error;
  std::optional<TokenId> stop_token;  // the EOS / stop id that ended the choice
  // Set on the finishing message (seconds on the engine's clock).
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
  int32_t num_output_tokens = 0;
  double arrival_time = 0, first_token_time = 0, finish_time = 0;
};

// Single producer (the engine thread), single consumer. close() is called by the engine after the last choice
// finished; pop() then drains what is left and returns nullopt.
class OutputChannel {
 public:
  explicit OutputChannel(int32_t n = 1) : n_(n) {}
  void push(RequestOutput out);
  void close();
  // Blocks until a message arrives or the channel is closed and empty.
  std::optional<RequestOutput> pop();
  // Waits at most timeout_s; nullopt on timeout or end (check closed()).
  std::optional<RequestOutput> pop_for(double timeout_s);
  bool closed() const;
  int32_t n() const { return n_; }

 private:
  const int32_t n_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool closed_ = false;
};

}  // namespace rl
