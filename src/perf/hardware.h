// Accelerator figures the roofline is drawn against: a built-in table of datasheet numbers, the figures measured
// on this project's own H200, and a small JSON format for measured figures written by benchmarks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::perf {

// One accelerator. Units are decimal: 1 TB/s = 1e12 bytes/s, 1 TFLOP/s = 1e12 FLOP/s, 1 GB = 1e9 bytes.
// TFLOP/s figures are dense (no 2:4 sparsity) tensor-core rates with fp32 accumulation.
struct GpuSpec {
  std::string name;
  double bandwidth_tbps = 0;  // device memory bandwidth
  double bf16_tflops = 0;     // dense bf16 matmul peak
  double fp8_tflops = 0;      // dense fp8 matmul peak; 0: no fp8 tensor cores (or not measured)
  double memory_gb = 0;       // device memory; 0: unknown
  std::string source;         // where the figures come from (datasheet, measurement + date)
};

// The built-in table (datasheet figures; sources in hardware.cpp).
const std::vector<GpuSpec>& gpu_table();

// The H200 this project runs on, as measured (see /work/shared/gpu.md): the one place these figures live.
GpuSpec measured_h200();
// The H100 80GB HBM3 (SXM) the project's GPU machines also lend, as measured the same way.
GpuSpec measured_h100();

// The chip a CUDA device's roofline is drawn against, from its name as the backend reports it (e.g. "cuda:0 (NVIDIA
// H100 80GB HBM3, 132 SMs)"): the measured H200 or H100 (SXM) where the name says so; else the table entry whose
// name, or one of the other spellings find_gpu knows, the name contains (the longest first: "L40S" before "L4");
// else none.
std::optional<GpuSpec> gpu_for_device(const std::string& device_name);

// Looks a name up in the table, ignoring case, spaces, '-' and '_' ("h100-sxm" == "H100 SXM"). "measured" gives
// measured_h200(). An unknown name is an error listing every known one.
Result<GpuSpec> find_gpu(const std::string& name);

// Measured-figures file: {"name", "bandwidth_tbps", "bf16_tflops", "fp8_tflops"?, "memory_gb"?, "source"?}.
Json gpu_spec_to_json(const GpuSpec& gpu);
Result<GpuSpec> parse_gpu_spec(const Json& j, const std::string& what);
Result<GpuSpec> load_gpu_spec(const std::string& path);

// Where `ridgeline bench kernels` keeps the figures it measured, read by `--gpu measured` when present:
// $RIDGELINE_MEASURED_GPU, else $XDG_CACHE_HOME/ridgeline/measured_gpu.json, else
// $HOME/.cache/ridgeline/measured_gpu.json ("" when none of these variables is set).
std::string default_measured_gpu_path();

// Bad figures (non-positive or non-finite bandwidth / bf16 rate, negative fp8 rate or memory) name the field.
Status validate_gpu_spec(const GpuSpec& gpu);

}  // namespace rl::perf
