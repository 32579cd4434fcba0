// StepProfiler: a timeline of the engine's steps as Chrome-trace JSON (chrome://tracing, Perfetto): host spans
// (schedule, stage+launch, wait, process, detokenize) and the device's span of every step, measured by markers
// in the stream. Disabled (every call a no-op) unless open() was given a path. Thread-safe: the engine thread
// and consumers (detokenizing) both add spans.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace rl {

class StepProfiler {
 public:
  static constexpr size_t kMaxEvents = 2'000'000;  // bounded memory on long runs; later spans are dropped

  void open(std::string path) { path_ = std::move(path); }
  bool enabled() const { return !path_.empty(); }
  // start and duration in seconds on now_seconds()'s clock; track: 0 host (engine), 1 device, 2 consumers.
  void span(const char* name, double start, double seconds, int track = 0, int64_t step = -1);
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
};

}  // namespace rl
