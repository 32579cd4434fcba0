// Host-only parts of src/backend/cuda/kernel_config.h: the decode split heuristic at the shapes it was measured on
// (H200: 132 SMs, 3 resident blocks of the G=4 D=128 instance per SM = 396 slots), and which attention shapes
// have fast kernels (CudaBackend::attention_slow_path).
#include <gtest/gtest.h>

#include "backend/cuda/kernel_config.h"

namespace rl::cuda {
namespace {

constexpr int64_t kSlots = 3 * 132;

TEST(DecodeSplits, FillsWholeWavesAtTheMeasuredShapes) {
  // 32 q / 8 kv heads, head_dim 128: one block per (sequence, kv head) and split.
  EXPECT_EQ(decode_num_splits(64, 8, 4096, 32, 128, kSlots), 3);   // 1,536 blocks: 3.88 TB/s measured
  EXPECT_EQ(decode_num_splits(16, 8, 32768, 32, 128, kSlots), 3);  // 384 blocks, one wave: 4.17 TB/s
  EXPECT_EQ(decode_num_splits(1, 8, 4096, 32, 128, kSlots), 32);   // the pages limit: 2 pages per warp
}

// The wave score both split heuristics share (best_wave_splits): a count buys its merge only with a fuller last wave.
TEST(DecodeSplits, WaveScoreTakesTheFewestSplitsOfTheFullestWaves) {
  EXPECT_EQ(best_wave_splits(128, 8, kSlots), 3);   // 384 of 396 slots; 6 fill as well but pay three more merges
  EXPECT_EQ(best_wave_splits(kSlots, 8, kSlots), 1);  // one full wave already
  EXPECT_EQ(best_wave_splits(100, 8, kSlots), 7);   // 700 of 792 slots in two waves; 3 fill 300 of 396
  EXPECT_EQ(best_wave_splits(1, 1, kSlots), 1);     // the cap
}

TEST(DecodeSplits, StaysWithinLimits) {
  // A short context cannot be split below kDecodeMinPagesPerSplit pages per split.
  EXPECT_EQ(decode_num_splits(1, 8, 100, 32, 128, kSlots), 1);
  // A grid sized for a 128k context at batch 1 still respects the split cap.
  EXPECT_LE(decode_num_splits(1, 8, 131072, 32, 128, kSlots), kDecodeMaxSplits);
  // Huge batches: never more rows of partials than the workspace holds.
  const int64_t s = decode_num_splits(4096, 8, 131072, 32, 128, kSlots);
  EXPECT_GE(s, 1);
  EXPECT_LE(4096 * 32 * s, kDecodeWorkspaceRows);
  // Degenerate slot counts do not divide by zero.
  EXPECT_GE(decode_num_splits(1, 1, 4096, 1, 64, 0), 1);
}

// The staged kernel (one block per SM: 132 slots on the H100 / H200): splits of at most kDecodeStagePages pages for
// the longest context, within half the SMs.
TEST(DecodeStagedSplits, HalfTheSmsAtBatchOne) {
  // Batch 1, 8 kv heads, 4k keys: 16 splits would hold a split's pages in one fill; half the SMs allow 8 (measured
  // end to end: 8 splits 174.9 tok/s, 16 173.9).
  EXPECT_EQ(decode_staged_num_splits(1, 8, 4096, 132), 8);
  // A short context needs fewer: 512 keys are 32 pages, two splits of 16.
  EXPECT_EQ(decode_staged_num_splits(1, 8, 512, 132), 2);
  EXPECT_EQ(decode_staged_num_splits(1, 8, 100, 132), 1);
  // A grid sized for 128k keys stays within half the SMs (longer splits refill their buffers).
  EXPECT_EQ(decode_staged_num_splits(1, 8, 131072, 132), 8);
  // Batch 16 × 8 kv heads already takes 128 blocks: one split; so does anything past half the SMs.
  EXPECT_EQ(decode_staged_num_splits(16, 8, 32768, 132), 1);
  EXPECT_EQ(decode_staged_num_splits(64, 8, 4096, 132), 1);
  EXPECT_EQ(decode_staged_num_splits(1, 1, 1 << 24, 1 << 20), kDecodeMaxSplits);
  EXPECT_GE(decode_staged_num_splits(1, 8, 4096, 0), 1);
}

// The Hopper prefill's forms by the launch's longest key row, at the lengths each was measured on (kernel_config.h):
// the diagonal's half tiles up to 2k keys, Q in the K stages' ring up to 4k, snake rounds from 2k.
TEST(PrefillSm90Forms, ByTheLongestKeyRow) {
  for (const int64_t keys : {1024, 2048, 4096, 16384, 32768}) {
    EXPECT_EQ(prefill_sm90_diag_half(keys), keys <= 2048) << keys;
    EXPECT_EQ(prefill_sm90_q_ring(keys), keys <= 4096) << keys;
    EXPECT_EQ(prefill_sm90_snake(keys), keys >= 2048) << keys;
  }
  EXPECT_FALSE(prefill_sm90_q_ring(4097));
  EXPECT_FALSE(prefill_sm90_diag_half(2049));
}

TEST(AttentionCoverage, FastShapesAreEmptyAndSlowOnesSaySo) {
  EXPECT_EQ(attention_slow_path(128, 32, 8, 16), "");
  EXPECT_EQ(attention_slow_path(64, 16, 16, 16), "");
  EXPECT_EQ(attention_slow_path(256, 8, 4, 16), "");  // the split-KV decode kernel serves head_dim 256 too
  const std::string d256_bs32 = attention_slow_path(256, 8, 4, 32);
  EXPECT_NE(d256_bs32.find("decode steps run the prefill kernel"), std::string::npos) << d256_bs32;
  EXPECT_NE(attention_slow_path(128, 32, 8, 32).find("decode steps"), std::string::npos);
  const std::string d80 = attention_slow_path(80, 8, 2, 16);
  EXPECT_NE(d80.find("head_dim 80"), std::string::npos) << d80;
  EXPECT_NE(d80.find("naive kernel"), std::string::npos) << d80;
  EXPECT_NE(attention_slow_path(128, 32, 8, 24).find("naive kernel"), std::string::npos);
  EXPECT_NE(attention_slow_path(512, 8, 8, 16).find("unsupported"), std::string::npos);
  EXPECT_NE(attention_slow_path(128, 30, 8, 16).find("unsupported"), std::string::npos);
}

}  // namespace
}  // namespace rl::cuda

namespace rl::cuda {
namespace {

// MLA (kernel_config.h mla_num_splits): workspace of the split-KV decode scratch; H200 slots of the 16-row instance
// (2 blocks per SM) and of the 64-row one (1 per SM).
constexpr int64_t kMlaCapacity = kDecodeWorkspaceRows * 129;

TEST(MlaSplits, FewSequencesSpreadOverTheFirstWave) {
  // Batch 1, 16 heads, 4k context: 128 tiles, at least 4 per split → 32 splits (32 blocks, one wave).
  EXPECT_EQ(mla_num_splits(1, 4096, 16, kMlaCapacity, 2 * 132), 32);
  // Batch 1, 128 heads (two 64-row blocks per token): 32 splits, 64 blocks.
  EXPECT_EQ(mla_num_splits(2, 4096, 128, kMlaCapacity, 132), 32);
  // A short context is not split below 4 tiles per split.
  EXPECT_EQ(mla_num_splits(1, 100, 16, kMlaCapacity, 264), 1);
}

TEST(MlaSplits, ManySequencesFillWholeWavesWithinTheWorkspace) {
  // Batch 64, 16 heads: 64 blocks; 4 splits fill 256 of 264 slots.
  EXPECT_EQ(mla_num_splits(64, 4096, 64 * 16, kMlaCapacity, 264), 4);
  // Batch 64, 128 heads: 128 blocks already fill 132 slots.
  EXPECT_EQ(mla_num_splits(128, 4096, 64 * 128, kMlaCapacity, 132), 1);
  // The partial states of every split fit the workspace; a prefill of 8k rows x 128 heads takes none.
  const int64_t s = mla_num_splits(1, 131072, 256 * 128, kMlaCapacity, 132);
  EXPECT_GE(s, 1);
  EXPECT_LE(256 * 128 * s * kMlaPartialFloats, kMlaCapacity);
  EXPECT_EQ(mla_num_splits(128, 8192, 8192 * 128, kMlaCapacity, 132), 1);
  EXPECT_GE(mla_num_splits(1, 4096, 16, kMlaCapacity, 0), 1);
}

}  // namespace
}  // namespace rl::cuda
