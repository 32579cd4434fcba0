// apply_token_bitmask: the CUDA kernel against the CPU reference on Llama-3-sized rows (128,256 ids, a partial
// last word), with all-ones, all-zeros and random mask words.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(CudaTokenMask, MatchesTheCpuReference) {
  const int64_t rows = 7, vocab = 128256 + 5, words = (vocab + 31) / 32;
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  std::normal_distribution<float> d(0, 2.0f);
  for (auto& v : x) v = d(rng());
  std::vector<int32_t> mask(static_cast<size_t>(rows * words));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t bits = r == 0 ? 0xffffffffu : r == 1 ? 0u : static_cast<uint32_t>(rng()());
      mask[static_cast<size_t>(r * words + w)] = static_cast<int32_t>(bits);
    }
  auto c_x = make_f32(cuda(), x, {rows, vocab});
  auto h_x = make_f32(cpu(), x, {rows, vocab});
  auto c_m = make(cuda(), DType::kI32, {rows, words});
  cuda().upload(c_m.t.data, mask.data(), mask.size() * 4);
  Tensor h_m(mask.data(), DType::kI32, {rows, words});
  cuda().apply_token_bitmask(c_x.t, c_m.t);
  cpu().apply_token_bitmask(h_x.t, h_m);
  std::vector<float> got(x.size());
  cuda().download(got.data(), c_x.t.data, got.size() * 4);
  const float* want = h_x.t.as<float>();
  int64_t masked = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i] == want[i] || (std::isinf(got[i]) && std::isinf(want[i]))) << i;
    masked += std::isinf(want[i]) ? 1 : 0;
  }
  EXPECT_GT(masked, vocab);  // row 1 entirely, half of the random rows
}

}  // namespace
}  // namespace rl::ops_test
