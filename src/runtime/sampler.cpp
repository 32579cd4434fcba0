#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace rl {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double to_unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The lowest id among the largest logits (NaN never wins). Two passes: a branch-free, vectorizable max, then
// the first match; a single branchy pass mispredicts too often on real logits.
TokenId argmax(std::span<const float> row) {
  float m = kNegInf;
  for (float v : row) m = v > m ? v : m;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == m) return static_cast<TokenId>(i);
  }
  return 0;  // only NaN logits
}

// True when the row can be sampled: no NaN, no +Inf, and some logit above -inf. Branch-free (vectorizes).
bool samplable(std::span<const float> row) {
  bool bad = false, any = false;
  for (float v : row) {
    bad |= !(v < std::numeric_limits<float>::infinity());  // NaN or +Inf
    any |= v > kNegInf;
  }
  return !bad && any;
}

bool in_vocab(TokenId t, size_t vocab_size) { return t >= 0 && static_cast<size_t>(t) < vocab_size; }

// Top-p buckets: bin b holds logits in (max - (b + 1) * w, max - b * w] with w = kBinRange / kNumBins; bin
// kNumBins holds everything further below (negligible mass, but kept exact).
constexpr int32_t kNumBins = 2048;
constexpr float kBinRange = 32.0f;

int32_t bin_of(float delta) {
  if (!(delta < kBinRange)) return kNumBins;
  return std::min(kNumBins - 1, static_cast<int32_t>(delta * (kNumBins / kBinRange)));
}

// Candidate order: descending logit, then ascending id.
bool ranks_before(std::span<const float> logits, int32_t a, int32_t b) {
  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

}  // namespace


double sampler_uniform(uint64_t seed, uint64_t step) { return to_unit(splitmix64(splitmix64(seed) ^ step)); }

Sampler::Sampler() : unseeded_rng_(std::random_device{}()) {}

void Sampler::apply_processors(std::span<float> logits, const SamplerRow& row) {
  const SamplingParams& p = *row.params;
  const size_t vocab = logits.size();
  for (const auto& [token, bias] : p.logit_bias) {
    if (in_vocab(token, vocab)) logits[token] += bias;
  }
  if (static_cast<int32_t>(row.output_token_ids.size()) < p.min_tokens) {
    if (!p.ignore_eos) {
      for (TokenId t : row.eos_token_ids) {
        if (in_vocab(t, vocab)) logits[t] = kNegInf;
      }
    }
    for (TokenId t : p.stop_token_ids) {
      if (in_vocab(t, vocab)) logits[t] = kNegInf;
    }
  }
  if (p.repetition_penalty != 1.0f) {
    seen_.resize(vocab, 0);
    const auto penalize = [&](std::span<const TokenId> ids) {
      for (TokenId t : ids) {
        if (!in_vocab(t, vocab) || seen_[t]) continue;
        seen_[t] = 1;
        logits[t] = logits[t] > 0.0f ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
      }
    };
    penalize(row.prompt_token_ids);
    penalize(row.output_token_ids);
    for (TokenId t : row.prompt_token_ids) if (in_vocab(t, vocab)) seen_[t] = 0;
    for (TokenId t : row.output_token_ids) if (in_vocab(t, vocab)) seen_[t] = 0;
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    counts_.resize(vocab, 0);
    for (TokenId t : row.output_token_ids) if (in_vocab(t, vocab)) ++counts_[t];
    for (TokenId t : row.output_token_ids) {
      if (!in_vocab(t, vocab) || counts_[t] == 0) continue;
      logits[t] -= p.frequency_penalty * static_cast<float>(counts_[t]) + p.presence_penalty;
      counts_[t] = 0;  // each distinct token once; also restores the all-zero scratch
    }
  }
}

void Sampler::select_top(std::span<const float> logits, int32_t k) {
  // One pass with a heap of the k best so far (its front is the worst of them): most tokens lose a single
  // comparison against the front, so this is O(vocab) for small k, with no index array over the vocabulary.
  const auto before = [&](int32_t a, int32_t b) { return ranks_before(logits, a, b); };
  const int32_t vocab = static_cast<int32_t>(logits.size());
  k = std::min(k, vocab);
  idx_.clear();
  if (k <= 0) return;
  for (int32_t t = 0; t < vocab; ++t) {
    if (static_cast<int32_t>(idx_.size()) < k) {
      idx_.push_back(t);
      std::push_heap(idx_.begin(), idx_.end(), before);
    } else if (logits[t] > logits[idx_.front()]) {  // an equal logit has a larger id: it ranks after
      std::pop_heap(idx_.begin(), idx_.end(), before);
      idx_.back() = t;
      std::push_heap(idx_.begin(), idx_.end(), before);
    }
  }
  std::sort_heap(idx_.begin(), idx_.end(), before);
}

std::vector<TokenProb> Sampler::filtered_distribution(std::span<const float> scaled, int32_t top_k, float top_p,
                                                      float min_p) {
  const int32_t vocab = static_cast<int32_t>(scaled.size());
  const float max_logit = scaled[argmax(scaled)];
  RL_CHECK_MSG(max_logit > kNegInf, "every logit is -inf");
  // weight(t) = p(t) / p_max, the unnormalized probability.
  const auto weight = [&](int32_t t) { return std::exp(scaled[t] - max_logit); };
  idx_.clear();
  if (top_k > 0 && top_k < vocab) {
    select_top(scaled, top_k);
    // Ties with the k-th value are kept (HF/vLLM): those are the equal logits with larger ids, left out above.
    const int32_t kth = idx_.back();
    for (int32_t t = kth + 1; t < vocab; ++t) {
      if (scaled[t] == scaled[kth]) idx_.push_back(t);
    }
    if (top_p < 1.0f) {
      double total = 0.0;
      for (int32_t t : idx_) total += weight(t);
      double cum = 0.0;
      size_t keep = 0;
      while (keep < idx_.size() && cum < top_p * total) cum += weight(idx_[keep++]);
      idx_.resize(std::max<size_t>(keep, 1));
    }
  } else if (top_p < 1.0f) {
    // Top-p without sorting the vocabulary: bucket tokens by logit (bins are monotone in the logit), find the
    // bin where the mass crosses top_p, and sort only that bin's tokens.
    bin_mass_.assign(kNumBins + 1, 0.0);
    double total = 0.0;
    for (int32_t t = 0; t < vocab; ++t) {
      const double w = weight(t);
      bin_mass_[bin_of(max_logit - scaled[t])] += w;
      total += w;
    }
    const double target = top_p * total;
    double cum = 0.0;
    int32_t crossing = 0;
    while (crossing < kNumBins && cum + bin_mass_[crossing] < target) cum += bin_mass_[crossing++];
    boundary_.clear();
    for (int32_t t = 0; t < vocab; ++t) {
      const int32_t b = bin_of(max_logit - scaled[t]);
      if (b < crossing) {
        idx_.push_back(t);
      } else if (b == crossing) {
        boundary_.push_back(t);
      }
    }
    std::sort(boundary_.begin(), boundary_.end(), [&](int32_t a, int32_t b) { return ranks_before(scaled, a, b); });
    for (int32_t t : boundary_) {
      if (cum >= target && !idx_.empty()) break;
      cum += weight(t);
      idx_.push_back(t);
    }
  } else {
    idx_.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) idx_[i] = i;
  }
  std::vector<TokenProb> out;
  out.reserve(idx_.size());
  double total = 0.0;
  for (int32_t t : idx_) {
    const float w = weight(t);
    if (w == 0.0f || w < min_p) continue;  // min-p: p(t) >= min_p * p_max
    out.push_back(TokenProb{t, w});
    total += w;
  }
  for (TokenProb& tp : out) tp.prob = static_cast<float>(tp.prob / total);
  return out;
}

TokenId Sampler::draw_unfiltered(std::span<const float> scaled, float min_p, double u) const {
  const float max_logit = scaled[argmax(scaled)];
  RL_CHECK_MSG(max_logit > kNegInf, "every logit is -inf");
  double total = 0.0;
  for (float v : scaled) {
    const float w = std::exp(v - max_logit);
    if (w >= min_p) total += w;
  }
  const double target = u * total;
  double cum = 0.0;
  TokenId last = 0;
  for (size_t t = 0; t < scaled.size(); ++t) {
    const float w = std::exp(scaled[t] - max_logit);
    if (w == 0.0f || w < min_p) continue;
    cum += w;
    last = static_cast<TokenId>(t);
    if (target < cum) return last;
  }
  return last;  // rounding left the target at the very end
}

std::vector<SampleResult> Sampler::sample(std::span<float> logits, int32_t vocab_size,
                                          std::span<const SamplerRow> rows) {
  RL_CHECK(vocab_size > 0);
  RL_CHECK(logits.size() == rows.size() * static_cast<size_t>(vocab_size));
  std::vector<SampleResult> results(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplerRow& row = rows[r];
    RL_CHECK(row.params != nullptr);
    const SamplingParams& p = *row.params;
    std::span<float> logit_row = logits.subspan(r * vocab_size, vocab_size);
    SampleResult& res = results[r];
    const int32_t num_top = p.logprobs ? std::min(*p.logprobs, vocab_size) : 0;
    float log_normalizer = 0.0f;
    if (!samplable(logit_row)) {
      res.error = "the model produced non-finite logits (NaN or Inf) for this sequence";
      continue;
    }
    if (p.logprobs) {
      raw_.assign(logit_row.begin(), logit_row.end());
      const float m = raw_[argmax(raw_)];
      double sum = 0.0;
      for (float v : raw_) sum += std::exp(v - m);
      log_normalizer = m + static_cast<float>(std::log(sum));
      select_top(raw_, num_top);
      for (int32_t i = 0; i < num_top; ++i) {
        res.top_logprobs.push_back(TokenLogprob{idx_[i], raw_[idx_[i]] - log_normalizer});
      }
    }
    apply_processors(logit_row, row);
    if (!p.is_greedy()) {
      const float inv_t = 1.0f / p.temperature;
      for (float& v : logit_row) v *= inv_t;
    }
    if (!samplable(logit_row)) {
      res.error = "no token can be sampled: every logit is -inf or non-finite after logit_bias, min_tokens, "
                  "penalties and temperature";
      continue;
    }
    if (p.is_greedy()) {
      res.token = argmax(logit_row);
    } else {
      const double u = p.seed ? sampler_uniform(*p.seed, row.output_token_ids.size()) : to_unit(unseeded_rng_());
      if ((p.top_k <= 0 || p.top_k >= vocab_size) && p.top_p >= 1.0f) {
        res.token = draw_unfiltered(logit_row, p.min_p, u);
      } else {
        const std::vector<TokenProb> dist = filtered_distribution(logit_row, p.top_k, p.top_p, p.min_p);
        double cum = 0.0;
        res.token = dist.back().token;  // guards against rounding leaving u above the last cumulative sum
        for (const TokenProb& tp : dist) {
          cum += tp.prob;
          if (u < cum) {
            res.token = tp.token;
            break;
          }
        }
      }
    }
    if (p.logprobs) res.logprob = raw_[res.token] - log_normalizer;
  }
  return results;
}

}  // namespace rl
