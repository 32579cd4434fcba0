// Tensor parallelism's ops on CUDA against the CPU reference (issue 19): the vocab-parallel embedding (rows of
// this rank looked up, every other id a zero row) and the strided column copy that puts gathered logits back in
// vocabulary order. Both move values without arithmetic, so bf16 inputs must come back exactly.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(CudaTpOps, EmbeddingShardLooksUpOwnRowsAndZerosTheRest) {
  const int64_t rows = 50, hidden = 136, begin = 100, n = 33;
  auto table = random_bf16_values(rows * hidden);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng()() % 250);  // in [0, 250): before, inside and after
  ids[0] = static_cast<int32_t>(begin);
  ids[1] = static_cast<int32_t>(begin + rows - 1);
  ids[2] = static_cast<int32_t>(begin + rows);
  auto g_table = make_f32(cpu(), table, {rows, hidden}), g_ids = make_i32(cpu(), ids, {n});
  auto g_out = make(cpu(), DType::kF32, {n, hidden});
  auto c_table = make_bf16(cuda(), table, {rows, hidden}), c_ids = make_i32(cuda(), ids, {n});
  auto c_out = make(cuda(), DType::kBF16, {n, hidden});
  poison(c_out.t);
  cpu().embedding_shard(g_ids.t, g_table.t, begin, g_out.t);
  cuda().embedding_shard(c_ids.t, c_table.t, begin, c_out.t);
  const std::vector<float> got = read_f32(cuda(), c_out.t), want = read_f32(cpu(), g_out.t);
  EXPECT_EQ(got, want);
  // Row 2 (id begin + rows) belongs to the next rank: zeros.
  for (int64_t c = 0; c < hidden; ++c) EXPECT_EQ(want[static_cast<size_t>(2 * hidden + c)], 0.0f);
}

TEST(CudaTpOps, CopyColumnsPlacesABlockOfColumns) {
  const int64_t rows = 7, src_cols = 90, dst_cols = 200;
  auto src = random_bf16_values(rows * src_cols), dst = random_bf16_values(rows * dst_cols);
  auto g_src = make_f32(cpu(), src, {rows, src_cols}), g_dst = make_f32(cpu(), dst, {rows, dst_cols});
  auto c_src = make_bf16(cuda(), src, {rows, src_cols}), c_dst = make_bf16(cuda(), dst, {rows, dst_cols});
  cpu().copy_columns(g_src.t, 5, g_dst.t, 110, 77);
  cuda().copy_columns(c_src.t, 5, c_dst.t, 110, 77);
  const std::vector<float> got = read_f32(cuda(), c_dst.t), want = read_f32(cpu(), g_dst.t);
  EXPECT_EQ(got, want);
  EXPECT_EQ(want[static_cast<size_t>(3 * dst_cols + 110)], src[static_cast<size_t>(3 * src_cols + 5)]);
  EXPECT_EQ(want[static_cast<size_t>(3 * dst_cols + 109)], dst[static_cast<size_t>(3 * dst_cols + 109)]);
}

}  // namespace
}  // namespace rl::ops_test
