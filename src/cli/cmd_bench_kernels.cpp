// `ridgeline bench kernels`: the CUDA kernel benchmarks (src/backend/cuda/kernel_bench.h). scripts/device/bench.sh
// runs them with the torch peers in the same call and prints the table with the % of roofline.
#include <cstdio>

#include "cli/bench_commands.h"
#ifdef RIDGELINE_CUDA
#include "backend/cuda/kernel_bench.h"
#endif

namespace rl::cli {

void add_bench_kernels(CLI::App* bench, int* exit_code) {
  auto* cmd = bench->add_subcommand(
      "kernels",
      "CUDA kernel benchmarks: GEMV/GEMM, decode and prefill attention, MLA, the sampler, the prefill's "
      "element-wise kernels, copy bandwidth (RESULT lines)");
  auto only = std::make_shared<std::string>();
  auto device = std::make_shared<int>(0);
  cmd->add_option("group", *only,
                  "Only this group: copy, linear, gemv, skinny, decode, prefill, prefill_production (its "
                  "production rows alone), prefill_trace (where a prefill launch's time goes, item by item; not "
                  "in the default), prefill_placement (the 1 x 16k row over eight fresh allocations; not in the "
                  "default), mla, sample or elementwise (default: all)");
  cmd->add_option("--device-index", *device, "CUDA device")->capture_default_str();
  cmd->callback([only, device, exit_code] {
#ifdef RIDGELINE_CUDA
    *exit_code = run_kernel_benchmarks(*only, *device);
#else
    (void)only;
    (void)device;
    std::fprintf(stderr, "ridgeline: error: bench kernels needs the CUDA build (cmake --preset cuda)\n");
    *exit_code = 1;
#endif
  });
}

}  // namespace rl::cli
