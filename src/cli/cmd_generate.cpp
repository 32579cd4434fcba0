#include "cli/commands.h"

namespace rl::cli {
void add_generate_command(CLI::App& app, int* exit_code) {
  (void)app;
  (void)exit_code;
}
}  // namespace rl::cli
