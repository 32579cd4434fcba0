// `ridgeline template`: renders a model's chat template for a conversation, as transformers'
// apply_chat_template(tokenize=False) would, and prints the prompt. Needs only tokenizer_config.json (or
// chat_template.jinja) in the model folder.
#include <cstdio>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/file.h"
#include "core/json.h"

namespace rl::cli {

namespace {

struct TemplateOptions {
  ModelOptions model;
  std::string messages_file;
  std::string tools_file;
  std::string kwargs_json;
  bool add_generation_prompt = false;
};

Result<OrderedJson> load_json(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_ordered_json(text, path);
}

Result<std::string> run_template(const TemplateOptions& o) {
  RL_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::from_model_dir(resolve_model_dir(o.model)));
  ChatTemplateInputs in;
  RL_ASSIGN_OR_RETURN(in.messages, load_json(o.messages_file));
  if (in.messages.is_object() && in.messages.contains("messages")) in.messages = in.messages["messages"];
  if (!o.tools_file.empty()) {
    RL_ASSIGN_OR_RETURN(in.tools, load_json(o.tools_file));
  }
  if (!o.kwargs_json.empty()) {
    RL_ASSIGN_OR_RETURN(in.extra, parse_ordered_json(o.kwargs_json, "--kwargs"));
    if (!in.extra.is_object()) return Status::error("--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  }
  in.add_generation_prompt = o.add_generation_prompt;
  return tmpl.apply(in);
}

}  // namespace

void add_template_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("template", "Render the model's chat template for a conversation");
  auto opts = std::make_shared<TemplateOptions>();
  add_model_dir_option(cmd, &opts->model);
  cmd->add_option("--messages", opts->messages_file, "JSON file: a list of {role, content, ...} messages")
      ->required();
  cmd->add_option("--tools", opts->tools_file, "JSON file: a list of tool (function) definitions");
  cmd->add_flag("--add-generation-prompt", opts->add_generation_prompt,
                "End with the header of an assistant turn, ready for generation");
  cmd->add_option("--kwargs", opts->kwargs_json,
                  "Extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
  cmd->callback([opts, exit_code] {
    auto out = run_template(*opts);
    if (!out) {
      std::fprintf(stderr, "ridgeline: error: %s\n", out.message().c_str());
      *exit_code = 1;
      return;
    }
    std::fwrite(out->data(), 1, out->size(), stdout);
    *exit_code = 0;
  });
}

}  // namespace rl::cli
