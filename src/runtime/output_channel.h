// What the engine thread sends to the consumer of one request (an HTTP worker, the offline API, the CLI), and
// the thread-safe channel that carries it. One channel per submitted request; with n > 1 every message names
// the choice it belongs to.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
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

class ChannelWaker;

// How long a ChannelWaker spins after its last wake before it sleeps: longer than a decode step (Llama-3.1-8B at
// batch 64 takes about 5.5 ms a step on the H200, batch 1 about 4 ms), so that an engine in steady decode never
// wakes it by a system call, and short enough that an idle server stops spinning at once.
constexpr double kChannelWakerSpinSeconds = 0.01;

// Single producer (the engine thread), single consumer. close() is called by the engine after the last choice
// finished; pop() then drains what is left and returns nullopt. A push or close that finds the consumer blocked in
// pop() wakes it: itself, or through a ChannelWaker when one is set (then the channel must be owned by a
// shared_ptr, as Engine::submit makes it).
class OutputChannel : public std::enable_shared_from_this<OutputChannel> {
 public:
  explicit OutputChannel(int32_t n = 1) : n_(n) {}
  // Before the first push: the waker that wakes this channel's blocked consumer (null: push wakes it itself).
  void set_waker(ChannelWaker* waker) { waker_ = waker; }
  void push(RequestOutput out);
  void close();
  // Blocks until a message arrives or the channel is closed and empty.
  std::optional<RequestOutput> pop();
  // Waits at most timeout_s; nullopt on timeout or end (check closed()).
  std::optional<RequestOutput> pop_for(double timeout_s);
  bool closed() const;
  int32_t n() const { return n_; }
  // Consumers blocked in pop() / pop_for() now.
  int32_t num_waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiters_;
  }

 private:
  friend class ChannelWaker;
  // Wakes the blocked consumer (all: every waiter), through the waker where there is one.
  void signal(bool all);
  void notify_now(bool all);

  const int32_t n_;
  ChannelWaker* waker_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool closed_ = false;
  int32_t waiters_ = 0;  // consumers blocked in pop() / pop_for()
};

// Wakes blocked consumers of OutputChannels from a thread of its own, so that the producer never makes the wake-up
// system call (a futex wake, and the scheduler's work to run the woken thread) itself. Why: a decode step pushes a
// message to every running request's channel, and each push to a blocked consumer was a futex wake on the engine
// thread, whose host time bounds a step where the device is fast (perf on the build machine, the embedded model
// at batch 1 on the CPU backend: 73 % of Engine::process; docs/benchmarks.md, session 40, has the H200's spans).
// The waker spins (a pause instruction at a time) for spin_seconds after its last wake before it sleeps, so a
// producer that posts at least that often never wakes the waker by a system call either: it costs one core while
// requests run, which is why the engine uses it only where the host's cores do not run the model
// (EngineConfig::wake_thread).
class ChannelWaker {
 public:
  explicit ChannelWaker(double spin_seconds);
  ~ChannelWaker();  // wakes what was posted, then stops
  ChannelWaker(const ChannelWaker&) = delete;
  ChannelWaker& operator=(const ChannelWaker&) = delete;
  // Wakes ch's blocked consumer (all: every one) soon, on the waker's thread.
  void post(std::shared_ptr<OutputChannel> ch, bool all);
  // Wakes so far that needed no system call from post (the waker was spinning) and that did (it slept).
  int64_t posts_while_spinning() const { return spinning_posts_.load(std::memory_order_relaxed); }
  int64_t posts_while_sleeping() const { return sleeping_posts_.load(std::memory_order_relaxed); }
  // Whether the waker's thread sleeps now (past its spin, nothing posted).
  bool asleep() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeping_;
  }

 private:
  void run();

  const double spin_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::shared_ptr<OutputChannel>, bool>> pending_;  // under mu_
  std::atomic<bool> has_pending_{false};
  std::atomic<bool> stop_{false};
  bool sleeping_ = false;  // under mu_
  std::atomic<int64_t> spinning_posts_{0}, sleeping_posts_{0};
  std::thread thread_;
};

}  // namespace rl
