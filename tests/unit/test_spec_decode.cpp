// Speculative decoding building blocks: the n-gram proposer's lookup, greedy verification, and the rejection
// rule's exactness (the emitted tokens are distributed as the target's, whatever the proposal distribution).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "core/random.h"
#include "spec/proposer.h"
#include "spec/verify.h"

namespace rl::spec {
namespace {

std::vector<TokenId> lookup(const NgramProposer& p, std::vector<TokenId> prompt, std::vector<TokenId> output,
                            int32_t k) {
  return p.lookup(prompt, output, k);
}

TEST(NgramProposer, LongestSuffixWinsOverMoreRecentShorterMatch) {
  NgramProposer p({.min_n = 1, .max_n = 3, .num_speculative_tokens = 4});
  // Context 1 2 3 9 | 7 3 8 | 1 2 3: the suffix "1 2 3" occurs at the start (followed by 9 7 3 8), while "3"
  // alone occurs more recently (followed by 8). The longer match wins.
  EXPECT_EQ(lookup(p, {1, 2, 3, 9, 7, 3, 8}, {1, 2, 3}, 4), (std::vector<TokenId>{9, 7, 3, 8}));
}

TEST(NgramProposer, TiesKeepTheMostRecentOccurrence) {
  NgramProposer p({.min_n = 1, .max_n = 2, .num_speculative_tokens = 2});
  // "5 6" occurs twice before the end: followed by 1 2 the first time and by 3 4 the second time.
  EXPECT_EQ(lookup(p, {5, 6, 1, 2, 5, 6, 3, 4}, {0, 5, 6}, 2), (std::vector<TokenId>{3, 4}));
}

TEST(NgramProposer, DraftStopsAtTheEndOfTheContextAndAtK) {
  NgramProposer p({.min_n = 1, .max_n = 4, .num_speculative_tokens = 8});
  // "7 7 7": the suffix matches one token back, so only one token follows it.
  EXPECT_EQ(lookup(p, {7, 7, 7}, {}, 8), (std::vector<TokenId>{7}));
  EXPECT_EQ(lookup(p, {1, 2, 3, 4, 5, 6, 1}, {}, 3), (std::vector<TokenId>{2, 3, 4}));
  EXPECT_TRUE(lookup(p, {1, 2, 3, 4, 5, 6, 1}, {}, 0).empty());
}

TEST(NgramProposer, BelowMinNProposesNothing) {
  NgramProposer p({.min_n = 2, .max_n = 4, .num_speculative_tokens = 4});
  EXPECT_TRUE(lookup(p, {1, 2, 3, 4}, {9, 4}, 4).empty());  // only "4" repeats
  EXPECT_EQ(lookup(p, {1, 2, 3, 4}, {9, 3, 4}, 4), (std::vector<TokenId>{9, 3, 4}));
  EXPECT_TRUE(lookup(p, {}, {}, 4).empty());
  EXPECT_TRUE(lookup(p, {5}, {}, 4).empty());
}

TEST(NgramProposer, ProposeHonoursEachRequestsBudget) {
  NgramProposer p({.min_n = 1, .max_n = 3, .num_speculative_tokens = 3});
  std::vector<TokenId> a = {1, 2, 3, 4, 1, 2}, b = {8, 9, 8};
  std::vector<ProposalInput> in(3);
  in[0].prompt = a;
  in[0].max_draft_tokens = 2;
  in[1].prompt = b;
  in[1].max_draft_tokens = 5;
  in[2].prompt = a;
  std::vector<Proposal> out;
  p.propose(in, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].tokens, (std::vector<TokenId>{3, 4}));
  EXPECT_EQ(out[1].tokens, (std::vector<TokenId>{9, 8}));
  EXPECT_TRUE(out[2].tokens.empty());
}

TEST(NgramConfig, RangesAreChecked) {
  EXPECT_TRUE(NgramConfig{}.validate().is_ok());
  EXPECT_FALSE((NgramConfig{.min_n = 0}).validate().is_ok());
  EXPECT_FALSE((NgramConfig{.min_n = 3, .max_n = 2}).validate().is_ok());
  EXPECT_FALSE((NgramConfig{.num_speculative_tokens = 0}).validate().is_ok());
}

TEST(VerifyGreedy, AcceptsUntilTheFirstMismatchThenTakesTheTarget) {
  std::vector<TokenId> draft = {4, 5, 6};
  VerifyResult all = verify_greedy(draft, std::vector<TokenId>{4, 5, 6, 7});
  EXPECT_EQ(all.num_accepted, 3);
  EXPECT_EQ(all.tokens, (std::vector<TokenId>{4, 5, 6, 7}));
  VerifyResult some = verify_greedy(draft, std::vector<TokenId>{4, 9, 6, 7});
  EXPECT_EQ(some.num_accepted, 1);
  EXPECT_EQ(some.tokens, (std::vector<TokenId>{4, 9}));
  VerifyResult none = verify_greedy({}, std::vector<TokenId>{3});
  EXPECT_EQ(none.tokens, (std::vector<TokenId>{3}));
}

TEST(DrawFromWeights, InverseCdfInIdOrder) {
  std::vector<double> w = {0.0, 1.0, 0.0, 3.0};
  EXPECT_EQ(draw_from_weights(w, 0.0f), 1);
  EXPECT_EQ(draw_from_weights(w, 0.24f), 1);
  EXPECT_EQ(draw_from_weights(w, 0.26f), 3);
  EXPECT_EQ(draw_from_weights(w, 0.9999f), 3);
  EXPECT_EQ(draw_from_weights(std::vector<double>{0.0, 0.0}, 0.5f), -1);
}

// A toy language over V tokens whose next-token distribution depends on the whole prefix (hashed), used as
// both the target p and the proposal q with different salts.
constexpr int kV = 5;

std::array<float, kV> toy_dist(uint64_t salt, const std::vector<TokenId>& prefix, float sharpness) {
  uint64_t h = mix64(salt);
  for (TokenId t : prefix) h = mix64(h ^ static_cast<uint64_t>(t + 1));
  std::array<float, kV> p{};
  float sum = 0;
  for (int t = 0; t < kV; ++t) {
    p[t] = 0.2f + std::pow(uniform_from_counter(h, t), sharpness);
    sum += p[t];
  }
  for (float& x : p) x /= sum;
  return p;
}

// Generates two tokens by speculative rounds of k drafts each (drafts from q or a fixed guess), as the engine
// would, and returns them.
std::array<TokenId, 2> speculate_two(uint64_t seed, int k, bool deterministic_draft) {
  std::vector<TokenId> out;
  while (out.size() < 2) {
    std::vector<TokenId> draft;
    std::vector<float> q_rows, p_rows;
    std::vector<TokenId> ctx = out;
    for (int j = 0; j < k; ++j) {
      const int64_t pos = static_cast<int64_t>(out.size()) + j;
      TokenId d;
      if (deterministic_draft) {
        // A skewed guess (only tokens 0 and 1), as real n-gram guesses are: a uniform guess would hide a verifier
        // that forgets to remove the draft from the residual.
        d = static_cast<TokenId>((mix64(seed + 77 * pos) >> 7) % 2);
      } else {
        auto q = toy_dist(/*salt=*/99, ctx, 0.5f);
        std::vector<double> w(q.begin(), q.end());
        d = draw_from_weights(w, uniform_from_counter(mix64(seed ^ 0xd4af7ull), static_cast<uint64_t>(pos)));
        q_rows.insert(q_rows.end(), q.begin(), q.end());
      }
      auto p = toy_dist(/*salt=*/1, ctx, 3.0f);
      p_rows.insert(p_rows.end(), p.begin(), p.end());
      draft.push_back(d);
      ctx.push_back(d);
    }
    auto p_last = toy_dist(1, ctx, 3.0f);
    p_rows.insert(p_rows.end(), p_last.begin(), p_last.end());
    VerifyInputs in{draft, p_rows, q_rows, kV, seed, static_cast<int64_t>(out.size())};
    VerifyResult r = verify_sampled(in);
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(r.num_accepted + 1));
    out.insert(out.end(), r.tokens.begin(), r.tokens.end());
  }
  return {out[0], out[1]};
}

// The engine's rule for point-mass drafts (verify_by_target_draws): the target draws at every draft position
// (inverse CDF of p_j with a per-position uniform) and drafts are accepted while they equal the draws.
std::array<TokenId, 2> speculate_two_by_draws(uint64_t seed, int k) {
  std::vector<TokenId> out;
  while (out.size() < 2) {
    std::vector<TokenId> draft, draws, ctx = out;
    for (int j = 0; j <= k; ++j) {
      const int64_t pos = static_cast<int64_t>(out.size()) + j;
      auto p = toy_dist(1, ctx, 3.0f);
      std::vector<double> w(p.begin(), p.end());
      draws.push_back(draw_from_weights(w, uniform_from_counter(mix64(seed), static_cast<uint64_t>(pos))));
      if (j == k) break;
      const TokenId d = static_cast<TokenId>((mix64(seed + 77 * pos) >> 7) % 2);  // skewed guesses, as above
      draft.push_back(d);
      ctx.push_back(d);
    }
    VerifyResult r = verify_by_target_draws(draft, draws);
    out.insert(out.end(), r.tokens.begin(), r.tokens.end());
  }
  return {out[0], out[1]};
}

// Pearson's chi-square of the joint distribution of the first two emitted tokens against the target's
// p(t0) * p(t1 | t0), over 200,000 seeded generations (fixed seeds: the test is deterministic).
// by_draws: the engine's verify_by_target_draws instead of verify_sampled.
double chi_square_two_tokens(int k, bool deterministic_draft, bool by_draws = false) {
  constexpr int kDraws = 200000;
  std::array<int64_t, kV * kV> counts{};
  for (int i = 0; i < kDraws; ++i) {
    auto [a, b] = by_draws ? speculate_two_by_draws(mix64(1234567 + i), k)
                           : speculate_two(mix64(1234567 + i), k, deterministic_draft);
    ++counts[a * kV + b];
  }
  double chi2 = 0;
  auto p0 = toy_dist(1, {}, 3.0f);
  for (int a = 0; a < kV; ++a) {
    auto p1 = toy_dist(1, {a}, 3.0f);
    for (int b = 0; b < kV; ++b) {
      const double expected = kDraws * static_cast<double>(p0[a]) * p1[b];
      const double diff = static_cast<double>(counts[a * kV + b]) - expected;
      chi2 += diff * diff / expected;
    }
  }
  return chi2;
}

// 24 degrees of freedom: the 0.999 quantile of chi-square(24) is 51.18.
constexpr double kChi2Crit = 51.18;

TEST(VerifySampled, DraftModelOutputFollowsTheTargetDistribution) {
  EXPECT_LT(chi_square_two_tokens(/*k=*/2, /*deterministic_draft=*/false), kChi2Crit);
  EXPECT_LT(chi_square_two_tokens(/*k=*/1, /*deterministic_draft=*/false), kChi2Crit);
}

TEST(VerifySampled, PointMassDraftsFollowTheTargetDistribution) {
  EXPECT_LT(chi_square_two_tokens(/*k=*/3, /*deterministic_draft=*/true), kChi2Crit);
}

TEST(VerifySampled, TheEnginesTargetDrawRuleFollowsTheTargetDistribution) {
  EXPECT_LT(chi_square_two_tokens(/*k=*/3, true, /*by_draws=*/true), kChi2Crit);
  EXPECT_LT(chi_square_two_tokens(/*k=*/1, true, /*by_draws=*/true), kChi2Crit);
}

TEST(VerifySampled, ABiasedVerifierIsCaught) {
  // The same statistic must see a wrong rule: always accepting drafts from q emits q's distribution.
  constexpr int kDraws = 50000;
  std::array<int64_t, kV> counts{};
  auto q = toy_dist(99, {}, 0.5f);
  std::vector<double> w(q.begin(), q.end());
  for (int i = 0; i < kDraws; ++i) ++counts[draw_from_weights(w, uniform_from_counter(mix64(i), 0))];
  auto p = toy_dist(1, {}, 3.0f);
  double chi2 = 0;
  for (int t = 0; t < kV; ++t) {
    const double e = kDraws * static_cast<double>(p[t]);
    chi2 += (counts[t] - e) * (counts[t] - e) / e;
  }
  EXPECT_GT(chi2, 18.47);  // the 0.999 quantile of chi-square(4): q and p really differ
}

TEST(VerifySampled, IdenticalProposalIsAlwaysAccepted) {
  auto p = toy_dist(1, {}, 3.0f);
  std::vector<float> target(p.begin(), p.end());
  target.insert(target.end(), p.begin(), p.end());
  std::vector<float> draft_probs(p.begin(), p.end());
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<double> w(p.begin(), p.end());
    std::vector<TokenId> d = {draw_from_weights(w, uniform_from_counter(i, 5))};
    VerifyResult r = verify_sampled({d, target, draft_probs, kV, static_cast<uint64_t>(i), 0});
    accepted += r.num_accepted;
  }
  EXPECT_EQ(accepted, 2000);
}

TEST(VerifySampled, SameSeedAndPositionGiveTheSameTokens) {
  auto p = toy_dist(1, {}, 3.0f);
  std::vector<float> target;
  for (int j = 0; j < 3; ++j) target.insert(target.end(), p.begin(), p.end());
  std::vector<TokenId> d = {1, 2};
  VerifyResult a = verify_sampled({d, target, {}, kV, 42, 17});
  VerifyResult b = verify_sampled({d, target, {}, kV, 42, 17});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.num_accepted, b.num_accepted);
}

TEST(SpecDecodeCounters, AcceptanceRateAndMeanLength) {
  SpecDecodeCounters c;
  c.record(4, 2);
  c.record(4, 4);
  c.record(0, 0);  // no drafts: not a round
  EXPECT_EQ(c.num_drafts, 2);
  EXPECT_EQ(c.num_draft_tokens, 8);
  EXPECT_EQ(c.num_accepted_tokens, 6);
  EXPECT_EQ(c.accepted_per_position, (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_DOUBLE_EQ(c.acceptance_rate(), 0.75);
  EXPECT_DOUBLE_EQ(c.mean_accepted_length(), 4.0);
}

}  // namespace
}  // namespace rl::spec
