#include "runtime/output_channel.h"

#include <chrono>

#include "core/cpu_relax.h"

namespace rl {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: return "";
  }
  return "";
}

void OutputChannel::push(RequestOutput out) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(out));
    wake = waiters_ > 0;
  }
  if (wake) signal(false);
}

void OutputChannel::close() {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    wake = waiters_ > 0;
  }
  if (wake) signal(true);
}

void OutputChannel::signal(bool all) {
  if (waker_ != nullptr) {
    if (std::shared_ptr<OutputChannel> self = weak_from_this().lock()) return waker_->post(std::move(self), all);
  }
  notify_now(all);
}

void OutputChannel::notify_now(bool all) {
  if (all) {
    cv_.notify_all();
  } else {
    cv_.notify_one();
  }
}

std::optional<RequestOutput> OutputChannel::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiters_;
  cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
  --waiters_;
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

std::optional<RequestOutput> OutputChannel::pop_for(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty() && !closed_ && timeout_s > 0) {
    ++waiters_;
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !queue_.empty() || closed_; });
    --waiters_;
  }
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

bool OutputChannel::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_ && queue_.empty();
}

ChannelWaker::ChannelWaker(double spin_seconds) : spin_seconds_(spin_seconds) {
  thread_ = std::thread([this] { run(); });
}

ChannelWaker::~ChannelWaker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
  }
  cv_.notify_one();
  thread_.join();
}

void ChannelWaker::post(std::shared_ptr<OutputChannel> ch, bool all) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace_back(std::move(ch), all);
    has_pending_.store(true, std::memory_order_release);
    wake = sleeping_;
  }
  (wake ? sleeping_posts_ : spinning_posts_).fetch_add(1, std::memory_order_relaxed);
  if (wake) cv_.notify_one();
}

void ChannelWaker::run() {
  using Clock = std::chrono::steady_clock;
  const auto spin = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spin_seconds_));
  std::vector<std::pair<std::shared_ptr<OutputChannel>, bool>> batch;
  Clock::time_point last = Clock::now();
  while (true) {
    if (has_pending_.load(std::memory_order_acquire)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        batch.swap(pending_);
        has_pending_.store(false, std::memory_order_relaxed);
      }
      for (auto& [ch, all] : batch) ch->notify_now(all);
      batch.clear();  // the channels' last references may go here
      last = Clock::now();
      continue;
    }
    if (!stop_.load(std::memory_order_relaxed) && Clock::now() - last < spin) {
      for (int i = 0; i < 32; ++i) cpu_relax();
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!pending_.empty()) continue;
    if (stop_.load(std::memory_order_relaxed)) break;
    sleeping_ = true;
    cv_.wait(lock, [&] { return !pending_.empty() || stop_.load(std::memory_order_relaxed); });
    sleeping_ = false;
    last = Clock::now();
  }
}

}  // namespace rl
