#include "perf/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "loader/kv_groups.h"

namespace rl::perf {

Result<Precision> parse_precision(const std::string& name, const std::string& flag) {
  if (name == "bf16" || name == "bfloat16") return Precision::kBf16;
  if (name == "fp8" || name == "fp8_e4m3" || name == "float8_e4m3fn") return Precision::kFp8;
  return Status::error(flag + " must be bf16 or fp8, got \"" + name + "\"");
}

const char* precision_name(Precision p) { return p == Precision::kFp8 ? "fp8" : "bf16"; }

int64_t precision_bytes(Precision p) { return p == Precision::kFp8 ? 1 : 2; }

double ModelCost::attended_keys(int64_t context) const {
  double keys = 0;
  for (int64_t w : layer_windows) keys += static_cast<double>(w > 0 && w < context ? w : context);
  return keys;
}

double ModelCost::kv_bytes(int64_t context) const {
  double bytes = 0;
  for (size_t i = 0; i < layer_kv_bytes.size(); ++i) {
    const int64_t w = layer_windows[i];
    bytes += static_cast<double>(layer_kv_bytes[i]) * static_cast<double>(w > 0 && w < context ? w : context);
  }
  return bytes;
}

double ModelCost::step_weight_bytes(int64_t batch) const {
  if (num_experts <= 0) return static_cast<double>(weight_bytes);
  const double miss = 1.0 - static_cast<double>(experts_per_tok) / static_cast<double>(num_experts);
  const double touched = 1.0 - std::pow(miss, static_cast<double>(batch));
  return static_cast<double>(weight_bytes - expert_bytes) + static_cast<double>(expert_bytes) * touched;
}

double ModelCost::prefill_flops(int64_t num_tokens) const {
  // Token i (1-based) attends to min(i, W) keys in a window layer, i in a full one; in the last layer only the last
  // token where last_attention_rows.
  double n = static_cast<double>(num_tokens), keys = 0;
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    const int64_t w = layer_windows[l];
    const bool windowed = w > 0 && w < num_tokens;
    const double wd = static_cast<double>(w);
    if (last_attention_rows && l + 1 == layer_windows.size()) {
      keys += windowed ? wd : n;
    } else if (windowed) {
      keys += wd * (wd + 1) / 2 + (n - wd) * wd;
    } else {
      keys += n * (n + 1) / 2;
    }
  }
  const double last_only = 2.0 * static_cast<double>(logits_params + last_rows_params);
  return n * (matmul_flops_per_token() - last_only) + last_only +
         static_cast<double>(layer_attention_flops_per_key) * keys;
}

ModelCost make_model_cost(const ModelConfig& c, Precision weights, Precision kv) {
  ModelCost m;
  const ParamCounts& p = c.params;
  m.num_params = p.total;
  m.matmul_params = p.active_matmul;
  m.logits_params = c.vocab_size * c.hidden_size;
  m.last_rows_params = p.last_rows_matmul;
  m.last_attention_rows = p.last_attention_rows && p.last_rows_matmul > 0;
  // Decoder-layer matmul weights at the weight precision; embeddings, lm_head, norms and biases stay bf16.
  m.weight_bytes = p.layer_linear * precision_bytes(weights) + (p.total - p.layer_linear) * 2;
  m.expert_bytes = p.expert_params * precision_bytes(weights);
  m.num_experts = p.num_experts;
  m.experts_per_tok = p.experts_per_tok;
  m.kv_bytes_per_token = c.kv_bytes_per_token(precision_bytes(kv));
  const KvGroupPlan plan = plan_kv_groups(c.kv_spec, true, kMaxKvGroups);
  m.kv_cache_bytes_per_token = plan.elems_per_token() * precision_bytes(kv);
  if (plan.num_groups() > 1) {
    for (int32_t g = 0; g < plan.num_groups(); ++g) {
      ModelCost::KvGroupCost gc;
      gc.window = plan.windows[static_cast<size_t>(g)];
      for (size_t i = 0; i < c.kv_spec.size(); ++i) {
        if (plan.layer_group[i] != g) continue;
        ++gc.num_layers;
        gc.bytes_per_token += c.kv_spec[i].elems_per_token() * precision_bytes(kv);
      }
      m.kv_groups.push_back(gc);
    }
  }
  m.notes = c.notes;
  for (const KvLayerSpec& l : c.kv_spec) {
    m.layer_kv_bytes.push_back(l.elems_per_token() * precision_bytes(kv));
    m.layer_windows.push_back(l.kind == KvKind::kSliding ? l.window : 0);
  }
  m.logits_row_bytes = c.vocab_size * 4;
  m.activation_bytes_per_token = c.num_hidden_layers * 4 * c.hidden_size * 2 + m.logits_row_bytes;
  m.attention_flops_per_key = c.attention_flops_per_key;
  m.layer_attention_flops_per_key = c.num_hidden_layers > 0 ? c.attention_flops_per_key / c.num_hidden_layers : 0;
  return m;
}

Roof make_roof(const GpuSpec& gpu, Precision weights) {
  double tflops = gpu.bf16_tflops;
  if (weights == Precision::kFp8 && gpu.fp8_tflops > 0) tflops = gpu.fp8_tflops;
  return {gpu.bandwidth_tbps * 1e12, tflops * 1e12};
}

namespace {

StepCost finish(StepCost s, const Roof& roof) {
  double t_mem = s.bytes / roof.bandwidth_bytes_per_s;
  double t_compute = s.flops / roof.peak_flops_per_s;
  s.compute_bound = t_compute >= t_mem;
  s.time_s = std::max(t_mem, t_compute);
  return s;
}

}  // namespace

StepCost decode_step(const ModelCost& cost, const Roof& roof, int64_t batch, int64_t context) {
  RL_CHECK(batch >= 1 && context >= 0);
  StepCost s;
  s.batch = batch;
  s.context = context;
  s.num_tokens = batch;
  double b = static_cast<double>(batch);
  s.flops = b * cost.decode_flops_per_token(context);
  s.bytes = cost.step_weight_bytes(batch) +
            b * (cost.kv_bytes(context) + static_cast<double>(cost.activation_bytes_per_token));
  return finish(s, roof);
}

StepCost prefill_step(const ModelCost& cost, const Roof& roof, int64_t prompt) {
  RL_CHECK(prompt >= 1);
  StepCost s;
  s.batch = 1;
  s.context = prompt;
  s.num_tokens = prompt;
  s.flops = cost.prefill_flops(prompt);
  s.bytes = cost.step_weight_bytes(prompt) + cost.kv_bytes(prompt) +
            static_cast<double>(prompt) * static_cast<double>(cost.activation_bytes_per_token - cost.logits_row_bytes) +
            static_cast<double>(cost.logits_row_bytes);
  return finish(s, roof);
}

double batch_mean_ttft_s(const StepCost& prompt, const Roof& roof, int64_t batch) {
  RL_CHECK(batch >= 1);
  return std::max(0.5 * static_cast<double>(batch + 1) * prompt.flops / roof.peak_flops_per_s,
                  prompt.bytes / roof.bandwidth_bytes_per_s);
}

std::optional<int64_t> compute_bound_batch(const ModelCost& cost, const Roof& roof, int64_t context) {
  // B * (F / peak - K / BW) >= W / BW, with F and K the per-sequence FLOPs and bytes.
  double per_seq_bytes = cost.kv_bytes(context) + static_cast<double>(cost.activation_bytes_per_token);
  double margin =
      cost.decode_flops_per_token(context) / roof.peak_flops_per_s - per_seq_bytes / roof.bandwidth_bytes_per_s;
  if (!(margin > 0)) return std::nullopt;
  double estimate = std::ceil(static_cast<double>(cost.weight_bytes) / roof.bandwidth_bytes_per_s / margin);
  if (estimate > 1e15) return std::nullopt;
  int64_t b = std::max<int64_t>(1, static_cast<int64_t>(estimate));
  // Settle rounding against the exact step evaluation.
  while (b > 1 && decode_step(cost, roof, b - 1, context).compute_bound) --b;
  while (!decode_step(cost, roof, b, context).compute_bound) ++b;
  return b;
}

int64_t max_sequences(const ModelCost& cost, double memory_bytes, double utilization, int64_t context) {
  double free_bytes = (memory_bytes - static_cast<double>(cost.weight_bytes)) * utilization;
  if (!(free_bytes > 0)) return 0;
  double per_seq = cost.kv_bytes(context);
  return static_cast<int64_t>(std::floor(free_bytes / per_seq));
}

}  // namespace rl::perf
