// DeepseekV3ForCausalLM (and DeepseekV2ForCausalLM, e.g. V2-Lite): multi-head latent attention
// (model/layers/mla.h: low-rank q with q_lora_rank or a plain q_proj, a kv_lora_rank latent plus a shared RoPE key
// cached per token, interleaved RoPE with YaRN) and DeepSeekMoE on layers >= first_k_dense_replace (and
// i % moe_layer_freq == 0): V3 scores experts with a sigmoid and chooses on score + e_score_correction_bias inside
// the topk_group best of n_group groups; V2 with a softmax (greedy). Routed weights are renormalised when
// norm_topk_prob and scaled by routed_scaling_factor; n_shared_experts shared experts (one MLP of
// n_shared * moe_intermediate_size, split into n_shared experts of moe_intermediate_size) join every token.
// Dense layers are SiLU MLPs of intermediate_size. The softmax scale is qk_head_dim^-0.5 times
// yarn_mscale(factor, mscale_all_dim)² as transformers computes it.
// Weights: f32/bf16, or FP8 e4m3 with `<name>_scale_inv` block scales (quantization_config fp8,
// weight_block_size), dequantised to the weight dtype at load. MTP modules (num_nextn_predict_layers, stored as
// model.layers.<num_hidden_layers + k>) are loaded when the checkpoint has them (transformers-made checkpoints
// do not) into Decoder::mtp, and not run.
#include <cmath>

#include "loader/config_fields.h"
#include "model/arch/archs.h"
#include "model/rope.h"

namespace rl {

namespace {

struct DeepseekHParams : ArchHParams {
  bool v3 = true;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, nope_dim = 0, rope_dim = 0, v_head_dim = 0;
  bool attention_bias = false, rope_interleave = true;
  int64_t moe_intermediate_size = 0, num_experts = 0, top_k = 0, num_shared = 0, n_group = 1, topk_group = 1;
  bool sigmoid = true, norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  std::vector<bool> sparse;                        // per layer
  int64_t fp8_block_rows = 0, fp8_block_cols = 0;  // > 0: FP8 e4m3 checkpoint
  int64_t num_mtp_layers = 0;
  std::vector<bool> mtp_sparse;  // per MTP module: its block is MoE (the layer-index rule at its index)
};

Status parse_quantization(const Json& j, DeepseekHParams& hp, ModelConfig& c, const std::string& what) {
  const Json* q = nullptr;
  RL_RETURN_IF_ERROR(read_object(j, "quantization_config", &q, what));
  if (q == nullptr) return Status::ok();
  const std::string w = what + ": quantization_config";
  std::string method, fmt = "e4m3";
  RL_RETURN_IF_ERROR(read_string(*q, "quant_method", &method, w));
  RL_RETURN_IF_ERROR(read_string(*q, "fmt", &fmt, w));
  if (method != "fp8" || fmt != "e4m3") {
    return Status::error(w + ": quant_method \"" + method + "\" fmt \"" + fmt +
                         "\" is not supported (supported: fp8 e4m3)");
  }
  auto bs = q->find("weight_block_size");
  if (bs == q->end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
      !(*bs)[1].is_number_integer()) {
    return Status::error(w + ": weight_block_size must be [rows, cols]");
  }
  hp.fp8_block_rows = (*bs)[0].get<int64_t>();
  hp.fp8_block_cols = (*bs)[1].get<int64_t>();
  RL_RETURN_IF_ERROR(require_int_range(hp.fp8_block_rows, "quantization_config.weight_block_size[0]", 1, 4096, what));
  RL_RETURN_IF_ERROR(require_int_range(hp.fp8_block_cols, "quantization_config.weight_block_size[1]", 1, 4096, what));
  c.notes.push_back("FP8 e4m3 weights (" + std::to_string(hp.fp8_block_rows) + "x" + std::to_string(hp.fp8_block_cols) +
                    " blocks, weight_scale_inv) are dequantised to the weight dtype at load (bf16 on GPUs)");
  return Status::ok();
}

Result<ModelConfig> parse(const Json& j, const std::string& what, bool v3) {
  RL_ASSIGN_OR_RETURN(ModelConfig c, parse_common_config(j, what));
  RL_RETURN_IF_ERROR(require_silu(j, what));
  auto hp = std::make_shared<DeepseekHParams>();
  hp->v3 = v3;
  using namespace config_limits;
  const Presence req = Presence::kRequired;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "intermediate_size", 1, kMaxIntermediate, &c.intermediate_size, what, req));
  // Attention.
  RL_RETURN_IF_ERROR(read_int_in_range(j, "q_lora_rank", 1, kMaxHidden, &hp->q_lora_rank, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "kv_lora_rank", 1, kMaxHidden, &hp->kv_lora_rank, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "qk_nope_head_dim", 1, kMaxHeadDim, &hp->nope_dim, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "qk_rope_head_dim", 2, kMaxHeadDim, &hp->rope_dim, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "v_head_dim", 1, kMaxHeadDim, &hp->v_head_dim, what, req));
  if (hp->rope_dim % 2 != 0) return Status::error(what + ": qk_rope_head_dim must be even for RoPE");
  RL_RETURN_IF_ERROR(read_bool(j, "attention_bias", &hp->attention_bias, what));
  RL_RETURN_IF_ERROR(read_bool(j, "rope_interleave", &hp->rope_interleave, what));
  // Mixture of experts.
  RL_RETURN_IF_ERROR(
      read_int_in_range(j, "moe_intermediate_size", 1, kMaxIntermediate, &hp->moe_intermediate_size, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "n_routed_experts", 1, kMaxExperts, &hp->num_experts, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_experts_per_tok", 1, hp->num_experts, &hp->top_k, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "n_shared_experts", 0, 64, &hp->num_shared, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "n_group", 1, hp->num_experts, &hp->n_group, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "topk_group", 1, hp->n_group, &hp->topk_group, what));
  if (hp->num_experts % hp->n_group != 0) {
    return Status::error(what + ": n_group (" + std::to_string(hp->n_group) + ") must divide n_routed_experts (" +
                         std::to_string(hp->num_experts) + ")");
  }
  RL_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", &hp->norm_topk_prob, what));
  RL_RETURN_IF_ERROR(read_double_in_range(j, "routed_scaling_factor", 1e-6, 1e6, &hp->routed_scaling_factor, what));
  std::string scoring = v3 ? "sigmoid" : "softmax", topk_method = v3 ? "noaux_tc" : "greedy";
  RL_RETURN_IF_ERROR(read_string(j, "scoring_func", &scoring, what));
  RL_RETURN_IF_ERROR(read_string(j, "topk_method", &topk_method, what));
  if (scoring == "sigmoid" && v3 && topk_method == "noaux_tc") {
    hp->sigmoid = true;
    if (hp->num_experts / hp->n_group < 2) {
      return Status::error(what + ": each of the n_group groups needs at least 2 experts (group scores sum the top 2)");
    }
    if (hp->top_k > hp->topk_group * (hp->num_experts / hp->n_group)) {
      return Status::error(what + ": num_experts_per_tok exceeds the experts of the topk_group chosen groups");
    }
  } else if (scoring == "softmax" && !v3 && (topk_method == "greedy" || hp->n_group == 1)) {
    hp->sigmoid = false;  // group_limited_greedy over a single group is greedy
  } else {
    return Status::error(what + ": scoring_func \"" + scoring + "\" with topk_method \"" + topk_method +
                         "\" is not supported (supported: V3 sigmoid + noaux_tc, V2 softmax + greedy)");
  }
  int64_t first_dense = 0, freq = 1;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "first_k_dense_replace", 0, c.num_hidden_layers, &first_dense, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "moe_layer_freq", 1, c.num_hidden_layers, &freq, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_nextn_predict_layers", 0, 16, &hp->num_mtp_layers, what));
  RL_RETURN_IF_ERROR(parse_quantization(j, *hp, c, what));
  if (hp->num_mtp_layers > 0) {
    c.notes.push_back(std::to_string(hp->num_mtp_layers) + " MTP module(s) (num_nextn_predict_layers, model.layers." +
                      std::to_string(c.num_hidden_layers) +
                      "+): loaded when the checkpoint has them, unused until speculative decoding can use them");
  }

  // Parameters, FLOPs and the KV spec: one latent of kv_lora_rank + rope_dim per token and layer.
  const int64_t h = c.hidden_size, nh = c.num_attention_heads, qh = hp->nope_dim + hp->rope_dim;
  const int64_t r = hp->kv_lora_rank, qr = hp->q_lora_rank, dv = hp->v_head_dim, lat = r + hp->rope_dim;
  int64_t attn_linear =
      (qr > 0 ? qr * h + nh * qh * qr : nh * qh * h) + lat * h + nh * (hp->nope_dim + dv) * r + h * nh * dv;
  int64_t attn_other = (qr > 0 ? qr : 0) + r + 2 * h;  // norms (q_a, kv_a, the block's two)
  if (hp->attention_bias) attn_other += (qr > 0 ? qr : 0) + lat + h;
  ParamCounts& p = c.params;
  p.total = c.vocab_size * h * (c.tie_word_embeddings ? 1 : 2) + h;
  p.layer_linear = 0;
  p.active_matmul = c.vocab_size * h;
  c.kv_spec.clear();
  const int64_t mi = hp->moe_intermediate_size, e = hp->num_experts;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool sparse = i >= first_dense && i % freq == 0;
    hp->sparse.push_back(sparse);
    p.total += attn_linear + attn_other;
    p.layer_linear += attn_linear;
    p.active_matmul += attn_linear;
    if (sparse) {
      const int64_t experts = e * 3 * h * mi, shared = hp->num_shared * 3 * h * mi;
      p.total += e * h + experts + shared + (hp->sigmoid ? e : 0);
      p.layer_linear += e * h + experts + shared;
      p.active_matmul += e * h + hp->top_k * 3 * h * mi + shared;
      // The last layer's feed-forward stays; its MLA attention and o_proj run for every row.
      p.last_rows_matmul = e * h + hp->top_k * 3 * h * mi + shared;
      p.expert_params += experts;
      ++p.num_moe_layers;
    } else {
      const int64_t mlp = 3 * h * c.intermediate_size;
      p.total += mlp;
      p.layer_linear += mlp;
      p.active_matmul += mlp;
      p.last_rows_matmul = mlp;
    }
    KvLayerSpec k;
    k.kind = KvKind::kLatent;
    k.num_kv_heads = 1;
    k.latent_dim = lat;
    c.kv_spec.push_back(k);
  }
  for (int64_t k = 0; k < hp->num_mtp_layers; ++k) {
    const int64_t i = c.num_hidden_layers + k;
    hp->mtp_sparse.push_back(i >= first_dense && i % freq == 0);
  }
  // MTP modules read every row's final hidden state, so a model with them computes the last layer for every row
  // (Decoder::forward; a checkpoint without them loads none, and then the roofline counts high).
  if (hp->num_mtp_layers > 0) p.last_rows_matmul = 0;
  p.num_experts = e;
  p.experts_per_tok = hp->top_k;
  // Absorbed attention per key and head: q · [c, k_r] over lat, then Σ p c over kv_lora_rank.
  c.attention_flops_per_key = c.num_hidden_layers * nh * 2 * (lat + r);
  c.hparams = hp;
  return c;
}

Result<ModelConfig> parse_v3(const Json& j, const std::string& what) { return parse(j, what, true); }
Result<ModelConfig> parse_v2(const Json& j, const std::string& what) { return parse(j, what, false); }

// A linear weight [rows, cols] in f32: as stored (f32/f16/bf16), or FP8 e4m3 times its block scale
// `<name>_scale_inv` [ceil(rows / br), ceil(cols / bc)].
Result<std::vector<float>> read_linear(const WeightLoader& w, const DeepseekHParams& hp, const std::string& name,
                                       int64_t rows, int64_t cols) {
  const TensorInfo* t = w.find(name);
  if (t == nullptr || t->dtype != DType::kFP8E4M3) return w.read_f32(name, {rows, cols});
  if (hp.fp8_block_rows == 0) {
    return Status::error(t->file + ": tensor \"" + name + "\" is FP8 but config.json has no fp8 quantization_config");
  }
  if (t->shape != std::vector<int64_t>{rows, cols}) {
    return Status::error(t->file + ": tensor \"" + name + "\" has shape " + t->shape_str() +
                         " but the config implies [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  const int64_t br = hp.fp8_block_rows, bc = hp.fp8_block_cols;
  const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
  RL_ASSIGN_OR_RETURN(std::vector<float> scale, w.read_f32(name + "_scale_inv", {sr, sc}));
  std::vector<float> out(static_cast<size_t>(rows * cols));
  convert_to_f32(t->data, DType::kFP8E4M3, out.data(), out.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k)
      out[static_cast<size_t>(i * cols + k)] *= scale[static_cast<size_t>((i / br) * sc + k / bc)];
  return out;
}

// Gated MLP weights from per-matrix reads: gate_up [2I, H] (gate rows, then up rows), down [H, I].
Status load_mlp(WeightLoader& w, const LinearReader& read, const std::string& p, int64_t h, int64_t inter, Mlp& m) {
  m.hidden = h;
  m.inter = inter;
  RL_ASSIGN_OR_RETURN(m.gate_up, w.load_computed({2 * inter, h}, kDummyScale, [&](float* dst) -> Status {
    RL_ASSIGN_OR_RETURN(std::vector<float> g, read(p + "gate_proj.weight", inter, h));
    RL_ASSIGN_OR_RETURN(std::vector<float> u, read(p + "up_proj.weight", inter, h));
    std::copy(g.begin(), g.end(), dst);
    std::copy(u.begin(), u.end(), dst + inter * h);
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(m.down, w.load_computed({h, inter}, kDummyScale, [&](float* dst) -> Status {
    RL_ASSIGN_OR_RETURN(std::vector<float> d, read(p + "down_proj.weight", h, inter));
    std::copy(d.begin(), d.end(), dst);
    return Status::ok();
  }));
  return Status::ok();
}

// Routed experts then the shared MLP split into num_shared experts of I: [E + S, 2I, H] and [E + S, H, I].
Status load_moe(WeightLoader& w, const LinearReader& read, const DeepseekHParams& hp, const std::string& p, int64_t h,
                Moe& moe) {
  const int64_t e = hp.num_experts, s = hp.num_shared, in = hp.moe_intermediate_size;
  RL_ASSIGN_OR_RETURN(moe.router, w.load({p + "gate.weight"}, {{e, h}}, kDummyScale));
  RL_ASSIGN_OR_RETURN(moe.gate_up, w.load_computed({e + s, 2 * in, h}, kDummyScale, [&](float* dst) -> Status {
    for (int64_t x = 0; x < e; ++x) {
      const std::string ep = p + "experts." + std::to_string(x) + ".";
      RL_ASSIGN_OR_RETURN(std::vector<float> g, read(ep + "gate_proj.weight", in, h));
      RL_ASSIGN_OR_RETURN(std::vector<float> u, read(ep + "up_proj.weight", in, h));
      std::copy(g.begin(), g.end(), dst + x * 2 * in * h);
      std::copy(u.begin(), u.end(), dst + (x * 2 + 1) * in * h);
    }
    if (s == 0) return Status::ok();
    RL_ASSIGN_OR_RETURN(std::vector<float> g, read(p + "shared_experts.gate_proj.weight", s * in, h));
    RL_ASSIGN_OR_RETURN(std::vector<float> u, read(p + "shared_experts.up_proj.weight", s * in, h));
    for (int64_t k = 0; k < s; ++k) {
      std::copy_n(g.data() + k * in * h, in * h, dst + ((e + k) * 2) * in * h);
      std::copy_n(u.data() + k * in * h, in * h, dst + ((e + k) * 2 + 1) * in * h);
    }
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(moe.down, w.load_computed({e + s, h, in}, kDummyScale, [&](float* dst) -> Status {
    for (int64_t x = 0; x < e; ++x) {
      RL_ASSIGN_OR_RETURN(std::vector<float> d, read(p + "experts." + std::to_string(x) + ".down_proj.weight", h, in));
      std::copy(d.begin(), d.end(), dst + x * h * in);
    }
    if (s == 0) return Status::ok();
    RL_ASSIGN_OR_RETURN(std::vector<float> d, read(p + "shared_experts.down_proj.weight", h, s * in));
    for (int64_t k = 0; k < s; ++k)
      for (int64_t row = 0; row < h; ++row) {
        std::copy_n(d.data() + row * s * in + k * in, in, dst + ((e + k) * h + row) * in);
      }
    return Status::ok();
  }));
  return Status::ok();
}

double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// One decoder block at prefix p (a model layer or an MTP module's): norms, MLA, and a dense MLP or the MoE.
Status load_block(WeightLoader& w, Backend& be, const ModelConfig& c, const DeepseekHParams& hp, const MlaSpec& spec,
                  const LinearReader& read, const std::string& p, bool sparse, DecoderBlock& b) {
  const int64_t h = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  RL_RETURN_IF_ERROR(b.attn_norm.load(w, p + "input_layernorm.", h, Norm::Kind::kRms, eps));
  RL_RETURN_IF_ERROR(b.ffn_norm.load(w, p + "post_attention_layernorm.", h, Norm::Kind::kRms, eps));
  b.mla = std::make_unique<MlaAttention>();
  b.mla->init(spec);
  RL_RETURN_IF_ERROR(b.mla->load_hf(w, p + "self_attn.", read, kDummyScale));
  if (!sparse) {
    b.mlp = std::make_unique<Mlp>();
    return load_mlp(w, read, p + "mlp.", h, c.intermediate_size, *b.mlp);
  }
  b.moe = std::make_unique<Moe>();
  MoeRouteParams r;
  r.routing = hp.sigmoid ? MoeRouting::kSigmoidGroupTopK : MoeRouting::kSoftmaxTopK;
  r.norm_topk_prob = hp.norm_topk_prob;
  r.n_group = hp.n_group;
  r.topk_group = hp.topk_group;
  // V2 scales only unnormalised weights; V3 always.
  r.routed_scaling_factor = static_cast<float>(hp.v3 || !hp.norm_topk_prob ? hp.routed_scaling_factor : 1.0);
  r.num_shared = hp.num_shared;
  b.moe->init(hp.num_experts, hp.top_k, h, hp.moe_intermediate_size, ActParams{}, r);
  RL_RETURN_IF_ERROR(load_moe(w, read, hp, p + "mlp.", h, *b.moe));
  if (hp.sigmoid) RL_RETURN_IF_ERROR(b.moe->load_correction_bias(w, be, p + "mlp.gate.e_score_correction_bias"));
  return Status::ok();
}

Result<std::unique_ptr<Model>> build(const ModelConfig& c, const std::string& dir, Backend* be,
                                     const LoadOptions& opts) {
  if (!be->supports_mla()) {
    return Status::error(c.architecture + ": the " + be->name() + " backend has no multi-head latent attention ops");
  }
  const auto& hp = c.arch<DeepseekHParams>();
  auto m = std::make_unique<Decoder>(c, be);
  const int64_t h = c.hidden_size;
  const uint64_t total = static_cast<uint64_t>(c.params.total) * dtype_size(opts.weight_dtype);
  RL_ASSIGN_OR_RETURN(auto w, WeightLoader::create(dir, be, opts, total));
  const float eps = static_cast<float>(c.rms_norm_eps);
  LinearReader read = [&w, &hp](const std::string& name, int64_t rows, int64_t cols) {
    return read_linear(*w, hp, name, rows, cols);
  };
  MlaSpec spec;
  spec.hidden = h;
  spec.num_heads = c.num_attention_heads;
  spec.q_lora_rank = hp.q_lora_rank;
  spec.kv_lora_rank = hp.kv_lora_rank;
  spec.nope_dim = hp.nope_dim;
  spec.rope_dim = hp.rope_dim;
  spec.v_head_dim = hp.v_head_dim;
  spec.bias = hp.attention_bias;
  spec.interleaved = hp.rope_interleave;
  spec.norm_eps = eps;
  double scale = 1.0 / std::sqrt(static_cast<double>(hp.nope_dim + hp.rope_dim));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kYarn && rs.mscale_all_dim > 0) {
    const double ms = yarn_mscale(rs.factor, rs.mscale_all_dim);
    scale *= ms * ms;
  }
  spec.scale = static_cast<float>(scale);
  const float af = rope_attention_factor(c);
  spec.q_rope_scale = af * af;

  RL_ASSIGN_OR_RETURN(m->embed, w->load({"model.embed_tokens.weight"}, {{c.vocab_size, h}}, kDummyScale));
  m->blocks.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    RL_RETURN_IF_ERROR(load_block(*w, *be, c, hp, spec, read, "model.layers." + std::to_string(i) + ".",
                                  hp.sparse[static_cast<size_t>(i)], m->blocks[static_cast<size_t>(i)]));
  }
  RL_RETURN_IF_ERROR(m->final_norm.load(*w, "model.norm.", h, Norm::Kind::kRms, eps));
  if (c.tie_word_embeddings) {
    m->lm_head = m->embed;
  } else {
    RL_ASSIGN_OR_RETURN(m->lm_head, w->load({"lm_head.weight"}, {{c.vocab_size, h}}, kDummyScale));
  }
  // MTP modules, when the checkpoint has the first one's eh_proj (dummy weights and transformers' checkpoints have
  // none). Their embed_tokens and shared_head.head copies are the model's own (DeepSeek-V3 shares them): checked
  // for shape, not loaded twice.
  const std::string first_mtp = "model.layers." + std::to_string(c.num_hidden_layers) + ".";
  if (hp.num_mtp_layers > 0 && w->find(first_mtp + "eh_proj.weight") != nullptr) {
    m->mtp.resize(static_cast<size_t>(hp.num_mtp_layers));
    for (int64_t k = 0; k < hp.num_mtp_layers; ++k) {
      const std::string p = "model.layers." + std::to_string(c.num_hidden_layers + k) + ".";
      Decoder::MtpModule& t = m->mtp[static_cast<size_t>(k)];
      RL_RETURN_IF_ERROR(t.enorm.load(*w, p + "enorm.", h, Norm::Kind::kRms, eps));
      RL_RETURN_IF_ERROR(t.hnorm.load(*w, p + "hnorm.", h, Norm::Kind::kRms, eps));
      RL_RETURN_IF_ERROR(t.head_norm.load(*w, p + "shared_head.norm.", h, Norm::Kind::kRms, eps));
      RL_ASSIGN_OR_RETURN(t.eh_proj, w->load_computed({h, 2 * h}, kDummyScale, [&](float* dst) -> Status {
        RL_ASSIGN_OR_RETURN(std::vector<float> v, read(p + "eh_proj.weight", h, 2 * h));
        std::copy(v.begin(), v.end(), dst);
        return Status::ok();
      }));
      for (const char* shared : {"embed_tokens.weight", "shared_head.head.weight"}) {
        const TensorInfo* ti = w->find(p + shared);
        if (ti != nullptr && ti->shape != std::vector<int64_t>{c.vocab_size, h}) {
          return Status::error(ti->file + ": tensor \"" + p + shared + "\" has shape " + ti->shape_str() +
                               " but the config implies [" + std::to_string(c.vocab_size) + ", " + std::to_string(h) +
                               "]");
        }
      }
      RL_RETURN_IF_ERROR(load_block(*w, *be, c, hp, spec, read, p, hp.mtp_sparse[static_cast<size_t>(k)], t.block));
    }
  }
  m->finish_load(*w, rope_inv_freq(c, hp.rope_dim));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

const Arch kDeepseekV2Arch = {parse_v2, build};
const Arch kDeepseekV3Arch = {parse_v3, build};

}  // namespace rl
