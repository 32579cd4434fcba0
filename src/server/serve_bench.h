// `ridgeline bench serve`: an open-loop load generator against a running OpenAI-compatible server (ours or any
// other), measured the way vLLM's `bench serve` does. Requests arrive as a Poisson process at request_rate
// (inf: all at once), at most max_concurrency in flight; each is a streamed /v1/completions call whose prompt is
// input_len random token ids and which generates exactly output_len tokens (ignore_eos). The client is
// asynchronous (Boost.Asio coroutines on one thread, one connection per stream, no thread per stream), so it
// holds thousands of streams. Output tokens are counted from the stream's `usage` (stream_options.include_usage);
// a stream without usage is a failed request. Per request, from the moment it is sent (connect included): TTFT
// (first text chunk), ITL (gaps between later chunks), TPOT ((e2e - ttft) / (output tokens - 1)) and E2E latency.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::server {

struct ServeBenchConfig {
  std::string url = "http://127.0.0.1:8000";
  std::string api_key;
  std::string model;  // "" = the first of GET /v1/models
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second
  int32_t max_concurrency = 0;                                    // 0 = unlimited
  int32_t num_prompts = 100;
  int32_t input_len = 128;
  int32_t output_len = 128;
  uint64_t seed = 0;
};

// mean, median (p50), p90 and p99 of a sample, percentiles interpolated linearly between order statistics (as
// numpy.percentile does). All zero for an empty sample.
struct Summary {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};
Summary summarize(std::vector<double> values);
double percentile(const std::vector<double>& sorted, double p);

struct ServeBenchResult {
  ServeBenchConfig config;
  int32_t completed = 0;
  int32_t failed = 0;
  std::string first_error;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // completed requests / s
  double output_throughput = 0;       // generated tokens / s
  double total_token_throughput = 0;  // (input + generated) tokens / s
  Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
  // The share of the prompts' tokens that the server's prefix cache held during the run (from its /metrics
  // counters vllm:prefix_cache_{queries,hits}_total before and after); < 0 when the server has no such counters.
  double prefix_cache_hit_rate = -1;
};

Result<ServeBenchResult> run_serve_bench(const ServeBenchConfig& config);
// The sum over label sets of a metric's samples in Prometheus text exposition; -1 when it has none.
double prometheus_sum(std::string_view text, std::string_view name);
// vLLM's report layout and names ("Mean TTFT (ms)", "Request throughput (req/s)", ...).
std::string format_report(const ServeBenchResult& r);
// The same numbers under vLLM's JSON keys (mean_ttft_ms, p99_itl_ms, request_throughput, ...).
OrderedJson to_json(const ServeBenchResult& r);

}  // namespace rl::server
