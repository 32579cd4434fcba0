#include "loader/model_config.h"

#include <algorithm>

#include "core/file.h"
#include "loader/config_fields.h"

namespace rl {

namespace {

using namespace config_limits;

Status parse_rope_scaling(const Json& rs_json, RopeScaling* rs, const std::string& what) {
  std::string type;
  RL_RETURN_IF_ERROR(read_string(rs_json, "type", &type, what));
  RL_RETURN_IF_ERROR(read_string(rs_json, "rope_type", &type, what));
  if (type == "default" || type.empty()) return Status::ok();
  if (type == "yarn") {
    rs->type = RopeScalingType::kYarn;
    RL_RETURN_IF_ERROR(read_double_in_range(rs_json, "factor", 1, 1024, &rs->factor, what));
    RL_RETURN_IF_ERROR(read_positive_double(rs_json, "beta_fast", 1e4, &rs->beta_fast, what));
    RL_RETURN_IF_ERROR(read_positive_double(rs_json, "beta_slow", 1e4, &rs->beta_slow, what));
    RL_RETURN_IF_ERROR(read_double_in_range(rs_json, "mscale", 0, 1e4, &rs->mscale, what));
    RL_RETURN_IF_ERROR(read_double_in_range(rs_json, "mscale_all_dim", 0, 1e4, &rs->mscale_all_dim, what));
    RL_RETURN_IF_ERROR(read_double_in_range(rs_json, "attention_factor", 0, 1e4, &rs->attention_factor, what));
    RL_RETURN_IF_ERROR(read_bool(rs_json, "truncate", &rs->truncate, what));
    rs->original_max_position_embeddings = 0;  // 0: max_position_embeddings (set by parse_common_config)
    RL_RETURN_IF_ERROR(read_int_in_range(rs_json, "original_max_position_embeddings", 1, kMaxPositions,
                                         &rs->original_max_position_embeddings, what));
    return Status::ok();
  }
  if (type != "llama3") {
    return Status::error(what + ": rope_scaling type \"" + type +
                         "\" is not supported (supported: llama3, yarn, default)");
  }
  rs->type = RopeScalingType::kLlama3;
  RL_RETURN_IF_ERROR(read_positive_double(rs_json, "factor", 1024, &rs->factor, what));
  RL_RETURN_IF_ERROR(read_positive_double(rs_json, "low_freq_factor", 1e4, &rs->low_freq_factor, what));
  RL_RETURN_IF_ERROR(read_positive_double(rs_json, "high_freq_factor", 1e4, &rs->high_freq_factor, what));
  RL_RETURN_IF_ERROR(read_int_in_range(rs_json, "original_max_position_embeddings", 1, kMaxPositions,
                                       &rs->original_max_position_embeddings, what, Presence::kRequired));
  if (!(rs->high_freq_factor > rs->low_freq_factor)) {
    return Status::error(what + ": llama3 rope scaling needs low_freq_factor < high_freq_factor");
  }
  return Status::ok();
}

}  // namespace

int64_t ModelConfig::kv_bytes_per_token(int64_t bytes_per_element) const {
  int64_t elems = 0;
  for (const KvLayerSpec& l : kv_spec) elems += l.elems_per_token();
  return elems * bytes_per_element;
}

int64_t ModelConfig::kv_bytes_at(int64_t context, int64_t bytes_per_element) const {
  int64_t elems = 0;
  for (const KvLayerSpec& l : kv_spec) elems += l.elems_per_token() * l.live_tokens(context);
  return elems * bytes_per_element;
}

Result<ModelConfig> parse_common_config(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be a JSON object");
  ModelConfig c;
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
    return Status::error(what + ": \"architectures\" must be a non-empty list of strings");
  }
  c.architecture = (*arch)[0].get<std::string>();
  const Presence req = Presence::kRequired;
  RL_RETURN_IF_ERROR(read_string(j, "model_type", &c.model_type, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "vocab_size", 1, kMaxVocab, &c.vocab_size, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "hidden_size", 1, kMaxHidden, &c.hidden_size, what, req));
  // Required by the architectures that have one dense MLP size (their parsers say so); GPT-2 has n_inner.
  RL_RETURN_IF_ERROR(read_int_in_range(j, "intermediate_size", 1, kMaxIntermediate, &c.intermediate_size, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_hidden_layers", 1, kMaxLayers, &c.num_hidden_layers, what, req));
  RL_RETURN_IF_ERROR(
      read_int_in_range(j, "num_attention_heads", 1, kMaxHeads, &c.num_attention_heads, what, req));
  c.num_kv_heads = c.num_attention_heads;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_key_value_heads", 1, kMaxHeads, &c.num_kv_heads, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "head_dim", 1, kMaxHeadDim, &c.head_dim, what));
  c.max_position_embeddings = 4096;  // when absent
  RL_RETURN_IF_ERROR(
      read_int_in_range(j, "max_position_embeddings", 1, kMaxPositions, &c.max_position_embeddings, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "bos_token_id", 0, kMaxTokenId, &c.bos_token_id, what));
  RL_RETURN_IF_ERROR(read_id_list(j, "eos_token_id", kMaxTokenId, &c.eos_token_ids, what));
  RL_RETURN_IF_ERROR(read_positive_double(j, "rms_norm_eps", 1.0, &c.rms_norm_eps, what));
  RL_RETURN_IF_ERROR(read_positive_double(j, "rope_theta", 1e12, &c.rope_theta, what));
  // transformers 5 may nest rope_theta (and the scaling type) under rope_parameters.
  const Json* rope_parameters = nullptr;
  RL_RETURN_IF_ERROR(read_object(j, "rope_parameters", &rope_parameters, what));
  if (rope_parameters != nullptr) {
    RL_RETURN_IF_ERROR(
        read_positive_double(*rope_parameters, "rope_theta", 1e12, &c.rope_theta, what + ": rope_parameters"));
    RL_RETURN_IF_ERROR(parse_rope_scaling(*rope_parameters, &c.rope_scaling, what + ": rope_parameters"));
  }
  const Json* rope_scaling = nullptr;
  RL_RETURN_IF_ERROR(read_object(j, "rope_scaling", &rope_scaling, what));
  if (rope_scaling != nullptr) {
    RL_RETURN_IF_ERROR(parse_rope_scaling(*rope_scaling, &c.rope_scaling, what + ": rope_scaling"));
  }
  RL_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", &c.tie_word_embeddings, what));
  RL_RETURN_IF_ERROR(read_string(j, "dtype", &c.torch_dtype, what));
  RL_RETURN_IF_ERROR(read_string(j, "torch_dtype", &c.torch_dtype, what));

  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      return Status::error(what + ": hidden_size must be divisible by num_attention_heads when head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
    RL_RETURN_IF_ERROR(require_int_range(c.head_dim, "head_dim (hidden_size / num_attention_heads)", 1,
                                         kMaxHeadDim, what));
  }
  if (c.num_attention_heads % c.num_kv_heads != 0) {
    return Status::error(what + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                         ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) return Status::error(what + ": head_dim must be even for RoPE");
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.original_max_position_embeddings == 0) {
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  }
  return c;
}

Result<GenerationConfig> parse_generation_config(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be a JSON object");
  GenerationConfig g;
  RL_RETURN_IF_ERROR(read_id_list(j, "eos_token_id", kMaxTokenId, &g.eos_token_ids, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "bos_token_id", 0, kMaxTokenId, &g.bos_token_id, what));
  RL_RETURN_IF_ERROR(read_bool(j, "do_sample", &g.do_sample, what));
  RL_RETURN_IF_ERROR(read_double_in_range(j, "temperature", 0, 1e4, &g.temperature, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "top_k", 0, kMaxVocab, &g.top_k, what));
  RL_RETURN_IF_ERROR(read_double_in_range(j, "top_p", 0, 1, &g.top_p, what));
  RL_RETURN_IF_ERROR(read_double_in_range(j, "min_p", 0, 1, &g.min_p, what));
  RL_RETURN_IF_ERROR(read_positive_double(j, "repetition_penalty", 1e4, &g.repetition_penalty, what));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "max_new_tokens", 0, kMaxTokenId, &g.max_new_tokens, what));
  return g;
}

Result<GenerationConfig> load_generation_config(const std::string& model_dir, const ModelConfig& config) {
  std::string path = path_join(model_dir, "generation_config.json");
  GenerationConfig g;
  if (file_exists(path)) {
    RL_ASSIGN_OR_RETURN(Json j, load_json_file(path));
    RL_ASSIGN_OR_RETURN(g, parse_generation_config(j, path));
  }
  if (g.eos_token_ids.empty()) g.eos_token_ids = config.eos_token_ids;
  if (g.bos_token_id < 0) g.bos_token_id = config.bos_token_id;
  return g;
}

}  // namespace rl
