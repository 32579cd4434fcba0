// The CPU reference of the one sampling path (ops.h, SampleRowParams). The CUDA kernel (cuda/sampling.cu)
// follows it step by step: the same processors, the same fixed-point top-p mass, the same counter-based race.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/random.h"

namespace rl {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kMassScale = 1099511627776.0;  // 2^40: top-p mass in fixed point, exact and order-free

// The row's token into out_tokens and, where the row names it, into host memory (SampleRowParams::host_token).
void put_token(const SampleBatch& b, const SampleRowParams& p, int64_t r, int32_t token) {
  b.out_tokens[r] = token;
  if (p.host_token != nullptr) *p.host_token = token;
}

// Descending value, then ascending id: the order of argmax and of the top logprobs.
bool ranks_before(float va, int64_t a, float vb, int64_t b) { return va > vb || (va == vb && a < b); }

// The first index of the largest value (x holds no NaN): the largest value over 16 independent lanes, then the
// first block of 16 that holds it, both loops the compiler vectorises. The one loop that carries the best index
// through every element does not vectorise; over a 151,936-token vocabulary it was 1-2 % of a decode step.
int64_t argmax_of(const float* x, int64_t vocab) {
  constexpr int64_t kLanes = 16;
  float m = x[0];
  int64_t i = 0;
  if (vocab >= kLanes) {
    float lane[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = x[j];
    for (i = kLanes; i + kLanes <= vocab; i += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    }
    for (int64_t j = 0; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  }
  for (; i < vocab; ++i) m = x[i] > m ? x[i] : m;
  for (int64_t b = 0; b < vocab; b += kLanes) {
    const int64_t e = std::min(vocab, b + kLanes);
    bool hit = false;
    for (int64_t j = b; j < e; ++j) hit |= x[j] == m;
    if (!hit) continue;
    for (int64_t j = b; j < e; ++j) {
      if (x[j] == m) return j;
    }
  }
  return 0;
}

bool bit(const uint32_t* words, int64_t i) { return (words[i >> 5] >> (i & 31)) & 1u; }

uint64_t mass_of(float logp) { return static_cast<uint64_t>(static_cast<double>(std::exp(logp)) * kMassScale); }

// The largest value t among candidates (x >= floor) such that the weight of candidates >= t reaches target;
// the smallest candidate when rounding never reaches it.
float threshold(const float* x, int64_t vocab, float floor, uint64_t target, bool by_mass, float m, float inv_t) {
  std::vector<std::pair<float, uint64_t>> cand;
  for (int64_t i = 0; i < vocab; ++i) {
    if (x[i] < floor || x[i] == kNegInf) continue;
    cand.emplace_back(x[i], by_mass ? mass_of((x[i] - m) * inv_t) : 1);
  }
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  uint64_t cum = 0;
  for (size_t j = 0; j < cand.size(); ++j) {
    cum += cand[j].second;
    const bool group_ends = j + 1 == cand.size() || cand[j + 1].first != cand[j].first;
    if (group_ends && cum >= target) return cand[j].first;
  }
  return cand.empty() ? floor : cand.back().first;
}

}  // namespace

void CpuBackend::sample(const Tensor& logits, const SampleBatch& b) {
  RL_CHECK(logits.dtype == DType::kF32 && logits.ndim == 2 && logits.dim(0) >= b.num_rows);
  const int64_t vocab = logits.dim(1), words = (vocab + 31) / 32;
  for (int64_t r = 0; r < b.num_rows; ++r) {
    const SampleRowParams& p = b.params[r];
    float* x = logits.f32() + r * vocab;
    // Counted, not or-ed into a bool, and the NaN store below unconditional: both loops then vectorise (as scalar
    // loops over the vocabulary they were most of the sampler's time, ~1 % of a decode step).
    int64_t num_raw_bad = 0;
    for (int64_t i = 0; i < vocab; ++i) num_raw_bad += x[i] < std::numeric_limits<float>::infinity() ? 0 : 1;
    const bool raw_bad = num_raw_bad > 0;
    if (raw_bad) {  // a numerically broken model: NaN or +Inf among the raw logits
      put_token(b, p, r, kSampleNonFinite);
      if (p.num_logprobs >= 0) b.out_logprobs[r] = 0.0f;
      continue;
    }
    // 1. Raw logprobs.
    float lse = 0.0f;
    if (p.num_logprobs >= 0) {
      const float m = x[argmax_of(x, vocab)];
      double sum = 0.0;
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(x[i] - m));
      lse = m + static_cast<float>(std::log(sum));
      std::copy(x, x + vocab, b.raw_scratch + r * vocab);
      int64_t prev = -1;
      for (int32_t k = 0; k < std::min<int64_t>(p.num_logprobs, vocab); ++k) {
        int64_t best = -1;
        for (int64_t i = 0; i < vocab; ++i) {
          if (prev >= 0 && !ranks_before(x[prev], prev, x[i], i)) continue;  // only tokens after the previous
          if (best < 0 || ranks_before(x[i], i, x[best], best)) best = i;
        }
        b.out_top_ids[r * kMaxTopLogprobs + k] = static_cast<int32_t>(best);
        b.out_top_logprobs[r * kMaxTopLogprobs + k] = x[best] - lse;
        prev = best;
      }
    }
    if (p.forced_token >= 0) {  // teacher-forced (prompt logprobs): score the given token, sample nothing
      const int64_t f = std::min<int64_t>(p.forced_token, vocab - 1);
      int32_t rank = 1;
      for (int64_t i = 0; i < vocab; ++i) rank += ranks_before(x[i], i, x[f], f) ? 1 : 0;
      put_token(b, p, r, static_cast<int32_t>(f));
      b.out_logprobs[r] = x[f] - lse;
      b.out_ranks[r] = rank;
      continue;
    }
    // 2. Bias, min_tokens suppression, the allowed-token mask.
    for (int32_t j = p.bias_begin; j < p.bias_end; ++j) x[b.bias_ids[j]] += b.bias_values[j];
    if (static_cast<int64_t>(p.step) < p.min_tokens) {
      for (int32_t j = p.suppress_begin; j < p.suppress_end; ++j) x[b.suppress_ids[j]] = kNegInf;
    }
    if (p.mask_row >= 0) {
      const uint32_t* mask = b.allowed_mask + p.mask_row * words;
      for (int64_t i = 0; i < vocab; ++i) {
        if (!bit(mask, i)) x[i] = kNegInf;
      }
    }
    // 3. Penalties.
    if (p.penalty_slot >= 0) {
      const int32_t* counts = b.penalty_counts + p.penalty_slot * vocab;
      const uint32_t* prompt = b.prompt_bits + p.penalty_slot * words;
      for (int64_t i = 0; i < vocab; ++i) {
        const int32_t c = counts[i];
        if (p.repetition_penalty != 1.0f && (c > 0 || bit(prompt, i))) {
          x[i] = x[i] > 0.0f ? x[i] / p.repetition_penalty : x[i] * p.repetition_penalty;
        }
        if (c > 0) x[i] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
      }
    }
    // 4. Choose.
    int64_t num_processed_bad = 0;  // +Inf or NaN after the processors (an infinite bias)
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = x[i];
      num_processed_bad += v < std::numeric_limits<float>::infinity() ? 0 : 1;
      x[i] = v != v ? kNegInf : v;
    }
    const bool processed_bad = num_processed_bad > 0;
    const int64_t top = argmax_of(x, vocab);
    const float m = x[top];
    int64_t token = top;
    if (processed_bad || m == kNegInf) {
      token = kSampleNothingLeft;
    } else if (p.temperature > 0.0f) {
      const float inv_t = 1.0f / p.temperature;
      float floor = -std::numeric_limits<float>::max();
      if (p.top_k > 0 && p.top_k < vocab) {
        floor = threshold(x, vocab, floor, static_cast<uint64_t>(p.top_k), false, m, inv_t);
      }
      if (p.top_p < 1.0f) {
        uint64_t total = 0;
        for (int64_t i = 0; i < vocab; ++i) {
          if (x[i] >= floor && x[i] != kNegInf) total += mass_of((x[i] - m) * inv_t);
        }
        const uint64_t target =
            std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(total)));
        floor = threshold(x, vocab, floor, target, true, m, inv_t);
      }
      const uint64_t stream = mix64(p.seed ^ mix64(p.step + 0x5851f42d4c957f2dull));
      float best = kNegInf;
      for (int64_t i = 0; i < vocab; ++i) {
        if (x[i] < floor || x[i] == kNegInf) continue;
        const float logp = (x[i] - m) * inv_t;
        if (p.min_p > 0.0f && std::exp(logp) < p.min_p) continue;
        const uint64_t bits = mix64(stream ^ mix64(static_cast<uint64_t>(i)));
        const float u = (static_cast<float>(bits >> 40) + 0.5f) * (1.0f / 16777216.0f);
        const float score = logp - std::log(-std::log(u));
        if (score > best) {
          best = score;
          token = i;
        }
      }
    }
    put_token(b, p, r, static_cast<int32_t>(token));
    if (token >= 0 && p.penalty_slot >= 0) b.penalty_counts[p.penalty_slot * vocab + token] += 1;
    if (p.num_logprobs >= 0) b.out_logprobs[r] = token >= 0 ? b.raw_scratch[r * vocab + token] - lse : 0.0f;
  }
}

void CpuBackend::init_penalty_slots(const PenaltySlotInit* inits, int64_t num_inits, const SampleBatch& b,
                                    int64_t vocab) {
  const int64_t words = (vocab + 31) / 32;
  for (int64_t k = 0; k < num_inits; ++k) {
    const PenaltySlotInit& in = inits[k];
    int32_t* counts = b.penalty_counts + in.slot * vocab;
    uint32_t* prompt = b.prompt_bits + in.slot * words;
    std::fill(counts, counts + vocab, 0);
    std::fill(prompt, prompt + words, 0u);
    for (int64_t i = 0; i < in.num_prompt; ++i) {
      const int32_t t = in.prompt_ids[i];
      if (t >= 0 && t < vocab) prompt[t >> 5] |= 1u << (t & 31);
    }
    for (int64_t i = 0; i < in.num_output; ++i) {
      const int32_t t = in.output_ids[i];
      if (t >= 0 && t < vocab) ++counts[t];
    }
  }
}

void CpuBackend::resolve_pending_ids(const Tensor& ids, const Tensor& sampled) {
  for (int64_t t = 0; t < ids.numel(); ++t) {
    const int32_t v = ids.i32()[t];
    if (v < 0) ids.i32()[t] = std::max(sampled.i32()[-static_cast<int64_t>(v) - 1], 0);  // see the CUDA kernel
  }
}

}  // namespace rl
