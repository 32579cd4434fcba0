// Kernel benchmarks of the CUDA backend at real model shapes (`ridgeline bench kernels`, and the rl_bench_kernels
// executable used by scripts/device/bench.sh): GEMV/GEMM, split-KV decode attention, FA2 prefill attention and
// a device-to-device copy for the bandwidth ceiling. Prints `RESULT <kernel> <shape> <value> <unit>` lines, which
// bench/peers/report.py joins with the torch peers of the same call into a table with the % of roofline.
#pragma once

#include <string>

namespace rl {

// only: "" (all), "copy", "linear", "gemv", "decode", "prefill" or "mla". Returns a process exit code.
int run_kernel_benchmarks(const std::string& only, int device_index);

}  // namespace rl
