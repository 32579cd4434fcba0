// Attention shapes without a fast kernel are named when the engine is created (Engine::attention_notes, also
// printed as a warning), not discovered at the first request: the default model with its head_dim or block size
// changed, on the test device (RIDGELINE_TEST_DEVICE). The CPU backend serves every shape with the same kernels
// (no notes); on CUDA, head_dim 64/128/256 at block size 16 has the FA2 prefill and split-KV decode kernels.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "engine_test_util.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// The default model's config with head_dim replaced (the weights are dummy ones at the new shapes).
std::string model_with_head_dim(int64_t head_dim) {
  const fs::path dir =
      fs::temp_directory_path() / ("rl_attn_notes_" + std::to_string(getpid()) + "_" + std::to_string(head_dim));
  fs::create_directories(dir);
  auto j = load_json_file(test_util::tiny_model_dir() + "/config.json");
  EXPECT_TRUE(j.is_ok()) << j.message();
  Json cfg = *j;
  cfg["head_dim"] = head_dim;
  std::ofstream((dir / "config.json").string()) << cfg.dump(1);
  return dir.string();
}

std::vector<std::string> notes_for(const std::string& dir, int64_t block_size) {
  EngineConfig c = test_util::tiny_engine_config();
  c.model_dir = dir;
  c.dummy_weights = true;
  c.block_size = block_size;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  if (!e.is_ok()) return {"engine failed"};
  return (*e)->attention_notes();
}

TEST(AttentionNotes, NamedAtLoadForShapesWithoutFastKernels) {
  const bool cuda = test_util::test_device() == "cuda";
  for (int64_t d : {64, 128, 256}) {
    EXPECT_TRUE(notes_for(model_with_head_dim(d), 16).empty()) << "head_dim " << d;
  }
  const auto odd = notes_for(model_with_head_dim(80), 16);
  const auto bs32 = notes_for(model_with_head_dim(64), 32);
  if (!cuda) {
    EXPECT_TRUE(odd.empty());
    EXPECT_TRUE(bs32.empty());
    return;
  }
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_NE(odd[0].find("head_dim 80"), std::string::npos) << odd[0];
  EXPECT_NE(odd[0].find("naive kernel"), std::string::npos) << odd[0];
  ASSERT_EQ(bs32.size(), 1u);
  EXPECT_NE(bs32[0].find("decode steps run the prefill kernel"), std::string::npos) << bs32[0];
}

}  // namespace
}  // namespace rl
