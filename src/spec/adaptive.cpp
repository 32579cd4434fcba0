#include "spec/adaptive.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

namespace rl::spec {

double expected_tokens(double a, int32_t k) {
  if (k <= 0) return 1.0;
  a = std::clamp(a, 0.0, 1.0);
  if (a >= 1.0) return static_cast<double>(k) + 1.0;
  return (1.0 - std::pow(a, k + 1)) / (1.0 - a);
}

void AcceptanceStats::record(int32_t num_draft, int32_t num_accepted) {
  if (num_draft <= 0) return;
  const double decay = std::exp2(-1.0 / kHalfLifeRounds);
  accepted = accepted * decay + num_accepted;
  tried = tried * decay + num_accepted + (num_accepted < num_draft ? 1 : 0);
  ++rounds;
}

double AcceptanceStats::rate() const {
  return (accepted + kPriorRate * kPriorTrials) / (tried + kPriorTrials);
}

void StepTimeModel::Line::add(double xv, double yv, double decay) {
  w = w * decay + 1.0;
  x = x * decay + xv;
  y = y * decay + yv;
  xx = xx * decay + xv * xv;
  xy = xy * decay + xv * yv;
  ++n;
}

std::optional<double> StepTimeModel::Line::at(double xv, std::optional<std::pair<double, double>> prior) const {
  if (n == 0) return std::nullopt;
  double sw = w, sx = x, sy = y, sxx = xx, sxy = xy;
  if (prior) {  // one pseudo-observation of weight 1
    sw += 1.0;
    sx += prior->first;
    sy += prior->second;
    sxx += prior->first * prior->first;
    sxy += prior->first * prior->second;
  }
  const double mean_x = sx / sw, mean_y = sy / sw;
  const double var = sxx / sw - mean_x * mean_x;
  // No spread in rows: the step time does not tell a slope; the mean is the estimate.
  if (!(var > 1e-9 * std::max(1.0, mean_x * mean_x))) return std::max(0.0, mean_y);
  // A step with more rows never takes less time: noise must not make drafts look free, so the slope is >= 0.
  const double slope = std::max(0.0, (sxy / sw - mean_x * mean_y) / var);
  return std::max(0.0, mean_y + slope * (xv - mean_x));
}

size_t StepTimeModel::bucket(int64_t batch) {
  return static_cast<size_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(1, batch))) - 1);
}

void StepTimeModel::observe(bool speculative, int64_t batch, int64_t rows, double seconds) {
  if (batch <= 0 || !(seconds > 0)) return;
  std::vector<Line>& lines = speculative ? spec_ : plain_;
  const size_t b = bucket(batch);
  if (lines.size() <= b) lines.resize(b + 1);
  const double decay = std::exp2(-1.0 / kHalfLifeSteps);
  lines[b].add(static_cast<double>(speculative ? rows : batch), seconds, decay);
}

std::optional<double> StepTimeModel::plain(int64_t batch) const {
  const size_t b = bucket(batch);
  if (b >= plain_.size()) return std::nullopt;
  return plain_[b].at(static_cast<double>(batch), std::nullopt);
}

std::optional<double> StepTimeModel::speculative(int64_t batch, int64_t rows) const {
  const size_t b = bucket(batch);
  if (b >= spec_.size()) return std::nullopt;
  std::optional<std::pair<double, double>> prior;
  if (const std::optional<double> p = plain(batch)) prior = std::make_pair(static_cast<double>(batch), *p);
  return spec_[b].at(static_cast<double>(rows), prior);
}

int64_t StepTimeModel::num_observations(bool speculative, int64_t batch) const {
  const std::vector<Line>& lines = speculative ? spec_ : plain_;
  const size_t b = bucket(batch);
  return b < lines.size() ? lines[b].n : 0;
}

DraftPlan plan_drafts(std::span<const DraftCandidate> candidates, int64_t num_rows_base, double num_other_tokens,
                      const StepTimeModel& times, int64_t batch) {
  DraftPlan plan;
  plan.k.assign(candidates.size(), 0);
  const double base_tokens = static_cast<double>(candidates.size()) + num_other_tokens;
  plan.expected_tokens = base_tokens;
  // Every draft a candidate may add, with its expected gain: the j-th draft of a request adds a^j tokens.
  struct Increment {
    double gain;
    size_t index;
    bool forced;
  };
  std::vector<Increment> inc;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const DraftCandidate& c = candidates[i];
    double g = 1.0;
    for (int32_t j = 1; j <= c.max_k; ++j) {
      g *= std::clamp(c.rate, 0.0, 1.0);
      inc.push_back({g, i, c.probe && j == 1});
    }
  }
  const std::optional<double> t_plain = times.plain(batch);
  if (inc.empty()) {
    plan.seconds = t_plain.value_or(0.0);
    return plan;
  }
  // Forced probes first, then by gain (a request's increments keep their order: gains fall with j).
  std::stable_sort(inc.begin(), inc.end(), [](const Increment& a, const Increment& b) {
    return a.forced != b.forced ? a.forced : a.gain > b.gain;
  });
  const int64_t num_forced = std::count_if(inc.begin(), inc.end(), [](const Increment& x) { return x.forced; });
  const bool spec_known = times.speculative(batch, num_rows_base + 1).has_value();
  size_t best_m = 0;
  double best_tokens = base_tokens;
  if (!spec_known) {
    // Explore: speculate with every draft allowed, which measures the most expensive speculative step.
    best_m = inc.size();
    for (const Increment& x : inc) best_tokens += x.gain;
    plan.seconds = 0.0;
  } else if (!t_plain && num_forced == 0) {
    plan.seconds = 0.0;  // explore the plain step once
    return plan;
  } else {
    double best_value = num_forced == 0 ? base_tokens / std::max(*t_plain, 1e-12) : -1.0;
    double best_seconds = num_forced == 0 ? *t_plain : 0.0;
    double tokens = base_tokens;
    for (size_t m = 1; m <= inc.size(); ++m) {
      tokens += inc[m - 1].gain;
      if (static_cast<int64_t>(m) < num_forced) continue;
      const double t = *times.speculative(batch, num_rows_base + static_cast<int64_t>(m));
      const double value = tokens / std::max(t, 1e-12);
      if (value > best_value) {
        best_value = value;
        best_m = m;
        best_tokens = tokens;
        best_seconds = t;
      }
    }
    plan.seconds = best_seconds;
  }
  if (best_m == 0) return plan;
  plan.speculate = true;
  plan.expected_tokens = best_tokens;
  for (size_t m = 0; m < best_m; ++m) ++plan.k[inc[m].index];
  return plan;
}

}  // namespace rl::spec
