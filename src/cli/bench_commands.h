// `ridgeline bench <what>`: each benchmark is one file (cmd_bench_<what>.cpp) adding its subcommand to the
// "bench" group.
#pragma once

#include <CLI/CLI.hpp>

namespace rl::cli {

void add_bench_throughput(CLI::App* bench, int* exit_code);
void add_bench_kernels(CLI::App* bench, int* exit_code);
void add_bench_latency(CLI::App* bench, int* exit_code);
void add_bench_serve(CLI::App* bench, int* exit_code);
void add_bench_cpu(CLI::App* bench, int* exit_code);

}  // namespace rl::cli
