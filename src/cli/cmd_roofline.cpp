// `ridgeline roofline`: the cost model of a model on a chip — bytes and FLOPs per token, decode tokens/s across
// batch sizes, TTFT, where decode turns compute-bound, how many sequences fit; optional JSON and SVG chart.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "loader/model_config.h"
#include "model/model.h"
#include "perf/bench_report.h"
#include "perf/roofline.h"
#include "perf/roofline_svg.h"
#include "perf/format.h"
#include "perf/tp_cost.h"

namespace rl::cli {

namespace {

struct RooflineArgs {
  ModelOptions model;
  std::string config_file;
  perf::GpuChoice gpu;
  double bandwidth = 0, tflops = 0, memory_gb = 0;
  std::string dtype = "bf16", kv_dtype = "bf16";
  perf::RooflineOptions options;
  std::string json_file, svg_file, results_file;
  int32_t tp_size = 1;
  double allreduce_bus_gbps = 350, allreduce_latency_us = 8;
};

// Tensor parallelism (issue 19): one rank's share and the decode steps with their all-reduces, against TP=1.
Status print_tensor_parallel(const RooflineArgs& args, const ModelConfig& config, const perf::GpuSpec& gpu) {
  const int32_t n = args.tp_size;
  RL_ASSIGN_OR_RETURN(parallel::TpPlan plan, tp_plan_for(config, n, 0));
  if (!(args.allreduce_bus_gbps > 0) || !(args.allreduce_latency_us >= 0)) {
    return Status::error("--allreduce-bus-gbps must be > 0 and --allreduce-latency-us >= 0");
  }
  const perf::ModelCost whole = perf::make_model_cost(config, args.options.weights, args.options.kv);
  const perf::ModelCost rank = perf::tp_rank_cost(whole, config, n);
  const perf::Roof roof = perf::make_roof(gpu, args.options.weights);
  perf::AllReduceLink link;
  link.bus_bytes_per_s = args.allreduce_bus_gbps * 1e9;
  link.latency_s = args.allreduce_latency_us * 1e-6;
  std::printf("\ntensor parallel %d (all-reduce %.0f GB/s bus bandwidth, %.1f us latency: assumed until "
              "scripts/device/tp.sh measures them)\n", n, args.allreduce_bus_gbps, args.allreduce_latency_us);
  std::printf("per rank              %lld of %lld heads, %lld of %lld KV heads%s, %lld of %lld intermediate, "
              "%lld vocabulary rows\n",
              static_cast<long long>(plan.num_heads), static_cast<long long>(config.num_attention_heads),
              static_cast<long long>(plan.num_kv_heads), static_cast<long long>(config.num_kv_heads),
              plan.kv_replicas > 1 ? (" (each on " + std::to_string(plan.kv_replicas) + " ranks)").c_str() : "",
              static_cast<long long>(plan.intermediate), static_cast<long long>(config.intermediate_size),
              static_cast<long long>(plan.vocab_per_rank));
  std::printf("weight bytes per rank %s (TP=1: %s)\n",
              perf::format_bytes(static_cast<double>(rank.weight_bytes)).c_str(),
              perf::format_bytes(static_cast<double>(whole.weight_bytes)).c_str());
  std::printf("KV bytes/token/rank   %s (TP=1: %s)\n",
              perf::format_num(static_cast<double>(rank.kv_bytes_per_token)).c_str(),
              perf::format_num(static_cast<double>(whole.kv_bytes_per_token)).c_str());
  std::printf("%-8s %-9s %12s %14s %12s %12s %8s\n", "batch", "context", "rank us", "collective us", "step us",
              "tokens/s", "vs TP=1");
  std::vector<int64_t> batches = {1, 8, 64};
  if (std::find(batches.begin(), batches.end(), args.options.batch) == batches.end()) {
    batches.push_back(args.options.batch);
  }
  for (int64_t b : batches) {
    const perf::TpStepCost t = perf::tp_decode_step(rank, config, roof, n, link, b, args.options.context);
    const perf::StepCost one = perf::decode_step(whole, roof, b, args.options.context);
    std::printf("%-8lld %-9lld %12.1f %14.1f %12.1f %12.0f %7.2fx\n", static_cast<long long>(b),
                static_cast<long long>(args.options.context), t.rank.time_s * 1e6, t.collective_s * 1e6,
                t.time_s * 1e6, t.tokens_per_s, one.time_s / t.time_s);
  }
  std::printf("all-reduces per step  %lld of batch x %lld bf16 values, one all-gather of the logits\n",
              static_cast<long long>(2 * config.num_hidden_layers + 1), static_cast<long long>(config.hidden_size));
  return Status::ok();
}

// "models/configs/Llama-3.1-8B/config.json" and "models/configs/Llama-3.1-8B/" both name "Llama-3.1-8B".
std::string model_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.size() > 12 && p.compare(p.size() - 12, 12, "/config.json") == 0) p.resize(p.size() - 12);
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

Status run_roofline(RooflineArgs& args, bool have_bandwidth, bool have_tflops, bool have_memory) {
  std::string config_path =
      args.config_file.empty() ? path_join(resolve_model_dir(args.model), "config.json") : args.config_file;
  RL_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(config_path));
  RL_ASSIGN_OR_RETURN(args.options.weights, perf::parse_precision(args.dtype, "--dtype"));
  RL_ASSIGN_OR_RETURN(args.options.kv, perf::parse_precision(args.kv_dtype, "--kv-dtype"));
  if (have_bandwidth) args.gpu.bandwidth_tbps = args.bandwidth;
  if (have_tflops) args.gpu.tflops = args.tflops;
  if (have_memory) args.gpu.memory_gb = args.memory_gb;
  if (args.gpu.measured_file.empty()) {
    // A file named by $RIDGELINE_MEASURED_GPU must load; the cache file is used only when present.
    std::string cached = perf::default_measured_gpu_path();
    const char* env = std::getenv("RIDGELINE_MEASURED_GPU");
    bool explicit_env = env != nullptr && *env != '\0';
    if (!cached.empty() && (explicit_env || file_exists(cached))) args.gpu.measured_file = cached;
  }
  RL_ASSIGN_OR_RETURN(perf::GpuSpec gpu, perf::resolve_gpu(args.gpu, args.options.weights));
  RL_ASSIGN_OR_RETURN(perf::RooflineAnalysis analysis,
                      perf::analyze_roofline(config, model_name(config_path), gpu, args.options));
  std::optional<perf::BenchReport> measured;
  if (!args.results_file.empty()) {
    RL_ASSIGN_OR_RETURN(measured, perf::load_bench_report(args.results_file));
  }
  std::fputs(perf::format_roofline_text(analysis).c_str(), stdout);
  if (args.tp_size != 1) RL_RETURN_IF_ERROR(print_tensor_parallel(args, config, gpu));
  if (measured) {
    perf::BenchReport report = *measured;
    perf::fill_roofline_pct(&report);
    std::printf("\nmeasured (%s, %s)\n%s", args.results_file.c_str(), report.command.c_str(),
                perf::format_bench_table(report).c_str());
  }
  if (!args.json_file.empty()) {
    RL_RETURN_IF_ERROR(write_file(args.json_file, perf::roofline_to_json(analysis).dump(2) + "\n"));
  }
  if (!args.svg_file.empty()) {
    perf::RooflineChart chart = perf::make_roofline_chart(analysis, measured ? &*measured : nullptr);
    for (const std::string& name : chart.skipped) {
      std::fprintf(stderr, "ridgeline: note: result \"%s\" has no intensity or achieved rate: not plotted\n",
                   name.c_str());
    }
    RL_RETURN_IF_ERROR(write_file(args.svg_file, perf::render_roofline_svg(chart)));
  }
  return Status::ok();
}

}  // namespace

void add_roofline_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("roofline", "Roofline cost model: bytes, FLOPs, predicted tokens/s and TTFT");
  auto args = std::make_shared<RooflineArgs>();
  add_model_dir_option(cmd, &args->model);
  auto* config_opt = cmd->add_option("--config", args->config_file, "A config.json instead of a model folder");
  config_opt->excludes(cmd->get_option("--model"));
  cmd->add_option("--gpu", args->gpu.name,
                  "Chip from the built-in table (H100 SXM, H200, A100 80GB, L40S, RTX 4090, B200, MI300X, ...) or "
                  "\"measured\" (the project's H200 figures)")
      ->default_str("measured");
  cmd->add_option("--measured", args->gpu.measured_file,
                  "JSON of measured figures for --gpu measured (default: $RIDGELINE_MEASURED_GPU or "
                  "~/.cache/ridgeline/measured_gpu.json if present, else the built-in ones)");
  auto* bw = cmd->add_option("--bandwidth", args->bandwidth, "Memory bandwidth in TB/s (overrides the chip's)");
  auto* tf = cmd->add_option("--tflops", args->tflops, "Matmul peak in TFLOP/s at --dtype (overrides the chip's)");
  auto* mem = cmd->add_option("--memory-gb", args->memory_gb, "Device memory in GB (overrides the chip's)");
  cmd->add_option("--batch", args->options.batch, "Decode batch size to report (also added to the sweep)")
      ->default_val(1);
  cmd->add_option("--context", args->options.context, "KV tokens per sequence during decode")->default_val(1024);
  cmd->add_option("--prompt", args->options.prompt, "Prompt tokens for the TTFT estimate")->default_val(512);
  cmd->add_option("--dtype", args->dtype, "Weight precision: bf16 | fp8")->default_val("bf16");
  cmd->add_option("--kv-dtype", args->kv_dtype, "KV cache precision: bf16 | fp8")->default_val("bf16");
  cmd->add_option("--mem-util", args->options.memory_utilization,
                  "Fraction of (memory - weights) given to the KV cache")
      ->default_val(0.9);
  cmd->add_option("--tensor-parallel-size", args->tp_size,
                  "Also model the decode steps split over N GPUs (per-rank bytes, all-reduces)")
      ->default_val(1);
  cmd->add_option("--allreduce-bus-gbps", args->allreduce_bus_gbps,
                  "NCCL all-reduce bus bandwidth in GB/s for --tensor-parallel-size")
      ->default_val(350);
  cmd->add_option("--allreduce-latency-us", args->allreduce_latency_us,
                  "Latency of one small all-reduce in microseconds for --tensor-parallel-size")
      ->default_val(8);
  cmd->add_option("--json", args->json_file, "Write every figure as JSON to FILE");
  cmd->add_option("--svg", args->svg_file, "Write the roofline chart as SVG to FILE");
  cmd->add_option("--results", args->results_file, "A benchmark results JSON whose measured points to add");
  auto* gpu_opt = cmd->get_option("--gpu");
  cmd->callback([args, exit_code, bw, tf, mem, gpu_opt] {
    args->gpu.name_given = gpu_opt->count() > 0;
    Status st = run_roofline(*args, bw->count() > 0, tf->count() > 0, mem->count() > 0);
    if (!st.is_ok()) {
      std::fprintf(stderr, "ridgeline: error: %s\n", st.message().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace rl::cli
