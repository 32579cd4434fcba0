// Backend::sample_rows on the GPU against the CPU backend's implementation of the same filters and the same
// random streams (the CPU one is checked against the exact filtered distribution in tests/unit). Float rounding
// of exp/log may flip a near-tie race now and then, so 99 % of rows must agree; greedy rows must all agree.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(CudaSampling, SampleRowsMatchesTheCpuReference) {
  const int64_t rows = 256, vocab = 151936;
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  std::normal_distribution<float> d(0, 2.5f);
  for (auto& v : x) v = d(rng());
  x[5 * vocab + 17] = NAN;
  auto c_x = make_f32(cuda(), x, {rows, vocab});
  auto h_x = make_f32(cpu(), x, {rows, vocab});
  auto c_out = make(cuda(), DType::kI32, {rows});
  auto h_out = make(cpu(), DType::kI32, {rows});
  std::vector<DeviceSampleParams> ps(static_cast<size_t>(rows));
  const DeviceSampleParams kinds[] = {{1.0f, 0, 1.0f, 0.0f, 0, 0}, {0.7f, 50, 1.0f, 0.0f, 0, 0},
                                      {0.8f, 0, 0.95f, 0.0f, 0, 0}, {1.1f, 40, 0.9f, 0.05f, 0, 0},
                                      {0.0f, 0, 1.0f, 0.0f, 0, 0},  {1.0f, 1, 1.0f, 0.0f, 0, 0}};
  for (int64_t r = 0; r < rows; ++r) {
    ps[static_cast<size_t>(r)] = kinds[r % 6];
    ps[static_cast<size_t>(r)].seed = 1000 + static_cast<uint64_t>(r);
    ps[static_cast<size_t>(r)].step = static_cast<uint64_t>(r * 7);
  }
  cuda().sample_rows(c_x.t, ps.data(), c_out.t);
  cpu().sample_rows(h_x.t, ps.data(), h_out.t);
  std::vector<int32_t> got(static_cast<size_t>(rows));
  cuda().download(got.data(), c_out.t.data, got.size() * 4);
  int same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool eq = got[static_cast<size_t>(r)] == h_out.t.i32()[r];
    same += eq;
    if (r % 6 == 4 || r % 6 == 5) {
      EXPECT_TRUE(eq) << "greedy/top-1 row " << r;
    }
    EXPECT_GE(got[static_cast<size_t>(r)], 0);
    EXPECT_LT(got[static_cast<size_t>(r)], vocab);
  }
  EXPECT_GE(same, rows * 99 / 100) << same << " of " << rows << " rows agree";
  // Deterministic: the same call gives the same tokens.
  std::vector<int32_t> again(static_cast<size_t>(rows));
  cuda().sample_rows(c_x.t, ps.data(), c_out.t);
  cuda().download(again.data(), c_out.t.data, again.size() * 4);
  EXPECT_EQ(again, got);
}

}  // namespace
}  // namespace rl::ops_test
