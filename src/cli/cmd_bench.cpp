// The `bench` command group.
#include "cli/bench_commands.h"
#include "cli/commands.h"

namespace rl::cli {

void add_bench_command(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: measured against predicted (roofline) and peers");
  bench->require_subcommand(1);
  add_bench_throughput(bench, exit_code);
  add_bench_kernels(bench, exit_code);
  add_bench_latency(bench, exit_code);
  add_bench_serve(bench, exit_code);
  add_bench_cpu(bench, exit_code);
}

}  // namespace rl::cli
