#include "core/thread_pool.h"

#include <algorithm>

#include "core/cpu_relax.h"

namespace rl {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) {
      cpu_relax();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int)>* task = task_;
    (*task)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the lock orders this notify after the caller's predicate check, so the wake-up is never lost.
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  task_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the lock, so that a worker between its predicate check and its wait cannot miss the increment.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  fn(0);
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  task_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t num_grains = (n + grain - 1) / grain;
  int workers = static_cast<int>(std::min<int64_t>(num_threads_, num_grains));
  if (workers <= 1) {
    fn(0, n, 0);
    return;
  }
  run_on_all([&](int t) {
    if (t >= workers) return;
    int64_t g0 = num_grains * t / workers, g1 = num_grains * (t + 1) / workers;
    int64_t b = g0 * grain, e = std::min(n, g1 * grain);
    if (b < e) fn(b, e, t);
  });
}

}  // namespace rl
