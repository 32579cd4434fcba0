// rl_bench_kernels: the kernel benchmarks without the rest of ridgeline (same code as `ridgeline bench kernels`).
#include <string>

#include "backend/cuda/kernel_bench.h"

int main(int argc, char** argv) { return rl::run_kernel_benchmarks(argc > 1 ? argv[1] : "", 0); }
