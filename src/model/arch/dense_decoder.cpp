#include "model/arch/dense_decoder.h"

#include <cmath>

#include "model/rope.h"
#include "model/weights.h"

namespace rl {

namespace {

struct LayerWeights {
  Tensor input_norm, post_attn_norm;  // [hidden]
  Tensor qkv, qkv_bias;               // [q + 2 kv, hidden], [q + 2 kv] (bias may be empty)
  Tensor o, o_bias;                   // [hidden, q], [hidden]
  Tensor q_norm, k_norm;              // [head_dim] (Qwen3) or empty
  Tensor gate_up, gate_up_bias;       // [2 I, hidden], [2 I]
  Tensor down, down_bias;             // [hidden, I], [hidden]
};

class DenseDecoder final : public Model {
 public:
  DenseDecoder(const ModelConfig& c, Backend* b) : config_(c), backend_(b) {}

  const ModelConfig& config() const override { return config_; }
  Backend& backend() const override { return *backend_; }
  uint64_t weight_bytes() const override { return weight_bytes_; }

  Status load(const std::string& model_dir, const LoadOptions& opts);
  void reserve(int64_t max_num_tokens, int64_t max_num_logits) override;
  Tensor forward(const ForwardBatch& batch, std::span<const KvLayer> kv) override;

 private:
  Tensor act(void* base, std::initializer_list<int64_t> dims) const {
    return Tensor(base, backend_->act_dtype(), dims);
  }

  ModelConfig config_;
  Backend* backend_;
  QkvLayout layout_;
  uint64_t weight_bytes_ = 0;
  std::vector<DeviceBuffer> weight_buffers_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  DeviceBuffer inv_freq_;

  // Workspace, sized by reserve(): [max_tokens, ...] activations and [max_logits, vocab] logits.
  int64_t max_tokens_ = 0, max_logits_ = 0;
  DeviceBuffer residual_, normed_, qkv_buf_, attn_buf_, proj_buf_, mlp_buf_, gate_up_buf_, inter_buf_;
  DeviceBuffer last_hidden_, logits_act_, logits_f32_;
};

Status DenseDecoder::load(const std::string& model_dir, const LoadOptions& opts) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  layout_ = {c.num_attention_heads, c.num_kv_heads, c.head_dim};
  uint64_t total = static_cast<uint64_t>(c.num_params()) * dtype_size(opts.weight_dtype);
  RL_ASSIGN_OR_RETURN(auto loader, WeightLoader::create(model_dir, backend_, opts, total));
  // Dummy weights: uniform with std ≈ 0.02 (as initializer_range), norms exactly 1.
  const float s = 0.02f * std::sqrt(3.0f);
  auto load1 = [&](const std::string& name, std::vector<int64_t> shape) {
    return loader->load({name}, {shape}, s);
  };
  auto norm1 = [&](const std::string& name, int64_t n) { return loader->load({name}, {{n}}, 0, 1.0f); };

  RL_ASSIGN_OR_RETURN(embed_, load1("model.embed_tokens.weight", {c.vocab_size, h}));
  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& L = layers_[static_cast<size_t>(i)];
    RL_ASSIGN_OR_RETURN(L.input_norm, norm1(p + "input_layernorm.weight", h));
    RL_ASSIGN_OR_RETURN(L.post_attn_norm, norm1(p + "post_attention_layernorm.weight", h));
    const std::string a = p + "self_attn.";
    RL_ASSIGN_OR_RETURN(L.qkv, loader->load({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"},
                                            {{q, h}, {kv, h}, {kv, h}}, s));
    if (c.qkv_bias) {
      RL_ASSIGN_OR_RETURN(L.qkv_bias, loader->load({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"},
                                                   {{q}, {kv}, {kv}}, s));
    }
    RL_ASSIGN_OR_RETURN(L.o, load1(a + "o_proj.weight", {h, q}));
    if (c.o_bias) {
      RL_ASSIGN_OR_RETURN(L.o_bias, loader->load({a + "o_proj.bias"}, {{h}}, s));
    }
    if (c.qk_norm) {
      RL_ASSIGN_OR_RETURN(L.q_norm, norm1(a + "q_norm.weight", c.head_dim));
      RL_ASSIGN_OR_RETURN(L.k_norm, norm1(a + "k_norm.weight", c.head_dim));
    }
    const std::string m = p + "mlp.";
    RL_ASSIGN_OR_RETURN(L.gate_up, loader->load({m + "gate_proj.weight", m + "up_proj.weight"},
                                                {{inter, h}, {inter, h}}, s));
    RL_ASSIGN_OR_RETURN(L.down, load1(m + "down_proj.weight", {h, inter}));
    if (c.mlp_bias) {
      RL_ASSIGN_OR_RETURN(L.gate_up_bias, loader->load({m + "gate_proj.bias", m + "up_proj.bias"},
                                                       {{inter}, {inter}}, s));
      RL_ASSIGN_OR_RETURN(L.down_bias, loader->load({m + "down_proj.bias"}, {{h}}, s));
    }
  }
  RL_ASSIGN_OR_RETURN(final_norm_, norm1("model.norm.weight", h));
  // Tied embeddings share the table; some tied checkpoints still carry lm_head.weight, which is then ignored.
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;
  } else {
    RL_ASSIGN_OR_RETURN(lm_head_, load1("lm_head.weight", {c.vocab_size, h}));
  }
  loader->finish();
  weight_bytes_ = loader->bytes_loaded();
  weight_buffers_ = loader->take_buffers();

  std::vector<float> inv = rope_inv_freq(c);
  inv_freq_ = DeviceBuffer(backend_, inv.size() * sizeof(float));
  backend_->upload(inv_freq_.data(), inv.data(), inv.size() * sizeof(float));
  return Status::ok();
}

void DenseDecoder::reserve(int64_t max_num_tokens, int64_t max_num_logits) {
  if (max_num_tokens <= max_tokens_ && max_num_logits <= max_logits_) return;
  max_tokens_ = std::max(max_tokens_, max_num_tokens);
  max_logits_ = std::max(max_logits_, max_num_logits);
  const ModelConfig& c = config_;
  const size_t es = dtype_size(backend_->act_dtype());
  const size_t t = static_cast<size_t>(max_tokens_), n = static_cast<size_t>(max_logits_);
  auto mk = [&](size_t elems, size_t esz) { return DeviceBuffer(backend_, elems * esz); };
  residual_ = mk(t * c.hidden_size, es);
  normed_ = mk(t * c.hidden_size, es);
  proj_buf_ = mk(t * c.hidden_size, es);
  mlp_buf_ = mk(t * c.hidden_size, es);
  qkv_buf_ = mk(t * static_cast<size_t>(layout_.row()), es);
  attn_buf_ = mk(t * static_cast<size_t>(c.q_size()), es);
  gate_up_buf_ = mk(t * 2 * c.intermediate_size, es);
  inter_buf_ = mk(t * c.intermediate_size, es);
  last_hidden_ = mk(n * c.hidden_size, es);
  logits_act_ = mk(n * c.vocab_size, es);
  logits_f32_ = mk(n * c.vocab_size, 4);
}

Tensor DenseDecoder::forward(const ForwardBatch& b, std::span<const KvLayer> kv) {
  const ModelConfig& c = config_;
  const int64_t t = b.num_tokens, h = c.hidden_size;
  RL_CHECK_MSG(t > 0 && t <= max_tokens_ && b.num_logits <= max_logits_, "batch exceeds the reserved workspace");
  RL_CHECK(static_cast<int64_t>(kv.size()) == c.num_hidden_layers);
  Backend& be = *backend_;
  const NormParams norm{static_cast<float>(c.rms_norm_eps)};
  RopeParams rope;
  rope.layout = layout_;
  rope.inv_freq = static_cast<const float*>(inv_freq_.data());

  Tensor residual = act(residual_.data(), {t, h});
  Tensor normed = act(normed_.data(), {t, h});
  Tensor qkv = act(qkv_buf_.data(), {t, layout_.row()});
  Tensor attn = act(attn_buf_.data(), {t, c.q_size()});
  Tensor proj = act(proj_buf_.data(), {t, h});
  Tensor mlp = act(mlp_buf_.data(), {t, h});
  Tensor gate_up = act(gate_up_buf_.data(), {t, 2 * c.intermediate_size});
  Tensor inter = act(inter_buf_.data(), {t, c.intermediate_size});

  be.embedding(b.input_ids, embed_, residual);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& L = layers_[static_cast<size_t>(i)];
    if (i == 0) {
      be.rms_norm(residual, L.input_norm, normed, norm);
    } else {
      be.add_rms_norm(residual, mlp, L.input_norm, normed, norm);
    }
    be.linear(normed, L.qkv, L.qkv_bias, qkv);
    be.qk_norm_rope(qkv, L.q_norm, L.k_norm, b.positions, rope, norm);
    be.kv_write(qkv, layout_, b.slot_mapping, kv[static_cast<size_t>(i)]);
    be.attention(qkv, kv[static_cast<size_t>(i)], b.attn, attn);
    be.linear(attn, L.o, L.o_bias, proj);
    be.add_rms_norm(residual, proj, L.post_attn_norm, normed, norm);
    be.linear(normed, L.gate_up, L.gate_up_bias, gate_up);
    be.silu_mul(gate_up, inter);
    be.linear(inter, L.down, L.down_bias, mlp);
  }
  be.add_rms_norm(residual, mlp, final_norm_, normed, norm);
  const int64_t n = b.num_logits;
  Tensor last = act(last_hidden_.data(), {n, h});
  be.gather_rows(normed, b.logits_indices, last);
  Tensor logits_f32(logits_f32_.data(), DType::kF32, {n, c.vocab_size});
  if (be.act_dtype() == DType::kF32) {
    be.linear(last, lm_head_, Tensor(), logits_f32);
  } else {
    Tensor logits = act(logits_act_.data(), {n, c.vocab_size});
    be.linear(last, lm_head_, Tensor(), logits);
    be.cast(logits, logits_f32);
  }
  return logits_f32;
}

}  // namespace

Result<std::unique_ptr<Model>> build_dense_decoder(const ModelConfig& config, const std::string& model_dir,
                                                   Backend* backend, const LoadOptions& opts) {
  auto m = std::make_unique<DenseDecoder>(config, backend);
  RL_RETURN_IF_ERROR(m->load(model_dir, opts));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace rl
