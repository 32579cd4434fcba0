#include "perf/roofline.h"

#include <algorithm>
#include <cmath>

#include "perf/format.h"

namespace rl::perf {

namespace {

Status check_range(int64_t v, int64_t lo, int64_t hi, const char* flag) {
  if (v < lo || v > hi) {
    return Status::error(std::string(flag) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + std::to_string(v));
  }
  return Status::ok();
}

Json step_to_json(const StepCost& s) {
  return Json{{"batch", s.batch},
              {"context", s.context},
              {"flops", s.flops},
              {"bytes", s.bytes},
              {"step_s", s.time_s},
              {"tokens_per_s_per_seq", 1.0 / s.time_s},
              {"tokens_per_s_total", s.tokens_per_s()},
              {"intensity", s.intensity()},
              {"achieved_tflops", s.achieved_tflops()},
              {"compute_bound", s.compute_bound}};
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

Result<GpuSpec> resolve_gpu(const GpuChoice& choice, Precision weights) {
  auto positive = [](const std::optional<double>& v, const char* flag) -> Status {
    if (v && !(*v > 0 && std::isfinite(*v))) {
      return Status::error(std::string(flag) + " must be > 0, got " + format_g(*v, 6));
    }
    return Status::ok();
  };
  RL_RETURN_IF_ERROR(positive(choice.bandwidth_tbps, "--bandwidth"));
  RL_RETURN_IF_ERROR(positive(choice.tflops, "--tflops"));
  RL_RETURN_IF_ERROR(positive(choice.memory_gb, "--memory-gb"));
  GpuSpec gpu;
  if (!choice.name_given && choice.bandwidth_tbps && choice.tflops) {
    gpu.name = "custom";
    gpu.source = "--bandwidth / --tflops";
  } else if (!choice.measured_file.empty() && find_gpu(choice.name).is_ok() &&
             find_gpu(choice.name)->name == measured_h200().name) {
    RL_ASSIGN_OR_RETURN(gpu, load_gpu_spec(choice.measured_file));
  } else {
    RL_ASSIGN_OR_RETURN(gpu, find_gpu(choice.name));
  }
  if (choice.bandwidth_tbps) gpu.bandwidth_tbps = *choice.bandwidth_tbps;
  if (choice.tflops) {
    if (weights == Precision::kFp8)
      gpu.fp8_tflops = *choice.tflops;
    else
      gpu.bf16_tflops = *choice.tflops;
    if (gpu.bf16_tflops <= 0) gpu.bf16_tflops = *choice.tflops;
  }
  if (choice.memory_gb) gpu.memory_gb = *choice.memory_gb;
  RL_RETURN_IF_ERROR(validate_gpu_spec(gpu));
  return gpu;
}

Status validate_roofline_options(const RooflineOptions& o, const ModelConfig& config) {
  RL_RETURN_IF_ERROR(check_range(o.batch, 1, kMaxBatch, "--batch"));
  RL_RETURN_IF_ERROR(check_range(o.context, 1, kMaxTokens, "--context"));
  RL_RETURN_IF_ERROR(check_range(o.prompt, 1, kMaxTokens, "--prompt"));
  int64_t max_ctx = config.max_context_len();
  if (o.context > max_ctx) {
    return Status::error("--context " + std::to_string(o.context) + " exceeds the model's maximum context " +
                         std::to_string(max_ctx));
  }
  if (o.prompt > max_ctx) {
    return Status::error("--prompt " + std::to_string(o.prompt) + " exceeds the model's maximum context " +
                         std::to_string(max_ctx));
  }
  if (!(o.memory_utilization > 0 && o.memory_utilization <= 1)) {
    return Status::error("--mem-util must be in (0, 1], got " + format_g(o.memory_utilization, 6));
  }
  return Status::ok();
}

std::vector<int64_t> sweep_batches(std::optional<int64_t> compute_bound, std::optional<int64_t> matmul_compute_bound,
                                   std::optional<int64_t> max_sequences, int64_t batch) {
  int64_t limit = 256;
  if (compute_bound) {
    limit = 2 * *compute_bound;
  } else {
    if (matmul_compute_bound) limit = std::max(limit, 2 * *matmul_compute_bound);
    if (max_sequences) limit = std::max(limit, *max_sequences);
  }
  limit = std::min(limit, kMaxBatch);
  std::vector<int64_t> out;
  int64_t b = 1;
  for (; b < limit; b *= 2) out.push_back(b);
  if (b <= kMaxBatch) out.push_back(b);  // the first power of two at or past the limit
  if (compute_bound && *compute_bound <= kMaxBatch) out.push_back(*compute_bound);
  out.push_back(batch);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<RooflineAnalysis> analyze_roofline(const ModelConfig& config, const std::string& model, const GpuSpec& gpu,
                                          const RooflineOptions& options) {
  RL_RETURN_IF_ERROR(validate_gpu_spec(gpu));
  RL_RETURN_IF_ERROR(validate_roofline_options(options, config));
  RooflineAnalysis a;
  a.model = model;
  a.config = config;
  a.gpu = gpu;
  a.options = options;
  a.cost = make_model_cost(config, options.weights, options.kv);
  a.roof = make_roof(gpu, options.weights);
  a.decode_batch1 = decode_step(a.cost, a.roof, 1, options.context);
  a.decode_at_batch = decode_step(a.cost, a.roof, options.batch, options.context);
  a.prefill = prefill_step(a.cost, a.roof, options.prompt);
  a.compute_bound_batch = compute_bound_batch(a.cost, a.roof, options.context);
  a.matmul_compute_bound_batch = compute_bound_batch(a.cost, a.roof, 0);
  if (gpu.memory_gb > 0) {
    a.max_sequences = max_sequences(a.cost, gpu.memory_gb * 1e9, options.memory_utilization, options.context);
  }
  for (int64_t b : sweep_batches(a.compute_bound_batch, a.matmul_compute_bound_batch, a.max_sequences, options.batch)) {
    a.sweep.push_back(decode_step(a.cost, a.roof, b, options.context));
  }
  return a;
}

std::string format_roofline_text(const RooflineAnalysis& a) {
  const ModelCost& m = a.cost;
  const RooflineOptions& o = a.options;
  std::string ctx = std::to_string(o.context);
  double attn_half = m.attention_flops(o.context) / 2;
  std::string out;
  auto line = [&](const std::string& label, const std::string& value) {
    out += label + std::string(label.size() < 34 ? 34 - label.size() : 1, ' ') + value + "\n";
  };
  line("model", a.model + " (" + a.config.architecture + ")");
  line("gpu", a.gpu.name + ": " + format_g(a.gpu.bandwidth_tbps) + " TB/s, " +
                  format_g(a.roof.peak_flops_per_s / 1e12) + " TFLOP/s " +
                  (o.weights == Precision::kFp8 && a.gpu.fp8_tflops > 0 ? "fp8" : "bf16") +
                  (a.gpu.memory_gb > 0 ? ", " + format_g(a.gpu.memory_gb) + " GB" : ""));
  line("gpu figures from", a.gpu.source);
  if (o.weights == Precision::kFp8 && a.gpu.fp8_tflops <= 0) {
    line("note", "no fp8 rate for this chip: fp8 weights are costed at the bf16 rate (dequantized)");
  }
  line("precision", std::string("weights ") + precision_name(o.weights) + ", KV " + precision_name(o.kv));
  line("parameters", format_count(m.num_params) + " (" + format_g(m.num_params / 1e9) + " B)");
  line("matmul parameters per token", format_count(m.matmul_params));
  line("weight bytes", format_count(m.weight_bytes) + " (" + format_bytes(m.weight_bytes) + ")");
  if (m.num_experts > 0) {
    const int64_t b1 = static_cast<int64_t>(m.step_weight_bytes(1)), b64 = static_cast<int64_t>(m.step_weight_bytes(64));
    line("weight bytes read per step", format_bytes(b1) + " at batch 1 (top-" + std::to_string(m.experts_per_tok) +
                                           " of " + std::to_string(m.num_experts) + " experts), " +
                                           format_bytes(b64) + " at batch 64 (uniform routing)");
  }
  line("KV bytes per token", format_count(m.kv_bytes_per_token) + " (" + format_bytes(m.kv_bytes_per_token) + ")");
  for (const ModelCost::KvGroupCost& g : m.kv_groups) {
    line("KV group " + (g.window > 0 ? "window " + std::to_string(g.window) : std::string("full")),
         std::to_string(g.num_layers) + " layers, " + format_count(g.bytes_per_token) + " bytes per token");
  }
  if (!m.kv_groups.empty()) {
    line("KV cache bytes/token (long ctx)",
         format_count(m.kv_cache_bytes_per_token) + " (" + format_g(static_cast<double>(m.kv_cache_bytes_per_token) /
                                                             static_cast<double>(m.kv_bytes_per_token)) +
             " of all layers: the window groups keep only their windows)");
  }
  for (const std::string& n : m.notes) line("note", n);
  line("activation bytes per token", format_count(m.activation_bytes_per_token));
  line("FLOPs/token: matmuls", format_g(m.matmul_flops_per_token() / 1e9) + " GFLOP");
  line("FLOPs/token: attention @ ctx " + ctx, format_g(m.attention_flops(o.context) / 1e9) + " GFLOP (QK^T " +
                                                  format_g(attn_half / 1e9) + " + PV " + format_g(attn_half / 1e9) +
                                                  "; " + format_count(m.attention_flops_per_key) + " per key)");
  line("FLOPs/token: decode @ ctx " + ctx, format_g(m.decode_flops_per_token(o.context) / 1e9) + " GFLOP");
  line("FLOPs/token: prefill of " + std::to_string(o.prompt),
       format_g(m.prefill_flops(o.prompt) / static_cast<double>(o.prompt) / 1e9) + " GFLOP (mean, causal)");
  line("ridge point", format_g(a.roof.ridge_intensity()) + " FLOP/byte");
  line("decode intensity (batch 1)", format_g(a.decode_batch1.intensity()) + " FLOP/byte");
  line("prefill intensity", format_g(a.prefill.intensity()) + " FLOP/byte");
  line("decode tok/s (batch 1)",
       format_num(a.decode_batch1.tokens_per_s()) + " (" + format_seconds(a.decode_batch1.time_s) + " per step)");
  if (o.batch != 1) {
    line("decode tok/s (batch " + std::to_string(o.batch) + ")",
         format_num(1 / a.decode_at_batch.time_s) + " per sequence, " + format_num(a.decode_at_batch.tokens_per_s()) +
             " total (" + format_seconds(a.decode_at_batch.time_s) + " per step)");
  }
  line("TTFT (prompt " + std::to_string(o.prompt) + ")",
       format_seconds(a.prefill.time_s) + (a.prefill.compute_bound ? " (compute-bound), " : " (memory-bound), ") +
           format_num(a.prefill.tokens_per_s()) + " prefill tok/s");
  std::string memory_note;
  if (a.compute_bound_batch && a.max_sequences && *a.compute_bound_batch > *a.max_sequences) {
    memory_note = ", more sequences than fit in memory";
  }
  line("decode compute-bound from batch",
       a.compute_bound_batch ? std::to_string(*a.compute_bound_batch) + " (ctx " + ctx + memory_note + ")"
                             : "never at ctx " + ctx + " (each sequence's KV read outlasts its FLOPs)");
  line("matmuls compute-bound from batch",
       a.matmul_compute_bound_batch ? std::to_string(*a.matmul_compute_bound_batch) + " (weights only, no KV)"
                                    : "never");
  line("sequences of ctx " + ctx + " that fit", a.max_sequences
                                                    ? format_count(*a.max_sequences) + " ((memory - weights) x " +
                                                          format_g(o.memory_utilization) + " / (ctx x KV bytes))"
                                                    : "unknown (no memory size)");
  out += "\ndecode at context " + ctx + "\n";
  out += "   batch     step  tok/s/seq  tok/s total  FLOP/byte  TFLOP/s  bound    fits\n";
  for (const StepCost& s : a.sweep) {
    std::string fits = a.max_sequences ? (s.batch <= *a.max_sequences ? "yes" : "no") : "?";
    out += pad(std::to_string(s.batch), 8) + pad(format_seconds(s.time_s), 10) + pad(format_num(1 / s.time_s), 11) +
           pad(format_num(s.tokens_per_s()), 13) + pad(format_g(s.intensity()), 11) +
           pad(format_g(s.achieved_tflops()), 9) + (s.compute_bound ? "  compute" : "  memory ") + pad(fits, 6) + "\n";
  }
  return out;
}

Json roofline_to_json(const RooflineAnalysis& a) {
  const ModelCost& m = a.cost;
  const RooflineOptions& o = a.options;
  Json sweep = Json::array();
  for (const StepCost& s : a.sweep) {
    Json j = step_to_json(s);
    if (a.max_sequences) j["fits"] = s.batch <= *a.max_sequences;
    sweep.push_back(j);
  }
  Json prefill = step_to_json(a.prefill);
  prefill.erase("tokens_per_s_per_seq");  // one sequence: tokens_per_s_total is the prefill rate
  double attn = m.attention_flops(o.context);
  Json j = {{"model", a.model},
            {"architecture", a.config.architecture},
            {"gpu", gpu_spec_to_json(a.gpu)},
            {"weights_dtype", precision_name(o.weights)},
            {"kv_dtype", precision_name(o.kv)},
            {"batch", o.batch},
            {"context", o.context},
            {"prompt", o.prompt},
            {"memory_utilization", o.memory_utilization},
            {"bandwidth_bytes_per_s", a.roof.bandwidth_bytes_per_s},
            {"peak_flops_per_s", a.roof.peak_flops_per_s},
            {"params", m.num_params},
            {"matmul_params", m.matmul_params},
            {"weight_bytes", m.weight_bytes},
            {"kv_bytes_per_token", m.kv_bytes_per_token},
            {"kv_cache_bytes_per_token", m.kv_cache_bytes_per_token},
            {"activation_bytes_per_token", m.activation_bytes_per_token},
            {"flops_per_token",
             {{"matmul", m.matmul_flops_per_token()},
              {"attention_per_key", m.attention_flops_per_key},
              {"decode_attention_qk", attn / 2},
              {"decode_attention_pv", attn / 2},
              {"decode_attention", attn},
              {"decode_total", m.decode_flops_per_token(o.context)},
              {"prefill_mean", m.prefill_flops(o.prompt) / static_cast<double>(o.prompt)}}},
            {"ridge_intensity", a.roof.ridge_intensity()},
            {"decode_intensity_batch1", a.decode_batch1.intensity()},
            {"decode_tokens_per_s_batch1", a.decode_batch1.tokens_per_s()},
            {"decode_step_s_batch1", a.decode_batch1.time_s},
            {"decode_at_batch", step_to_json(a.decode_at_batch)},
            {"prefill", prefill},
            {"ttft_s", a.prefill.time_s},
            {"prefill_tokens_per_s", a.prefill.tokens_per_s()},
            {"compute_bound_batch", a.compute_bound_batch ? Json(*a.compute_bound_batch) : Json(nullptr)},
            {"matmul_compute_bound_batch",
             a.matmul_compute_bound_batch ? Json(*a.matmul_compute_bound_batch) : Json(nullptr)},
            {"max_sequences", a.max_sequences ? Json(*a.max_sequences) : Json(nullptr)},
            {"sweep", sweep}};
  return j;
}

}  // namespace rl::perf
