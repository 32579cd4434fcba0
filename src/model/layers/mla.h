// Multi-head latent attention (DeepSeek-V2/V3) of the layer library. Projections: q through a low-rank
// q_a_proj → RMSNorm → q_b_proj (or one q_proj when q_lora_rank is 0), the compressed KV through
// kv_a_proj_with_mqa → [c (kv_lora_rank), k_rope (rope_dim)], c RMS-normed; kv_b_proj maps c to every head's
// k_nope and v. The cache keeps only [c, RoPE(k_rope)] per token (KvKind::kLatent), and attention always runs in
// the absorbed form: kv_b's k rows (W_UK) fold into the query, its v rows (W_UV) apply to the attended latent.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "model/forward_batch.h"
#include "model/weights.h"

namespace rl {

struct MlaSpec {
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: plain q_proj (DeepSeek-V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t nope_dim = 0, rope_dim = 0, v_head_dim = 0;
  bool bias = false;          // attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj carry biases
  bool interleaved = true;    // rope_interleave
  float scale = 0;            // softmax scale (mscale² folded in by the architecture)
  float q_rope_scale = 1.0f;  // YaRN attention factor squared, on the rotated q only
  float norm_eps = 1e-6f;
};

// Reads a linear weight [rows, cols] of the checkpoint into f32 (dequantising block-quantised FP8).
using LinearReader = std::function<Result<std::vector<float>>(const std::string& name, int64_t rows, int64_t cols)>;

class MlaAttention {
 public:
  MlaSpec spec;
  MlaLayout layout;
  Tensor q_a, q_a_bias, q_a_norm, q_b;  // q_lora_rank > 0: [qr, H], [qr], [qr], [nh * q_head, qr]
  Tensor q_proj;                        // q_lora_rank == 0: [nh * q_head, H]
  Tensor kv_a, kv_a_bias, kv_norm;      // [latent, H], [latent], [kv_lora_rank]
  Tensor w_uk_t;                        // [nh, kv_lora_rank, nope_dim]: kv_b's k rows, transposed per head
  Tensor w_uv;                          // [nh, v_head_dim, kv_lora_rank]: kv_b's v rows
  Tensor o, o_bias;                     // [H, nh * v_head_dim], [H]

  void init(const MlaSpec& s);
  // <prefix>{q_a_proj, q_a_layernorm, q_b_proj | q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj}.
  Status load_hf(WeightLoader& w, const std::string& prefix, const LinearReader& read, float dummy_scale);

  KvLayerSpec kv_spec() const;
  int64_t num_params() const;
  // Workspace bytes for max_tokens tokens of act_bytes activations.
  size_t workspace_bytes(int64_t max_tokens, size_t act_bytes) const;
  // x: [T, hidden] normed input → out: [T, hidden]; ws: workspace_bytes(T) bytes.
  void forward(Backend& be, const ForwardBatch& b, const Tensor& x, const KvLayer& kv, const float* inv_freq, void* ws,
               const Tensor& out) const;
};

}  // namespace rl
