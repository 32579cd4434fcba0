#include "tokenizer/tokenizer.h"

#include "core/file.h"
#include "core/json.h"
#include "tokenizer/unicode.h"

namespace rl {
namespace {

// Ids above this are rejected at load: the id table is dense, so a stray huge id would allocate
// gigabytes.
constexpr int64_t kMaxTokenId = 1 << 24;

// A special token in tokenizer_config.json: a string, an AddedToken object {"content": ...}, or
// null.
std::optional<std::string> config_token(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

Status parse_added_tokens(const Json& j, std::vector<tok::AddedToken>* out) {
  auto it = j.find("added_tokens");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return Status::error("tokenizer.json: \"added_tokens\" must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& a = (*it)[i];
    std::string where = "tokenizer.json: added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object()) return Status::error(where + " must be an object");
    if (!a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 ||
        a["id"].get<int64_t>() > kMaxTokenId) {
      return Status::error(where + " needs an integer \"id\" in [0, " +
                           std::to_string(kMaxTokenId) + "]");
    }
    if (!a.contains("content") || !a["content"].is_string() ||
        a["content"].get<std::string>().empty()) {
      return Status::error(where + " needs a non-empty string \"content\"");
    }
    tok::AddedToken t;
    t.content = a["content"].get<std::string>();
    if (!tok::is_valid_utf8(t.content))
      return Status::error(where + ": \"content\" is not valid UTF-8");
    t.id = static_cast<int32_t>(a["id"].get<int64_t>());
    auto flag = [&](const char* key, bool def) -> Result<bool> {
      auto f = a.find(key);
      if (f == a.end() || f->is_null()) return def;
      if (!f->is_boolean()) return Status::error(where + ": \"" + key + "\" must be a boolean");
      return f->get<bool>();
    };
    RL_ASSIGN_OR_RETURN(t.special, flag("special", false));
    RL_ASSIGN_OR_RETURN(t.lstrip, flag("lstrip", false));
    RL_ASSIGN_OR_RETURN(t.rstrip, flag("rstrip", false));
    RL_ASSIGN_OR_RETURN(t.single_word, flag("single_word", false));
    RL_ASSIGN_OR_RETURN(t.normalized, flag("normalized", !t.special));
    out->push_back(std::move(t));
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& model_dir) {
  std::string path = path_join(model_dir, "tokenizer.json");
  if (!file_exists(path)) return Status::error(model_dir + ": no tokenizer.json in this folder");
  RL_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::string config_text;
  std::string config_path = path_join(model_dir, "tokenizer_config.json");
  if (file_exists(config_path)) {
    RL_ASSIGN_OR_RETURN(config_text, read_file(config_path));
  }
  auto tokenizer = from_json(text, config_text);
  if (!tokenizer) return tokenizer.status().with_context(model_dir);
  return tokenizer;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(const std::string& tokenizer_json,
                                                        const std::string& tokenizer_config_json) {
  RL_ASSIGN_OR_RETURN(Json j, parse_json(tokenizer_json, "tokenizer.json"));
  if (!j.is_object()) return Status::error("tokenizer.json: must be a JSON object");
  std::optional<Json> config;
  if (!tokenizer_config_json.empty()) {
    RL_ASSIGN_OR_RETURN(config, parse_json(tokenizer_config_json, "tokenizer_config.json"));
    if (!config->is_object()) return Status::error("tokenizer_config.json: must be a JSON object");
  }
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer());
  RL_RETURN_IF_ERROR(t->init(j, config ? &*config : nullptr));
  return t;
}

Status Tokenizer::init(const Json& j, const Json* config) {
  static const Json kNull;
  auto field = [&](const char* key) -> const Json& {
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  const Json& model = field("model");
  if (!model.is_object()) return Status::error("tokenizer.json: missing \"model\" object");
  std::string type = model.contains("type") && model["type"].is_string()
                         ? model["type"].get<std::string>()
                     : model.contains("merges") ? "BPE"
                                                : "";
  if (type != "BPE") {
    return Status::error("tokenizer.json: model type \"" + type + "\" is not supported (only BPE)");
  }
  RL_ASSIGN_OR_RETURN(model_, tok::BpeModel::from_json(model, "tokenizer.json: model"));
  RL_ASSIGN_OR_RETURN(normalizer_,
                      tok::parse_normalizer(field("normalizer"), "tokenizer.json: normalizer"));
  RL_ASSIGN_OR_RETURN(pre_tokenizer_, tok::parse_pre_tokenizer(field("pre_tokenizer"),
                                                               "tokenizer.json: pre_tokenizer"));
  RL_ASSIGN_OR_RETURN(post_processor_, tok::parse_post_processor(field("post_processor"),
                                                                 "tokenizer.json: post_processor"));
  RL_ASSIGN_OR_RETURN(decoder_, tok::parse_decoder(field("decoder"), "tokenizer.json: decoder"));
  RL_RETURN_IF_ERROR(parse_added_tokens(j, &added_));

  int64_t max_id = -1;
  for (const auto& [token, id] : model_->vocab()) max_id = std::max<int64_t>(max_id, id);
  if (max_id > kMaxTokenId) {
    return Status::error("tokenizer.json: model vocab id " + std::to_string(max_id) +
                         " is out of range");
  }
  for (const auto& a : added_) max_id = std::max<int64_t>(max_id, a.id);
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  kind_.assign(id_to_token_.size(), Kind::kNone);
  special_.assign(id_to_token_.size(), 0);
  for (const auto& [token, id] : model_->vocab()) {
    id_to_token_[id] = token;
    kind_[id] = Kind::kModel;
  }
  std::vector<std::string> raw_patterns, normalized_patterns;
  std::vector<int32_t> raw_index, normalized_index;
  for (size_t i = 0; i < added_.size(); ++i) {
    const tok::AddedToken& a = added_[i];
    id_to_token_[a.id] = a.content;
    kind_[a.id] = Kind::kAdded;
    special_[a.id] = a.special ? 1 : 0;
    added_by_content_[a.content] = static_cast<int32_t>(i);
    if (a.normalized && normalizer_) {
      normalized_patterns.push_back(normalizer_->normalize(a.content));
      normalized_index.push_back(static_cast<int32_t>(i));
    } else {
      raw_patterns.push_back(a.content);
      raw_index.push_back(static_cast<int32_t>(i));
    }
  }
  raw_matcher_ = tok::AddedTokenMatcher(raw_patterns, raw_index, &added_);
  normalized_matcher_ = tok::AddedTokenMatcher(normalized_patterns, normalized_index, &added_);
  unk_id_ = model_->unk_id();
  if (config) RL_RETURN_IF_ERROR(init_config(*config));
  return Status::ok();
}

Status Tokenizer::init_config(const Json& c) {
  auto resolve = [&](const char* key, std::string* name, std::optional<int32_t>* id) {
    auto token = config_token(c, key);
    if (!token) return;
    if (name) *name = *token;
    if (auto found = token_to_id(*token)) *id = *found;
  };
  resolve("bos_token", &bos_token_, &bos_id_);
  resolve("eos_token", &eos_token_, &eos_id_);
  resolve("pad_token", nullptr, &pad_id_);
  resolve("unk_token", nullptr, &unk_id_);
  if (auto it = c.find("add_bos_token"); it != c.end() && it->is_boolean())
    add_bos_token_ = it->get<bool>();
  if (auto it = c.find("add_eos_token"); it != c.end() && it->is_boolean())
    add_eos_token_ = it->get<bool>();
  if (auto it = c.find("clean_up_tokenization_spaces"); it != c.end() && it->is_boolean()) {
    clean_up_tokenization_spaces_ = it->get<bool>();
  }
  if (auto it = c.find("chat_template"); it != c.end()) {
    if (it->is_string()) {
      chat_template_ = it->get<std::string>();
    } else if (it->is_array()) {
      // Named templates: [{"name": "default", "template": ...}, ...]; "default" wins, else the
      // first.
      for (const Json& t : *it) {
        if (!t.is_object() || !t.contains("template") || !t["template"].is_string()) {
          return Status::error(
              "tokenizer_config.json: chat_template entries must be {\"name\", \"template\"}");
        }
        if (chat_template_.empty() || t.value("name", "") == "default")
          chat_template_ = t["template"].get<std::string>();
      }
    } else if (!it->is_null()) {
      return Status::error(
          "tokenizer_config.json: chat_template must be a string or a list of named templates");
    }
  }
  if (auto it = c.find("additional_special_tokens"); it != c.end() && it->is_array()) {
    for (const Json& t : *it) {
      std::string content = t.is_string()   ? t.get<std::string>()
                            : t.is_object() ? t.value("content", "")
                                            : "";
      if (auto id = token_to_id(content)) special_[*id] = 1;
    }
  }
  return Status::ok();
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  std::string text = tok::utf8_lossy(input);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Segment> sections;
  if (raw_matcher_.empty()) {
    if (!text.empty()) sections.push_back({text, -1});
  } else {
    raw_matcher_.split(text, &sections);
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].token >= 0) {
      ids.push_back(added_[sections[i].token].id);
    } else {
      encode_text(sections[i].text, i, &ids);
    }
  }
  if (post_processor_) post_processor_->process(&ids, add_special_tokens);
  return ids;
}

void Tokenizer::encode_text(std::string_view section, size_t section_index,
                            std::vector<int32_t>* ids) const {
  std::string normalized = normalizer_ ? normalizer_->normalize(section) : std::string(section);
  if (normalized.empty()) return;
  std::vector<tok::Segment> subsections;
  if (normalized_matcher_.empty()) {
    subsections.push_back({normalized, -1});
  } else {
    normalized_matcher_.split(normalized, &subsections);
  }
  std::vector<std::string> pieces;
  for (const tok::Segment& sub : subsections) {
    if (sub.token >= 0) {
      ids->push_back(added_[sub.token].id);
      continue;
    }
    pieces.clear();
    pieces.emplace_back(sub.text);
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(&pieces, section_index);
    for (const std::string& p : pieces) {
      if (!p.empty()) model_->encode(p, ids);
    }
  }
}

std::string Tokenizer::decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<tok::DecodeToken> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || kind_[id] == Kind::kNone) continue;
    if (skip_special_tokens && special_[id]) continue;
    tokens.push_back({id_to_token_[id], kind_[id] == Kind::kAdded});
  }
  std::string out;
  if (decoder_) {
    decoder_->decode_chain(&tokens);
    for (const auto& t : tokens) out += t.text;
    return out;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += tokens[i].text;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text = decode_raw(ids, skip_special_tokens);
  return clean_up_tokenization_spaces_ ? tok::clean_up_tokenization(text) : text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_by_content_.find(token); it != added_by_content_.end())
    return added_[it->second].id;
  if (auto it = model_->vocab().find(token); it != model_->vocab().end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return id_to_token_[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

}  // namespace rl
