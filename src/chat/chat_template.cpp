#include "chat/chat_template.h"

#include <utility>

#include "chat/template_error.h"
#include "core/file.h"

namespace rl {

namespace {

const char* const kSpecialTokenKeys[] = {"bos_token", "eos_token",  "unk_token", "sep_token",
                                         "pad_token", "cls_token", "mask_token"};

// A special token is a string or an AddedToken object {"content": "<s>", ...}; null means unset.
Result<std::string> token_text(const OrderedJson& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return Status::error(key + " must be a string or an object with a string \"content\"");
}

Result<std::shared_ptr<const jinja::Template>> parse_named(const std::string& source, const std::string& what) {
  auto t = jinja::Template::parse(source);
  if (!t) return t.status().with_context(what);
  return std::make_shared<const jinja::Template>(std::move(t).value());
}

Result<jinja::Object> special_tokens_from(const OrderedJson& config, const std::string& what) {
  jinja::Object tokens;
  if (!config.is_object()) return Status::error(what + ": expected a JSON object");
  for (const char* key : kSpecialTokenKeys) {
    if (!config.contains(key) || config[key].is_null()) continue;
    auto text = token_text(config[key], key);
    if (!text) return text.status().with_context(what);
    tokens.set(key, jinja::Value::string(*text));
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    jinja::Array list;
    for (const auto& t : config["additional_special_tokens"]) {
      auto text = token_text(t, "additional_special_tokens");
      if (!text) return text.status().with_context(what);
      list.push_back(jinja::Value::string(*text));
    }
    tokens.set("additional_special_tokens", jinja::Value::array(std::move(list)));
  }
  return tokens;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_source(const std::string& source, const OrderedJson& special_tokens) {
  ChatTemplate ct;
  RL_ASSIGN_OR_RETURN(ct.default_, parse_named(source, "chat template"));
  if (!special_tokens.is_null()) {
    RL_ASSIGN_OR_RETURN(ct.special_tokens_, special_tokens_from(special_tokens, "special tokens"));
  }
  return ct;
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const OrderedJson& config, const std::string& what) {
  ChatTemplate ct;
  RL_ASSIGN_OR_RETURN(ct.special_tokens_, special_tokens_from(config, what));
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return Status::error(what + ": no chat_template (this model has no chat template)");
  }
  const OrderedJson& tmpl = config["chat_template"];
  if (tmpl.is_string()) {
    RL_ASSIGN_OR_RETURN(ct.default_, parse_named(tmpl.get<std::string>(), what + ": chat_template"));
    return ct;
  }
  if (!tmpl.is_array()) return Status::error(what + ": chat_template must be a string or a list of {name, template}");
  for (const auto& entry : tmpl) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      return Status::error(what + ": each chat_template entry needs string \"name\" and \"template\"");
    }
    std::string name = entry["name"].get<std::string>();
    if (name != "default" && name != "tool_use") continue;
    RL_ASSIGN_OR_RETURN(auto parsed, parse_named(entry["template"].get<std::string>(), what + ": chat_template '" + name + "'"));
    (name == "default" ? ct.default_ : ct.tool_use_) = std::move(parsed);
  }
  if (!ct.default_ && !ct.tool_use_) {
    return Status::error(what + ": chat_template list has neither a \"default\" nor a \"tool_use\" template");
  }
  return ct;
}

Result<ChatTemplate> ChatTemplate::from_model_dir(const std::string& model_dir) {
  std::string config_path = path_join(model_dir, "tokenizer_config.json");
  OrderedJson config = OrderedJson::object();
  if (file_exists(config_path)) {
    RL_ASSIGN_OR_RETURN(std::string text, read_file(config_path));
    RL_ASSIGN_OR_RETURN(config, parse_ordered_json(text, config_path));
  }
  std::string jinja_path = path_join(model_dir, "chat_template.jinja");
  if (file_exists(jinja_path)) {
    RL_ASSIGN_OR_RETURN(std::string source, read_file(jinja_path));
    ChatTemplate ct;
    RL_ASSIGN_OR_RETURN(ct.default_, parse_named(source, jinja_path));
    RL_ASSIGN_OR_RETURN(ct.special_tokens_, special_tokens_from(config, config_path));
    return ct;
  }
  if (!file_exists(config_path)) {
    return Status::error(model_dir + ": no tokenizer_config.json or chat_template.jinja (no chat template)");
  }
  return from_tokenizer_config(config, config_path);
}

Result<std::string> ChatTemplate::apply(const ChatTemplateInputs& in) const {
  if (!in.messages.is_array()) return Status::error("chat template: messages must be a JSON array");
  bool has_tools = !in.tools.is_null();
  const jinja::Template* tmpl = (has_tools && tool_use_) ? tool_use_.get() : default_.get();
  if (tmpl == nullptr) return Status::error("chat template: no \"default\" template for a request without tools");
  if (!in.extra.is_null() && !in.extra.is_object()) return Status::error("chat template: kwargs must be a JSON object");

  jinja::Object vars;
  try {  // from_json throws on JSON nested deeper than jinja::kMaxValueDepth
    vars.set("messages", jinja::Value::from_json(in.messages, "messages"));
    vars.set("tools", jinja::Value::from_json(in.tools, "tools"));
    vars.set("documents", jinja::Value::from_json(in.documents, "documents"));
    vars.set("add_generation_prompt", jinja::Value::boolean(in.add_generation_prompt));
    for (const auto& kv : special_tokens_.items) vars.set(kv.first, kv.second);
    if (in.extra.is_object()) {
      for (auto it = in.extra.begin(); it != in.extra.end(); ++it) {
        const std::string& key = it.key();
        if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
          return Status::error("chat template: kwarg '" + key + "' conflicts with the argument of that name");
        }
        vars.set(key, jinja::Value::from_json(it.value(), key));
      }
    }
  } catch (const jinja::TemplateError& e) {
    return Status::error("chat template: " + e.message());
  }
  jinja::RenderOptions options;
  options.now_unix_seconds = in.now_unix_seconds;
  auto out = tmpl->render(vars, limits_, options);
  if (!out) return out.status().with_context("chat template");
  return out;
}

}  // namespace rl
