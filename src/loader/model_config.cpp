#include "loader/model_config.h"

#include <algorithm>
#include <cmath>

#include "core/file.h"
#include "loader/config_fields.h"

namespace rl {

// Reads an integer field; `required` missing → error naming the key.
Status get_int(const Json& j, const char* key, int64_t* out, bool required, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::error(what + ": missing required key \"" + key + "\"");
    return Status::ok();
  }
  if (it->is_number_integer() || it->is_number_unsigned()) {
    *out = it->get<int64_t>();
    return Status::ok();
  }
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e15) {
      *out = static_cast<int64_t>(d);
      return Status::ok();
    }
  }
  return Status::error(what + ": \"" + key + "\" must be an integer, got " + it->dump());
}

Status get_double(const Json& j, const char* key, double* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return Status::error(what + ": \"" + key + "\" must be a number, got " + it->dump());
  *out = it->get<double>();
  return Status::ok();
}

Status get_bool(const Json& j, const char* key, bool* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return Status::error(what + ": \"" + key + "\" must be a boolean, got " + it->dump());
  *out = it->get<bool>();
  return Status::ok();
}

Status get_string(const Json& j, const char* key, std::string* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_string()) return Status::error(what + ": \"" + key + "\" must be a string, got " + it->dump());
  *out = it->get<std::string>();
  return Status::ok();
}

Status check_range(int64_t v, int64_t lo, int64_t hi, const char* key, const std::string& what) {
  if (v < lo || v > hi) {
    return Status::error(what + ": \"" + key + "\" must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + std::to_string(v));
  }
  return Status::ok();
}

Status get_int_list(const Json& j, const char* key, std::vector<int64_t>* out, int64_t lo, int64_t hi,
                    size_t max_len, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || it->size() > max_len) {
    return Status::error(what + ": \"" + key + "\" must be a list of at most " + std::to_string(max_len) +
                         " integers");
  }
  out->clear();
  for (const auto& v : *it) {
    if (!v.is_number_integer()) return Status::error(what + ": \"" + key + "\" must hold integers");
    RL_RETURN_IF_ERROR(check_range(v.get<int64_t>(), lo, hi, key, what));
    out->push_back(v.get<int64_t>());
  }
  return Status::ok();
}

Status get_id_list(const Json& j, const char* key, std::vector<int64_t>* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  out->clear();
  if (it->is_number_integer()) {
    out->push_back(it->get<int64_t>());
    return Status::ok();
  }
  if (it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return Status::error(what + ": \"" + key + "\" must hold integers");
      out->push_back(v.get<int64_t>());
    }
    return Status::ok();
  }
  return Status::error(what + ": \"" + key + "\" must be an integer or a list of integers");
}

namespace {

Status parse_rope_scaling(const Json& j, RopeScaling* rs, const std::string& what) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return Status::error(what + ": \"rope_scaling\" must be an object or null");
  std::string type;
  if (it->contains("rope_type") && (*it)["rope_type"].is_string()) type = (*it)["rope_type"].get<std::string>();
  else if (it->contains("type") && (*it)["type"].is_string()) type = (*it)["type"].get<std::string>();
  if (type == "default" || type.empty()) return Status::ok();
  if (type == "yarn") {
    const std::string w = what + ": rope_scaling";
    rs->type = RopeScalingType::kYarn;
    RL_RETURN_IF_ERROR(get_double(*it, "factor", &rs->factor, w));
    RL_RETURN_IF_ERROR(get_double(*it, "beta_fast", &rs->beta_fast, w));
    RL_RETURN_IF_ERROR(get_double(*it, "beta_slow", &rs->beta_slow, w));
    RL_RETURN_IF_ERROR(get_double(*it, "mscale", &rs->mscale, w));
    RL_RETURN_IF_ERROR(get_double(*it, "mscale_all_dim", &rs->mscale_all_dim, w));
    RL_RETURN_IF_ERROR(get_double(*it, "attention_factor", &rs->attention_factor, w));
    RL_RETURN_IF_ERROR(get_bool(*it, "truncate", &rs->truncate, w));
    rs->original_max_position_embeddings = 0;
    RL_RETURN_IF_ERROR(get_int(*it, "original_max_position_embeddings", &rs->original_max_position_embeddings,
                               false, w));
    if (!(rs->factor >= 1) || !(rs->beta_fast > 0) || !(rs->beta_slow > 0) ||
        rs->original_max_position_embeddings < 0) {
      return Status::error(w + ": yarn needs factor >= 1, beta_fast > 0, beta_slow > 0");
    }
    return Status::ok();
  }
  if (type != "llama3") {
    return Status::error(what + ": rope_scaling type \"" + type +
                         "\" is not supported (supported: llama3, yarn, default)");
  }
  rs->type = RopeScalingType::kLlama3;
  RL_RETURN_IF_ERROR(get_double(*it, "factor", &rs->factor, what + ": rope_scaling"));
  RL_RETURN_IF_ERROR(get_double(*it, "low_freq_factor", &rs->low_freq_factor, what + ": rope_scaling"));
  RL_RETURN_IF_ERROR(get_double(*it, "high_freq_factor", &rs->high_freq_factor, what + ": rope_scaling"));
  RL_RETURN_IF_ERROR(get_int(*it, "original_max_position_embeddings", &rs->original_max_position_embeddings,
                             true, what + ": rope_scaling"));
  if (!(rs->factor > 0) || !(rs->low_freq_factor > 0) || !(rs->high_freq_factor > rs->low_freq_factor) ||
      rs->original_max_position_embeddings <= 0) {
    return Status::error(what + ": rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor "
                                "and original_max_position_embeddings > 0");
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
  if (j.contains("model_type") && j["model_type"].is_string()) c.model_type = j["model_type"].get<std::string>();
  RL_RETURN_IF_ERROR(get_int(j, "vocab_size", &c.vocab_size, true, what));
  RL_RETURN_IF_ERROR(get_int(j, "hidden_size", &c.hidden_size, true, what));
  RL_RETURN_IF_ERROR(get_int(j, "intermediate_size", &c.intermediate_size, false, what));
  RL_RETURN_IF_ERROR(get_int(j, "num_hidden_layers", &c.num_hidden_layers, true, what));
  RL_RETURN_IF_ERROR(get_int(j, "num_attention_heads", &c.num_attention_heads, true, what));
  c.num_kv_heads = c.num_attention_heads;
  RL_RETURN_IF_ERROR(get_int(j, "num_key_value_heads", &c.num_kv_heads, false, what));
  RL_RETURN_IF_ERROR(get_int(j, "head_dim", &c.head_dim, false, what));
  RL_RETURN_IF_ERROR(get_int(j, "max_position_embeddings", &c.max_position_embeddings, false, what));
  RL_RETURN_IF_ERROR(get_int(j, "bos_token_id", &c.bos_token_id, false, what));
  RL_RETURN_IF_ERROR(get_id_list(j, "eos_token_id", &c.eos_token_ids, what));
  RL_RETURN_IF_ERROR(get_double(j, "rms_norm_eps", &c.rms_norm_eps, what));
  RL_RETURN_IF_ERROR(get_double(j, "rope_theta", &c.rope_theta, what));
  // transformers 5 may nest rope_theta under rope_parameters.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    RL_RETURN_IF_ERROR(get_double(j["rope_parameters"], "rope_theta", &c.rope_theta, what + ": rope_parameters"));
    Json wrapped = {{"rope_scaling", j["rope_parameters"]}};
    RL_RETURN_IF_ERROR(parse_rope_scaling(wrapped, &c.rope_scaling, what + ": rope_parameters"));
  }
  RL_RETURN_IF_ERROR(parse_rope_scaling(j, &c.rope_scaling, what));
  RL_RETURN_IF_ERROR(get_bool(j, "tie_word_embeddings", &c.tie_word_embeddings, what));
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) c.torch_dtype = j["torch_dtype"].get<std::string>();
  else if (j.contains("dtype") && j["dtype"].is_string()) c.torch_dtype = j["dtype"].get<std::string>();

  if (c.head_dim == 0) {
    if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0) {
      return Status::error(what + ": hidden_size must be divisible by num_attention_heads when head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  auto positive = [&](int64_t v, const char* key) -> Status {
    if (v <= 0 || v > (int64_t{1} << 31)) {
      return Status::error(what + ": \"" + key + "\" must be in [1, 2^31], got " + std::to_string(v));
    }
    return Status::ok();
  };
  RL_RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  RL_RETURN_IF_ERROR(positive(c.hidden_size, "hidden_size"));
  if (c.intermediate_size != 0) RL_RETURN_IF_ERROR(positive(c.intermediate_size, "intermediate_size"));
  RL_RETURN_IF_ERROR(positive(c.num_hidden_layers, "num_hidden_layers"));
  RL_RETURN_IF_ERROR(positive(c.num_attention_heads, "num_attention_heads"));
  RL_RETURN_IF_ERROR(positive(c.num_kv_heads, "num_key_value_heads"));
  RL_RETURN_IF_ERROR(positive(c.head_dim, "head_dim"));
  if (c.num_attention_heads % c.num_kv_heads != 0) {
    return Status::error(what + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                         ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) return Status::error(what + ": head_dim must be even for RoPE");
  if (!(c.rms_norm_eps > 0)) return Status::error(what + ": rms_norm_eps must be > 0");
  if (!(c.rope_theta > 0)) return Status::error(what + ": rope_theta must be > 0");
  if (c.max_position_embeddings <= 0) c.max_position_embeddings = 4096;
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.original_max_position_embeddings == 0) {
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  }
  return c;
}

Result<GenerationConfig> parse_generation_config(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be a JSON object");
  GenerationConfig g;
  RL_RETURN_IF_ERROR(get_id_list(j, "eos_token_id", &g.eos_token_ids, what));
  RL_RETURN_IF_ERROR(get_int(j, "bos_token_id", &g.bos_token_id, false, what));
  RL_RETURN_IF_ERROR(get_bool(j, "do_sample", &g.do_sample, what));
  RL_RETURN_IF_ERROR(get_double(j, "temperature", &g.temperature, what));
  RL_RETURN_IF_ERROR(get_int(j, "top_k", &g.top_k, false, what));
  RL_RETURN_IF_ERROR(get_double(j, "top_p", &g.top_p, what));
  RL_RETURN_IF_ERROR(get_double(j, "min_p", &g.min_p, what));
  RL_RETURN_IF_ERROR(get_double(j, "repetition_penalty", &g.repetition_penalty, what));
  RL_RETURN_IF_ERROR(get_int(j, "max_new_tokens", &g.max_new_tokens, false, what));
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
