// One metrics registry: counters, gauges and histograms with labels, rendered in the Prometheus text
// exposition format (version 0.0.4). Thread-safe: any thread may update a metric while another renders.
// A family (one name) has one type, one help text and, for histograms, one set of buckets; each distinct label
// set is one child. Registering a name again returns the same family; a conflicting type is a bug (checked).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rl {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;  // (name, value), in render order

class Counter {
 public:
  void inc(double amount = 1.0);  // amount >= 0 (checked)
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void dec(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending, finite; +Inf is implicit
  void observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // [upper_bounds.size() + 1], the last one is +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  mutable std::mutex mu_;  // one observation updates bucket, sum and count together
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; [upper_bounds_.size() + 1]
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  Counter& counter(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                       const MetricLabels& labels = {});

  // Families in registration order, children in label order.
  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<double> buckets;
    std::map<std::string, MetricLabels> labels;  // key: rendered label set
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Type type, const std::vector<double>& buckets);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Bucket helpers.
std::vector<double> linear_buckets(double start, double width, int32_t count);
std::vector<double> exponential_buckets(double start, double factor, int32_t count);


// The engine's metrics under vLLM's names (vllm:*), labelled with model_name. Counters that the scheduler keeps
// as totals are advanced by the difference since the previous update.
struct SchedulerStats;
struct UpdateResult;
struct Request;

class EngineMetrics {
 public:
  EngineMetrics(MetricsRegistry& registry, const std::string& model_name);

  // Gauges and totals from the scheduler, once per step.
  void update(const SchedulerStats& stats);
  // Per-token latencies and finished requests of one step.
  void observe_step(const UpdateResult& result);
  // A finished request (observe_step calls it; the engine calls it for requests it aborted itself).
  void observe_finished(const Request& request);
  // One speculative verification of num_draft draft tokens of which the first num_accepted were accepted
  // (vllm:spec_decode_*; per-position children are created as positions first occur).
  void observe_spec(int32_t num_draft, int32_t num_accepted);

 private:

  MetricsRegistry& registry_;
  MetricLabels labels_;
  Gauge& num_running_;
  Gauge& num_waiting_;
  Gauge& kv_usage_;
  Counter& prefix_queries_;
  Counter& prefix_hits_;
  Counter& preemptions_;
  Counter& prompt_tokens_;
  Counter& generation_tokens_;
  Histogram& ttft_;
  Histogram& inter_token_;
  Histogram& time_per_output_token_;
  Histogram& e2e_;
  Histogram& prompt_len_;
  Histogram& generation_len_;
  Counter& spec_drafts_;
  Counter& spec_draft_tokens_;
  Counter& spec_accepted_tokens_;
  std::vector<Counter*> spec_accepted_per_pos_;
  // Scheduler totals already reported.
  int64_t last_prefix_queries_ = 0;
  int64_t last_prefix_hits_ = 0;
  int64_t last_preemptions_ = 0;
  int64_t last_prompt_tokens_ = 0;
  int64_t last_generation_tokens_ = 0;
};

}  // namespace rl
