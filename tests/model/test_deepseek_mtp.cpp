// DeepSeek-V3's multi-token-prediction module (num_nextn_predict_layers): loaded when the checkpoint holds it
// (model.layers.<num_hidden_layers>.*, as the published checkpoints store it), not run. transformers drops MTP
// weights, so the checkpoint here is the deepseek_v3 golden fixture plus a second safetensors file with one MTP
// module (its block copied from layer 1's MoE block, the rest drawn), joined by a safetensors index.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "core/file.h"
#include "core/json.h"
#include "engine_test_util.h"
#include "loader/safetensors.h"
#include "model/layers/decoder.h"
#include "model/model.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/golden/deepseek_v3";

struct Blob {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// A safetensors file of f32 tensors.
std::string safetensors_bytes(const std::map<std::string, Blob>& tensors) {
  Json header = Json::object();
  size_t offset = 0;
  for (const auto& [name, b] : tensors) {
    const size_t n = b.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", b.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t len = h.size();
  std::memcpy(out.data(), &len, 8);
  out += h;
  for (const auto& [name, b] : tensors) out.append(reinterpret_cast<const char*>(b.data.data()), b.data.size() * 4);
  return out;
}

Blob read_blob(const TensorInfo& t) {
  Blob b{t.shape, std::vector<float>(static_cast<size_t>(t.numel()))};
  convert_to_f32(t.data, t.dtype, b.data.data(), b.data.size());
  return b;
}

// The fixture with one MTP module at model.layers.3 (num_hidden_layers = 3); eh_proj's shape can be broken.
std::string make_checkpoint(const std::string& tag, std::vector<int64_t> eh_shape = {}) {
  const fs::path dir = fs::temp_directory_path() / ("rl_mtp_" + std::to_string(getpid()) + "_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json"}) fs::copy_file(kFixture + "/" + f, dir / f);
  fs::copy_file(kFixture + "/model.safetensors", dir / "model-00001.safetensors");
  auto base = SafetensorsFile::open(kFixture + "/model.safetensors");
  EXPECT_TRUE(base.is_ok()) << base.message();
  std::map<std::string, Blob> mtp;
  Json weight_map = Json::object();
  int64_t h = 0;
  for (const auto& [name, t] : (*base)->tensors()) {
    weight_map[name] = "model-00001.safetensors";
    if (name == "model.embed_tokens.weight") {
      h = t.shape[1];
      mtp["model.layers.3.embed_tokens.weight"] = read_blob(t);
      mtp["model.layers.3.shared_head.head.weight"] = read_blob(t);
    }
    if (name.rfind("model.layers.1.", 0) == 0) mtp["model.layers.3." + name.substr(15)] = read_blob(t);
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const auto drawn = [&](std::vector<int64_t> shape, float mean) {
    Blob b{shape, {}};
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) b.data.push_back(mean + nd(rng));
    return b;
  };
  for (const char* norm : {"enorm", "hnorm", "shared_head.norm"}) {
    mtp[std::string("model.layers.3.") + norm + ".weight"] = drawn({h}, 1.0f);
  }
  mtp["model.layers.3.eh_proj.weight"] = drawn(eh_shape.empty() ? std::vector<int64_t>{h, 2 * h} : eh_shape, 0.0f);
  for (const auto& [name, b] : mtp) weight_map[name] = "model-00002.safetensors";
  EXPECT_TRUE(write_file((dir / "model-00002.safetensors").string(), safetensors_bytes(mtp)).is_ok());
  const Json index = {{"metadata", Json::object()}, {"weight_map", weight_map}};
  EXPECT_TRUE(write_file((dir / "model.safetensors.index.json").string(), index.dump()).is_ok());
  return dir.string();
}

const Decoder* decoder(const std::unique_ptr<Model>& m) { return dynamic_cast<const Decoder*>(m.get()); }

TEST(DeepseekMtp, TheModuleLoadsWhenTheCheckpointHasItAndChangesNoOutput) {
  const std::string dir = make_checkpoint("ok");
  CpuBackend be(2);
  LoadOptions lo;
  lo.weight_dtype = DType::kF32;
  auto with = load_model(dir, &be, lo);
  ASSERT_TRUE(with.is_ok()) << with.message();
  ASSERT_NE(decoder(*with), nullptr);
  ASSERT_EQ(decoder(*with)->mtp.size(), 1u);
  const Decoder::MtpModule& t = decoder(*with)->mtp[0];
  ASSERT_EQ(t.eh_proj.ndim, 2);
  EXPECT_EQ(t.eh_proj.dim(0), 64);
  EXPECT_EQ(t.eh_proj.dim(1), 128);
  EXPECT_TRUE(t.block.mla != nullptr);
  EXPECT_TRUE(t.block.moe != nullptr);  // layer index 3 >= first_k_dense_replace: MoE, like the checkpoint's
  auto without = load_model(kFixture, &be, lo);
  ASSERT_TRUE(without.is_ok()) << without.message();
  EXPECT_TRUE(decoder(*without)->mtp.empty());  // transformers' checkpoint: none
  EXPECT_GT((*with)->weight_bytes(), (*without)->weight_bytes());

  // Unused: the engine's greedy tokens are the fixture's.
  const auto greedy = [](const std::string& model_dir) {
    EngineConfig c = test_util::tiny_engine_config(16ll << 20);
    c.model_dir = model_dir;
    c.device = "cpu";
    c.load_tokenizer = false;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.is_ok()) << e.message();
    return e.is_ok() ? (*e)->generate({{1, 5, 9, 2, 7}}, test_util::greedy(12)).at(0).at(0).token_ids
                     : std::vector<TokenId>{};
  };
  const std::vector<TokenId> a = greedy(dir), b = greedy(kFixture);
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
  fs::remove_all(dir);
}

TEST(DeepseekMtp, AMisshapenModuleFailsTheLoadNamingTheTensor) {
  const std::string dir = make_checkpoint("bad", {64, 64});
  CpuBackend be(2);
  LoadOptions lo;
  lo.weight_dtype = DType::kF32;
  auto m = load_model(dir, &be, lo);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("model.layers.3.eh_proj.weight"), std::string::npos) << m.message();
  fs::remove_all(dir);
}

TEST(DeepseekMtp, InspectSaysTheModulesAreNotRun) {
  auto c = load_model_config(kFixture + "/config.json");
  ASSERT_TRUE(c.is_ok()) << c.message();
  bool found = false;
  for (const std::string& n : c->notes) {
    found |= n.find("MTP module") != std::string::npos && n.find("unused") != std::string::npos;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace rl
