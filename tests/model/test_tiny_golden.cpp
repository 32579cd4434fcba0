// The embedded default model against transformers: the tokenizer gives the same prompt ids, and greedy decoding
// (f32 compute from the bf16 weights, as the golden was made) gives the same 32 tokens (tests/data/tiny_golden.json).
#include <gtest/gtest.h>

#include "core/json.h"
#include "runtime/engine.h"

namespace rl {
namespace {

TEST(TinyGoldenTest, GreedyTokensMatchTransformers) {
  auto golden = load_json_file(std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/tiny_golden.json");
  ASSERT_TRUE(golden.is_ok()) << golden.message();
  EngineConfig c;
  c.model_dir = std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny";
  c.weight_dtype = DType::kF32;
  c.kv_cache_memory_bytes = 64ll << 20;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.is_ok()) << e.message();
  Engine& engine = **e;
  const int max_new = (*golden)["max_new_tokens"].get<int>();
  ASSERT_EQ((*golden)["prompts"].size(), 3u);
  for (const auto& p : (*golden)["prompts"]) {
    std::vector<TokenId> want_prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    std::vector<TokenId> want = p["greedy_ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(engine.tokenizer()->encode(p["text"].get<std::string>(), true), want_prompt);
    SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = max_new;
    sp.ignore_eos = true;
    auto out = engine.generate({want_prompt}, sp);
    EXPECT_EQ(out[0][0].token_ids, want) << p["text"];
    EXPECT_EQ(out[0][0].text, p["greedy_text"].get<std::string>());
  }
}

}  // namespace
}  // namespace rl
