// Adaptive speculation (issue 18): each step chooses how many drafts (0..K) each decoding request proposes, from
// a cost model of the step and each request's running acceptance, so that speculation turns itself off (or k
// shrinks) where it stops paying: at large batches, where verifying 1 + k tokens per row makes the step
// compute bound, and for requests whose drafts keep failing.
//
// The model. A round of k drafts, each accepted with probability a given the earlier ones were, emits
// E(a, k) = 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a) tokens. A step's seconds depend on its rows (every
// verified token is a decode row): T_spec(rows) for a speculative step (propose, verify, not pipelined) and
// T_plain for the plain pipelined step of the same batch. The plan maximises expected tokens per second,
//   plain: B / T_plain        speculative: sum_i E(a_i, k_i) / T_spec(B + sum_i k_i),
// over k_i in [0, K_i]. E's increments a^j fall with j, so for a total of m drafts the best split takes the m
// largest increments over all requests; the plan scans m = 0..sum K_i and keeps the best (exact for this model).
//
// Nothing here is a constant of one machine: the step times are measured online (StepTimeModel) and the
// acceptance rates per request (AcceptanceStats). Pure C++ over numbers, unit-tested without a model.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rl::spec {

// Expected tokens one verification of k drafts emits at per-draft acceptance a: (1 - a^(k+1)) / (1 - a);
// k + 1 at a = 1.
double expected_tokens(double a, int32_t k);

// One request's acceptance, exponentially weighted: discounted counts of drafts accepted and drafts tried. A
// round of k drafts with m accepted is m + 1 Bernoulli trials when a draft was rejected (the rejection is the
// last trial), m when all were accepted (a geometric sample, so accepted / tried is the maximum-likelihood a).
// Starts at the prior (kPriorRate with the weight of kPriorTrials drafts), so a new request speculates.
struct AcceptanceStats {
  // A verification's weight halves after kHalfLifeRounds more: recent enough to follow a request that stops
  // copying, long enough that one unlucky round does not switch it off.
  static constexpr double kHalfLifeRounds = 8.0;
  static constexpr double kPriorRate = 0.5;
  static constexpr double kPriorTrials = 2.0;

  double accepted = 0.0;  // discounted
  double tried = 0.0;     // discounted
  int64_t rounds = 0;

  void record(int32_t num_draft, int32_t num_accepted);
  double rate() const;
};

// Online step-time estimates, per batch bucket (powers of two: 1, 2-3, 4-7, ...), from the wall seconds of
// all-decode steps. Speculative steps: a discounted least-squares line seconds = alpha + beta * rows over the
// bucket's observations, anchored by one pseudo-observation (rows = batch, seconds = the plain estimate) so that a
// single observed row count still gives a slope. Plain steps: a discounted line in batch (rows = batch).
// Observations lose half their weight after kHalfLifeSteps newer ones in the same bucket and mode, so the model
// follows a machine whose load changes.
class StepTimeModel {
 public:
  static constexpr double kHalfLifeSteps = 32.0;

  void observe(bool speculative, int64_t batch, int64_t rows, double seconds);
  // Seconds of a plain step of `batch` requests; nullopt before any plain observation in its bucket.
  std::optional<double> plain(int64_t batch) const;
  // Seconds of a speculative step of `batch` requests and `rows` rows; nullopt before any speculative
  // observation in its bucket.
  std::optional<double> speculative(int64_t batch, int64_t rows) const;
  int64_t num_observations(bool speculative, int64_t batch) const;

 private:
  struct Line {  // discounted sums for least squares
    double w = 0, x = 0, y = 0, xx = 0, xy = 0;
    int64_t n = 0;
    void add(double xv, double yv, double decay);
    // The fitted value at xv; with no spread in x (or no prior), the weighted mean of y shifted by `slope`.
    std::optional<double> at(double xv, std::optional<std::pair<double, double>> prior) const;
  };
  static size_t bucket(int64_t batch);
  std::vector<Line> plain_, spec_;
};

// One decoding request in the plan.
struct DraftCandidate {
  double rate = 0.0;     // AcceptanceStats::rate()
  int32_t max_k = 0;     // drafts it may propose this step (K, capped by max_tokens, max_model_len, budget)
  bool probe = false;    // proposes at least one draft whatever the model says (re-measures its acceptance)
};

struct DraftPlan {
  bool speculate = false;     // false: a plain pipelined step (every k is 0)
  std::vector<int32_t> k;     // per candidate
  double expected_tokens = 0; // of the chosen plan, per step
  double seconds = 0;         // its estimated step time (0 when unknown)
};

// The plan for one step. num_rows_base: the step's rows without drafts (its decode rows and any prefill
// tokens); num_other_tokens: tokens the step emits outside the candidates (decode rows that cannot speculate).
// Unknown step times are explored: without a speculative estimate every candidate proposes max_k (optimistic);
// without a plain estimate (but with a speculative one) the step runs plain once.
DraftPlan plan_drafts(std::span<const DraftCandidate> candidates, int64_t num_rows_base, double num_other_tokens,
                      const StepTimeModel& times, int64_t batch);

}  // namespace rl::spec
