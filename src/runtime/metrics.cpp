#include "runtime/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "sched/scheduler.h"

namespace rl {
namespace {

bool valid_name(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest of %.15g / %.17g that reads back exactly, so 0.1 renders as "0.1".
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// {a="x",b="y"} with an optional extra label appended (le for histogram buckets); "" for no labels.
std::string render_labels(const MetricLabels& labels, const std::string& extra_name = "",
                          const std::string& extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    out += k + "=\"" + escape(v, true) + "\"";
  }
  if (!extra_name.empty()) {
    if (out.size() > 1) out += ',';
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

void Counter::inc(double amount) {
  RL_CHECK(amount >= 0.0);
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    RL_CHECK(std::isfinite(upper_bounds_[i]));
    RL_CHECK(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i]);
  }
}

void Histogram::observe(double v) {
  // Bucket i counts v <= upper_bounds_[i] (and > the previous bound); the last one is +Inf.
  const size_t bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v) - upper_bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cum = 0;
  for (uint64_t c : counts_) {
    cum += c;
    s.cumulative_counts.push_back(cum);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name, const std::string& help, Type type,
                                                 const std::vector<double>& buckets) {
  RL_CHECK_MSG(valid_name(name, true), "bad metric name '%s'", name.c_str());
  for (auto& f : families_) {
    if (f->name != name) continue;
    RL_CHECK_MSG(f->type == type, "metric '%s' registered with two types", name.c_str());
    RL_CHECK_MSG(f->buckets == buckets, "histogram '%s' registered with two bucket sets", name.c_str());
    return *f;
  }
  auto f = std::make_unique<Family>();
  f->name = name;
  f->help = help;
  f->type = type;
  f->buckets = buckets;
  families_.push_back(std::move(f));
  return *families_.back();
}

namespace {

std::string label_key(const MetricLabels& labels) {
  for (const auto& [k, v] : labels) {
    RL_CHECK_MSG(valid_name(k, false) && k != "le", "bad label name '%s'", k.c_str());
  }
  return render_labels(labels);
}

}  // namespace

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, Type::kCounter, {});
  const std::string key = label_key(labels);
  auto& slot = f.counters[key];
  if (!slot) {
    slot = std::make_unique<Counter>();
    f.labels[key] = labels;
  }
  return *slot;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, Type::kGauge, {});
  const std::string key = label_key(labels);
  auto& slot = f.gauges[key];
  if (!slot) {
    slot = std::make_unique<Gauge>();
    f.labels[key] = labels;
  }
  return *slot;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const std::vector<double>& buckets, const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, Type::kHistogram, buckets);
  const std::string key = label_key(labels);
  auto& slot = f.histograms[key];
  if (!slot) {
    slot = std::make_unique<Histogram>(buckets);
    f.labels[key] = labels;
  }
  return *slot;
}

std::string MetricsRegistry::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& f : families_) {
    static const char* const kTypeNames[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + f->name + " " + escape(f->help, false) + "\n";
    out += "# TYPE " + f->name + " " + kTypeNames[static_cast<int>(f->type)] + "\n";
    for (const auto& [key, labels] : f->labels) {
      if (f->type == Type::kCounter) {
        out += f->name + key + " " + format_value(f->counters.at(key)->value()) + "\n";
      } else if (f->type == Type::kGauge) {
        out += f->name + key + " " + format_value(f->gauges.at(key)->value()) + "\n";
      } else {
        const Histogram::Snapshot s = f->histograms.at(key)->snapshot();
        for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
          const std::string le = i < s.upper_bounds.size() ? format_value(s.upper_bounds[i]) : "+Inf";
          out += f->name + "_bucket" + render_labels(labels, "le", le) + " " +
                 std::to_string(s.cumulative_counts[i]) + "\n";
        }
        out += f->name + "_sum" + key + " " + format_value(s.sum) + "\n";
        out += f->name + "_count" + key + " " + std::to_string(s.count) + "\n";
      }
    }
  }
  return out;
}

std::vector<double> linear_buckets(double start, double width, int32_t count) {
  std::vector<double> b;
  for (int32_t i = 0; i < count; ++i) b.push_back(start + width * i);
  return b;
}

std::vector<double> exponential_buckets(double start, double factor, int32_t count) {
  std::vector<double> b;
  double v = start;
  for (int32_t i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

}  // namespace rl

namespace rl {
namespace {

// vLLM's latency buckets (seconds).
const std::vector<double> kTtftBuckets{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                       2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                                               1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                                      60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kLengthBuckets{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000,
                                         50000, 100000};

const char* finished_reason(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped: return "stop";
    case RequestStatus::kFinishedLength: return "length";
    case RequestStatus::kFinishedAborted: return "abort";
    default: return "error";
  }
}

}  // namespace

EngineMetrics::EngineMetrics(MetricsRegistry& registry, const std::string& model_name)
    : registry_(registry),
      labels_{{"model_name", model_name}},
      num_running_(registry.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                                  labels_)),
      num_waiting_(registry.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                                  labels_)),
      kv_usage_(registry.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels_)),
      prefix_queries_(registry.counter("vllm:prefix_cache_queries_total",
                                       "Prefix cache queries, in terms of number of queried tokens.", labels_)),
      prefix_hits_(registry.counter("vllm:prefix_cache_hits_total",
                                    "Prefix cache hits, in terms of number of cached tokens.", labels_)),
      preemptions_(registry.counter("vllm:num_preemptions_total", "Cumulative number of preemptions.", labels_)),
      prompt_tokens_(registry.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", labels_)),
      generation_tokens_(registry.counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
                                          labels_)),
      ttft_(registry.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                               kTtftBuckets, labels_)),
      inter_token_(registry.histogram("vllm:inter_token_latency_seconds",
                                      "Histogram of inter-token latency in seconds.", kTokenLatencyBuckets, labels_)),
      time_per_output_token_(registry.histogram("vllm:request_time_per_output_token_seconds",
                                                "Histogram of time_per_output_token_seconds per request.",
                                                kTokenLatencyBuckets, labels_)),
      e2e_(registry.histogram("vllm:e2e_request_latency_seconds",
                              "Histogram of e2e request latency in seconds.", kE2eBuckets, labels_)),
      prompt_len_(registry.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                                     kLengthBuckets, labels_)),
      generation_len_(registry.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                         kLengthBuckets, labels_)),
      spec_drafts_(registry.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
                                    labels_)),
      spec_draft_tokens_(registry.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
                                          labels_)),
      spec_accepted_tokens_(registry.counter("vllm:spec_decode_num_accepted_tokens_total",
                                             "Number of accepted tokens.", labels_)) {}

void EngineMetrics::observe_spec(int32_t num_draft, int32_t num_accepted) {
  if (num_draft <= 0) return;
  spec_drafts_.inc();
  spec_draft_tokens_.inc(num_draft);
  spec_accepted_tokens_.inc(num_accepted);
  while (spec_accepted_per_pos_.size() < static_cast<size_t>(num_draft)) {
    MetricLabels l = labels_;
    l.emplace_back("position", std::to_string(spec_accepted_per_pos_.size()));
    spec_accepted_per_pos_.push_back(&registry_.counter("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                                        "Accepted tokens per draft position.", l));
  }
  for (int32_t j = 0; j < num_accepted; ++j) spec_accepted_per_pos_[static_cast<size_t>(j)]->inc();
}

void EngineMetrics::update(const SchedulerStats& stats) {
  num_running_.set(stats.num_running);
  num_waiting_.set(stats.num_waiting);
  kv_usage_.set(stats.kv_usage);
  const auto advance = [](Counter& c, int64_t total, int64_t& last) {
    if (total > last) c.inc(static_cast<double>(total - last));
    last = total;
  };
  advance(prefix_queries_, stats.prefix_cache_queries, last_prefix_queries_);
  advance(prefix_hits_, stats.prefix_cache_hits, last_prefix_hits_);
  advance(preemptions_, stats.num_preemptions, last_preemptions_);
  advance(prompt_tokens_, stats.num_prompt_tokens, last_prompt_tokens_);
  advance(generation_tokens_, stats.num_generation_tokens, last_generation_tokens_);
}

void EngineMetrics::observe_step(const UpdateResult& result) {
  for (const TokenUpdate& t : result.tokens) {
    if (t.inter_token_latency) inter_token_.observe(*t.inter_token_latency);
  }
  for (const auto& r : result.finished) observe_finished(*r);
}

void EngineMetrics::observe_finished(const Request& r) {
  registry_.counter("vllm:request_success_total", "Count of finished requests by finish reason.",
                    MetricLabels{labels_[0], {"finished_reason", finished_reason(r.status)}})
      .inc();
  if (r.first_token_time) ttft_.observe(*r.first_token_time - r.arrival_time);
  if (r.finished_time) e2e_.observe(*r.finished_time - r.arrival_time);
  if (r.first_token_time && r.last_token_time && r.num_output_tokens() > 1) {
    time_per_output_token_.observe((*r.last_token_time - *r.first_token_time) / (r.num_output_tokens() - 1));
  }
  prompt_len_.observe(r.num_prompt_tokens);
  generation_len_.observe(r.num_output_tokens());
}

}  // namespace rl
