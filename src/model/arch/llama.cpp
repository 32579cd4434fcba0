// LlamaForCausalLM, and the dense Llama-style decoder Mistral, Qwen2 and Qwen3 share: RMSNorm, GQA with RoPE
// (llama3 or YaRN scaling), SiLU-gated MLP. Differences are hyper-parameters: biases (attention_bias, mlp_bias,
// Qwen2's q/k/v bias), Qwen3's q/k norm, sliding windows.
#include "loader/config_fields.h"
#include "model/arch/archs.h"
#include "model/arch/dense.h"

namespace rl {

Result<ModelConfig> parse_dense(const Json& j, const std::string& what, DenseFlavor flavor) {
  RL_ASSIGN_OR_RETURN(ModelConfig c, parse_common_config(j, what));
  RL_RETURN_IF_ERROR(require_silu(j, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "intermediate_size", 1, config_limits::kMaxIntermediate,
                                       &c.intermediate_size, what, Presence::kRequired));
  bool attention_bias = false;
  RL_RETURN_IF_ERROR(read_bool(j, "attention_bias", &attention_bias, what));
  RL_RETURN_IF_ERROR(read_bool(j, "mlp_bias", &c.mlp_bias, what));
  switch (flavor) {
    case DenseFlavor::kQwen2:
      c.qkv_bias = true;
      break;  // always q/k/v bias, no o_proj bias
    case DenseFlavor::kMistral:
      break;
    case DenseFlavor::kLlama:
    case DenseFlavor::kQwen3:
      c.qkv_bias = c.o_bias = attention_bias;
      break;
  }
  c.qk_norm = flavor == DenseFlavor::kQwen3;
  // Sliding window: attention over at most `window` positions equals full attention while the sequence fits in
  // the window, so the model is accepted and its context is capped there (ModelConfig::max_context_len).
  int64_t window = 0;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "sliding_window", 0, config_limits::kMaxPositions, &window, what));
  bool use_sw = flavor == DenseFlavor::kMistral;
  if (flavor == DenseFlavor::kQwen2 || flavor == DenseFlavor::kQwen3) {
    RL_RETURN_IF_ERROR(read_bool(j, "use_sliding_window", &use_sw, what));
    int64_t max_window_layers = 0;
    RL_RETURN_IF_ERROR(read_int_in_range(j, "max_window_layers", 0, config_limits::kMaxLayers, &max_window_layers,
                                         what));
    // transformers applies the window only to layers at index >= max_window_layers.
    if (use_sw && j.contains("max_window_layers") && max_window_layers >= c.num_hidden_layers) use_sw = false;
  }
  if (use_sw && window > 0) c.sliding_window = window;
  llama_base_counts(c, {}, false);
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;
  c.params.total += c.num_hidden_layers * (mlp + (c.mlp_bias ? 2 * c.intermediate_size + c.hidden_size : 0));
  c.params.layer_linear += c.num_hidden_layers * mlp;
  c.params.active_matmul += c.num_hidden_layers * mlp;
  c.params.last_rows_matmul += mlp;
  return c;
}

Result<std::unique_ptr<Model>> build_dense(const ModelConfig& c, const std::string& dir, Backend* be,
                                           const LoadOptions& opts) {
  auto spec = [&c](int64_t) {
    AttentionSpec s;
    s.hidden = c.hidden_size;
    s.num_heads = c.num_attention_heads;
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.qkv_bias = c.qkv_bias;
    s.o_bias = c.o_bias;
    s.qk_norm = c.qk_norm;
    s.norm_eps = static_cast<float>(c.rms_norm_eps);
    return s;
  };
  auto ffn = [&c](WeightLoader& w) -> FfnLoadFn {
    return [&c, &w](int64_t, const std::string& p, DecoderBlock& b) {
      b.mlp = std::make_unique<Mlp>();
      return b.mlp->load_gated_hf(w, p, c.hidden_size, c.intermediate_size, c.mlp_bias, kDummyScale);
    };
  };
  return build_llama_style(c, dir, be, opts, spec, ffn);
}

const Arch kLlamaArch = {
    [](const Json& j, const std::string& what) { return parse_dense(j, what, DenseFlavor::kLlama); }, build_dense,
    /*tensor_parallel=*/true};

}  // namespace rl
