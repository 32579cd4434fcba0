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

TEST(AttentionCoverage, FastShapesAreEmptyAndSlowOnesSaySo) {
  EXPECT_EQ(attention_slow_path(128, 32, 8, 16), "");
  EXPECT_EQ(attention_slow_path(64, 16, 16, 16), "");
  const std::string d256 = attention_slow_path(256, 8, 4, 16);
  EXPECT_NE(d256.find("decode steps run the prefill kernel"), std::string::npos) << d256;
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
