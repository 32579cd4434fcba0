#include "model/layers/attention.h"

#include <cmath>

namespace rl {

void Attention::init(const AttentionSpec& s) {
  spec = s;
  if (spec.scale == 0) spec.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  layout = {s.num_heads, s.num_kv_heads, s.head_dim};
}

Status Attention::load_hf(WeightLoader& w, const std::string& a, float s) {
  const int64_t h = spec.hidden, q = spec.num_heads * spec.head_dim, kv = spec.num_kv_heads * spec.head_dim;
  using R = parallel::WeightRole;  // tensor parallelism: each rank loads its heads (load() on one rank)
  RL_ASSIGN_OR_RETURN(qkv, w.load_sharded({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"},
                                          {{q, h}, {kv, h}, {kv, h}}, {R::kQProj, R::kKProj, R::kVProj}, s));
  if (spec.qkv_bias) {
    RL_ASSIGN_OR_RETURN(qkv_bias, w.load_sharded({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"},
                                                 {{q}, {kv}, {kv}}, {R::kQBias, R::kKBias, R::kVBias}, s));
  }
  RL_ASSIGN_OR_RETURN(o, w.load_sharded({a + "o_proj.weight"}, {{h, q}}, {R::kOProj}, s));
  if (spec.o_bias) {
    RL_ASSIGN_OR_RETURN(o_bias, w.load({a + "o_proj.bias"}, {{h}}, s));
    if (w.tp_rank() > 0) o_bias = Tensor();  // row-parallel: rank 0 alone adds the bias before the all-reduce
  }
  if (const parallel::TpPlan* tp = w.tp()) layout = {tp->num_heads, tp->num_kv_heads, spec.head_dim};
  if (spec.qk_norm) {
    RL_ASSIGN_OR_RETURN(q_norm, w.load({a + "q_norm.weight"}, {{spec.head_dim}}, 0, 1.0f));
    RL_ASSIGN_OR_RETURN(k_norm, w.load({a + "k_norm.weight"}, {{spec.head_dim}}, 0, 1.0f));
  }
  return Status::ok();
}

Status Attention::load_sinks(WeightLoader& w, Backend& be, const std::string& name) {
  const int64_t n = spec.num_heads;
  std::vector<float> host(static_cast<size_t>(n), 0.0f);
  if (!w.dummy()) {
    RL_ASSIGN_OR_RETURN(host, w.read_f32(name, {n}));
  }
  sinks_f32_ = DeviceBuffer(&be, host.size() * 4);
  be.upload(sinks_f32_.data(), host.data(), host.size() * 4);
  sinks = Tensor(sinks_f32_.data(), DType::kF32, {n});
  return Status::ok();
}

KvLayerSpec Attention::kv_spec() const {
  KvLayerSpec k;
  k.kind = spec.window > 0 ? KvKind::kSliding : KvKind::kFull;
  k.num_kv_heads = layout.num_kv_heads;  // this rank's (spec.num_kv_heads on one rank)
  k.head_dim = k.v_head_dim = spec.head_dim;
  k.window = spec.window;
  return k;
}

void Attention::forward(Backend& be, const ForwardBatch& b, const Tensor& x, const KvLayer& kv, const float* inv_freq,
                        const Tensor& qkv_buf, const Tensor& attn_buf, const Tensor& out, const ResidualFusion& fusion,
                        const QueryRows* rows) const {
  if (fusion.in_norm) {
    RL_CHECK(fusion.in_norm->kind == Norm::Kind::kRms);
    be.rms_norm_linear(x, fusion.in_norm->weight, fusion.in_norm->params, qkv, qkv_bias, fusion.normed, qkv_buf);
  } else {
    be.linear(x, qkv, qkv_bias, qkv_buf);
  }
  AttentionMetadata meta = b.attn;
  meta.block_tables = b.block_tables(kv.group);
  meta.layout = layout;
  meta.scale = spec.scale;
  meta.sliding_window = spec.window;
  meta.sinks = spec.sinks ? static_cast<const float*>(sinks.data) : nullptr;
  RopeParams rope;
  rope.layout = layout;
  rope.inv_freq = inv_freq;
  RL_CHECK_MSG(spec.rope || !spec.qk_norm, "q/k norm without RoPE is not implemented");
  if (rows) {
    if (spec.rope) {
      be.qk_norm_rope_kv_write(qkv_buf, q_norm, k_norm, b.positions, rope, NormParams{spec.norm_eps},
                               b.slots(kv.group), kv);
    } else {
      be.kv_write(qkv_buf, layout, b.slots(kv.group), kv);
    }
    if (rows->qkv.rows() == 0) return;  // no row wanted: the KV write was all
    be.gather_rows(qkv_buf, *rows->indices, rows->qkv);
    meta.cu_seqlens_q = rows->queries->cu_seqlens_q;
    meta.max_seqlen_q = rows->queries->max_seqlen_q;
    meta.all_decode = rows->queries->all_decode;
    meta.num_leading_decodes = rows->queries->num_leading_decodes;
    be.attention(rows->qkv, kv, meta, attn_buf);
  } else if (spec.rope) {
    be.rope_kv_write_attention(qkv_buf, q_norm, k_norm, b.positions, rope, NormParams{spec.norm_eps},
                               b.slots(kv.group), kv, meta, attn_buf);
  } else {
    be.kv_write(qkv_buf, layout, b.slots(kv.group), kv);
    be.attention(qkv_buf, kv, meta, attn_buf);
  }
  if (fusion.residual.data) {
    be.linear_add(attn_buf, o, o_bias, out, fusion.residual);
  } else {
    be.linear(attn_buf, o, o_bias, out);
  }
}

}  // namespace rl
