// The server's /metrics: the runtime's MetricsRegistry with EngineMetrics (vLLM names, vllm:*). The engine loop
// does not feed EngineMetrics itself, so the server does: scheduler gauges and counters from Engine::stats() at
// each scrape, and per-request latencies (TTFT, e2e, time per output token, lengths) from each choice's finishing
// message; inter-token latency is measured where the tokens arrive, on the worker thread (same monotonic clock
// as the engine's timestamps). Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include "runtime/metrics.h"
#include "runtime/output_channel.h"

namespace rl::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(const std::string& model_name);

  // The finishing message of one choice; `reason` as reported to the client.
  void observe_finished(const RequestOutput& out, FinishReason reason);
  void observe_inter_token(double seconds);
  // Prometheus text, after folding in the scheduler's current state.
  std::string render(const SchedulerStats& stats);

 private:
  std::mutex update_mu_;  // EngineMetrics::update keeps the totals already reported
  MetricsRegistry registry_;
  EngineMetrics engine_;
};

}  // namespace rl::server
