// `ridgeline tokenize` and `ridgeline detokenize`: text ↔ ids with a model folder's tokenizer.json
// (only the tokenizer files are needed: no config.json, no weights).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/file.h"
#include "tokenizer/tokenizer.h"

namespace rl::cli {
namespace {

struct TokenizeOptions {
  ModelOptions model;
  bool no_special = false;
  std::string text;
  std::string file;
  bool skip_special = false;
  std::vector<std::string> ids;
};

std::unique_ptr<Tokenizer> load_tokenizer(const ModelOptions& model, int* exit_code) {
  auto tok = Tokenizer::load(resolve_model_dir(model));
  if (!tok) {
    std::fprintf(stderr, "ridgeline: error: %s\n", tok.message().c_str());
    *exit_code = 1;
    return nullptr;
  }
  return std::move(tok).value();
}

// Ids come as separate arguments or whitespace/comma-separated inside one argument ("1 2 3").
Result<std::vector<int32_t>> parse_ids(const std::vector<std::string>& args) {
  std::vector<int32_t> ids;
  for (const std::string& arg : args) {
    size_t i = 0;
    while (i < arg.size()) {
      if (arg[i] == ' ' || arg[i] == ',' || arg[i] == '\t' || arg[i] == '\n') {
        ++i;
        continue;
      }
      size_t end = arg.find_first_of(" ,\t\n", i);
      if (end == std::string::npos) end = arg.size();
      std::string word = arg.substr(i, end - i);
      char* stop = nullptr;
      errno = 0;
      long long v = std::strtoll(word.c_str(), &stop, 10);
      if (*stop != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) {
        return Status::error("\"" + word + "\" is not a token id (a 32-bit integer)");
      }
      ids.push_back(static_cast<int32_t>(v));
      i = end;
    }
  }
  return ids;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd =
      app.add_subcommand("tokenize", "Print the token ids of a text (space-separated, one line)");
  add_model_dir_option(cmd, &opts->model);
  cmd->add_flag("--no-special", opts->no_special,
                "Do not add the post-processor's special tokens (e.g. BOS)");
  auto* text =
      cmd->add_option("text", opts->text, "Text to tokenize (default: --file, else stdin)");
  cmd->add_option("--file", opts->file, "Read the text (raw bytes) from this file")->excludes(text);
  cmd->callback([opts, exit_code] {
    auto tok = load_tokenizer(opts->model, exit_code);
    if (!tok) return;
    std::string input = opts->text;
    if (!opts->file.empty()) {
      auto data = read_file(opts->file);
      if (!data) {
        std::fprintf(stderr, "ridgeline: error: %s\n", data.message().c_str());
        *exit_code = 1;
        return;
      }
      input = std::move(data).value();
    } else if (opts->text.empty()) {
      input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    std::vector<int32_t> ids = tok->encode(input, !opts->no_special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  });
}

void add_detokenize_command(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("detokenize",
                                 "Print the text of token ids (ids naming no token are skipped)");
  add_model_dir_option(cmd, &opts->model);
  cmd->add_flag("--skip-special", opts->skip_special, "Leave out special tokens");
  cmd->add_option("ids", opts->ids,
                  "Token ids (separate arguments or one quoted, space-separated list)")
      ->required();
  cmd->callback([opts, exit_code] {
    auto ids = parse_ids(opts->ids);
    if (!ids) {
      std::fprintf(stderr, "ridgeline: error: %s\n", ids.message().c_str());
      *exit_code = 1;
      return;
    }
    auto tok = load_tokenizer(opts->model, exit_code);
    if (!tok) return;
    std::string text = tok->decode(*ids, opts->skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace rl::cli
