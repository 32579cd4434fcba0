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

TokenId argmax(std::span<const float> row) {
  TokenId best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = static_cast<TokenId>(i);  // strict: ties keep the lowest id
  }
  return best;
}

bool in_vocab(TokenId t, size_t vocab_size) { return t >= 0 && static_cast<size_t>(t) < vocab_size; }

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
  const auto before = [&](int32_t a, int32_t b) { return ranks_before(logits, a, b); };
  if (k < static_cast<int32_t>(idx_.size())) std::nth_element(idx_.begin(), idx_.begin() + k, idx_.end(), before);
  std::sort(idx_.begin(), idx_.begin() + k, before);
}

std::vector<TokenProb> Sampler::filtered_distribution(std::span<const float> scaled, int32_t top_k, float top_p,
                                                      float min_p) {
  const int32_t vocab = static_cast<int32_t>(scaled.size());
  const float max_logit = scaled[argmax(scaled)];
  RL_CHECK_MSG(max_logit > kNegInf, "every logit is -inf");
  idx_.resize(vocab);
  for (int32_t i = 0; i < vocab; ++i) idx_[i] = i;
  // Candidates: idx_[0, num) — sorted by descending logit when `sorted`.
  int32_t num = vocab;
  bool sorted = false;
  if (top_k > 0 && top_k < vocab) {
    select_top(scaled, top_k);
    const float kth = scaled[idx_[top_k - 1]];
    num = top_k;
    // Ties with the k-th value are kept: move them up behind the top k, then restore the candidate order.
    for (int32_t i = top_k; i < vocab; ++i) {
      if (scaled[idx_[i]] == kth) std::swap(idx_[num++], idx_[i]);
    }
    if (num > top_k) {
      std::sort(idx_.begin(), idx_.begin() + num, [&](int32_t a, int32_t b) { return ranks_before(scaled, a, b); });
    }
    sorted = true;
  }
  if (top_p < 1.0f) {
    double total = 0.0;  // normalizer over the current candidates
    for (int32_t i = 0; i < num; ++i) total += std::exp(static_cast<double>(scaled[idx_[i]] - max_logit));
    if (!sorted) {
      // Grow a sorted prefix until it holds top_p of the mass, instead of sorting the whole vocabulary.
      for (int32_t k = std::min(num, 256);; k = std::min(num, k * 4)) {
        select_top(scaled, k);
        double mass = 0.0;
        for (int32_t i = 0; i < k; ++i) mass += std::exp(static_cast<double>(scaled[idx_[i]] - max_logit));
        if (mass >= top_p * total || k == num) break;
      }
      sorted = true;
    }
    double cum = 0.0;
    int32_t keep = 0;
    while (keep < num && cum < top_p * total) {
      cum += std::exp(static_cast<double>(scaled[idx_[keep]] - max_logit));
      ++keep;
    }
    num = std::max(keep, 1);
  }
  std::vector<TokenProb> out;
  out.reserve(sorted ? num : 0);
  const float min_ratio = min_p;
  double total = 0.0;
  for (int32_t i = 0; i < num; ++i) {
    const TokenId t = idx_[i];
    const double w = std::exp(static_cast<double>(scaled[t] - max_logit));  // p / p_max
    if (w == 0.0 || (min_ratio > 0.0f && w < min_ratio)) continue;
    out.push_back(TokenProb{t, static_cast<float>(w)});
    total += w;
  }
  for (TokenProb& tp : out) tp.prob = static_cast<float>(tp.prob / total);
  return out;
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
    if (p.logprobs) {
      raw_.assign(logit_row.begin(), logit_row.end());
      const float m = raw_[argmax(raw_)];
      double sum = 0.0;
      for (float v : raw_) sum += std::exp(static_cast<double>(v - m));
      log_normalizer = m + static_cast<float>(std::log(sum));
      idx_.resize(vocab_size);
      for (int32_t i = 0; i < vocab_size; ++i) idx_[i] = i;
      select_top(raw_, num_top);
      for (int32_t i = 0; i < num_top; ++i) {
        res.top_logprobs.push_back(TokenLogprob{idx_[i], raw_[idx_[i]] - log_normalizer});
      }
    }
    apply_processors(logit_row, row);
    if (p.is_greedy()) {
      res.token = argmax(logit_row);
    } else {
      const float inv_t = 1.0f / p.temperature;
      for (float& v : logit_row) v *= inv_t;
      const std::vector<TokenProb> dist = filtered_distribution(logit_row, p.top_k, p.top_p, p.min_p);
      const double u = p.seed ? sampler_uniform(*p.seed, row.output_token_ids.size()) : to_unit(unseeded_rng_());
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
    if (p.logprobs) res.logprob = raw_[res.token] - log_normalizer;
  }
  return results;
}

}  // namespace rl
