// Hybrid KV through the whole engine: the GPT-OSS fixture (layers sliding 8 / full / sliding 8) runs with one
// block table per KV group, its window layers holding only the blocks of their window, and generates exactly
// the tokens of the same engine with every layer keeping every block (f32, CPU): many windows past the prompt,
// chunked prefill (16-token steps), batches of 5, preemption in a tight cache and prefix hits.
#include <gtest/gtest.h>


#include "engine_test_util.h"
#include "runtime/engine.h"

namespace rl {
namespace {

const std::string kModel = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/golden/gpt_oss";

std::unique_ptr<Engine> make_engine(bool hybrid, int64_t num_kv_blocks) {
  // Prompts of 20-45 tokens prefill in chunks, mixed with decodes.
  EngineConfig c = test_util::chunked_engine_config(kModel, num_kv_blocks, 5);
  c.hybrid_kv = hybrid;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.is_ok()) << e.message();
  return std::move(e).value();
}

std::vector<std::vector<TokenId>> prompts() {
  std::vector<std::vector<TokenId>> out;
  for (int p = 0; p < 5; ++p) {
    std::vector<TokenId> ids;
    for (int i = 0; i < 20 + 6 * p; ++i) ids.push_back(3 + (i * 37 + p * 101) % 300);
    out.push_back(ids);
  }
  return out;
}

using test_util::greedy;

TEST(HybridKvEngine, BatchedChunkedDecodingPastManyWindowsEqualsFullKv) {
  auto full = make_engine(false, 128);
  auto hybrid = make_engine(true, 128);
  const auto ps = prompts();
  auto want = full->generate(ps, greedy(100));  // up to 145 tokens: 18 windows of 8
  auto got = hybrid->generate(ps, greedy(100));
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_EQ(got[i][0].token_ids.size(), 100u);
    EXPECT_EQ(got[i][0].token_ids, want[i][0].token_ids) << "prompt " << i;
  }
  EXPECT_EQ(hybrid->stats().num_preemptions, 0);
  EXPECT_TRUE(hybrid->check_integrity().is_ok()) << hybrid->check_integrity().message();
  EXPECT_EQ(hybrid->num_free_kv_blocks(), 127);
}

TEST(HybridKvEngine, PreemptionInATightCacheAndPrefixHitsKeepTheTokens) {
  auto full = make_engine(false, 128);
  const auto ps = prompts();
  auto want = full->generate(ps, greedy(100));
  // 5 sequences of up to 145 tokens need 10 full-group blocks + 3 window blocks each (65): 40 blocks make
  // preemption unavoidable; all-full KV would need the same 10 per sequence but with 3 layers per block
  // instead of 2.
  auto tight = make_engine(true, 41);
  auto got = tight->generate(ps, greedy(100));
  EXPECT_GT(tight->stats().num_preemptions, 0);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(got[i][0].token_ids, want[i][0].token_ids) << "prompt " << i;
  EXPECT_TRUE(tight->check_integrity().is_ok()) << tight->check_integrity().message();
  EXPECT_EQ(tight->num_free_kv_blocks(), 40);

  // The same prompt again, after the first run finished: its full blocks hit in group 0 and, inside the window
  // of the hit's end, in the window group.
  const int64_t hits_before = tight->stats().prefix_cache_hits;
  auto again = tight->generate({ps[4]}, greedy(100));
  EXPECT_GT(tight->stats().prefix_cache_hits, hits_before);
  EXPECT_EQ(again[0][0].token_ids, want[4][0].token_ids);
  // A prompt that continues the sequence just finished (prompt and 60 outputs): a hit deep into its history,
  // whose window blocks were released (and stayed cached) as it decoded.
  std::vector<TokenId> longer = ps[4];
  longer.insert(longer.end(), want[4][0].token_ids.begin(), want[4][0].token_ids.begin() + 60);
  const int64_t hits_mid = tight->stats().prefix_cache_hits;
  auto cont = tight->generate({longer}, greedy(20));
  auto cont_full = full->generate({longer}, greedy(20));
  EXPECT_EQ(tight->stats().prefix_cache_hits - hits_mid, 96);  // 6 of the 104 tokens' full blocks
  EXPECT_EQ(cont[0][0].token_ids, cont_full[0][0].token_ids);
  EXPECT_TRUE(tight->check_integrity().is_ok()) << tight->check_integrity().message();
  EXPECT_EQ(tight->num_free_kv_blocks(), 40);
}

}  // namespace
}  // namespace rl
