// ModelConfig: the architecture-independent view of a model's config.json that the runtime, the KV cache, the
// cost model and `inspect` read; GenerationConfig from generation_config.json. Each architecture's own file
// (src/model/arch) parses its hyper-parameters and fills this view, including the per-layer KV spec and the
// parameter counts; parse_common_config reads the fields every decoder shares. Parsing is strict about
// anything that would change results (unknown rope_scaling types, unknown activations) and names the key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/json.h"
#include "core/status.h"

namespace rl {

enum class RopeScalingType { kNone, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 8192;
  // YaRN (transformers' _compute_yarn_parameters): 0 = absent.
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 0, mscale_all_dim = 0, attention_factor = 0;
  bool truncate = true;
};

// What the KV cache holds for one layer, per token.
enum class KvKind {
  kFull,     // K [num_kv_heads, head_dim] and V [num_kv_heads, v_head_dim] of every position
  kSliding,  // the same, but attention reads only the last `window` positions
  kLatent,   // one latent vector of latent_dim values (MLA: kv_lora_rank + rope dim); no separate V
};
struct KvLayerSpec {
  KvKind kind = KvKind::kFull;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t window = 0;      // kSliding
  int64_t latent_dim = 0;  // kLatent
  int64_t elems_per_token() const { return kind == KvKind::kLatent ? latent_dim : num_kv_heads * (head_dim + v_head_dim); }
  // Positions of a `context`-token sequence that attention reads (and the cache must keep).
  int64_t live_tokens(int64_t context) const { return kind == KvKind::kSliding && window < context ? window : context; }
};

// Parameter counts, filled by the architecture (transformers' convention: tied embeddings once).
struct ParamCounts {
  int64_t total = 0;
  // Per token: every weight a token multiplies — attention, dense MLPs, the router, top_k experts (+ shared),
  // lm_head. Equals `total` minus the embeddings for dense models.
  int64_t active_matmul = 0;
  // Of those, the last layer's weights after its KV write: o_proj and the feed-forward (dense MLP, or router +
  // top_k experts + shared experts); MLA's the feed-forward only. A prefill multiplies them, as lm_head, only for
  // the rows whose logits it returns (Decoder::forward runs the rest of the last layer on those rows).
  int64_t last_rows_matmul = 0;
  // Whether that layer's attention, too, runs for those rows only (not MLA's).
  bool last_attention_rows = false;
  // Weights of the decoder layers' matmuls (the part a weight precision applies to), all experts included.
  int64_t layer_linear = 0;
  // Routed-expert weights of all MoE layers (part of layer_linear), and the shape of their routing.
  int64_t expert_params = 0;  // all experts of all MoE layers
  int64_t num_moe_layers = 0;
  int64_t num_experts = 0;
  int64_t experts_per_tok = 0;
};

// Architecture-specific hyper-parameters: each arch file derives its own struct and reads it back.
struct ArchHParams {
  virtual ~ArchHParams() = default;
};

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;    // "qwen3", "llama", ...
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in config.json or hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qkv_bias = false;   // bias on q/k/v projections (Qwen2; Llama/Qwen3 attention_bias)
  bool o_bias = false;     // bias on o_proj (Llama/Qwen3 attention_bias)
  bool mlp_bias = false;   // Llama mlp_bias
  bool qk_norm = false;    // Qwen3: RMSNorm over head_dim on q and k before RoPE
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  // An active sliding window (0: none). Attention is exact only while a sequence is no longer than the window,
  // so the runtime caps the context length at it (max_context_len()).
  int64_t sliding_window = 0;
  std::string torch_dtype;  // as written in config.json ("bfloat16", "float32", ...), may be empty
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // from config.json; generation_config.json takes precedence

  // Filled by the architecture's parser.
  std::vector<KvLayerSpec> kv_spec;  // one per layer
  ParamCounts params;
  // One query against one key in every layer (QK^T and PV, multiply-add = 2 FLOPs).
  int64_t attention_flops_per_key = 0;
  std::vector<std::string> notes;  // facts `inspect` shows (e.g. "MXFP4 experts dequantised to bf16 at load")
  std::shared_ptr<const ArchHParams> hparams;

  int64_t max_context_len() const {
    return sliding_window > 0 && sliding_window < max_position_embeddings ? sliding_window
                                                                            : max_position_embeddings;
  }
  int64_t q_size() const { return num_attention_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  // Parameters as transformers counts them (tied embeddings counted once).
  int64_t num_params() const { return params.total; }
  // What one more token adds to the cache of a long sequence, over all layers (window layers included: the
  // bytes are written; they are freed once the window has passed).
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const;
  // KV bytes that attention reads for one sequence of `context` tokens (window layers read at most their
  // window), and that the cache must hold for it.
  int64_t kv_bytes_at(int64_t context, int64_t bytes_per_element) const;
  template <typename T>
  const T& arch() const {
    const T* p = dynamic_cast<const T*>(hparams.get());
    RL_CHECK_MSG(p != nullptr, "config of %s has no hyper-parameters of this architecture", architecture.c_str());
    return *p;
  }
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: disabled
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  int64_t max_new_tokens = -1;  // -1: not given
};

// The fields every decoder shares: architecture, model_type, vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: heads), head_dim (default hidden / heads), max positions,
// bos/eos, rms_norm_eps, rope_theta and rope_scaling (also under transformers 5's rope_parameters),
// tie_word_embeddings, torch_dtype. intermediate_size is read when present. Validated ranges.
// Architecture-specific fields are the arch file's (model/registry.h: parse_model_config).
Result<ModelConfig> parse_common_config(const Json& j, const std::string& what);
Result<GenerationConfig> parse_generation_config(const Json& j, const std::string& what = "generation_config.json");
// Missing file → defaults with the config's eos ids.
Result<GenerationConfig> load_generation_config(const std::string& model_dir, const ModelConfig& config);

}  // namespace rl
