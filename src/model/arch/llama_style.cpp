// Helpers shared by the Llama-style architectures (Llama, Mistral, Qwen2/3, Qwen3-MoE, GPT-OSS).
#include <cmath>

#include "loader/config_fields.h"
#include "model/arch/archs.h"
#include "model/rope.h"

namespace rl {

int64_t llama_attention_linear(const ModelConfig& c) {
  return 2 * c.hidden_size * c.q_size() + 2 * c.hidden_size * c.kv_size();
}

int64_t llama_attention_params(const ModelConfig& c, bool sinks) {
  int64_t n = llama_attention_linear(c);
  if (c.qkv_bias) n += c.q_size() + 2 * c.kv_size();
  if (c.o_bias) n += c.hidden_size;
  if (c.qk_norm) n += 2 * c.head_dim;
  if (sinks) n += c.num_attention_heads;
  return n;
}

void llama_base_counts(ModelConfig& c, const std::vector<int64_t>& windows, bool sinks) {
  const int64_t h = c.hidden_size, layers = c.num_hidden_layers;
  ParamCounts& p = c.params;
  p.total = layers * (llama_attention_params(c, sinks) + 2 * h) + c.vocab_size * h + h;
  if (!c.tie_word_embeddings) p.total += c.vocab_size * h;
  p.layer_linear = layers * llama_attention_linear(c);
  p.active_matmul = p.layer_linear + c.vocab_size * h;
  p.last_rows_matmul = c.num_attention_heads * c.head_dim * h;  // o_proj; each arch adds its feed-forward
  p.last_attention_rows = true;
  c.attention_flops_per_key = layers * c.num_attention_heads * 4 * c.head_dim;
  c.kv_spec.clear();
  for (int64_t i = 0; i < layers; ++i) {
    KvLayerSpec k;
    k.num_kv_heads = c.num_kv_heads;
    k.head_dim = k.v_head_dim = c.head_dim;
    const int64_t w = windows.empty() ? 0 : windows[static_cast<size_t>(i)];
    if (w > 0) {
      k.kind = KvKind::kSliding;
      k.window = w;
    }
    c.kv_spec.push_back(k);
  }
}

Status require_silu(const Json& j, const std::string& what) {
  std::string act;
  RL_RETURN_IF_ERROR(read_string(j, "hidden_act", &act, what));
  if (!act.empty() && act != "silu" && act != "swish") {
    return Status::error(what + ": hidden_act \"" + act + "\" is not supported (supported: silu)");
  }
  return Status::ok();
}

Result<std::unique_ptr<Model>> build_llama_style(const ModelConfig& c, const std::string& model_dir, Backend* be,
                                                 const LoadOptions& opts, const AttnSpecFn& attn_spec,
                                                 const std::function<FfnLoadFn(WeightLoader&)>& make_ffn_loader,
                                                 const ExtraLoadFn& extra) {
  auto m = std::make_unique<Decoder>(c, be);
  const int64_t h = c.hidden_size;
  const uint64_t total = static_cast<uint64_t>(c.params.total) * dtype_size(opts.weight_dtype) /
                         static_cast<uint64_t>(opts.tp ? opts.tp->plan.tp_size : 1);
  RL_ASSIGN_OR_RETURN(auto w, WeightLoader::create(model_dir, be, opts, total));
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float s = kDummyScale;
  using R = parallel::WeightRole;  // tensor parallelism: vocab-parallel embedding and lm_head
  m->set_tensor_parallel(opts.tp);
  RL_ASSIGN_OR_RETURN(m->embed,
                      w->load_sharded({"model.embed_tokens.weight"}, {{c.vocab_size, h}}, {R::kEmbedding}, s));
  FfnLoadFn load_ffn = make_ffn_loader(*w);
  m->blocks.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderBlock& b = m->blocks[static_cast<size_t>(i)];
    RL_RETURN_IF_ERROR(b.attn_norm.load(*w, p + "input_layernorm.", h, Norm::Kind::kRms, eps));
    RL_RETURN_IF_ERROR(b.ffn_norm.load(*w, p + "post_attention_layernorm.", h, Norm::Kind::kRms, eps));
    b.attn.init(attn_spec(i));
    RL_RETURN_IF_ERROR(b.attn.load_hf(*w, p + "self_attn.", s));
    if (extra) RL_RETURN_IF_ERROR(extra(i, p, b, *w));
    RL_RETURN_IF_ERROR(load_ffn(i, p + "mlp.", b));
  }
  RL_RETURN_IF_ERROR(m->final_norm.load(*w, "model.norm.", h, Norm::Kind::kRms, eps));
  // Tied embeddings share the table; some tied checkpoints still carry lm_head.weight, which is then ignored.
  if (c.tie_word_embeddings) {
    m->lm_head = m->embed;
  } else {
    RL_ASSIGN_OR_RETURN(m->lm_head, w->load_sharded({"lm_head.weight"}, {{c.vocab_size, h}}, {R::kLmHead}, s));
  }
  m->finish_load(*w, rope_inv_freq(c));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace rl
