// Qwen3MoeForCausalLM: the Qwen3 decoder (q/k norm, GQA, RoPE) whose feed-forward is a mixture of experts on
// the layers decoder_sparse_step selects (layer i is sparse when (i + 1) % step == 0 and i is not in
// mlp_only_layers) and a dense SiLU MLP elsewhere. Routing: softmax over all experts, top-k, renormalised
// when norm_topk_prob. Checkpoints: mlp.gate.weight [E, H], mlp.experts.{e}.{gate,up,down}_proj.weight.
#include <algorithm>

#include "loader/config_fields.h"
#include "model/arch/archs.h"

namespace rl {

namespace {

struct Qwen3MoeHParams : ArchHParams {
  int64_t moe_intermediate_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  std::vector<bool> sparse;  // per layer
};

Result<ModelConfig> parse(const Json& j, const std::string& what) {
  RL_ASSIGN_OR_RETURN(ModelConfig c, parse_common_config(j, what));
  RL_RETURN_IF_ERROR(require_silu(j, what));
  auto hp = std::make_shared<Qwen3MoeHParams>();
  using namespace config_limits;
  const Presence req = Presence::kRequired;
  RL_RETURN_IF_ERROR(
      read_int_in_range(j, "intermediate_size", 1, kMaxIntermediate, &c.intermediate_size, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "moe_intermediate_size", 1, kMaxIntermediate,
                                       &hp->moe_intermediate_size, what, req));
  // "num_experts" in the published configs; transformers 5 writes "num_local_experts".
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_local_experts", 1, kMaxExperts, &hp->num_experts, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_experts", 1, kMaxExperts, &hp->num_experts, what,
                                       hp->num_experts == 0 ? req : Presence::kOptional));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_experts_per_tok", 1, hp->num_experts, &hp->top_k, what, req));
  RL_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", &hp->norm_topk_prob, what));
  int64_t step = 1;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "decoder_sparse_step", 1, c.num_hidden_layers, &step, what));
  std::vector<int64_t> mlp_only;
  RL_RETURN_IF_ERROR(read_int_list(j, "mlp_only_layers", 0, c.num_hidden_layers - 1,
                                   static_cast<size_t>(kMaxLayers), &mlp_only, what));
  bool attention_bias = false;
  RL_RETURN_IF_ERROR(read_bool(j, "attention_bias", &attention_bias, what));
  c.qkv_bias = c.o_bias = attention_bias;
  c.qk_norm = true;
  bool use_sw = false;
  RL_RETURN_IF_ERROR(read_bool(j, "use_sliding_window", &use_sw, what));
  if (use_sw) return Status::error(what + ": use_sliding_window is not supported for Qwen3-MoE");

  llama_base_counts(c, {}, false);
  const int64_t h = c.hidden_size, e = hp->num_experts, mi = hp->moe_intermediate_size;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool sparse = std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end() && (i + 1) % step == 0;
    hp->sparse.push_back(sparse);
    if (sparse) {
      const int64_t experts = e * 3 * h * mi;
      c.params.total += e * h + experts;
      c.params.layer_linear += e * h + experts;
      c.params.active_matmul += e * h + hp->top_k * 3 * h * mi;
      if (i + 1 == c.num_hidden_layers) c.params.last_rows_matmul += e * h + hp->top_k * 3 * h * mi;
      c.params.expert_params += experts;
      ++c.params.num_moe_layers;
    } else {
      const int64_t mlp = 3 * h * c.intermediate_size;
      c.params.total += mlp;
      c.params.layer_linear += mlp;
      c.params.active_matmul += mlp;
      if (i + 1 == c.num_hidden_layers) c.params.last_rows_matmul += mlp;
    }
  }
  c.params.num_experts = e;
  c.params.experts_per_tok = hp->top_k;
  c.hparams = hp;
  return c;
}

Result<std::unique_ptr<Model>> build(const ModelConfig& c, const std::string& dir, Backend* be,
                                     const LoadOptions& opts) {
  const auto& hp = c.arch<Qwen3MoeHParams>();
  auto spec = [&c](int64_t) {
    AttentionSpec s;
    s.hidden = c.hidden_size;
    s.num_heads = c.num_attention_heads;
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.qkv_bias = c.qkv_bias;
    s.o_bias = c.o_bias;
    s.qk_norm = true;
    s.norm_eps = static_cast<float>(c.rms_norm_eps);
    return s;
  };
  auto ffn = [&c, &hp](WeightLoader& w) -> FfnLoadFn {
    return [&c, &hp, &w](int64_t i, const std::string& p, DecoderBlock& b) -> Status {
      if (!hp.sparse[static_cast<size_t>(i)]) {
        b.mlp = std::make_unique<Mlp>();
        return b.mlp->load_gated_hf(w, p, c.hidden_size, c.intermediate_size, false, kDummyScale);
      }
      b.moe = std::make_unique<Moe>();
      MoeRouteParams r;
      r.routing = MoeRouting::kSoftmaxTopK;
      r.norm_topk_prob = hp.norm_topk_prob;
      b.moe->init(hp.num_experts, hp.top_k, c.hidden_size, hp.moe_intermediate_size, ActParams{}, r);
      return b.moe->load_per_expert_hf(w, p, p + "gate.weight", kDummyScale);
    };
  };
  return build_llama_style(c, dir, be, opts, spec, ffn);
}

}  // namespace

const Arch kQwen3MoeArch = {parse, build};

}  // namespace rl
