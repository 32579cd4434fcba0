#include "model/layers/mla.h"

#include <algorithm>
#include <cmath>

namespace rl {

void MlaAttention::init(const MlaSpec& s) {
  spec = s;
  layout = {s.num_heads, s.nope_dim, s.rope_dim, s.kv_lora_rank};
}

Status MlaAttention::load_hf(WeightLoader& w, const std::string& a, const LinearReader& read, float s) {
  const int64_t h = spec.hidden, nh = spec.num_heads, qh = layout.q_head(), r = spec.kv_lora_rank;
  const int64_t dn = spec.nope_dim, dv = spec.v_head_dim, qr = spec.q_lora_rank;
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
    return w.load_computed({rows, cols}, s, [&, name, rows, cols](float* dst) -> Status {
      RL_ASSIGN_OR_RETURN(std::vector<float> v, read(name, rows, cols));
      std::copy(v.begin(), v.end(), dst);
      return Status::ok();
    });
  };
  if (qr > 0) {
    RL_ASSIGN_OR_RETURN(q_a, linear(a + "q_a_proj.weight", qr, h));
    if (spec.bias) {
      RL_ASSIGN_OR_RETURN(q_a_bias, w.load({a + "q_a_proj.bias"}, {{qr}}, s));
    }
    RL_ASSIGN_OR_RETURN(q_a_norm, w.load({a + "q_a_layernorm.weight"}, {{qr}}, 0, 1.0f));
    RL_ASSIGN_OR_RETURN(q_b, linear(a + "q_b_proj.weight", nh * qh, qr));
  } else {
    RL_ASSIGN_OR_RETURN(q_proj, linear(a + "q_proj.weight", nh * qh, h));
  }
  RL_ASSIGN_OR_RETURN(kv_a, linear(a + "kv_a_proj_with_mqa.weight", layout.latent(), h));
  if (spec.bias) {
    RL_ASSIGN_OR_RETURN(kv_a_bias, w.load({a + "kv_a_proj_with_mqa.bias"}, {{layout.latent()}}, s));
  }
  RL_ASSIGN_OR_RETURN(kv_norm, w.load({a + "kv_a_layernorm.weight"}, {{r}}, 0, 1.0f));
  // kv_b_proj [nh * (dn + dv), r]: per head dn k rows (W_UK), then dv v rows (W_UV).
  std::vector<float> kv_b;
  auto kv_b_rows = [&]() -> Status {
    if (!kv_b.empty()) return Status::ok();
    RL_ASSIGN_OR_RETURN(kv_b, read(a + "kv_b_proj.weight", nh * (dn + dv), r));
    return Status::ok();
  };
  RL_ASSIGN_OR_RETURN(w_uk_t, w.load_computed({nh, r, dn}, s, [&](float* dst) -> Status {
    RL_RETURN_IF_ERROR(kv_b_rows());
    for (int64_t x = 0; x < nh; ++x)
      for (int64_t d = 0; d < dn; ++d)
        for (int64_t c = 0; c < r; ++c)
          dst[(x * r + c) * dn + d] = kv_b[static_cast<size_t>((x * (dn + dv) + d) * r + c)];
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(w_uv, w.load_computed({nh, dv, r}, s, [&](float* dst) -> Status {
    RL_RETURN_IF_ERROR(kv_b_rows());
    for (int64_t x = 0; x < nh; ++x) std::copy_n(kv_b.data() + (x * (dn + dv) + dn) * r, dv * r, dst + x * dv * r);
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(o, linear(a + "o_proj.weight", h, nh * dv));
  if (spec.bias) {
    RL_ASSIGN_OR_RETURN(o_bias, w.load({a + "o_proj.bias"}, {{h}}, s));
  }
  return Status::ok();
}

KvLayerSpec MlaAttention::kv_spec() const {
  KvLayerSpec k;
  k.kind = KvKind::kLatent;
  k.num_kv_heads = 1;
  k.latent_dim = layout.latent();
  return k;
}

int64_t MlaAttention::num_params() const {
  const int64_t h = spec.hidden, nh = spec.num_heads, qh = layout.q_head(), r = spec.kv_lora_rank;
  const int64_t qr = spec.q_lora_rank, dv = spec.v_head_dim;
  int64_t n = qr > 0 ? qr * h + qr + nh * qh * qr : nh * qh * h;
  n += layout.latent() * h + r + nh * (spec.nope_dim + dv) * r + h * nh * dv;
  if (spec.bias) n += (qr > 0 ? qr : 0) + layout.latent() + h;
  return n;
}

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

// Workspace, each 256-byte aligned: q [nh q_head], ckv [latent], q_lat [nh latent], o_lat [nh r], o [nh dv],
// q_a and its norm [qr] twice.
size_t MlaAttention::workspace_bytes(int64_t max_tokens, size_t act_bytes) const {
  const int64_t nh = spec.num_heads;
  size_t n = 0;
  for (int64_t cols : {nh * layout.q_head(), layout.latent(), nh * layout.latent(), nh * spec.kv_lora_rank,
                       nh * spec.v_head_dim, spec.q_lora_rank, spec.q_lora_rank}) {
    n += align256(static_cast<size_t>(max_tokens * cols) * act_bytes);
  }
  return n;
}

void MlaAttention::forward(Backend& be, const ForwardBatch& b, const Tensor& x, const KvLayer& kv,
                           const float* inv_freq, void* ws, const Tensor& out) const {
  const int64_t t = x.dim(0), nh = spec.num_heads, qr = spec.q_lora_rank, r = spec.kv_lora_rank;
  const int64_t lat = layout.latent(), qh = layout.q_head(), dv = spec.v_head_dim;
  const DType adt = be.act_dtype();
  const size_t es = dtype_size(adt);
  char* p = static_cast<char*>(ws);
  auto take = [&](int64_t cols) {
    Tensor v(p, adt, {t, cols});
    p += align256(static_cast<size_t>(t * cols) * es);
    return v;
  };
  Tensor q = take(nh * qh), ckv = take(lat), q_lat = take(nh * lat), o_lat = take(nh * r), o_heads = take(nh * dv);
  if (qr > 0) {
    Tensor qa = take(qr), qa_normed = take(qr);
    be.linear(x, q_a, q_a_bias, qa);
    be.rms_norm(qa, q_a_norm, qa_normed, NormParams{spec.norm_eps});
    be.linear(qa_normed, q_b, Tensor(), q);
  } else {
    be.linear(x, q_proj, Tensor(), q);
  }
  be.linear(x, kv_a, kv_a_bias, ckv);
  MlaRopeParams rp;
  rp.layout = layout;
  rp.inv_freq = inv_freq;
  rp.interleaved = spec.interleaved;
  rp.q_rope_scale = spec.q_rope_scale;
  rp.eps = spec.norm_eps;
  be.mla_prepare(q, ckv, kv_norm, b.positions, b.slots(kv.group), rp, q_lat, kv);
  be.head_linear(q, qh, w_uk_t, q_lat, lat);
  AttentionMetadata meta = b.attn;
  meta.block_tables = b.block_tables(kv.group);
  meta.scale = spec.scale;
  be.mla_attention(q_lat, kv, meta, layout, o_lat);
  be.head_linear(o_lat, r, w_uv, o_heads, dv);
  be.linear(o_heads, o, o_bias, out);
}

}  // namespace rl
