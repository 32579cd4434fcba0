// Sliding-window KV release through the whole engine: the GPT-OSS fixture with every layer a sliding window of
// 8 positions decodes 200 tokens in a KV cache of 4 usable blocks (64 slots), which only works because the KV
// manager releases the blocks behind the window; its tokens equal those of a cache large enough that released
// blocks are never reused (a stale read would differ), and every block comes back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/file.h"
#include "core/json.h"
#include "runtime/engine.h"
#include "engine_test_util.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// A copy of tests/data/golden/gpt_oss whose layers are all sliding_attention.
std::string all_sliding_model() {
  // RIDGELINE_SOURCE_ROOT overrides the compiled-in source folder (the GPU machine runs a copy elsewhere).
  const char* root = std::getenv("RIDGELINE_SOURCE_ROOT");
  const fs::path src = fs::path(root && *root ? root : RIDGELINE_SOURCE_DIR) / "tests/data/golden/gpt_oss";
  const fs::path dir = fs::temp_directory_path() / ("rl_all_sliding_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto j = load_json_file((src / "config.json").string());
  EXPECT_TRUE(j.is_ok()) << j.message();
  Json cfg = *j;
  for (auto& t : cfg["layer_types"]) t = "sliding_attention";
  std::ofstream((dir / "config.json").string()) << cfg.dump(1);
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  return dir.string();
}

std::unique_ptr<Engine> make_engine(const std::string& dir, int64_t num_kv_blocks) {
  // Prompts of 30 tokens prefill in chunks, so release happens mid-prefill too.
  const EngineConfig c = test_util::chunked_engine_config(dir, num_kv_blocks, 4);
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return std::move(e).value();
}

TEST(SlidingWindowEngine, LongSequencesDecodeInABoundedNumberOfBlocks) {
  const std::string dir = all_sliding_model();
  auto small = make_engine(dir, 5);   // 4 usable blocks of 16
  auto large = make_engine(dir, 64);  // never reuses a released block for these requests
  EXPECT_EQ(small->max_model_len(), 256);  // the model's context, not the 64 slots of the cache
  std::vector<std::vector<TokenId>> prompts;
  for (int p = 0; p < 2; ++p) {
    std::vector<TokenId> ids;
    for (int i = 0; i < 30; ++i) ids.push_back(3 + (i * 37 + p * 101) % 300);
    prompts.push_back(ids);
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 200;
  greedy.ignore_eos = true;
  for (const auto& prompt : prompts) {  // one at a time: two sequences need 6 blocks at once
    auto a = small->generate({prompt}, greedy);
    auto b = large->generate({prompt}, greedy);
    ASSERT_EQ(a[0][0].token_ids.size(), 200u);
    EXPECT_EQ(a[0][0].token_ids, b[0][0].token_ids);
    EXPECT_TRUE(small->check_integrity().is_ok()) << small->check_integrity().message();
    EXPECT_EQ(small->num_free_kv_blocks(), 4);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rl
