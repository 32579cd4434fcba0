// The roofline cost model of a decoder (dense or MoE, with full or sliding-window KV layers): what a token costs
// in bytes and FLOPs (from config.json alone, through the architecture's parameter counts and KV spec),
// and how long a decode step or a prefill takes on a chip that is limited either by memory bandwidth or by
// its matmul peak: time = max(bytes / bandwidth, flops / peak). Formulas and assumptions: docs/roofline.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "loader/model_config.h"
#include "perf/hardware.h"

namespace rl::perf {

enum class Precision { kBf16, kFp8 };
Result<Precision> parse_precision(const std::string& name, const std::string& flag);  // "bf16" | "fp8"
const char* precision_name(Precision p);
int64_t precision_bytes(Precision p);

// Per-token costs of one model. All FLOP counts take a multiply-add as 2 FLOPs.
struct ModelCost {
  int64_t num_params = 0;     // as transformers counts them (tied embeddings once)
  // Weights multiplied per token: attention, dense MLPs, routers, the top_k experts a token visits, lm_head.
  int64_t matmul_params = 0;
  // Of those, lm_head's (vocab × hidden) and the last layer's after its KV write (ParamCounts::last_rows_matmul). A
  // prefill multiplies them for the rows whose logits it returns (one: the prompt's last token), not for every
  // prompt token; and where last_attention_rows, the last layer's attention runs for that row alone.
  int64_t logits_params = 0;
  int64_t last_rows_params = 0;
  bool last_attention_rows = false;
  // Every parameter once: the decoder layers' linear weights at the weight precision; embeddings, lm_head,
  // norms and biases stay bf16 (as fp8 checkpoints keep them).
  int64_t weight_bytes = 0;
  int64_t kv_bytes_per_token = 0;  // K and V of every layer at the KV precision (window layers included)
  // The engine's KV cache (hybrid KV groups, loader/kv_groups.h): bytes per token position of a block, i.e.
  // what a long sequence costs per token once its window groups hold only their windows (GPT-OSS: half of
  // kv_bytes_per_token). Equals kv_bytes_per_token for models of one kind of layer.
  int64_t kv_cache_bytes_per_token = 0;
  struct KvGroupCost {
    int64_t window = 0;      // 0: keeps every position
    int64_t num_layers = 0;
    int64_t bytes_per_token = 0;  // its layers' K and V
  };
  std::vector<KvGroupCost> kv_groups;  // one per KV group; empty for models of one kind of layer
  // MoE: the routed experts' bytes (part of weight_bytes) and their routing. A decode step of B tokens reads
  // every non-expert weight and, per MoE layer, the experts at least one token chose: with uniform routing a
  // fraction 1 - (1 - k/E)^B of them (k/E at batch 1: the active bytes).
  int64_t expert_bytes = 0;
  int64_t num_experts = 0;
  int64_t experts_per_tok = 0;
  // Per layer KV bytes per token and window (0 = full attention), and the attention FLOPs per key of one layer.
  std::vector<int64_t> layer_kv_bytes, layer_windows;
  std::vector<std::string> notes;  // the config's facts worth a line (ModelConfig::notes): dequantised formats, MTP
  int64_t layer_attention_flops_per_key = 0;
  // Activations streamed per token: the residual stream read and written around attention and MLP in every
  // layer (4 * hidden_size bf16 values) plus the f32 logits row (logits_row_bytes).
  int64_t activation_bytes_per_token = 0;
  int64_t logits_row_bytes = 0;
  // One query against one key in every layer: QK^T (2 * head_dim per head) + PV (2 * head_dim per head).
  int64_t attention_flops_per_key = 0;

  double matmul_flops_per_token() const { return 2.0 * static_cast<double>(matmul_params); }
  // Keys each layer reads for a query at `context` (window layers at most their window), summed over layers.
  double attended_keys(int64_t context) const;
  // One query token attending to `context` keys (itself included), windows applied.
  double attention_flops(int64_t context) const {
    return static_cast<double>(layer_attention_flops_per_key) * attended_keys(context);
  }
  // KV bytes one sequence of `context` tokens reads (and keeps): window layers hold at most their window.
  double kv_bytes(int64_t context) const;
  // Weight bytes a decode step of `batch` tokens reads (MoE: only the experts some token chose).
  double step_weight_bytes(int64_t batch) const;
  double decode_flops_per_token(int64_t context) const { return matmul_flops_per_token() + attention_flops(context); }
  // A causal prefill of `num_tokens` tokens: token i (1-based) attends to i keys, so attention sums to
  // attention_flops_per_key * n (n + 1) / 2. The layers' matmuls run for every token, lm_head and the last layer's
  // after its KV write (and its attention, last_attention_rows) for the last one only.
  double prefill_flops(int64_t num_tokens) const;
};

ModelCost make_model_cost(const ModelConfig& config, Precision weights, Precision kv);


// The two ceilings of one chip at one precision.
struct Roof {
  double bandwidth_bytes_per_s = 0;
  double peak_flops_per_s = 0;
  // Arithmetic intensity (FLOP/byte) at which the bandwidth slope meets the compute ceiling.
  double ridge_intensity() const { return peak_flops_per_s / bandwidth_bytes_per_s; }
};

// fp8 weights use the fp8 tensor rate; a chip without one (fp8_tflops == 0) runs them dequantized to bf16.
Roof make_roof(const GpuSpec& gpu, Precision weights);

// One forward step: `batch` sequences, `context` tokens each (decode), or one sequence of `context` prompt
// tokens (prefill, batch == 1).
struct StepCost {
  int64_t batch = 0;
  int64_t context = 0;
  int64_t num_tokens = 0;  // tokens the step computes: batch (decode) or the prompt length (prefill)
  double flops = 0;
  double bytes = 0;
  double time_s = 0;  // max(bytes / bandwidth, flops / peak)
  bool compute_bound = false;

  double intensity() const { return flops / bytes; }
  double achieved_tflops() const { return flops / time_s / 1e12; }
  double tokens_per_s() const { return static_cast<double>(num_tokens) / time_s; }
};

// Decode step (context 0: the matmuls alone, no KV): flops = B (matmul + attention(C)); bytes = weights + B (C
// kv_bytes_per_token + activations).
StepCost decode_step(const ModelCost& cost, const Roof& roof, int64_t batch, int64_t context);
// Prefill of one prompt (its time is the predicted TTFT): flops = prefill_flops(P);
// bytes = weights + P (kv_bytes_per_token + activations without the logits row) + one logits row (the KV is written
// once).
StepCost prefill_step(const ModelCost& cost, const Roof& roof, int64_t prompt);
// The least mean TTFT of `batch` prompts of equal length submitted at once, each prefill_step `prompt`: the GPU's
// compute is one queue, so serving the prompts one after another is the order with the least mean time to a first
// token: prompt i's comes after i + 1 prompts' FLOPs, a mean of (batch + 1) / 2 prompts' (prefilling all of them
// together gives every prompt the whole batch's time). The weights stream at least once:
// max((batch + 1) / 2 · prompt.flops / peak, prompt.bytes / bandwidth).
double batch_mean_ttft_s(const StepCost& prompt, const Roof& roof, int64_t batch);

// Smallest batch whose decode step at `context` is compute-bound; nullopt when no batch ever is (the KV read
// per sequence then costs more time than that sequence's FLOPs, as with long contexts). With context 0 it is
// the batch at which the weight matmuls alone turn compute-bound (about ridge * weight_bytes / matmul FLOPs).
std::optional<int64_t> compute_bound_batch(const ModelCost& cost, const Roof& roof, int64_t context);

// Sequences of `context` tokens whose KV fits: floor((memory - weights) * utilization / (context * kv bytes)).
// 0 when the weights alone do not fit.
int64_t max_sequences(const ModelCost& cost, double memory_bytes, double utilization, int64_t context);

}  // namespace rl::perf
