#include "cli/bench_common.h"

#include <algorithm>

namespace rl::cli {

PromptGenerator::PromptGenerator(int64_t vocab_size, uint64_t seed)
    : rng_(seed),
      token_(static_cast<int32_t>(std::min<int64_t>(10, vocab_size - 1)), static_cast<int32_t>(vocab_size - 1)) {}

std::vector<TokenId> PromptGenerator::next(int32_t length, const std::vector<TokenId>& prefix) {
  std::vector<TokenId> p = prefix;
  while (static_cast<int32_t>(p.size()) < length) p.push_back(token_(rng_));
  return p;
}

perf::BenchReport start_report(const std::string& command, Engine& engine, const EngineOptions& o) {
  perf::BenchReport rep;
  rep.command = command;
  rep.date = perf::utc_timestamp();
  rep.commit = perf::git_describe(RIDGELINE_SOURCE_DIR_FOR_BENCH);
  rep.device = engine.backend().name();
  rep.model = engine.model_config().architecture + " (" + resolve_model_dir(o.model) + "), KV cache " +
              std::string(dtype_name(engine.kv_dtype()));
  return rep;
}

Result<std::optional<perf::GpuSpec>> roofline_gpu(const std::string& gpu_flag, const std::string& device,
                                                  const std::string& device_name) {
  if (!gpu_flag.empty()) {
    RL_ASSIGN_OR_RETURN(perf::GpuSpec g, perf::find_gpu(gpu_flag));
    return std::optional<perf::GpuSpec>(g);
  }
  if (device == "cuda") return perf::gpu_for_device(device_name);
  return std::optional<perf::GpuSpec>();
}

perf::BenchResult bench_result(const char* name, const char* unit, double measured) {
  perf::BenchResult r;
  r.name = name;
  r.unit = unit;
  r.measured = measured;
  return r;
}

perf::Precision kv_roof_precision(const Engine& engine) {
  return engine.kv_dtype() == DType::kFP8E4M3 ? perf::Precision::kFp8 : perf::Precision::kBf16;
}

}  // namespace rl::cli
