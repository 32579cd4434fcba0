#include "perf/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace rl::perf {

Result<Precision> parse_precision(const std::string& name, const std::string& flag) {
  if (name == "bf16" || name == "bfloat16") return Precision::kBf16;
  if (name == "fp8" || name == "fp8_e4m3" || name == "float8_e4m3fn") return Precision::kFp8;
  return Status::error(flag + " must be bf16 or fp8, got \"" + name + "\"");
}

const char* precision_name(Precision p) { return p == Precision::kFp8 ? "fp8" : "bf16"; }

int64_t precision_bytes(Precision p) { return p == Precision::kFp8 ? 1 : 2; }

double ModelCost::prefill_flops(int64_t num_tokens) const {
  double n = static_cast<double>(num_tokens);
  return n * matmul_flops_per_token() + static_cast<double>(attention_flops_per_key) * n * (n + 1) / 2;
}

ModelCost make_model_cost(const ModelConfig& c, Precision weights, Precision kv) {
  ModelCost m;
  m.num_params = c.num_params();
  // q [h → q_size], k and v [h → kv_size], o [q_size → h], gate and up [h → I], down [I → h].
  int64_t layer_linear = c.hidden_size * c.q_size() + 2 * c.hidden_size * c.kv_size() + c.q_size() * c.hidden_size +
                         3 * c.hidden_size * c.intermediate_size;
  int64_t lm_head = c.vocab_size * c.hidden_size;  // tied or not, the logits matmul runs over it
  m.matmul_params = c.num_hidden_layers * layer_linear + lm_head;
  int64_t linear_weights = c.num_hidden_layers * layer_linear;
  m.weight_bytes = linear_weights * precision_bytes(weights) + (m.num_params - linear_weights) * 2;
  m.kv_bytes_per_token = c.kv_bytes_per_token(precision_bytes(kv));
  m.activation_bytes_per_token = c.num_hidden_layers * 4 * c.hidden_size * 2 + c.vocab_size * 4;
  m.attention_flops_per_key = c.num_hidden_layers * c.num_attention_heads * 4 * c.head_dim;
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
  s.bytes = static_cast<double>(cost.weight_bytes) +
            b * (static_cast<double>(context) * static_cast<double>(cost.kv_bytes_per_token) +
                 static_cast<double>(cost.activation_bytes_per_token));
  return finish(s, roof);
}

StepCost prefill_step(const ModelCost& cost, const Roof& roof, int64_t prompt) {
  RL_CHECK(prompt >= 1);
  StepCost s;
  s.batch = 1;
  s.context = prompt;
  s.num_tokens = prompt;
  s.flops = cost.prefill_flops(prompt);
  s.bytes =
      static_cast<double>(cost.weight_bytes) +
      static_cast<double>(prompt) * static_cast<double>(cost.kv_bytes_per_token + cost.activation_bytes_per_token);
  return finish(s, roof);
}

std::optional<int64_t> compute_bound_batch(const ModelCost& cost, const Roof& roof, int64_t context) {
  // B * (F / peak - K / BW) >= W / BW, with F and K the per-sequence FLOPs and bytes.
  double per_seq_bytes = static_cast<double>(context) * static_cast<double>(cost.kv_bytes_per_token) +
                         static_cast<double>(cost.activation_bytes_per_token);
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
  double per_seq = static_cast<double>(context) * static_cast<double>(cost.kv_bytes_per_token);
  return static_cast<int64_t>(std::floor(free_bytes / per_seq));
}

}  // namespace rl::perf
