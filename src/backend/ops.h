// Op parameter structs and the metadata attention needs. Plain data only: backends interpret them.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rl {

// The fused projection output qkv: [T, (num_heads + 2 * num_kv_heads) * head_dim], per token q heads, then k
// heads, then v heads. Ops that read q, k or v take this layout instead of separate tensors, so one GEMM
// produces all three and no copy splits them.
struct QkvLayout {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t row() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
  int64_t k_offset() const { return num_heads * head_dim; }
  int64_t v_offset() const { return (num_heads + num_kv_heads) * head_dim; }
};

struct RopeParams {
  QkvLayout layout;
  // inv_freq[head_dim / 2], f32, in the backend's memory: precomputed once (with llama3 scaling applied) by the
  // model, so kernels never see scaling types.
  const float* inv_freq = nullptr;
};

struct NormParams {
  float eps = 1e-6f;
};

// The paged KV cache of one layer: K and V as [num_blocks, block_size, num_kv_heads, head_dim].
struct KvLayer {
  Tensor k;
  Tensor v;
  int64_t block_size() const { return k.shape[1]; }
  int64_t num_kv_heads() const { return k.shape[2]; }
  int64_t head_dim() const { return k.shape[3]; }
};

// Per-step attention metadata (vLLM v1 style, flattened: prefill chunks and decode tokens mix in one batch).
// Device tensors are in the backend's memory; the host_* fields mirror what kernels need for dispatch.
struct AttentionMetadata {
  Tensor cu_seqlens_q;  // i32 [num_seqs + 1]: query tokens of sequence s are rows [cu[s], cu[s+1])
  Tensor seq_lens_k;    // i32 [num_seqs]: context length of s including this step's tokens
  Tensor block_tables;  // i32 [num_seqs, max_blocks_per_seq]: KV block ids of s, in order
  int64_t num_seqs = 0;
  int64_t max_seqlen_q = 0;
  int64_t max_seqlen_k = 0;
  bool all_decode = false;  // every sequence has exactly one query token
  QkvLayout layout;
  float scale = 1.0f;       // softmax scale, usually head_dim^-0.5
  // Set per layer by the model (defaults: full causal attention, no sinks).
  int64_t sliding_window = 0;    // > 0: the query at position p sees only keys at positions (p - window, p]
  const float* sinks = nullptr;  // f32 [num_heads] in backend memory: a learned logit per head that joins the
                                 // softmax's denominator (GPT-OSS attention sinks); null: none
  bool plain() const { return sliding_window <= 0 && sinks == nullptr; }
};

// Element-wise activations of MLP and expert outputs.
enum class Activation {
  kSiluGated,   // in [T, 2I] (gate then up) → silu(gate) * up
  kGeluTanh,    // in [T, I] → gelu with the tanh approximation (GPT-2 "gelu_new")
  kSwigluOss,   // in [T, 2I] (gate then up) → (clamp(up, ±limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit)
};
struct ActParams {
  Activation kind = Activation::kSiluGated;
  float limit = 7.0f;
  float alpha = 1.702f;
  bool gated() const { return kind != Activation::kGeluTanh; }
};

// Routing of a mixture-of-experts layer: router logits [T, E] → top_k expert ids and weights per token.
enum class MoeRouting {
  kSoftmaxTopK,  // softmax over all experts, top-k; weights renormalised to sum 1 when norm_topk_prob (Qwen3-MoE)
  kTopKSoftmax,  // top-k of the logits, softmax over the chosen k (GPT-OSS)
};
struct MoeRouteParams {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int64_t top_k = 1;
  bool norm_topk_prob = false;
};

// The expert computation: every token's rows go to its top_k experts, each expert computes
// down(act(gate_up(x) + b1)) + b2 over its tokens, and the results are combined with the routing weights.
struct MoeParams {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I (per expert)
  ActParams act;
};

// Scratch the moe_experts op needs for T tokens (permutation indices, permuted rows, expert outputs), in bytes,
// for activations of act_bytes each. The same bound holds on every backend.
inline size_t moe_scratch_bytes(const MoeParams& p, int64_t num_tokens, size_t act_bytes) {
  const size_t rows = static_cast<size_t>(num_tokens * p.top_k);
  const size_t ints = 4 * (rows * 2 + static_cast<size_t>(p.num_experts) * 2 + 2 +
                           static_cast<size_t>(rows / 16 + p.num_experts + 1) * 2);
  const size_t acts = rows * static_cast<size_t>(p.hidden + 3 * p.intermediate + p.hidden) * act_bytes;
  return (ints + 255) / 256 * 256 + acts + 256;
}

// One row of device-side sampling (Backend::sample_rows). The filters are those of the CPU sampler (temperature,
// then top-k with ties kept, top-p keeping the smallest high-probability set that reaches top_p, min-p relative to
// the top probability); the draw is an exponential race (argmax of p_i / E_i, E_i ~ Exp(1) from a counter-based
// generator keyed by (seed, step, token)), an exact draw from the filtered distribution that needs no sort. So
// the same (seed, step) gives the same token whatever else is in the batch. temperature 0 = argmax.
struct DeviceSampleParams {
  float temperature = 1.0f;
  int32_t top_k = 0;    // <= 0: off
  float top_p = 1.0f;   // >= 1: off
  float min_p = 0.0f;   // <= 0: off
  uint64_t seed = 0;
  uint64_t step = 0;    // the request's number of output tokens so far
};

}  // namespace rl
