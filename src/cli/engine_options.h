// Flags shared by every command that runs a model (generate, chat, serve, bench): device, dtype, dummy
// weights, memory and batching limits, and the sampling flags.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "runtime/engine.h"

namespace rl::cli {

struct EngineOptions {
  ModelOptions model;
  std::string device = "cpu";
  std::string dtype = "bf16";
  bool dummy_weights = false;
  std::string quantization = "none";
  std::string kv_cache_dtype = "auto";  // runtime/kv_dtype.h
  int threads = 0;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;
  double kv_cache_gb = 0;
  double gpu_memory_utilization = 0.9;
  bool no_prefix_caching = false;
  bool no_hybrid_kv = false;  // one block table for every layer (loader/kv_groups.h)
  bool enforce_eager = false;
  bool deterministic = false;  // issue 13: batch-invariant kernels (see docs/benchmarks.md for the cost)
  std::string profile;         // Chrome-trace JSON path (empty: off)
  bool profile_kernels = false;  // --profile-kernels: every device kernel's span in the trace (CUDA)
  std::string wake_thread = "auto";  // --wake-thread: EngineConfig::wake_thread
  // Speculative decoding (issue 18).
  std::string speculative;     // "", ngram or draft
  int32_t num_speculative_tokens = 4;
  std::string draft_model;
  int32_t ngram_min = 1, ngram_max = 4;
  std::string speculative_adaptive = "off";  // on: k per step and request from the cost model; off: always k
  int32_t speculative_max_running = 16;
  int32_t tensor_parallel_size = 1;  // issue 19: ranks the model is split over (docs/distributed.md)
};

void add_engine_options(CLI::App* cmd, EngineOptions* o);
// --kv-cache-dtype auto|f32|bf16 (also on commands that build their cache without an engine: perplexity).
void add_kv_cache_dtype_option(CLI::App* cmd, std::string* kv_cache_dtype);
// Builds the engine (loading the model); prints nothing on success.
Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& o);

struct SamplingOptions {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  int32_t max_tokens = 128;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
};

void add_sampling_options(CLI::App* cmd, SamplingOptions* s);
// Flags first, then generation_config.json's defaults (as vLLM does), then the neutral defaults.
SamplingParams make_sampling_params(const SamplingOptions& s, const GenerationConfig& g);

}  // namespace rl::cli
