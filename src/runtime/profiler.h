// StepProfiler: a timeline of the engine's steps as Chrome-trace JSON (chrome://tracing, Perfetto): host spans
// (schedule, stage+launch, wait, process, detokenize), the device's span of every step, measured by markers in
// the stream, and with --profile-kernels every kernel's span (Backend::take_kernel_spans). Disabled (every call a
// no-op) unless open() was given a path. Thread-safe: the engine thread and consumers (detokenizing) both add
// spans. tools/kernel_gaps.py reads the kernel track: each step's busy and idle device time, and the hand-offs the
// idle time falls in.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/status.h"

namespace rl {

class StepProfiler {
 public:
  static constexpr size_t kMaxEvents = 2'000'000;  // bounded memory on long runs; later spans are dropped

  void open(std::string path) { path_ = std::move(path); }
  bool enabled() const { return !path_.empty(); }
  // start and duration in seconds on now_seconds()'s clock; track: 0 host (engine), 1 device, 2 consumers,
  // 3 device kernels. name: a literal (kept by pointer).
  void span(const char* name, double start, double seconds, int track = 0, int64_t step = -1);
  // A kernel's span on track 3; the name is copied (one copy per distinct name).
  void kernel_span(const std::string& name, double start, double seconds);
  // Writes the trace; an error names the file.
  Status write() const;
  size_t num_events() const;

 private:
  struct Event {
    const char* name;
    double start, seconds;
    int track;
    int64_t step;
  };
  std::string path_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::unordered_set<std::string> names_;  // kernel_span's names (node-based: their c_str() stay put)
};

}  // namespace rl
