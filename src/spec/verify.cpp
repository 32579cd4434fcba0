#include "spec/verify.h"

#include <algorithm>

#include "core/check.h"
#include "core/random.h"

namespace rl::spec {
namespace {

// Independent streams for the accept test and the draw at the same position.
constexpr uint64_t kAcceptStream = 0x61636365707431ull;  // "accept1"
constexpr uint64_t kDrawStream = 0x64726177317374ull;    // "draw1st"

}  // namespace

float accept_uniform(uint64_t seed, int64_t pos) {
  return uniform_from_counter(mix64(seed ^ kAcceptStream), static_cast<uint64_t>(pos));
}

float draw_uniform(uint64_t seed, int64_t pos) {
  return uniform_from_counter(mix64(seed ^ kDrawStream), static_cast<uint64_t>(pos));
}

TokenId draw_from_weights(std::span<const double> weights, float u) {
  double total = 0;
  for (double w : weights) total += w;
  if (!(total > 0)) return -1;
  const double target = static_cast<double>(u) * total;
  double acc = 0;
  TokenId last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last = static_cast<TokenId>(i);
    if (target < acc) return last;
  }
  return last;
}

VerifyResult verify_greedy(std::span<const TokenId> draft, std::span<const TokenId> target_argmax) {
  RL_CHECK(target_argmax.size() == draft.size() + 1);
  VerifyResult r;
  for (size_t j = 0; j < draft.size(); ++j) {
    if (draft[j] != target_argmax[j]) {
      r.tokens.push_back(target_argmax[j]);
      return r;
    }
    r.tokens.push_back(draft[j]);
    ++r.num_accepted;
  }
  r.tokens.push_back(target_argmax[draft.size()]);
  return r;
}

VerifyResult verify_sampled(const VerifyInputs& in) {
  const size_t k = in.draft.size();
  const size_t v = static_cast<size_t>(in.vocab_size);
  RL_CHECK(in.vocab_size > 0 && in.target.size() == (k + 1) * v);
  RL_CHECK(in.draft_probs.empty() || in.draft_probs.size() == k * v);
  VerifyResult r;
  std::vector<double> residual(v);
  for (size_t j = 0; j < k; ++j) {
    const int64_t pos = in.first_position + static_cast<int64_t>(j);
    const TokenId d = in.draft[j];
    RL_CHECK(d >= 0 && static_cast<size_t>(d) < v);
    const float* p = in.target.data() + j * v;
    const float* q = in.draft_probs.empty() ? nullptr : in.draft_probs.data() + j * v;
    const double pd = p[d];
    const double qd = q ? q[d] : 1.0;
    // Accept with probability min(1, p/q); u < p/q  <=>  u * q < p (no division, exact for q = 1).
    if (qd > 0 && static_cast<double>(accept_uniform(in.seed, pos)) * qd < pd) {
      r.tokens.push_back(d);
      ++r.num_accepted;
      continue;
    }
    for (size_t t = 0; t < v; ++t) {
      const double qt = q ? q[t] : (static_cast<TokenId>(t) == d ? 1.0 : 0.0);
      residual[t] = std::max(0.0, static_cast<double>(p[t]) - qt);
    }
    TokenId tok = draw_from_weights(residual, draw_uniform(in.seed, pos));
    // An all-zero residual means p == q: rejection then has probability 0, reachable only through rounding of
    // the inputs; fall back to p itself.
    if (tok < 0) {
      for (size_t t = 0; t < v; ++t) residual[t] = p[t];
      tok = draw_from_weights(residual, draw_uniform(in.seed, pos));
    }
    r.tokens.push_back(tok);
    return r;
  }
  const float* p = in.target.data() + k * v;
  for (size_t t = 0; t < v; ++t) residual[t] = p[t];
  r.tokens.push_back(draw_from_weights(residual, draw_uniform(in.seed, in.first_position + static_cast<int64_t>(k))));
  return r;
}

void SpecDecodeCounters::record(int32_t num_draft, int32_t num_accepted) {
  if (num_draft <= 0) return;
  ++num_drafts;
  num_draft_tokens += num_draft;
  num_accepted_tokens += num_accepted;
  if (accepted_per_position.size() < static_cast<size_t>(num_draft)) accepted_per_position.resize(num_draft, 0);
  for (int32_t j = 0; j < num_accepted; ++j) ++accepted_per_position[j];
}

double SpecDecodeCounters::acceptance_rate() const {
  return num_draft_tokens ? static_cast<double>(num_accepted_tokens) / static_cast<double>(num_draft_tokens) : 0.0;
}

double SpecDecodeCounters::mean_k() const {
  return num_decode_steps ? static_cast<double>(num_draft_tokens) / static_cast<double>(num_decode_steps) : 0.0;
}

double SpecDecodeCounters::mean_accepted_length() const {
  return num_drafts ? 1.0 + static_cast<double>(num_accepted_tokens) / static_cast<double>(num_drafts) : 0.0;
}

}  // namespace rl::spec
