// The host group's collectives (tensor parallelism on the CPU backend, issue 19): sums in rank order with the
// same bits on every rank, gathers in rank order, mismatches reported on every rank, many rounds without a
// stale read (the phases of one collective never overlap the next one's).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "core/dtype.h"
#include "parallel/communicator.h"

namespace rl::parallel {
namespace {

// Runs body(rank, comm) on one thread per rank of a fresh host group of n.
template <typename Body>
void on_ranks(int n, Body body) {
  auto comms = make_host_group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, *comms[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
}

std::vector<float> values(int rank, int64_t n, int round) {
  std::mt19937 g(static_cast<uint32_t>(rank * 7919 + round * 104729 + 1));
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

TEST(HostGroup, AllReduceSumsInRankOrderWithTheSameBitsEverywhere) {
  for (int n : {1, 2, 3, 4, 8}) {
    const int64_t len = 1001;  // not a multiple of any n: uneven slices
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    on_ranks(n, [&](int r, Communicator& c) {
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), n);
      std::vector<float> x = values(r, len, 0);
      ASSERT_TRUE(c.all_reduce_sum(Tensor(x.data(), DType::kF32, {7, 143})).is_ok());
      got[static_cast<size_t>(r)] = x;
    });
    for (int64_t i = 0; i < len; ++i) {
      float want = values(0, len, 0)[static_cast<size_t>(i)];
      for (int r = 1; r < n; ++r) want += values(r, len, 0)[static_cast<size_t>(i)];
      for (int r = 0; r < n; ++r) ASSERT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(i)], want) << n << " " << i;
    }
  }
}

TEST(HostGroup, Bf16SumsInF32AndRoundsOnce) {
  const int n = 4;
  const int64_t len = 257;
  std::vector<std::vector<uint16_t>> got(n);
  on_ranks(n, [&](int r, Communicator& c) {
    std::vector<float> f = values(r, len, 3);
    std::vector<uint16_t> x(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = f32_to_bf16(f[static_cast<size_t>(i)]);
    ASSERT_TRUE(c.all_reduce_sum(Tensor(x.data(), DType::kBF16, {len})).is_ok());
    got[static_cast<size_t>(r)] = x;
  });
  for (int64_t i = 0; i < len; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < n; ++r) acc += bf16_to_f32(f32_to_bf16(values(r, len, 3)[static_cast<size_t>(i)]));
    for (int r = 0; r < n; ++r) ASSERT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(i)], f32_to_bf16(acc));
  }
}

TEST(HostGroup, AllGatherConcatenatesInRankOrder) {
  const int n = 3;
  on_ranks(n, [&](int r, Communicator& c) {
    std::vector<float> in = {static_cast<float>(r), static_cast<float>(10 * r)};
    std::vector<float> out(6, -1.0f);
    ASSERT_TRUE(c.all_gather(Tensor(in.data(), DType::kF32, {2}), Tensor(out.data(), DType::kF32, {6})).is_ok());
    EXPECT_EQ(out, (std::vector<float>{0, 0, 1, 10, 2, 20}));
  });
}

TEST(HostGroup, MismatchedShapesFailOnEveryRankAndTheGroupGoesOn) {
  const int n = 4;
  on_ranks(n, [&](int r, Communicator& c) {
    std::vector<float> x(static_cast<size_t>(r == 2 ? 5 : 6), 1.0f);
    const Status st = c.all_reduce_sum(Tensor(x.data(), DType::kF32, {static_cast<int64_t>(x.size())}));
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.message();
    std::vector<int32_t> ints(4, 1);
    const Status st2 = c.all_reduce_sum(Tensor(ints.data(), DType::kI32, {4}));
    EXPECT_NE(st2.message().find("f32 or bf16"), std::string::npos) << st2.message();
    std::vector<float> small(2, 0.0f), out(r == 1 ? 7 : 8, 0.0f);
    EXPECT_FALSE(c.all_gather(Tensor(small.data(), DType::kF32, {2}),
                              Tensor(out.data(), DType::kF32, {static_cast<int64_t>(out.size())}))
                     .is_ok());
    // The group still works after the failures.
    std::vector<float> ok(3, static_cast<float>(r));
    ASSERT_TRUE(c.all_reduce_sum(Tensor(ok.data(), DType::kF32, {3})).is_ok());
    EXPECT_EQ(ok, (std::vector<float>(3, 6.0f)));
  });
}

TEST(HostGroup, ManyRoundsOfChangingSizesNeverReadAStaleInput) {
  const int n = 4;
  on_ranks(n, [&](int r, Communicator& c) {
    for (int round = 0; round < 300; ++round) {
      const int64_t len = 1 + (round * 37) % 300;
      std::vector<float> x(static_cast<size_t>(len), static_cast<float>(r + round));
      ASSERT_TRUE(c.all_reduce_sum(Tensor(x.data(), DType::kF32, {len})).is_ok());
      const float want = static_cast<float>(n * round + 6);  // sum of r + round over r = 0..3
      for (float v : x) ASSERT_EQ(v, want) << "round " << round;
    }
  });
}

}  // namespace
}  // namespace rl::parallel
