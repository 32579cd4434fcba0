// Op parameter structs and the metadata attention needs. Plain data only: backends interpret them.
#pragma once

#include <cstdint>
#include <vector>

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
  // Its KV group (hybrid KV, loader/kv_groups.h): the layer writes through ForwardBatch::slots(group) and
  // reads through ForwardBatch::block_tables(group).
  int32_t group = 0;
  int64_t block_size() const { return k.shape[1]; }
  int64_t num_kv_heads() const { return k.shape[2]; }
  int64_t head_dim() const { return k.shape[3]; }
};

// A stack of dense Llama-style decoder layers (pre-RMSNorm, RoPE attention with optional q/k norm and qkv / o
// biases, SiLU-gated MLP without biases), as Backend::dense_stack_decode runs it. Tensors are the layers' own.
struct DenseStackLayer {
  Tensor attn_norm, qkv, qkv_bias, q_norm, k_norm, o, o_bias, ffn_norm, gate_up, down;
  float attn_eps = 1e-6f, ffn_eps = 1e-6f;
};
struct DenseStack {
  std::vector<DenseStackLayer> layers;
  QkvLayout layout;
  int64_t hidden = 0, inter = 0;
  float scale = 1.0f;        // softmax scale
  float qk_eps = 1e-6f;      // eps of the q/k norms
  const float* inv_freq = nullptr;  // [head_dim / 2], f32, backend memory
  // The KV cache the stack is checked for (dense_stack_unsupported): bf16, or FP8 e4m3 codes.
  bool kv_fp8 = false;
};
// One batch-1 decode step through the stack. residual: [1, hidden], the embedding in, the last layer's output
// out. scratch: dense_stack_scratch_bytes() of backend memory (the activations between the layers' phases live
// there), zero before the first step and used by this stack only. positions, slots, seq_lens: i32 [1];
// block_table: i32 [1, max_blocks]; kv: the layers' caches.
struct DenseStackStep {
  Tensor residual;
  void* scratch = nullptr;
  Tensor positions, slots, seq_lens, block_table;
  const KvLayer* kv = nullptr;  // [layers]
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
  // Sequences 0 .. n-1 have one query token each (rows 0 .. n-1): a mixed batch's leading decode rows, which a
  // backend may serve with its decode kernel and the rest with its prefill kernel (0: not known).
  int64_t num_leading_decodes = 0;
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
  // DeepSeek-V3: s = sigmoid(logit); experts are chosen on s + correction_bias, only inside the topk_group
  // groups (of n_group equal groups) with the largest sum of their two best biased scores; experts of the other
  // groups score 0 (as transformers' masked_fill). Weights are the unbiased s of the chosen, renormalised when
  // norm_topk_prob, times routed_scaling_factor.
  kSigmoidGroupTopK,
};
struct MoeRouteParams {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int64_t top_k = 1;  // routed experts per token
  bool norm_topk_prob = false;
  // kSigmoidGroupTopK
  int64_t n_group = 1, topk_group = 1;
  float routed_scaling_factor = 1.0f;
  const float* correction_bias = nullptr;  // f32 [num_experts] in backend memory, or null
  // Shared experts ride along as extra experts: ids [T, top_k + num_shared] end with num_experts ..
  // num_experts + num_shared - 1 (experts after the routed ones in the stacked weights), weight 1 each.
  int64_t num_shared = 0;
  int64_t slots() const { return top_k + num_shared; }
};

// Multi-head latent attention (DeepSeek MLA). The cache holds per token one latent row of kv_lora_rank + rope_dim
// values: the RMS-normed compressed KV c, then the shared RoPE key k_r. Attention runs in the absorbed form: a
// query row per head is [q_nope · W_UK (kv_lora_rank), RoPE(q_rope) (rope_dim)], scores are q · row over the
// whole latent row, and the output per head is Σ p · c (kv_lora_rank wide), which W_UV then maps to v_head_dim.
struct MlaLayout {
  int64_t num_heads = 0;
  int64_t nope_dim = 0;      // qk_nope_head_dim
  int64_t rope_dim = 0;      // qk_rope_head_dim
  int64_t kv_lora_rank = 0;  // latent width c
  int64_t q_head() const { return nope_dim + rope_dim; }        // per head of the q projection
  int64_t latent() const { return kv_lora_rank + rope_dim; }    // per token of the cache, per absorbed q head
};
struct MlaRopeParams {
  MlaLayout layout;
  const float* inv_freq = nullptr;  // f32 [rope_dim / 2] in backend memory
  // The RoPE input pairs are interleaved (x0, x1), (x2, x3), .. (DeepSeek checkpoints, rope_interleave); the
  // output is in rotate-half order (first halves, then second halves), as transformers' interleaved apply does.
  bool interleaved = true;
  // Applied to the rotated q only: YaRN's attention factor multiplies cos and sin (so q_r · k_r by its square).
  float q_rope_scale = 1.0f;
  float eps = 1e-6f;  // of the kv_a RMSNorm
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

// One sampling path (runtime/sampler.h) for every parameter, on every backend. Per row, in this order:
//   1. logprobs (vLLM's "raw logprobs"): the log-softmax of the RAW logits gives the chosen token's logprob and
//      the top num_logprobs (descending, ties → lower id);
//   2. logit_bias is added; while step < min_tokens the suppressed ids (EOS, stop ids) get -inf; the
//      per-row allowed-token bitmask (grammar hook) sets every disallowed token to -inf;
//   3. penalties: repetition (HF: tokens seen in prompt or output; positive logits divided, negative multiplied),
//      then frequency and presence (OpenAI: logit -= frequency * count + presence, over output tokens);
//   4. temperature 0: argmax (ties → the lowest id); otherwise (logit - max) / temperature, top-k (ties at the
//      k-th value kept), top-p (the smallest set of highest logits whose mass reaches top_p, ties kept), min-p
//      (probability >= min_p * the top probability), then an exponential race: argmax of logp_i - log(E_i),
//      E_i = -log(u_i), u_i from the counter-based generator keyed by (seed, step, token id). That is an exact
//      draw from the filtered distribution that needs no sort, and the same (seed, step) gives the same token
//      whatever else is in the batch, on the CPU and on the GPU.
// A forced row (forced_token >= 0) stops after step 1: its token is the forced one (teacher forcing: the logprob
// of a prompt token given the tokens before it), scored on the raw logits with its rank.
// A row that cannot be sampled gets a negative code instead of a token, and the engine fails that request alone:
// kSampleNonFinite when the raw logits hold NaN or +Inf (a numerically broken model), kSampleNothingLeft when
// nothing finite is left after the processors (every token masked or suppressed, or an infinite bias).
inline constexpr int32_t kSampleNonFinite = -1;
inline constexpr int32_t kSampleNothingLeft = -2;
struct SampleRowParams {
  float temperature = 1.0f;
  int32_t top_k = 0;    // <= 0: off
  float top_p = 1.0f;   // >= 1: off
  float min_p = 0.0f;   // <= 0: off
  uint64_t seed = 0;
  uint64_t step = 0;    // the request's number of output tokens before this one
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_slot = -1;    // row of SampleBatch's penalty state; -1: no penalties
  int32_t num_logprobs = -1;    // -1: none; 0: the chosen token's only; N: also the top N (N <= kMaxTopLogprobs)
  int32_t bias_begin = 0, bias_end = 0;          // [begin, end) in bias_ids / bias_values
  int32_t suppress_begin = 0, suppress_end = 0;  // [begin, end) in suppress_ids (applied while step < min_tokens)
  int32_t min_tokens = 0;
  int32_t mask_row = -1;        // row of allowed_mask; -1: every token allowed
  // >= 0: a teacher-forced row (prompt logprobs): nothing is sampled and no state is touched; the row's token is
  // this id, with its raw logprob, its rank (1 + the tokens ranked before it) and the top num_logprobs (>= 0).
  int32_t forced_token = -1;
  // Pinned host memory (Backend::alloc_pinned) the row's token is also written to, in stream order like out_tokens
  // (readable once a fence after the op has passed); null: out_tokens only. The step's sampled ids reach the host
  // this way, with no download after the sampler.
  int32_t* host_token = nullptr;
};

inline constexpr int32_t kMaxTopLogprobs = 20;

// Device pointers (backend memory) for Backend::sample over logits f32 [num_rows, vocab]. Logits rows are
// processed in place.
struct SampleBatch {
  int64_t num_rows = 0;
  const SampleRowParams* params = nullptr;  // [num_rows]
  const int32_t* bias_ids = nullptr;        // indexed by SampleRowParams::bias_*
  const float* bias_values = nullptr;
  const int32_t* suppress_ids = nullptr;    // indexed by SampleRowParams::suppress_*
  // Penalty state, one row per slot: output-token counts i32 [slots, vocab] and prompt membership bits
  // u32 [slots, ceil(vocab / 32)]. sample() adds the chosen token to its slot's counts.
  int32_t* penalty_counts = nullptr;
  uint32_t* prompt_bits = nullptr;
  const uint32_t* allowed_mask = nullptr;   // u32 [mask rows, ceil(vocab / 32)]: bit t set = token t allowed
  float* raw_scratch = nullptr;             // f32 [num_rows, vocab]: raw logits kept for logprob rows
  int32_t* out_tokens = nullptr;            // [num_rows]
  float* out_logprobs = nullptr;            // [num_rows]: the chosen token's raw logprob (logprob rows)
  int32_t* out_top_ids = nullptr;           // [num_rows, kMaxTopLogprobs]
  float* out_top_logprobs = nullptr;        // [num_rows, kMaxTopLogprobs]
  int32_t* out_ranks = nullptr;             // [num_rows]: the forced token's rank (forced rows only)
};

// Resets one penalty slot to a request's known tokens: counts = histogram of output_ids, prompt bits = the set
// of prompt_ids. ids: device i32 arrays.
struct PenaltySlotInit {
  int32_t slot = 0;
  const int32_t* prompt_ids = nullptr;
  int64_t num_prompt = 0;
  const int32_t* output_ids = nullptr;
  int64_t num_output = 0;
};

}  // namespace rl
