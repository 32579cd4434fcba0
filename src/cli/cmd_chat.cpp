// `ridgeline chat`: an interactive REPL over the model's chat template, with history, /reset and /exit. Reads a
// pipe too (one user message per line), printing only the replies.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "runtime/text_stream.h"

namespace rl::cli {

namespace {

struct ChatOptions {
  EngineOptions engine;
  SamplingOptions sampling;
  std::string system;
};

int run(const ChatOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "ridgeline: error: %s\n", m.c_str());
    return 1;
  };
  const std::string dir = resolve_model_dir(o.engine.model);
  auto tmpl = ChatTemplate::from_model_dir(dir);
  if (!tmpl) return fail(tmpl.message());
  auto er = make_engine(o.engine);
  if (!er) return fail(er.message());
  Engine& engine = **er;
  if (!engine.tokenizer()) return fail("the model folder has no tokenizer.json");
  SamplingParams params = make_sampling_params(o.sampling, engine.generation_config());
  if (Status st = params.validate(static_cast<int32_t>(engine.model_config().vocab_size)); !st) {
    return fail(st.message());
  }
  const bool tty = ::isatty(STDIN_FILENO) == 1;
  if (tty) std::fprintf(stderr, "ridgeline chat: /reset clears the history, /exit (or Ctrl-D) quits\n");
  OrderedJson history = OrderedJson::array();
  if (!o.system.empty()) history.push_back({{"role", "system"}, {"content", o.system}});
  const OrderedJson initial = history;
  std::string line;
  int turn = 0;
  while (true) {
    if (tty) {
      std::fprintf(stdout, "> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history = initial;
      if (tty) std::fprintf(stderr, "(history cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});
    ChatTemplateInputs in;
    in.messages = history;
    in.add_generation_prompt = true;
    auto prompt_text = tmpl->apply(in);
    if (!prompt_text) return fail(prompt_text.message());
    std::vector<TokenId> prompt = engine.tokenizer()->encode(*prompt_text, false);
    if (static_cast<int64_t>(prompt.size()) >= engine.max_model_len()) {
      std::fprintf(stderr, "ridgeline: the conversation no longer fits the context (%d tokens); use /reset\n",
                   engine.max_model_len());
      history.erase(history.end() - 1);
      continue;
    }
    SamplingParams p = params;
    p.max_tokens = std::min<int32_t>(params.max_tokens.value_or(512),
                                     engine.max_model_len() - static_cast<int32_t>(prompt.size()));
    const std::string id = "chat-" + std::to_string(turn++);
    auto ch = engine.submit(id, prompt, p);
    TextStream text(*engine.tokenizer(), p.stop);
    std::string reply;
    std::string error;
    while (auto m = ch->pop()) {
      for (const TokenOutput& t : m->tokens) {
        TextStream::Piece piece = text.push(t.token);
        reply += piece.text;
        std::fwrite(piece.text.data(), 1, piece.text.size(), stdout);
        std::fflush(stdout);
        if (piece.stopped) engine.abort(id, FinishReason::kStop);
      }
      if (m->finish == FinishReason::kError) error = m->error;
    }
    std::string rest = text.finish();
    reply += rest;
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!error.empty()) return fail(error);
    history.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace

void add_chat_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("chat", "Interactive chat over the model's chat template (also reads a pipe)");
  auto o = std::make_shared<ChatOptions>();
  cmd->add_option("--system", o->system, "System prompt");
  add_engine_options(cmd, &o->engine);
  add_sampling_options(cmd, &o->sampling);
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
