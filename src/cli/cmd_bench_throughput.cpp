// `ridgeline bench throughput`: offline throughput of N requests submitted at once (vLLM's benchmark_throughput):
// random prompts of --input-len tokens whose first --prefix-len tokens are shared, --output-len tokens each with
// ignore_eos. A warm-up round first (not timed): one request per batch slot with staggered output lengths, so
// every batch size of the ramp-down runs once (each decode bucket's CUDA graph captured, first cuBLASLt calls
// and prefill shapes done). Prints requests/s, output and total tok/s, prefix-cache hit rate and preemptions
// of the timed run, the host's share of the step time, and the roofline's prediction for the same mix
// (every prompt's prefill plus the decode steps) when a chip is known.
#include <algorithm>
#include <cstdio>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "cli/engine_options.h"
#include "core/file.h"
#include "core/log.h"
#include "perf/bench_report.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

namespace rl::cli {

namespace {

struct ThroughputOptions {
  EngineOptions engine;
  int32_t num_prompts = 64;
  int32_t input_len = 128;
  int32_t output_len = 128;
  int32_t prefix_len = 0;
  uint64_t seed = 0;
  std::string gpu;  // roofline chip; default: the device's (perf::gpu_for_device) on cuda, none on cpu
  std::string json;
};

int run(const ThroughputOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "ridgeline: error: %s\n", m.c_str());
    return 1;
  };
  if (o.num_prompts <= 0 || o.input_len <= 0 || o.output_len <= 0 || o.prefix_len < 0 ||
      o.prefix_len > o.input_len) {
    return fail("need --num-prompts, --input-len, --output-len > 0 and 0 <= --prefix-len <= --input-len");
  }
  auto er = make_engine(o.engine);
  if (!er) return fail(er.message());
  Engine& engine = **er;
  const ModelConfig& mc = engine.model_config();
  if (o.input_len + o.output_len > engine.max_model_len()) {
    return fail("--input-len + --output-len exceeds max_model_len " + std::to_string(engine.max_model_len()));
  }
  PromptGenerator gen(mc.vocab_size, o.seed);
  const std::vector<TokenId> prefix = gen.next(o.prefix_len);
  std::vector<std::vector<TokenId>> prompts;
  for (int32_t i = 0; i < o.num_prompts; ++i) prompts.push_back(gen.next(o.input_len, prefix));
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = o.output_len;
  params.ignore_eos = true;

  // Warm-up: request i of B stops after i + 1 tokens, so batch sizes B, B-1, ..., 1 each run once.
  {
    const int32_t b = std::min(o.num_prompts, o.engine.max_num_seqs);
    PromptGenerator warm_gen(mc.vocab_size, o.seed + 7777);
    std::vector<std::shared_ptr<OutputChannel>> warm;
    for (int32_t i = 0; i < b; ++i) {
      SamplingParams wp = params;
      wp.max_tokens = std::min(o.output_len, i + 1);
      warm.push_back(engine.submit("warmup-" + std::to_string(i), warm_gen.next(o.input_len), wp));
    }
    for (auto& ch : warm) {
      while (auto m = ch->pop()) {
        if (m->finish == FinishReason::kError) return fail("warm-up request failed: " + m->error);
      }
    }
  }
  const SchedulerStats st0 = engine.stats();
  const Engine::StepTiming tm0 = engine.step_timing();

  const double t0 = now_seconds();
  auto results = engine.generate(prompts, params);
  const double elapsed = now_seconds() - t0;
  int64_t out_tokens = 0, finished = 0;
  for (const auto& r : results) {
    if (r[0].finish == FinishReason::kError) return fail(r[0].error);
    out_tokens += static_cast<int64_t>(r[0].token_ids.size());
    ++finished;
  }
  SchedulerStats st = engine.stats();
  st.prefix_cache_queries -= st0.prefix_cache_queries;
  st.prefix_cache_hits -= st0.prefix_cache_hits;
  st.num_preemptions -= st0.num_preemptions;
  const int64_t total_tokens = out_tokens + static_cast<int64_t>(o.num_prompts) * o.input_len;
  const double hit_rate = st.prefix_cache_queries > 0
                              ? static_cast<double>(st.prefix_cache_hits) / static_cast<double>(st.prefix_cache_queries)
                              : 0.0;

  perf::BenchReport rep = start_report("bench throughput", engine, o.engine);
  auto gpu_r = roofline_gpu(o.gpu, o.engine.device, engine.backend().name());
  if (!gpu_r) return fail(gpu_r.message());
  const std::optional<perf::GpuSpec> gpu = *gpu_r;
  perf::BenchResult out_r = bench_result("output throughput", "tok/s", static_cast<double>(out_tokens) / elapsed);
  out_r.batch = std::min(o.num_prompts, o.engine.max_num_seqs);
  out_r.context = o.input_len + o.output_len / 2;
  double decode_only_tok_s = 0.0;
  if (gpu) {
    rep.gpu = gpu->name;
    // The same mix: every prompt's prefill (the uncached part; compute-bound, weights read once per chunk)
    // plus ceil(N / batch) waves of output_len decode steps of `batch` sequences at the mean context.
    perf::ModelCost cost = perf::make_model_cost(mc, perf::Precision::kBf16, kv_roof_precision(engine));
    perf::Roof roof = perf::make_roof(*gpu, perf::Precision::kBf16);
    const perf::StepCost d = perf::decode_step(cost, roof, *out_r.batch, *out_r.context);
    const int64_t uncached = std::max<int64_t>(1, o.input_len - (hit_rate > 0 ? o.prefix_len : 0));
    const perf::StepCost p = perf::prefill_step(cost, roof, uncached);
    const double prefill_s = o.num_prompts * p.flops / roof.peak_flops_per_s;
    const int64_t waves = (o.num_prompts + *out_r.batch - 1) / *out_r.batch;
    const double decode_s = static_cast<double>(waves) * o.output_len * d.time_s;
    out_r.predicted = static_cast<double>(o.num_prompts) * o.output_len / (prefill_s + decode_s);
    decode_only_tok_s = d.tokens_per_s();
  }
  rep.results.push_back(out_r);
  rep.results.push_back(bench_result("total throughput", "tok/s", static_cast<double>(total_tokens) / elapsed));
  rep.results.push_back(bench_result("requests", "req/s", finished / elapsed));
  perf::fill_roofline_pct(&rep);

  std::printf("requests: %lld in %.2f s\n", static_cast<long long>(finished), elapsed);
  std::printf("Request throughput (req/s):      %.2f\n", finished / elapsed);
  std::printf("Output token throughput (tok/s): %.1f\n", out_tokens / elapsed);
  std::printf("Total token throughput (tok/s):  %.1f\n", total_tokens / elapsed);
  std::printf("Prefix cache hit rate:           %.1f%%\n", 100.0 * hit_rate);
  std::printf("Preemptions:                     %lld\n", static_cast<long long>(st.num_preemptions));
  std::printf("KV cache:                        %s, %lld blocks of %lld tokens\n",
              std::string(dtype_name(engine.kv_dtype())).c_str(), static_cast<long long>(engine.num_kv_blocks()),
              static_cast<long long>(o.engine.block_size));
  Engine::StepTiming tm = engine.step_timing();
  tm.num_steps -= tm0.num_steps;
  tm.step_seconds -= tm0.step_seconds;
  tm.host_seconds -= tm0.host_seconds;
  tm.scheduler_seconds -= tm0.scheduler_seconds;
  const double sched_pct = tm.step_seconds > 0 ? 100.0 * tm.scheduler_seconds / tm.step_seconds : 0.0;
  const double host_pct = tm.step_seconds > 0 ? 100.0 * tm.host_seconds / tm.step_seconds : 0.0;
  std::printf("Steps: %lld, mean step %.2f ms, host %.3f ms/step (%.1f%%; scheduler %.1f%%), max batch %lld\n",
              static_cast<long long>(tm.num_steps), tm.num_steps ? 1e3 * tm.step_seconds / tm.num_steps : 0.0,
              tm.num_steps ? 1e3 * tm.host_seconds / tm.num_steps : 0.0, host_pct, sched_pct,
              static_cast<long long>(tm.max_running));
  if (decode_only_tok_s > 0) {
    std::printf("Roofline of the mix (prefill + decode): %.0f out tok/s; decode phase alone: %.0f tok/s\n",
                *out_r.predicted, decode_only_tok_s);
  }
  std::printf("%s", perf::format_bench_table(rep).c_str());
  if (!o.json.empty()) {
    Json j = perf::bench_report_to_json(rep);
    j["requests_per_s"] = finished / elapsed;
    j["output_tokens_per_s"] = out_tokens / elapsed;
    j["total_tokens_per_s"] = total_tokens / elapsed;
    j["prefix_cache_hit_rate"] = hit_rate;
    j["num_preemptions"] = st.num_preemptions;
    j["num_requests_finished"] = finished;
    j["elapsed_s"] = elapsed;
    j["tensor_parallel_size"] = o.engine.tensor_parallel_size;
    j["scheduler_pct_of_step"] = sched_pct;
    j["host_pct_of_step"] = host_pct;
    if (decode_only_tok_s > 0) j["roofline_decode_only_tokens_per_s"] = decode_only_tok_s;
    j["num_steps"] = tm.num_steps;
    Status ws = write_file(o.json, j.dump(2) + "\n");
    if (!ws) return fail(ws.message());
  }
  return 0;
}

}  // namespace

void add_bench_throughput(CLI::App* bench, int* exit_code) {
  auto* cmd = bench->add_subcommand("throughput", "Offline throughput: N requests at once (ignore_eos)");
  auto o = std::make_shared<ThroughputOptions>();
  add_engine_options(cmd, &o->engine);
  cmd->add_option("--num-prompts", o->num_prompts, "Requests")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--prefix-len", o->prefix_len, "Leading prompt tokens shared by all requests")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--gpu", o->gpu,
                  "Chip for the roofline prediction (default with --device cuda: the device's own, measured on H200 / H100)");
  cmd->add_option("--json", o->json, "Write the results as JSON");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
