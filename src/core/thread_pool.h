// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into contiguous chunks,
// one per thread (the caller is thread 0), and returns when all are done. Not reentrant: a task must not call
// parallel_for on the same pool.
// A decode step issues hundreds of short loops, so waking sleeping threads would dominate: between tasks,
// workers first spin (with pause) for about kSpinIterations polls of the task generation, and only then sleep
// on the condition variable; the caller likewise spins before sleeping while it waits for the workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rl {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // fn(begin, end, thread_index) over chunks of [0, n); chunks are multiples of `grain` except the last.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain = 1);
  // fn(thread_index) once on every thread.
  void run_on_all(const std::function<void(int)>& fn);

 private:
  // Polls before sleeping: a few tens of microseconds, longer than the gap between two ops of a decode step.
  static constexpr int kSpinIterations = 2000;

  void worker(int index);

  int num_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  // Invariants: task_ is set before generation_ is incremented (release) and read after it is observed
  // (acquire); pending_ counts the workers still running the current generation's task.
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;  // guarded by mu_
};

}  // namespace rl
