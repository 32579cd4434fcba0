// Backend::sample on the CPU backend (the reference the CUDA kernel is checked against): the empirical
// distribution of its draws equals the filtered distribution (temperature, top-k, top-p, min-p), the same
// (seed, step) gives the same token wherever the row sits in the batch, and temperature 0 is the argmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/cpu/cpu_backend.h"

namespace rl {
namespace {

SampleRowParams make(float t, int32_t k, float p, float min_p, uint64_t seed, uint64_t step) {
  SampleRowParams r;
  r.temperature = t;
  r.top_k = k;
  r.top_p = p;
  r.min_p = min_p;
  r.seed = seed;
  r.step = step;
  return r;
}

// Samples logits (copied: sample() processes rows in place) with params into out.
void sample(CpuBackend& be, const std::vector<float>& logits, int64_t vocab, const std::vector<SampleRowParams>& ps,
            std::vector<int32_t>& out) {
  std::vector<float> work = logits;
  const int64_t rows = static_cast<int64_t>(ps.size());
  SampleBatch b;
  b.num_rows = rows;
  b.params = ps.data();
  b.out_tokens = out.data();
  be.sample(Tensor(work.data(), DType::kF32, {rows, vocab}), b);
}

// The filtered, renormalised distribution, computed the plain way (full sort).
std::vector<double> filtered(const std::vector<float>& logits, const SampleRowParams& p) {
  const size_t v = logits.size();
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double m = logits[static_cast<size_t>(order[0])];
  std::vector<double> prob(v, 0.0);
  for (size_t i = 0; i < v; ++i) prob[i] = std::exp((logits[i] - m) / p.temperature);
  double floor = -1e300;
  if (p.top_k > 0 && p.top_k < static_cast<int>(v)) floor = logits[static_cast<size_t>(order[static_cast<size_t>(p.top_k - 1)])];
  if (p.top_p < 1.0f) {
    double total = 0, cum = 0;
    for (int i : order) {
      if (logits[static_cast<size_t>(i)] >= floor) total += prob[static_cast<size_t>(i)];
    }
    for (int i : order) {
      if (logits[static_cast<size_t>(i)] < floor) break;
      cum += prob[static_cast<size_t>(i)];
      if (cum >= p.top_p * total) {
        floor = logits[static_cast<size_t>(i)];
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < v; ++i) {
    if (logits[i] < floor || (p.min_p > 0 && prob[i] < p.min_p)) prob[i] = 0;
    total += prob[i];
  }
  for (double& x : prob) x /= total;
  return prob;
}

TEST(DeviceSamplingReference, DrawsFollowTheFilteredDistribution) {
  CpuBackend be(2);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.5f);
  const int64_t vocab = 48, rows = 512, rounds = 40;  // 20,480 draws per case
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (auto& x : logits) x = d(rng);
  std::vector<float> batch;
  for (int64_t r = 0; r < rows; ++r) batch.insert(batch.end(), logits.begin(), logits.end());
  std::vector<int32_t> out(static_cast<size_t>(rows));
  const SampleRowParams cases[] = {make(1.0f, 0, 1.0f, 0.0f, 11, 0), make(0.7f, 10, 1.0f, 0.0f, 12, 0),
                                   make(1.3f, 0, 0.8f, 0.0f, 13, 0), make(1.0f, 20, 0.9f, 0.1f, 14, 0)};
  for (const SampleRowParams& c : cases) {
    std::vector<double> want = filtered(logits, c);
    std::vector<double> got(static_cast<size_t>(vocab), 0.0);
    std::vector<SampleRowParams> ps(static_cast<size_t>(rows), c);
    for (int64_t k = 0; k < rounds; ++k) {
      for (int64_t r = 0; r < rows; ++r) ps[static_cast<size_t>(r)].step = static_cast<uint64_t>(k * rows + r);
      sample(be, batch, vocab, ps, out);
      for (int32_t t : out) got[static_cast<size_t>(t)] += 1.0 / (rows * rounds);
    }
    double tv = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      tv += std::abs(got[static_cast<size_t>(i)] - want[static_cast<size_t>(i)]) / 2;
      if (want[static_cast<size_t>(i)] == 0) {
        EXPECT_EQ(got[static_cast<size_t>(i)], 0.0) << "filtered token " << i;
      }
    }
    EXPECT_LT(tv, 0.03) << "T=" << c.temperature << " k=" << c.top_k << " p=" << c.top_p << " min_p=" << c.min_p;
  }
}

TEST(DeviceSamplingReference, SameSeedAndStepSameTokenAnywhereInTheBatch) {
  CpuBackend be(1);
  const int64_t vocab = 1000;
  std::mt19937 rng(6);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> batch(static_cast<size_t>(3 * vocab));
  for (auto& x : batch) x = d(rng);
  std::copy(batch.begin(), batch.begin() + vocab, batch.begin() + 2 * vocab);  // row 2 = row 0
  std::vector<int32_t> out(3);
  std::vector<SampleRowParams> ps(3, make(1.0f, 0, 0.95f, 0.0f, 42, 7));
  ps[1].seed = 43;
  sample(be, batch, vocab, ps, out);
  EXPECT_EQ(out[0], out[2]);
  ps[0].temperature = 0.0f;
  sample(be, batch, vocab, ps, out);
  EXPECT_EQ(out[0], std::max_element(batch.begin(), batch.begin() + vocab) - batch.begin());
}

// A row with NaN or +Inf is numerically broken (kSampleNonFinite from sample, -1 from argmax_rows); a row with
// nothing above -inf has nothing to sample (kSampleNothingLeft). The engine fails those requests instead of
// emitting an arbitrary token.
TEST(DeviceSamplingReference, BrokenRowsGiveNegativeCodes) {
  CpuBackend be(1);
  const std::vector<float> batch = {1.0f,      NAN,       2.0f,       // NaN
                                    1.0f,      INFINITY,  2.0f,       // +Inf
                                    -INFINITY, -INFINITY, -INFINITY,  // nothing
                                    1.0f,      3.0f,      2.0f};
  std::vector<float> work = batch;
  std::vector<int32_t> out(4);
  Tensor lt(work.data(), DType::kF32, {4, 3}), ot(out.data(), DType::kI32, {4});
  be.argmax_rows(lt, ot);
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, -1, 1}));
  for (float t : {0.0f, 1.0f}) {
    sample(be, batch, 3, std::vector<SampleRowParams>(4, make(t, 0, 0.95f, 0.0f, 42, 7)), out);
    EXPECT_EQ(out[0], kSampleNonFinite) << "temperature " << t;
    EXPECT_EQ(out[1], kSampleNonFinite) << "temperature " << t;
    EXPECT_EQ(out[2], kSampleNothingLeft) << "temperature " << t;
    EXPECT_GE(out[3], 0) << "temperature " << t;
  }
}

}  // namespace
}  // namespace rl
