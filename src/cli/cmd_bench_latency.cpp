// `ridgeline bench latency`: vLLM's benchmark_latency through the Engine. --batch requests of random
// --input-len prompts are submitted at once with ignore_eos and max_tokens = --output-len; from each request's
// timings (RequestOutput: arrival = submit, first token, finish) come TTFT (first token − arrival, queueing
// included) and TPOT
// ((finish − first token) / (output tokens − 1)). One warm-up round on other prompts first (kernels loaded,
// GEMM plans chosen, the batch's CUDA graph captured). Printed beside the roofline (src/perf): TTFT against the least
// mean TTFT of the batch's prompts (perf::batch_mean_ttft_s), TPOT and decode tok/s against a decode step at the
// mean context.
// --prompt-file takes the prompts from a text file instead (request i: input_len tokens of it from token
// i * input_len / 2 on, wrapping), for workloads whose text matters, such as copying for n-gram speculation.
// With --speculative, the acceptance rate, the mean accepted length (tokens per verification) and the mean k
// (drafts per decoding step, zeros included: what adaptive speculation chose) are printed.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "cli/engine_options.h"
#include "core/dtype.h"
#include "core/file.h"
#include "core/log.h"
#include "perf/bench_report.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

namespace rl::cli {

namespace {

struct LatencyOptions {
  EngineOptions engine;
  int32_t batch = 1;
  int32_t input_len = 128;
  int32_t output_len = 256;
  int32_t num_iters = 1;
  uint64_t seed = 0;
  std::string gpu;  // roofline chip; default: the device's (perf::gpu_for_device) on cuda, none on cpu
  std::string json;
  std::string prompt_file;
  // Sampling of every request (greedy by default); seeded per request, so rounds repeat.
  float temperature = 0.0f, top_p = 1.0f;
  int32_t top_k = 0;
};

// Request i's prompt from the file's tokens (see the header comment); empty `text` = random prompts.
std::vector<TokenId> file_prompt(const std::vector<TokenId>& text, int32_t len, int32_t i) {
  std::vector<TokenId> p(static_cast<size_t>(len));
  const size_t start = static_cast<size_t>(i) * static_cast<size_t>(len / 2);
  for (size_t j = 0; j < p.size(); ++j) p[j] = text[(start + j) % text.size()];
  return p;
}

struct RoundTimes {
  double ttft_s = 0, tpot_s = 0, elapsed_s = 0;  // TTFT and TPOT: means over the batch's requests
};

// Submits `batch` random prompts at once and waits for all of them.
Result<RoundTimes> run_round(Engine& engine, const LatencyOptions& o, int32_t output_len, uint64_t seed,
                             const std::string& tag, const std::vector<TokenId>& text) {
  PromptGenerator gen(engine.model_config().vocab_size, seed);
  SamplingParams params;
  params.temperature = o.temperature;
  params.top_k = o.top_k;  // the flags' defaults (0, 1) are SamplingParams' "off"
  params.top_p = o.top_p;
  params.max_tokens = output_len;
  params.ignore_eos = true;
  std::vector<std::shared_ptr<OutputChannel>> channels;
  const double t0 = now_seconds();
  for (int32_t i = 0; i < o.batch; ++i) {
    if (o.temperature > 0.0f) params.seed = seed + static_cast<uint64_t>(i);
    channels.push_back(engine.submit(tag + std::to_string(i),
                                     text.empty() ? gen.next(o.input_len) : file_prompt(text, o.input_len, i),
                                     params));
  }
  RoundTimes r;
  for (auto& ch : channels) {
    std::optional<RequestOutput> last;
    while (auto m = ch->pop()) {
      if (m->finish == FinishReason::kError) return Status::error("request failed: " + m->error);
      if (m->finish != FinishReason::kNone) last = std::move(m);
    }
    if (!last) return Status::error("a request ended without a finishing message");
    if (last->num_output_tokens < 2) return Status::error("TPOT needs at least 2 output tokens");
    r.ttft_s += last->first_token_time - last->arrival_time;
    r.tpot_s += (last->finish_time - last->first_token_time) / (last->num_output_tokens - 1);
  }
  r.elapsed_s = now_seconds() - t0;
  r.ttft_s /= o.batch;
  r.tpot_s /= o.batch;
  return r;
}

int run(const LatencyOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "ridgeline: error: %s\n", m.c_str());
    return 1;
  };
  if (o.batch <= 0 || o.input_len <= 0 || o.output_len < 2 || o.num_iters <= 0) {
    return fail("need --batch, --input-len, --num-iters > 0 and --output-len >= 2");
  }
  if (o.batch > o.engine.max_num_seqs) {
    return fail("--batch " + std::to_string(o.batch) + " exceeds --max-num-seqs " +
                std::to_string(o.engine.max_num_seqs));
  }
  auto er = make_engine(o.engine);
  if (!er) return fail(er.message());
  Engine& engine = **er;
  const ModelConfig& mc = engine.model_config();
  if (o.input_len + o.output_len > engine.max_model_len()) {
    return fail("--input-len + --output-len exceeds max_model_len " + std::to_string(engine.max_model_len()));
  }
  std::vector<TokenId> text;
  if (!o.prompt_file.empty()) {
    if (engine.tokenizer() == nullptr) return fail("--prompt-file needs a model folder with tokenizer.json");
    auto t = read_file(o.prompt_file);
    if (!t) return fail(t.message());
    text = engine.tokenizer()->encode(*t, false);
    if (text.empty()) return fail("--prompt-file " + o.prompt_file + " has no tokens");
  }
  // The warm-up round's blocks are not the measured rounds' (the free queue hands out unused blocks first), so it
  // does not fault the pool in for them: make every round's blocks resident first, as llama-bench's KV buffer is
  // (cleared when allocated).
  const double t_prefault = now_seconds();
  const size_t kv_bytes =
      engine.prefault_kv_cache(static_cast<int64_t>(o.num_iters + 1) * o.batch, o.input_len + o.output_len);
  const double prefault_s = now_seconds() - t_prefault;
  auto warm = run_round(engine, o, std::min<int32_t>(o.output_len, 8), o.seed + 1000, "warmup-", text);
  if (!warm) return fail(warm.message());
  RoundTimes sum;
  const Engine::StepTiming tm0 = engine.step_timing();
  const spec::SpecDecodeCounters sc0 = engine.spec_counters();
  for (int32_t it = 0; it < o.num_iters; ++it) {
    auto r = run_round(engine, o, o.output_len, o.seed + static_cast<uint64_t>(it), "it" + std::to_string(it) + "-",
                       text);
    if (!r) return fail(r.message());
    sum.ttft_s += r->ttft_s / o.num_iters;
    sum.tpot_s += r->tpot_s / o.num_iters;
    sum.elapsed_s += r->elapsed_s / o.num_iters;
  }

  Engine::StepTiming tm = engine.step_timing();
  const int64_t num_steps = tm.num_steps - tm0.num_steps;
  const double step_s = tm.step_seconds - tm0.step_seconds, host_s = tm.host_seconds - tm0.host_seconds;

  perf::BenchReport rep = start_report("bench latency", engine, o.engine);
  auto gpu_r = roofline_gpu(o.gpu, o.engine.device, engine.backend().name());
  if (!gpu_r) return fail(gpu_r.message());
  const std::optional<perf::GpuSpec> gpu = *gpu_r;
  const int64_t context = o.input_len + o.output_len / 2;
  auto result = [&](const char* name, const char* unit, double measured, int64_t ctx) {
    perf::BenchResult r = bench_result(name, unit, measured);
    r.batch = o.batch;
    r.context = ctx;
    return r;
  };
  perf::BenchResult ttft = result("TTFT", "ms", sum.ttft_s * 1e3, o.input_len);
  perf::BenchResult tpot = result("TPOT", "ms", sum.tpot_s * 1e3, context);
  perf::BenchResult decode = result("decode", "tok/s", o.batch / sum.tpot_s, context);
  if (gpu) {
    rep.gpu = gpu->name;
    const perf::ModelCost cost = perf::make_model_cost(mc, perf::Precision::kBf16, kv_roof_precision(engine));
    const perf::Roof roof = perf::make_roof(*gpu, perf::Precision::kBf16);
    // The measured TTFT is the mean over the batch's requests: its least value is the prompts served one after
    // another (perf::batch_mean_ttft_s). Until session 27 this took the whole batch's prefill, which a chunked
    // prefill beats for every request but the last (batch 16 × 2,000 tokens read 135 % of it).
    const perf::StepCost p = perf::prefill_step(cost, roof, o.input_len);
    ttft.predicted = perf::batch_mean_ttft_s(p, roof, o.batch) * 1e3;
    const perf::StepCost d = perf::decode_step(cost, roof, o.batch, context);
    tpot.predicted = d.time_s * 1e3;
    decode.predicted = d.tokens_per_s();
    decode.intensity = d.intensity();
    decode.achieved_tbps = d.bytes / sum.tpot_s / 1e12;
  }
  rep.results = {ttft, tpot, decode};
  perf::fill_roofline_pct(&rep);

  std::printf("batch %d, input %d, output %d tokens, %d iteration(s): %.2f s per iteration\n", o.batch,
              o.input_len, o.output_len, o.num_iters, sum.elapsed_s);
  std::printf("KV cache: %s\n", std::string(dtype_name(engine.kv_dtype())).c_str());
  std::printf("KV cache: %.1f MiB of the rounds' blocks made resident before the warm-up in %.0f ms\n",
              static_cast<double>(kv_bytes) / static_cast<double>(1 << 20), prefault_s * 1e3);
  // Host time: the engine thread's own work per step (schedule, stage, launch, applying tokens), which the step
  // pipeline overlaps with the device's previous step.
  std::printf("steps: %lld, host %.1f us/step = %.1f%% of the mean step (%.1f us)\n",
              static_cast<long long>(num_steps), num_steps ? 1e6 * host_s / num_steps : 0.0,
              step_s > 0 ? 100.0 * host_s / step_s : 0.0, num_steps ? 1e6 * step_s / num_steps : 0.0);
  // The kernels of one decode step (the decode graph's kernel nodes): the launch-bound batch-1 step's lever.
  const int64_t step_kernels = engine.decode_graph_kernels(o.batch);
  if (step_kernels > 0) {
    std::printf("decode graph: %lld kernels per step (batch %d)\n", static_cast<long long>(step_kernels), o.batch);
  }
  // Speculation over the measured rounds only.
  const spec::SpecDecodeCounters sc1 = engine.spec_counters();
  spec::SpecDecodeCounters sc;
  sc.num_drafts = sc1.num_drafts - sc0.num_drafts;
  sc.num_draft_tokens = sc1.num_draft_tokens - sc0.num_draft_tokens;
  sc.num_accepted_tokens = sc1.num_accepted_tokens - sc0.num_accepted_tokens;
  sc.num_decode_steps = sc1.num_decode_steps - sc0.num_decode_steps;
  if (engine.speculative()) {
    std::printf("speculative %s, k = %d (adaptive %s): %lld verifications, %lld draft tokens, acceptance rate %.3f, "
                "mean accepted length %.3f tokens per verification, mean k %.3f drafts per decoding step\n",
                o.engine.speculative.c_str(), o.engine.num_speculative_tokens, o.engine.speculative_adaptive.c_str(),
                static_cast<long long>(sc.num_drafts), static_cast<long long>(sc.num_draft_tokens),
                sc.acceptance_rate(), sc.mean_accepted_length(), sc.mean_k());
  }
  std::printf("%s", perf::format_bench_table(rep).c_str());
  if (!o.json.empty()) {
    Json j = perf::bench_report_to_json(rep);
    j["host_us_per_step"] = num_steps ? 1e6 * host_s / num_steps : 0.0;
    j["host_pct_of_step"] = step_s > 0 ? 100.0 * host_s / step_s : 0.0;
    j["batch"] = o.batch;
    j["input_len"] = o.input_len;
    j["output_len"] = o.output_len;
    j["ttft_ms"] = sum.ttft_s * 1e3;
    j["tpot_ms"] = sum.tpot_s * 1e3;
    j["decode_tokens_per_s"] = o.batch / sum.tpot_s;
    j["decode_graph_kernels"] = step_kernels;
    j["elapsed_s"] = sum.elapsed_s;
    j["tensor_parallel_size"] = o.engine.tensor_parallel_size;
    if (engine.speculative()) {
      j["speculative"] = o.engine.speculative;
      j["num_speculative_tokens"] = o.engine.num_speculative_tokens;
      j["spec_num_drafts"] = sc.num_drafts;
      j["spec_num_draft_tokens"] = sc.num_draft_tokens;
      j["spec_num_accepted_tokens"] = sc.num_accepted_tokens;
      j["spec_acceptance_rate"] = sc.acceptance_rate();
      j["spec_mean_accepted_length"] = sc.mean_accepted_length();
      j["spec_adaptive"] = o.engine.speculative_adaptive;
      j["spec_mean_k"] = sc.mean_k();
    }
    Status ws = write_file(o.json, j.dump(2) + "\n");
    if (!ws) return fail(ws.message());
  }
  return 0;
}

}  // namespace

void add_bench_latency(CLI::App* bench, int* exit_code) {
  auto* cmd = bench->add_subcommand("latency", "TTFT and TPOT of one batch of requests (ignore_eos)");
  auto o = std::make_shared<LatencyOptions>();
  add_engine_options(cmd, &o->engine);
  cmd->add_option("--batch", o->batch, "Requests submitted at once")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--num-iters", o->num_iters, "Measured rounds (after one warm-up round)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--gpu", o->gpu,
                  "Chip for the roofline prediction (default with --device cuda: the device's own, measured on H200 / H100)");
  cmd->add_option("--json", o->json, "Write the results as JSON");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature of every request (0 = greedy)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Top-k of every request (0 = off)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--top-p", o->top_p, "Top-p of every request (1 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--prompt-file", o->prompt_file,
                  "Prompts from this text file (request i: --input-len tokens from token i * input_len / 2)");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
