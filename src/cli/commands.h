// Every subcommand registers itself on the CLI11 app through one add_*_command function (one file each).
// A command's callback stores its exit code in *exit_code; errors are printed by the command itself.
#pragma once

#include <CLI/CLI.hpp>

namespace rl::cli {

void add_generate_command(CLI::App& app, int* exit_code);
void add_chat_command(CLI::App& app, int* exit_code);
void add_inspect_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_tokenize_command(CLI::App& app, int* exit_code);
void add_detokenize_command(CLI::App& app, int* exit_code);
void add_template_command(CLI::App& app, int* exit_code);
void add_roofline_command(CLI::App& app, int* exit_code);
void add_serve_command(CLI::App& app, int* exit_code);
void add_perplexity_command(CLI::App& app, int* exit_code);

}  // namespace rl::cli
