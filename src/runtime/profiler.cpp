#include "runtime/profiler.h"

#include <algorithm>
#include <cstdio>
#include <memory>

namespace rl {

void StepProfiler::span(const char* name, double start, double seconds, int track, int64_t step) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) return;
  events_.push_back(Event{name, start, seconds, track, step});
}

void StepProfiler::kernel_span(const std::string& name, double start, double seconds) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) return;
  const char* n = names_.insert(name).first->c_str();
  events_.push_back(Event{n, start, seconds, 3, -1});
}

size_t StepProfiler::num_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

Status StepProfiler::write() const {
  if (!enabled()) return Status::ok();
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path_.c_str(), "w"), &std::fclose);
  if (!f) return Status::error("cannot write the profile " + path_);
  static const char* kTracks[] = {"engine (host)", "device", "consumers (host)", "device kernels"};
  std::fprintf(f.get(), "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  for (int t = 0; t < 4; ++t) {
    std::fprintf(f.get(), "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n",
                 t, kTracks[t]);
  }
  double t0 = events_.empty() ? 0.0 : events_.front().start;  // kernels may start before the first host span
  for (const Event& e : events_) t0 = std::min(t0, e.start);
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    std::string name;  // JSON-escaped (kernel names are the device's; the others are literals)
    for (const char* c = e.name; *c != 0; ++c) {
      if (*c == '"' || *c == '\\') name += '\\';
      if (static_cast<unsigned char>(*c) >= 0x20) name += *c;
    }
    std::fprintf(f.get(), "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", name.c_str(),
                 e.track, (e.start - t0) * 1e6, e.seconds * 1e6);
    if (e.step >= 0) std::fprintf(f.get(), ",\"args\":{\"step\":%lld}", static_cast<long long>(e.step));
    std::fprintf(f.get(), "}%s\n", i + 1 < events_.size() ? "," : "");
  }
  std::fprintf(f.get(), "]}\n");
  if (std::ferror(f.get())) return Status::error("cannot write the profile " + path_);
  return Status::ok();
}

}  // namespace rl
