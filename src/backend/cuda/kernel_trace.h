// Per-kernel GPU timestamps through CUPTI's activity API, kernels inside CUDA graphs included: the timeline Nsight
// Systems would draw, for machines where it does not run (the GPU machines here: docs/cuda.md). CUPTI is loaded
// with dlopen when a trace starts, so nothing else in the process depends on it: libcupti.so.13 from the library
// path, else the CUDA toolkit's lib64 or extras/CUPTI/lib64.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

namespace rl::cuda {

// Starts recording every kernel the process runs from now on, and every copy-engine copy ("memcpy HtoD", "memcpy
// DtoH", "memcpy DtoD": the idle time between a step's kernels is often a copy), once per process (a second call is
// a no-op). An error names what failed: the library not found, or CUPTI's own message.
Status kernel_trace_start();
// Flushes CUPTI's buffers and takes the kernels completed so far (demangled names without the argument list, on
// now_seconds()'s clock), in start order; empty if no trace runs. At most kKernelTraceMaxRecords are kept (later
// ones are counted in kernel_trace_dropped()).
std::vector<Backend::KernelSpan> kernel_trace_take();
int64_t kernel_trace_dropped();
constexpr int64_t kKernelTraceMaxRecords = 1'000'000;

}  // namespace rl::cuda
