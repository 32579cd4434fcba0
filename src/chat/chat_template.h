// Chat templates: messages (+ tools, documents, kwargs) → the prompt string, exactly as transformers'
// apply_chat_template(tokenize=False) renders it. The template comes from a model folder's chat_template.jinja
// or tokenizer_config.json ("chat_template": a string, or a list of {name, template} where "tool_use" is picked
// when tools are given and "default" otherwise), with the special tokens of tokenizer_config.json (bos_token,
// eos_token, ...; strings or AddedToken objects {"content": ...}) as variables.
//
//   RL_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::from_model_dir(dir));
//   ChatTemplateInputs in;
//   in.messages = OrderedJson::parse(R"([{"role": "user", "content": "Hi"}])");
//   in.add_generation_prompt = true;
//   RL_ASSIGN_OR_RETURN(std::string prompt, tmpl.apply(in));
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "chat/jinja.h"
#include "core/json.h"
#include "core/status.h"

namespace rl {

struct ChatTemplateInputs {
  OrderedJson messages = OrderedJson::array();  // [{role, content, tool_calls?, reasoning_content?, ...}]
  OrderedJson tools;                            // null = no tools (the template sees tools = None)
  OrderedJson documents;                        // null = no documents
  bool add_generation_prompt = false;
  OrderedJson extra = OrderedJson::object();    // more template kwargs: enable_thinking, date_string, ...
  int64_t now_unix_seconds = -1;                // strftime_now's clock; < 0 = now (local time), else UTC
};

class ChatTemplate {
 public:
  // chat_template.jinja if the folder has one, else tokenizer_config.json's chat_template; special tokens from
  // tokenizer_config.json.
  static Result<ChatTemplate> from_model_dir(const std::string& model_dir);
  // From a parsed tokenizer_config.json; `what` names it in errors.
  static Result<ChatTemplate> from_tokenizer_config(const OrderedJson& config, const std::string& what);
  // From template source and an object of special tokens ({"bos_token": "<s>", ...}).
  static Result<ChatTemplate> from_source(const std::string& source, const OrderedJson& special_tokens);

  // Renders; thread-safe. Errors (bad inputs, raise_exception, limits) name the template line.
  Result<std::string> apply(const ChatTemplateInputs& inputs) const;

  jinja::RenderLimits& limits() { return limits_; }

 private:
  std::shared_ptr<const jinja::Template> default_;   // may be null when only named templates exist
  std::shared_ptr<const jinja::Template> tool_use_;  // may be null
  jinja::Object special_tokens_;
  jinja::RenderLimits limits_;
};

}  // namespace rl
