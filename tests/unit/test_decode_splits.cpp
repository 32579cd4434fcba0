// The decode split heuristic (src/backend/cuda/kernel_config.h) is host-only C++: its choices at the shapes it
// was measured on (H200: 132 SMs, 3 resident blocks of the G=4 D=128 instance per SM = 396 slots).
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

}  // namespace
}  // namespace rl::cuda
