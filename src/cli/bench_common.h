// What the model benchmarks (bench throughput, bench latency) share: random prompts, the report header and the
// chip the roofline predicts for.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/engine_options.h"
#include "perf/bench_report.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

namespace rl::cli {

// Random token ids in [10, vocab) (no special token of a small vocabulary is hit by chance), seeded.
class PromptGenerator {
 public:
  PromptGenerator(int64_t vocab_size, uint64_t seed);
  // `prefix` followed by random tokens up to `length`.
  std::vector<TokenId> next(int32_t length, const std::vector<TokenId>& prefix = {});

 private:
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int32_t> token_;
};

// command, date, commit, device and model of a report about `engine`.
perf::BenchReport start_report(const std::string& command, Engine& engine, const EngineOptions& o);

// --gpu NAME if given; else on CUDA the chip the device's name says (perf::gpu_for_device: the measured H200 or
// H100, a datasheet entry, or none); else none (no CPU roofline).
Result<std::optional<perf::GpuSpec>> roofline_gpu(const std::string& gpu_flag, const std::string& device,
                                                  const std::string& device_name);

perf::BenchResult bench_result(const char* name, const char* unit, double measured);

// The roofline's KV precision for `engine`'s cache: fp8 for an fp8 cache, else bf16 (the GPU roofline's unit).
perf::Precision kv_roof_precision(const Engine& engine);

}  // namespace rl::cli
