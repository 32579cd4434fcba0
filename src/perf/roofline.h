// `ridgeline roofline`: one model on one chip — the cost model's figures, the decode sweep over batch sizes,
// the prefill (TTFT) estimate, where decode turns compute-bound and how many sequences fit; as text and JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "loader/model_config.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

namespace rl::perf {

struct RooflineOptions {
  int64_t batch = 1;       // decode batch reported on its own (and included in the sweep)
  int64_t context = 1024;  // KV tokens per sequence during decode
  int64_t prompt = 512;    // prompt tokens for the TTFT estimate
  Precision weights = Precision::kBf16;
  Precision kv = Precision::kBf16;
  double memory_utilization = 0.9;  // fraction of (memory - weights) given to the KV cache
};

// Which chip: a table name (or "measured"), optionally from a measured-figures file, with flag overrides.
struct GpuChoice {
  std::string name = "measured";
  bool name_given = false;               // --gpu given: without it, --bandwidth and --tflops together define a chip
  std::string measured_file;             // figures for "measured" (hardware.h format); empty: the built-in ones
  std::optional<double> bandwidth_tbps;  // --bandwidth
  std::optional<double> tflops;          // --tflops: the peak at the weight precision
  std::optional<double> memory_gb;       // --memory-gb
};
// Errors name the flag ("--bandwidth must be > 0, got 0") or list the known GPUs.
Result<GpuSpec> resolve_gpu(const GpuChoice& choice, Precision weights);

// Limits keep every product well inside double and int64 range.
constexpr int64_t kMaxBatch = int64_t{1} << 20;
constexpr int64_t kMaxTokens = int64_t{1} << 26;

// Errors name the flag: "--batch must be >= 1, got -3".
Status validate_roofline_options(const RooflineOptions& options, const ModelConfig& config);

struct RooflineAnalysis {
  std::string model;  // folder or config path, for the reader
  ModelConfig config;
  GpuSpec gpu;
  RooflineOptions options;
  ModelCost cost;
  Roof roof;
  StepCost decode_batch1;                             // batch 1 at options.context
  StepCost decode_at_batch;                           // options.batch at options.context
  StepCost prefill;                                   // one prompt of options.prompt tokens: its time is the TTFT
  std::optional<int64_t> compute_bound_batch;         // the whole step at options.context
  std::optional<int64_t> matmul_compute_bound_batch;  // the weight matmuls alone (context 0)
  std::optional<int64_t> max_sequences;               // of options.context tokens; nullopt when memory is unknown
  std::vector<StepCost> sweep;                        // batch 1, 2, 4, ... past compute_bound_batch, plus options.batch
};

Result<RooflineAnalysis> analyze_roofline(const ModelConfig& config, const std::string& model, const GpuSpec& gpu,
                                          const RooflineOptions& options);

// Batches of the sweep: powers of two up to twice the compute-bound batch, or, when the step never turns
// compute-bound, up to the largest of 256, twice the matmul compute-bound batch and the memory limit; plus the
// compute-bound batch and `batch`; sorted, unique, at most kMaxBatch.
std::vector<int64_t> sweep_batches(std::optional<int64_t> compute_bound, std::optional<int64_t> matmul_compute_bound,
                                   std::optional<int64_t> max_sequences, int64_t batch);

std::string format_roofline_text(const RooflineAnalysis& a);
// Keys: params, weight_bytes, kv_bytes_per_token, decode_tokens_per_s_batch1 and everything the text shows.
Json roofline_to_json(const RooflineAnalysis& a);

}  // namespace rl::perf
