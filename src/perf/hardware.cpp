#include "perf/hardware.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "perf/format.h"

namespace rl::perf {

namespace {

// Datasheet figures, dense (vendors print 2:4-sparsity figures too; those are halved here), fp32 accumulation.
//   NVIDIA H100 Tensor Core GPU datasheet (SXM5 / PCIe / NVL columns).
//   NVIDIA H200 Tensor Core GPU datasheet (SXM / NVL columns).
//   NVIDIA HGX B200 datasheet: per GPU 1/8 of the 8-GPU figures (1,440 GB, 64 TB/s, FP8 72 PFLOP/s sparse).
//   NVIDIA H20: figures as published at its 2024 launch (96 GB HBM3, 4.0 TB/s, 148 bf16 / 296 fp8).
//   NVIDIA A100 Tensor Core GPU datasheet (SXM 40 GB: 1,555 GB/s; SXM 80 GB: 2,039 GB/s; no fp8).
//   NVIDIA L40S datasheet (362.05 bf16 / 733 fp8 dense), NVIDIA L4 datasheet (242 / 485 sparse).
//   NVIDIA A10 datasheet (125 bf16 dense). A10G (AWS g5) has no public datasheet: same 24 GB / 600 GB/s,
//   lower tensor rate (70 TFLOP/s, as compared in Baseten's "NVIDIA A10 vs A10G for ML model inference").
//   NVIDIA Ada Lovelace architecture whitepaper (RTX 4090: bf16 165.2, fp8 330.3 with fp32 accumulate).
//   NVIDIA Ampere GA102 whitepaper (RTX 3090: bf16 71 with fp32 accumulate).
//   AMD Instinct MI300X / MI325X / MI250X datasheets.
const std::vector<GpuSpec> kTable = {
    {"H100 SXM", 3.35, 989.4, 1978.9, 80, "NVIDIA H100 datasheet (SXM5)"},
    {"H100 PCIe", 2.0, 756.0, 1513.0, 80, "NVIDIA H100 datasheet (PCIe)"},
    {"H100 NVL", 3.9, 835.5, 1670.5, 94, "NVIDIA H100 datasheet (NVL)"},
    {"H200", 4.8, 989.4, 1978.9, 141, "NVIDIA H200 datasheet (SXM)"},
    {"H200 NVL", 4.8, 835.5, 1670.5, 141, "NVIDIA H200 datasheet (NVL)"},
    {"H20", 4.0, 148.0, 296.0, 96, "NVIDIA H20 launch specifications"},
    {"B200", 8.0, 2250.0, 4500.0, 180, "NVIDIA HGX B200 datasheet (per GPU)"},
    {"A100 40GB", 1.555, 312.0, 0, 40, "NVIDIA A100 datasheet (SXM 40GB)"},
    {"A100 80GB", 2.039, 312.0, 0, 80, "NVIDIA A100 datasheet (SXM 80GB)"},
    {"L40S", 0.864, 362.05, 733.0, 48, "NVIDIA L40S datasheet"},
    {"L4", 0.3, 121.0, 242.5, 24, "NVIDIA L4 datasheet"},
    {"A10", 0.6, 125.0, 0, 24, "NVIDIA A10 datasheet"},
    {"A10G", 0.6, 70.0, 0, 24, "AWS g5 A10G (no public datasheet)"},
    {"RTX 4090", 1.008, 165.2, 330.3, 24, "NVIDIA Ada Lovelace whitepaper"},
    {"RTX 3090", 0.936, 71.0, 0, 24, "NVIDIA Ampere GA102 whitepaper"},
    {"MI300X", 5.3, 1307.4, 2614.9, 192, "AMD Instinct MI300X datasheet"},
    {"MI325X", 6.0, 1307.4, 2614.9, 256, "AMD Instinct MI325X datasheet"},
    {"MI250X", 3.2, 383.0, 0, 128, "AMD Instinct MI250X datasheet"},
};

// Other spellings people use for a table entry (normalized form → table name).
const std::vector<std::pair<std::string, std::string>> kAliases = {
    {"h100", "H100 SXM"},  {"h100sxm5", "H100 SXM"}, {"h200sxm", "H200"},
    {"a100", "A100 80GB"}, {"4090", "RTX 4090"},     {"3090", "RTX 3090"},
};

std::string normalize(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '-' || c == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Status get_number(const Json& j, const char* key, bool required, double* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return required ? Status::error(what + ": missing required key \"" + key + "\"") : Status::ok();
  }
  if (!it->is_number()) return Status::error(what + ": \"" + key + "\" must be a number, got " + it->dump());
  *out = it->get<double>();
  return Status::ok();
}

}  // namespace

const std::vector<GpuSpec>& gpu_table() { return kTable; }

GpuSpec measured_h200() {
  // Measured 2026-11-29 on the project's H200 with torch 2.11: device-to-device copy (read + write) 4.25 TB/s,
  // cuBLAS bf16 GEMM 8192^3 756 TFLOP/s. fp8 not measured (0). Memory: the datasheet's 141 GB.
  return {"H200 (measured)",
          4.25,
          756.0,
          0,
          141,
          "measured on the project's H200, 2026-11-29: copy 4.25 TB/s, bf16 GEMM 756 TFLOP/s"};
}

GpuSpec measured_h100() {
  // Measured 2026-12-05 on an H100 80GB HBM3 of the GPU machines with torch 2.11 (bench/peers/torch_peers.py copy):
  // device-to-device copy (read + write) 2.98 TB/s, cuBLAS bf16 GEMM 8192^3 772 TFLOP/s. fp8 not measured (0).
  return {"H100 (measured)",
          2.98,
          772.0,
          0,
          80,
          "measured on an H100 80GB HBM3 of the project's GPU machines, 2026-12-05: copy 2.98 TB/s, bf16 GEMM 772 "
          "TFLOP/s"};
}

std::optional<GpuSpec> gpu_for_device(const std::string& device_name) {
  const std::string key = normalize(device_name);
  const auto has = [&](const char* part) { return key.find(part) != std::string::npos; };
  const bool other_form = has("pcie") || has("nvl");
  if (has("h200") && !other_form) return measured_h200();
  if (has("h100") && !other_form) return measured_h100();
  // Table names and the other spellings, longest first, as parts of the device's name.
  std::vector<std::pair<std::string, std::string>> names;  // (normalized part, table name)
  for (const auto& g : kTable) names.emplace_back(normalize(g.name), g.name);
  for (const auto& [alias, target] : kAliases) names.emplace_back(alias, target);
  std::stable_sort(names.begin(), names.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [part, table_name] : names) {
    if (has(part.c_str())) return *find_gpu(table_name);
  }
  return std::nullopt;
}

Result<GpuSpec> find_gpu(const std::string& name) {
  std::string key = normalize(name);
  if (key == "measured") return measured_h200();
  for (const auto& [alias, target] : kAliases) {
    if (key == alias) key = normalize(target);
  }
  for (const auto& g : kTable) {
    if (normalize(g.name) == key) return g;
  }
  std::string known = "measured";
  for (const auto& g : kTable) known += ", " + g.name;
  return Status::error("unknown GPU \"" + name + "\" (known: " + known + "; or give --bandwidth TBPS --tflops N)");
}

Status validate_gpu_spec(const GpuSpec& gpu) {
  // Bandwidth and the bf16 rate must be > 0; the fp8 rate and memory may be 0 (absent / unknown).
  auto check = [&](const char* field, double v, bool zero_ok) -> Status {
    if (std::isfinite(v) && (v > 0 || (zero_ok && v == 0))) return Status::ok();
    return Status::error("GPU \"" + gpu.name + "\": " + field + (zero_ok ? " must be >= 0" : " must be > 0") +
                         ", got " + format_g(v, 6));
  };
  RL_RETURN_IF_ERROR(check("bandwidth (TB/s)", gpu.bandwidth_tbps, false));
  RL_RETURN_IF_ERROR(check("bf16 TFLOP/s", gpu.bf16_tflops, false));
  RL_RETURN_IF_ERROR(check("fp8 TFLOP/s", gpu.fp8_tflops, true));
  return check("memory (GB)", gpu.memory_gb, true);
}

Json gpu_spec_to_json(const GpuSpec& gpu) {
  return Json{{"name", gpu.name},
              {"bandwidth_tbps", gpu.bandwidth_tbps},
              {"bf16_tflops", gpu.bf16_tflops},
              {"fp8_tflops", gpu.fp8_tflops},
              {"memory_gb", gpu.memory_gb},
              {"source", gpu.source}};
}

Result<GpuSpec> parse_gpu_spec(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be a JSON object");
  GpuSpec g;
  g.name = "measured";
  if (j.contains("name") && j["name"].is_string()) g.name = j["name"].get<std::string>();
  if (j.contains("source") && j["source"].is_string()) g.source = j["source"].get<std::string>();
  RL_RETURN_IF_ERROR(get_number(j, "bandwidth_tbps", true, &g.bandwidth_tbps, what));
  RL_RETURN_IF_ERROR(get_number(j, "bf16_tflops", true, &g.bf16_tflops, what));
  RL_RETURN_IF_ERROR(get_number(j, "fp8_tflops", false, &g.fp8_tflops, what));
  RL_RETURN_IF_ERROR(get_number(j, "memory_gb", false, &g.memory_gb, what));
  if (g.source.empty()) g.source = what;
  RL_RETURN_IF_ERROR(validate_gpu_spec(g).with_context(what));
  return g;
}

std::string default_measured_gpu_path() {
  if (const char* env = std::getenv("RIDGELINE_MEASURED_GPU"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/ridgeline/measured_gpu.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/ridgeline/measured_gpu.json";
  }
  return "";
}

Result<GpuSpec> load_gpu_spec(const std::string& path) {
  RL_ASSIGN_OR_RETURN(Json j, load_json_file(path));
  return parse_gpu_spec(j, path);
}

}  // namespace rl::perf
