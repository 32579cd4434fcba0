// Self-attention of the layer library: fused q/k/v projection (optional biases), optional per-head q/k RMSNorm,
// optional RoPE, a paged KV cache, full or sliding-window causal attention with optional sinks, output
// projection. The KV spec of the layer follows from its spec.
#pragma once

#include <string>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "model/forward_batch.h"
#include "model/layers/norm.h"
#include "model/weights.h"

namespace rl {

struct AttentionSpec {
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;  // Qwen3: RMSNorm over head_dim on q and k before RoPE
  bool rope = true;      // false: absolute positions elsewhere (GPT-2)
  int64_t window = 0;    // > 0: sliding window of this many positions
  bool sinks = false;    // GPT-OSS: a learned logit per head in the softmax (`<prefix>sinks`)
  float scale = 0;       // softmax scale (0: head_dim^-0.5)
  float norm_eps = 1e-6f;
};

// Attention of some rows alone (the last layer of a prefill, Decoder::forward): the qkv projection, RoPE and the KV
// write run for every row, then only these rows' q attend over the cache (queries: their cu_seqlens_q etc.) and
// o_proj runs on them. qkv: [rows, qkv row] scratch for their q.
struct QueryRows {
  const Tensor* indices = nullptr;  // i32 [rows]: the rows, strictly increasing
  const ForwardBatch::LogitsQueries* queries = nullptr;
  Tensor qkv;
};

class Attention {
 public:
  AttentionSpec spec;
  QkvLayout layout;
  Tensor qkv, qkv_bias;   // [q + 2 kv, hidden], [q + 2 kv]
  Tensor o, o_bias;       // [hidden, q], [hidden]
  Tensor q_norm, k_norm;  // [head_dim]
  Tensor sinks;           // f32 [num_heads]

  void init(const AttentionSpec& s);
  // Weights by the Llama-family names: <prefix>{q,k,v,o}_proj.{weight,bias}, q_norm/k_norm, sinks.
  Status load_hf(WeightLoader& w, const std::string& prefix, float dummy_scale);
  // The sinks, kept in f32 whatever the weight dtype (the softmax reads them as f32).
  Status load_sinks(WeightLoader& w, Backend& be, const std::string& name);

  KvLayerSpec kv_spec() const;
  // Activation elements per token this layer needs: the qkv row and the attention output.
  int64_t workspace_per_token() const { return layout.row() + layout.num_heads * layout.head_dim; }
  // x: [T, hidden] normed input → out: [T, hidden]; qkv_buf [T, row], attn_buf [T, q] are workspace. With
  // fusion (norm.h): x un-normed and fusion.in_norm folded into the qkv projection, and/or the output
  // projection added into fusion.residual. With rows: attn_buf, out and fusion.residual hold those rows only.
  void forward(Backend& be, const ForwardBatch& b, const Tensor& x, const KvLayer& kv, const float* inv_freq,
               const Tensor& qkv_buf, const Tensor& attn_buf, const Tensor& out, const ResidualFusion& fusion = {},
               const QueryRows* rows = nullptr) const;

 private:
  DeviceBuffer sinks_f32_;
};

}  // namespace rl
