// ModelConfig: what a dense decoder needs from config.json, validated; GenerationConfig from
// generation_config.json. Parsing is strict about anything that would change results (unknown rope_scaling
// types, an active sliding window, activations other than SiLU) and names the offending key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl {

enum class RopeScalingType { kNone, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
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

  int64_t max_context_len() const {
    return sliding_window > 0 && sliding_window < max_position_embeddings ? sliding_window
                                                                            : max_position_embeddings;
  }
  int64_t q_size() const { return num_attention_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  // Parameters as transformers counts them (tied embeddings counted once).
  int64_t num_params() const;
  // K and V for every layer, per token.
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const {
    return 2 * num_hidden_layers * num_kv_heads * head_dim * bytes_per_element;
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

// Architectures the dense decoder implements (the model registry holds the same list).
const std::vector<std::string>& supported_architectures();

Result<ModelConfig> parse_model_config(const Json& j, const std::string& what = "config.json");
Result<ModelConfig> load_model_config(const std::string& path);
Result<GenerationConfig> parse_generation_config(const Json& j, const std::string& what = "generation_config.json");
// Missing file → defaults with the config's eos ids.
Result<GenerationConfig> load_generation_config(const std::string& model_dir, const ModelConfig& config);

}  // namespace rl
