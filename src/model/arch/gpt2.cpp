// GPT2LMHeadModel: learned absolute positions (wpe) added to the token embedding, pre-LayerNorm blocks (with
// bias), fused c_attn q/k/v with biases and no RoPE, GELU (tanh approximation) MLP, final ln_f, lm_head tied to
// wte. Checkpoints store Conv1D weights as [in, out]; they are transposed at load into the [out, in] every
// linear op takes. Tensor names may or may not carry the "transformer." prefix (the Hub's gpt2 does not).
#include "loader/config_fields.h"
#include "model/arch/archs.h"

namespace rl {

namespace {

struct Gpt2HParams : ArchHParams {
  int64_t inner = 0;
  float eps = 1e-5f;
};

Result<ModelConfig> parse(const Json& j, const std::string& what) {
  // GPT-2's keys, renamed to the common ones (transformers' attribute_map).
  Json t = j;
  const std::pair<const char*, const char*> kRename[] = {{"n_embd", "hidden_size"},
                                                         {"n_layer", "num_hidden_layers"},
                                                         {"n_head", "num_attention_heads"},
                                                         {"n_positions", "max_position_embeddings"}};
  for (const auto& [from, to] : kRename) {
    if (t.contains(from) && !t.contains(to)) t[to] = t[from];
  }
  if (!t.contains("tie_word_embeddings")) t["tie_word_embeddings"] = true;
  RL_ASSIGN_OR_RETURN(ModelConfig c, parse_common_config(t, what));
  auto hp = std::make_shared<Gpt2HParams>();
  hp->inner = 4 * c.hidden_size;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "n_inner", 1, config_limits::kMaxIntermediate, &hp->inner, what));
  RL_RETURN_IF_ERROR(require_int_range(hp->inner, "n_inner", 1, config_limits::kMaxIntermediate, what));
  double eps = 1e-5;
  RL_RETURN_IF_ERROR(read_positive_double(j, "layer_norm_epsilon", 1.0, &eps, what));
  hp->eps = static_cast<float>(eps);
  std::string act = "gelu_new";
  RL_RETURN_IF_ERROR(read_string(j, "activation_function", &act, what));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    return Status::error(what + ": activation_function \"" + act +
                         "\" is not supported (supported: gelu_new, gelu_pytorch_tanh)");
  }
  bool by_layer = false, scale_weights = true;
  RL_RETURN_IF_ERROR(read_bool(j, "scale_attn_by_inverse_layer_idx", &by_layer, what));
  RL_RETURN_IF_ERROR(read_bool(j, "scale_attn_weights", &scale_weights, what));
  if (by_layer || !scale_weights) {
    return Status::error(what + ": only scale_attn_weights = true, scale_attn_by_inverse_layer_idx = false");
  }
  if (c.num_kv_heads != c.num_attention_heads) return Status::error(what + ": GPT-2 attention is MHA");
  c.intermediate_size = hp->inner;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  const int64_t h = c.hidden_size, layers = c.num_hidden_layers, in = hp->inner;
  const int64_t linear = 4 * h * h + 2 * h * in;
  const int64_t per_layer = linear + 3 * h + h + in + h + 4 * h;  // + biases + two LayerNorms
  c.params.total = layers * per_layer + c.vocab_size * h + c.max_position_embeddings * h + 2 * h;
  if (!c.tie_word_embeddings) c.params.total += c.vocab_size * h;
  c.params.layer_linear = layers * linear;
  c.params.active_matmul = layers * linear + c.vocab_size * h;
  c.params.last_rows_matmul = h * h + 2 * h * in;  // c_proj and the MLP
  c.params.last_attention_rows = true;
  c.attention_flops_per_key = layers * c.num_attention_heads * 4 * c.head_dim;
  for (int64_t i = 0; i < layers; ++i) {
    KvLayerSpec k;
    k.num_kv_heads = c.num_kv_heads;
    k.head_dim = k.v_head_dim = c.head_dim;
    c.kv_spec.push_back(k);
  }
  c.hparams = hp;
  return c;
}

// A Conv1D weight [in, out] → [out, in].
Result<Tensor> load_conv1d(WeightLoader& w, const std::string& name, int64_t in, int64_t out) {
  return w.load_computed({out, in}, kDummyScale, [&](float* dst) -> Status {
    RL_ASSIGN_OR_RETURN(std::vector<float> src, w.read_f32(name, {in, out}));
    for (int64_t r = 0; r < in; ++r)
      for (int64_t c = 0; c < out; ++c) dst[c * in + r] = src[static_cast<size_t>(r * out + c)];
    return Status::ok();
  });
}

Result<std::unique_ptr<Model>> build(const ModelConfig& c, const std::string& dir, Backend* be,
                                     const LoadOptions& opts) {
  const auto& hp = c.arch<Gpt2HParams>();
  auto m = std::make_unique<Decoder>(c, be);
  const int64_t h = c.hidden_size, in = hp.inner;
  const float s = kDummyScale;
  RL_ASSIGN_OR_RETURN(
      auto w,
      WeightLoader::create(dir, be, opts, static_cast<uint64_t>(c.params.total) * dtype_size(opts.weight_dtype)));
  const std::string t = w->dummy() || w->find("transformer.wte.weight") ? "transformer." : "";
  RL_ASSIGN_OR_RETURN(m->embed, w->load({t + "wte.weight"}, {{c.vocab_size, h}}, s));
  RL_ASSIGN_OR_RETURN(m->pos_embed,
                      w->load_unquantized({t + "wpe.weight"}, {{c.max_position_embeddings, h}}, s));
  m->blocks.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = t + "h." + std::to_string(i) + ".";
    DecoderBlock& b = m->blocks[static_cast<size_t>(i)];
    RL_RETURN_IF_ERROR(b.attn_norm.load(*w, p + "ln_1.", h, Norm::Kind::kLayer, hp.eps));
    RL_RETURN_IF_ERROR(b.ffn_norm.load(*w, p + "ln_2.", h, Norm::Kind::kLayer, hp.eps));
    AttentionSpec spec;
    spec.hidden = h;
    spec.num_heads = spec.num_kv_heads = c.num_attention_heads;
    spec.head_dim = c.head_dim;
    spec.qkv_bias = spec.o_bias = true;
    spec.rope = false;
    b.attn.init(spec);
    RL_ASSIGN_OR_RETURN(b.attn.qkv, load_conv1d(*w, p + "attn.c_attn.weight", h, 3 * h));
    RL_ASSIGN_OR_RETURN(b.attn.qkv_bias, w->load({p + "attn.c_attn.bias"}, {{3 * h}}, s));
    RL_ASSIGN_OR_RETURN(b.attn.o, load_conv1d(*w, p + "attn.c_proj.weight", h, h));
    RL_ASSIGN_OR_RETURN(b.attn.o_bias, w->load({p + "attn.c_proj.bias"}, {{h}}, s));
    b.mlp = std::make_unique<Mlp>();
    b.mlp->hidden = h;
    b.mlp->inter = in;
    b.mlp->act.kind = Activation::kGeluTanh;
    RL_ASSIGN_OR_RETURN(b.mlp->gate_up, load_conv1d(*w, p + "mlp.c_fc.weight", h, in));
    RL_ASSIGN_OR_RETURN(b.mlp->gate_up_bias, w->load({p + "mlp.c_fc.bias"}, {{in}}, s));
    RL_ASSIGN_OR_RETURN(b.mlp->down, load_conv1d(*w, p + "mlp.c_proj.weight", in, h));
    RL_ASSIGN_OR_RETURN(b.mlp->down_bias, w->load({p + "mlp.c_proj.bias"}, {{h}}, s));
  }
  RL_RETURN_IF_ERROR(m->final_norm.load(*w, t + "ln_f.", h, Norm::Kind::kLayer, hp.eps));
  if (c.tie_word_embeddings) {
    m->lm_head = m->embed;
  } else {
    RL_ASSIGN_OR_RETURN(m->lm_head, w->load({"lm_head.weight"}, {{c.vocab_size, h}}, s));
  }
  m->finish_load(*w, {});
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

const Arch kGpt2Arch = {parse, build};

}  // namespace rl
