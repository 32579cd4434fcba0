// `ridgeline roofline`: the cost model of a model on a chip — bytes and FLOPs per token, decode tokens/s across
// batch sizes, TTFT, where decode turns compute-bound, how many sequences fit; optional JSON and SVG chart.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "loader/model_config.h"
#include "model/model.h"
#include "perf/bench_report.h"
#include "perf/roofline.h"
#include "perf/roofline_svg.h"

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
};

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
