// Adaptive speculation's cost model (spec/adaptive.h): the expected accepted length, the per-request
// exponentially weighted acceptance, the online step-time model, and the plan, which turns speculation off where
// verification makes the step compute bound and gives each request the k that maximises tokens per second (checked
// against brute force over every k vector).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "spec/adaptive.h"

namespace rl::spec {
namespace {

TEST(ExpectedTokens, ClosedFormAndLimits) {
  EXPECT_DOUBLE_EQ(expected_tokens(0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(expected_tokens(0.5, 0), 1.0);
  EXPECT_NEAR(expected_tokens(0.5, 2), 1.75, 1e-12);  // 1 + 0.5 + 0.25
  for (double a : {0.1, 0.6, 0.9}) {
    double sum = 0, pw = 1;
    for (int j = 0; j <= 5; ++j, pw *= a) sum += pw;
    EXPECT_NEAR(expected_tokens(a, 5), sum, 1e-12) << a;
  }
}

TEST(AcceptanceStats, StartsAtThePriorAndFollowsRecentRounds) {
  AcceptanceStats s;
  EXPECT_DOUBLE_EQ(s.rate(), AcceptanceStats::kPriorRate);
  for (int i = 0; i < 40; ++i) s.record(4, 4);  // every draft accepted
  EXPECT_GT(s.rate(), 0.95);
  // Then every first draft rejected: the rate falls round by round to the floor the prior leaves, 1 accepted of
  // 2 + the discounted trials (1 / (1 - 2^(-1/8)) = 12.0): 1 / 14 = 0.071.
  double prev = s.rate();
  for (int i = 0; i < 80; ++i) {
    s.record(4, 0);
    EXPECT_LT(s.rate(), prev);
    prev = s.rate();
  }
  EXPECT_LT(s.rate(), 0.08);
  EXPECT_GT(s.rate(), 0.06);
  // One round of k drafts with m accepted and a rejection is m + 1 trials: rate m / (m + 1) in the limit.
  AcceptanceStats t;
  for (int i = 0; i < 200; ++i) t.record(4, 2);
  EXPECT_NEAR(t.rate(), 2.0 / 3.0, 0.01);
  t.record(0, 0);  // no drafts: nothing learnt
  EXPECT_EQ(t.rounds, 200);
}

TEST(StepTimeModel, PlainAndSpeculativeLinesPerBatchBucket) {
  StepTimeModel m;
  EXPECT_FALSE(m.plain(8).has_value());
  EXPECT_FALSE(m.speculative(8, 16).has_value());
  // Plain steps: 1 ms + 0.1 ms per request in the bucket 8-15.
  for (int i = 0; i < 20; ++i) m.observe(false, 8 + i % 8, 8 + i % 8, 1e-3 + 1e-4 * (8 + i % 8));
  EXPECT_NEAR(*m.plain(12), 2.2e-3, 1e-9);
  EXPECT_FALSE(m.plain(4).has_value());  // another bucket
  // One speculative row count: the slope comes from the plain anchor (8 rows, 1.8 ms) to (24 rows, 5 ms).
  for (int i = 0; i < 10; ++i) m.observe(true, 8, 24, 5e-3);
  const double at16 = *m.speculative(8, 16);
  EXPECT_GT(at16, 1.8e-3);
  EXPECT_LT(at16, 5e-3);
  EXPECT_NEAR(*m.speculative(8, 24), 5e-3, 5e-4);
  // Noise never makes more rows cheaper: a falling line is flat.
  StepTimeModel n;
  n.observe(true, 2, 2, 3e-3);
  n.observe(true, 2, 6, 1e-3);
  EXPECT_GE(*n.speculative(2, 10), *n.speculative(2, 2) - 1e-12);
}

// A step-time model that knows a given function of rows (speculative) and of the batch (plain).
StepTimeModel model_of(const std::function<double(int64_t)>& spec_s, double plain_s, int64_t batch, int64_t k) {
  StepTimeModel m;
  for (int i = 0; i < 200; ++i) {
    m.observe(false, batch, batch, plain_s);
    const int64_t rows = batch + (i % (batch * k + 1));
    m.observe(true, batch, rows, spec_s(rows));
  }
  return m;
}

TEST(PlanDrafts, BandwidthBoundStepsSpeculateFully) {
  // Batch 1 on a GPU: the step costs the same with 1 or 5 rows.
  const StepTimeModel m = model_of([](int64_t) { return 1e-3; }, 1e-3, 1, 4);
  std::vector<DraftCandidate> c = {{.rate = 0.6, .max_k = 4}};
  DraftPlan p = plan_drafts(c, 1, 0, m, 1);
  EXPECT_TRUE(p.speculate);
  EXPECT_EQ(p.k, (std::vector<int32_t>{4}));
  EXPECT_NEAR(p.expected_tokens, expected_tokens(0.6, 4), 1e-9);
}

TEST(PlanDrafts, ComputeBoundStepsTurnSpeculationOff) {
  // A large batch: every row costs the same, so k drafts cost k rows and return fewer than k tokens.
  const StepTimeModel m = model_of([](int64_t rows) { return 1e-4 * rows; }, 1e-4 * 32, 32, 4);
  std::vector<DraftCandidate> c(32, {.rate = 0.9, .max_k = 4});
  DraftPlan p = plan_drafts(c, 32, 0, m, 32);
  EXPECT_FALSE(p.speculate);
  for (int32_t k : p.k) EXPECT_EQ(k, 0);
}

TEST(PlanDrafts, RequestsWhoseDraftsFailGetNone) {
  // A fixed cost and 0.1 ms per row: a draft pays when its expected tokens beat the time it adds, so the
  // request that accepts 90 % takes every draft and the one at 2 % none.
  const StepTimeModel m = model_of([](int64_t rows) { return 1e-3 + 1e-4 * rows; }, 1.2e-3, 2, 4);
  std::vector<DraftCandidate> c = {{.rate = 0.9, .max_k = 4}, {.rate = 0.02, .max_k = 4}};
  DraftPlan p = plan_drafts(c, 2, 0, m, 2);
  EXPECT_TRUE(p.speculate);
  EXPECT_EQ(p.k, (std::vector<int32_t>{4, 0}));
}

TEST(PlanDrafts, MatchesBruteForceOverEveryKVector) {
  // T(rows) = 1 ms + 0.25 ms per row: three requests of different acceptance, K = 3.
  const auto t = [](int64_t rows) { return 1e-3 + 2.5e-4 * rows; };
  const StepTimeModel m = model_of(t, t(3), 3, 3);
  const std::vector<DraftCandidate> c = {{.rate = 0.95, .max_k = 3}, {.rate = 0.5, .max_k = 3}, {.rate = 0.1, .max_k = 2}};
  double best = 3.0 / *m.plain(3);
  std::vector<int32_t> best_k = {0, 0, 0};
  for (int32_t a = 0; a <= 3; ++a) {
    for (int32_t b = 0; b <= 3; ++b) {
      for (int32_t d = 0; d <= 2; ++d) {
        if (a + b + d == 0) continue;
        const double tokens =
            expected_tokens(c[0].rate, a) + expected_tokens(c[1].rate, b) + expected_tokens(c[2].rate, d);
        const double v = tokens / *m.speculative(3, 3 + a + b + d);
        if (v > best) {
          best = v;
          best_k = {a, b, d};
        }
      }
    }
  }
  DraftPlan p = plan_drafts(c, 3, 0, m, 3);
  EXPECT_EQ(p.k, best_k);
  EXPECT_GT(best_k[0], 0);       // the brute force really speculates here
  EXPECT_LT(best_k[2], 2);       // and not with everything
}

TEST(PlanDrafts, UnknownTimesAreExploredAndProbesForced) {
  std::vector<DraftCandidate> c = {{.rate = 0.01, .max_k = 3}, {.rate = 0.01, .max_k = 2}};
  StepTimeModel none;
  DraftPlan p = plan_drafts(c, 2, 0, none, 2);  // no speculative estimate: try every draft once
  EXPECT_TRUE(p.speculate);
  EXPECT_EQ(p.k, (std::vector<int32_t>{3, 2}));
  StepTimeModel spec_only;
  for (int i = 0; i < 3; ++i) spec_only.observe(true, 2, 7, 1e-3);
  EXPECT_FALSE(plan_drafts(c, 2, 0, spec_only, 2).speculate);  // no plain estimate: run plain once
  // Known times where nothing pays; a probe still proposes one draft.
  const StepTimeModel m = model_of([](int64_t rows) { return 1e-4 * rows; }, 2e-4, 2, 3);
  EXPECT_FALSE(plan_drafts(c, 2, 0, m, 2).speculate);
  c[1].probe = true;
  DraftPlan q = plan_drafts(c, 2, 0, m, 2);
  EXPECT_TRUE(q.speculate);
  EXPECT_EQ(q.k, (std::vector<int32_t>{0, 1}));
  // Nothing may speculate: plain.
  std::vector<DraftCandidate> none_k = {{.rate = 1.0, .max_k = 0}};
  EXPECT_FALSE(plan_drafts(none_k, 1, 0, m, 1).speculate);
}

}  // namespace
}  // namespace rl::spec
