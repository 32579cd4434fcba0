// ridgeline: the command-line entry point. Each subcommand lives in its own file (src/cli/cmd_*.cpp).
#include <cstdio>
#include <exception>

#include <string>

#include "backend/cpu/cpu_isa.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ridgeline: an LLM inference engine (CPU and CUDA), measured against the roofline", "ridgeline"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print the help of every command");
  app.footer("CPU kernels: " + rl::cpu_isa_description() +
             "; RIDGELINE_CPU_ISA=scalar|avx2|avx512|avx512_bf16|avx512_fp16 forces a lower tier");
  int exit_code = 0;
  rl::cli::add_generate_command(app, &exit_code);
  rl::cli::add_chat_command(app, &exit_code);
  rl::cli::add_inspect_command(app, &exit_code);
  rl::cli::add_bench_command(app, &exit_code);
  rl::cli::add_tokenize_command(app, &exit_code);
  rl::cli::add_detokenize_command(app, &exit_code);
  rl::cli::add_template_command(app, &exit_code);
  rl::cli::add_roofline_command(app, &exit_code);
  rl::cli::add_serve_command(app, &exit_code);
  rl::cli::add_perplexity_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ridgeline: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
