// The roofline analysis: GPU table and flag validation, the batch sweep, the JSON keys and values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/file.h"
#include "loader/model_config.h"
#include "model/model.h"
#include "perf/hardware.h"
#include "perf/roofline.h"

namespace rl::perf {
namespace {

ModelConfig load(const std::string& name) {
  auto c = load_model_config(std::string(RIDGELINE_SOURCE_DIR) + "/models/configs/" + name + "/config.json");
  EXPECT_TRUE(c.is_ok()) << c.message();
  return c.is_ok() ? *c : ModelConfig{};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(PerfHardware, TableHoldsTheRequiredChips) {
  for (const char* name : {"H100 SXM", "H100 PCIe", "H200", "A100 40GB", "A100 80GB", "L40S", "RTX 4090", "B200", "H20",
                           "L4", "A10G", "MI300X", "RTX 3090"}) {
    auto g = find_gpu(name);
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.message();
    EXPECT_TRUE(validate_gpu_spec(*g).is_ok()) << name;
    EXPECT_FALSE(g->source.empty()) << name;
  }
  EXPECT_DOUBLE_EQ(find_gpu("h200")->bandwidth_tbps, 4.8);
  EXPECT_DOUBLE_EQ(find_gpu("h100-sxm")->bandwidth_tbps, 3.35);
  EXPECT_DOUBLE_EQ(find_gpu("a100_80gb")->memory_gb, 80);
  GpuSpec m = find_gpu("measured").value();
  EXPECT_DOUBLE_EQ(m.bandwidth_tbps, 4.25);
  EXPECT_DOUBLE_EQ(m.bf16_tflops, 756);
}

// bench latency / throughput on CUDA draw against the chip the backend's device name says (names as
// cudaDeviceProp::name spells them, inside the backend's "cuda:0 (..., 132 SMs)").
TEST(PerfHardware, ChipForACudaDeviceName) {
  const auto name_of = [](const std::string& device) {
    const std::optional<GpuSpec> g = gpu_for_device("cuda:0 (" + device + ", 132 SMs)");
    return g ? g->name : std::string("none");
  };
  EXPECT_EQ(name_of("NVIDIA H200"), "H200 (measured)");
  EXPECT_EQ(name_of("NVIDIA H100 80GB HBM3"), "H100 (measured)");
  EXPECT_EQ(name_of("NVIDIA H100 PCIe"), "H100 PCIe");
  EXPECT_EQ(name_of("NVIDIA H100 NVL"), "H100 NVL");
  EXPECT_EQ(name_of("NVIDIA H200 NVL"), "H200 NVL");
  EXPECT_EQ(name_of("NVIDIA A100-SXM4-80GB"), "A100 80GB");
  EXPECT_EQ(name_of("NVIDIA L40S"), "L40S");  // not L4, a shorter part of the same name
  EXPECT_EQ(name_of("NVIDIA L4"), "L4");
  EXPECT_EQ(name_of("NVIDIA GeForce RTX 4090"), "RTX 4090");
  EXPECT_EQ(name_of("Tesla T4"), "none");
  const GpuSpec h100 = measured_h100();
  EXPECT_DOUBLE_EQ(h100.bandwidth_tbps, 2.98);
  EXPECT_DOUBLE_EQ(h100.bf16_tflops, 772);
  EXPECT_TRUE(validate_gpu_spec(h100).is_ok());
}

TEST(PerfHardware, UnknownGpuListsTheKnownOnes) {
  auto g = find_gpu("Z9000");
  ASSERT_FALSE(g.is_ok());
  EXPECT_TRUE(contains(g.message(), "unknown GPU \"Z9000\"")) << g.message();
  EXPECT_TRUE(contains(g.message(), "H100 SXM")) << g.message();
  EXPECT_TRUE(contains(g.message(), "MI300X")) << g.message();
  EXPECT_TRUE(contains(g.message(), "measured")) << g.message();
}

TEST(PerfHardware, MeasuredFiguresFile) {
  std::string path = std::string(RIDGELINE_BINARY_DIR) + "/test_perf_measured_gpu.json";
  ASSERT_TRUE(write_file(path, R"({"name": "H200 run 7", "bandwidth_tbps": 4.1, "bf16_tflops": 700,
                                   "memory_gb": 141, "source": "bench kernels"})")
                  .is_ok());
  GpuChoice choice;
  choice.measured_file = path;
  auto g = resolve_gpu(choice, Precision::kBf16);
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->name, "H200 run 7");
  EXPECT_DOUBLE_EQ(g->bandwidth_tbps, 4.1);
  EXPECT_DOUBLE_EQ(g->bf16_tflops, 700);
  // Round trip through the writer.
  auto back = parse_gpu_spec(gpu_spec_to_json(*g), "roundtrip");
  ASSERT_TRUE(back.is_ok());
  EXPECT_DOUBLE_EQ(back->memory_gb, 141);

  ASSERT_TRUE(write_file(path, R"({"name": "x", "bandwidth_tbps": 0, "bf16_tflops": 700})").is_ok());
  auto bad = resolve_gpu(choice, Precision::kBf16);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.message(), "bandwidth")) << bad.message();
  ASSERT_TRUE(write_file(path, R"({"name": "x", "bf16_tflops": 700})").is_ok());
  EXPECT_TRUE(contains(resolve_gpu(choice, Precision::kBf16).message(), "missing required key \"bandwidth_tbps\""));
}

TEST(PerfHardware, DefaultMeasuredPath) {
  std::string saved_env = std::getenv("RIDGELINE_MEASURED_GPU") ? std::getenv("RIDGELINE_MEASURED_GPU") : "";
  std::string saved_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  setenv("RIDGELINE_MEASURED_GPU", "/tmp/figures.json", 1);
  EXPECT_EQ(default_measured_gpu_path(), "/tmp/figures.json");
  unsetenv("RIDGELINE_MEASURED_GPU");
  setenv("XDG_CACHE_HOME", "/var/cache/u", 1);
  EXPECT_EQ(default_measured_gpu_path(), "/var/cache/u/ridgeline/measured_gpu.json");
  if (saved_env.empty())
    unsetenv("RIDGELINE_MEASURED_GPU");
  else
    setenv("RIDGELINE_MEASURED_GPU", saved_env.c_str(), 1);
  if (saved_xdg.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
}

TEST(PerfHardware, FlagOverridesAndErrors) {
  GpuChoice custom;
  custom.bandwidth_tbps = 2.0;
  custom.tflops = 400;
  auto g = resolve_gpu(custom, Precision::kBf16);
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->name, "custom");
  EXPECT_DOUBLE_EQ(g->bf16_tflops, 400);
  EXPECT_DOUBLE_EQ(g->memory_gb, 0);

  GpuChoice zero;
  zero.bandwidth_tbps = 0;
  zero.tflops = 400;
  auto z = resolve_gpu(zero, Precision::kBf16);
  ASSERT_FALSE(z.is_ok());
  EXPECT_TRUE(contains(z.message(), "--bandwidth must be > 0, got 0")) << z.message();

  GpuChoice neg;
  neg.name = "H100 SXM";
  neg.name_given = true;
  neg.tflops = -5;
  EXPECT_TRUE(contains(resolve_gpu(neg, Precision::kBf16).message(), "--tflops must be > 0"));

  GpuChoice unknown;
  unknown.name = "nope";
  unknown.name_given = true;
  EXPECT_TRUE(contains(resolve_gpu(unknown, Precision::kBf16).message(), "unknown GPU"));

  // --gpu with --bandwidth: the chip's other figures stay.
  GpuChoice over;
  over.name = "L40S";
  over.name_given = true;
  over.bandwidth_tbps = 0.7;
  auto o = resolve_gpu(over, Precision::kFp8);
  ASSERT_TRUE(o.is_ok());
  EXPECT_DOUBLE_EQ(o->bandwidth_tbps, 0.7);
  EXPECT_DOUBLE_EQ(o->fp8_tflops, 733);
}

TEST(PerfRoofline, InvalidOptionsNameTheFlag) {
  ModelConfig c = load("Llama-3.1-8B");
  RooflineOptions o;
  o.batch = -3;
  auto st = validate_roofline_options(o, c);
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "--batch must be in [1, ")) << st.message();
  EXPECT_TRUE(contains(st.message(), "got -3")) << st.message();
  o = RooflineOptions{};
  o.context = 0;
  EXPECT_TRUE(contains(validate_roofline_options(o, c).message(), "--context must be in [1, "));
  o = RooflineOptions{};
  o.context = 200000;  // Llama-3.1-8B: max_position_embeddings 131072
  EXPECT_TRUE(contains(validate_roofline_options(o, c).message(), "exceeds the model's maximum context 131072"));
  o = RooflineOptions{};
  o.prompt = -1;
  EXPECT_TRUE(contains(validate_roofline_options(o, c).message(), "--prompt must be in [1, "));
  o = RooflineOptions{};
  o.memory_utilization = 0;
  EXPECT_TRUE(contains(validate_roofline_options(o, c).message(), "--mem-util must be in (0, 1]"));
  EXPECT_TRUE(validate_roofline_options(RooflineOptions{}, c).is_ok());
  GpuSpec broken = measured_h200();
  broken.bandwidth_tbps = 0;
  EXPECT_FALSE(analyze_roofline(c, "x", broken, RooflineOptions{}).is_ok());
}

TEST(PerfRoofline, SweepBatches) {
  // Compute-bound at 295: powers of two up to 2*295 = 590 → 1..512 and 1024 (the first past it), plus 295 and 48.
  std::vector<int64_t> want = {1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 295, 512, 1024};
  EXPECT_EQ(sweep_batches(295, 194, 837, 48), want);
  // Never compute-bound: up to max(256, 2*194, 837) → 1..1024.
  std::vector<int64_t> never = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  EXPECT_EQ(sweep_batches(std::nullopt, 194, 837, 1), never);
  // A batch beyond everything is still included.
  EXPECT_EQ(sweep_batches(4, 4, std::nullopt, 100).back(), 100);
}

TEST(PerfRoofline, JsonHoldsTheFigures) {
  RooflineOptions o;
  o.batch = 8;
  auto a = analyze_roofline(load("Llama-3.1-8B"), "Llama-3.1-8B", measured_h200(), o);
  ASSERT_TRUE(a.is_ok()) << a.message();
  Json j = roofline_to_json(*a);
  for (const char* key : {"params", "weight_bytes", "kv_bytes_per_token", "decode_tokens_per_s_batch1", "ttft_s",
                          "ridge_intensity", "compute_bound_batch", "matmul_compute_bound_batch", "max_sequences",
                          "flops_per_token", "sweep", "prefill", "decode_at_batch", "gpu"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["params"].get<int64_t>(), 8030261248);
  EXPECT_EQ(j["weight_bytes"].get<int64_t>(), 16060522496);
  EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), 131072);
  // Hand figure from test_perf_cost_model: 4.25e12 / 16,196,301,824 bytes.
  EXPECT_NEAR(j["decode_tokens_per_s_batch1"].get<double>(), 262.4056, 1e-3);
  EXPECT_TRUE(j["compute_bound_batch"].is_null());
  EXPECT_EQ(j["matmul_compute_bound_batch"].get<int64_t>(), 194);
  EXPECT_EQ(j["max_sequences"].get<int64_t>(), 837);
  EXPECT_DOUBLE_EQ(j["flops_per_token"]["decode_attention_qk"].get<double>(), 268435456.0);
  EXPECT_DOUBLE_EQ(j["flops_per_token"]["decode_attention_pv"].get<double>(), 268435456.0);
  EXPECT_EQ(j["decode_at_batch"]["batch"].get<int64_t>(), 8);
  bool has_batch8 = false;
  for (const auto& row : j["sweep"]) has_batch8 |= row["batch"].get<int64_t>() == 8;
  EXPECT_TRUE(has_batch8);
  std::string text = format_roofline_text(*a);
  EXPECT_TRUE(contains(text, "8,030,261,248")) << text;
  EXPECT_TRUE(contains(text, "never at ctx 1024")) << text;
}

}  // namespace
}  // namespace rl::perf
