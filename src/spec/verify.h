// Exact verification of draft tokens against the target model.
//
// Greedy: a draft token is accepted while it equals the target's argmax at its position; the first mismatch is
// replaced by the target's argmax, and when every draft is accepted the target's next argmax is the bonus token.
// The output is therefore identical, token for token, to plain greedy decoding.
//
// Sampling (Leviathan et al. 2023; Chen et al. 2023): draft d_j with proposal probability q_j(d_j) is accepted with
// probability min(1, p_j(d_j) / q_j(d_j)); at the first rejection a token is drawn from norm(max(0, p_j - q_j))
// and verification stops; when all k drafts are accepted, a bonus token is drawn from p_k. The emitted tokens are
// then distributed exactly as if drawn from the target one at a time. A deterministic proposer (n-gram) has
// q_j = one-hot(d_j): acceptance with probability p_j(d_j), and the residual is p_j without d_j.
//
// Randomness is counter-based (core/random.h) and keyed by (seed, output position), so a seeded request's result
// does not depend on the batch, on k, or on which backend scored it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"

namespace rl::spec {

struct VerifyResult {
  int32_t num_accepted = 0;      // drafts accepted (0..k)
  std::vector<TokenId> tokens;   // the tokens to append: the accepted drafts, then one more token
};

// target_argmax: [k + 1] argmax of the target's processed logits at each draft position and after the last.
VerifyResult verify_greedy(std::span<const TokenId> draft, std::span<const TokenId> target_argmax);

// The engine's verification for point-mass proposals (n-gram, greedy draft model) at any temperature:
// target_draws[j] is the token the target's own sampler drew at draft position j (from p_j, with the RNG counter
// of that output position), and draft j is accepted while it equals the draw; the first differing draw (or the
// draw after the last draft) is emitted. This is a coupling of the rejection rule for q = one-hot(d): the accept
// event {x_j = d_j} has probability p_j(d_j), and given a rejection x_j follows p_j without d_j, renormalised,
// which is exactly the residual norm(max(0, p_j - q_j)). Since the draws are those plain decoding makes, the
// tokens equal plain decoding's for the same seed, not only in distribution.
inline VerifyResult verify_by_target_draws(std::span<const TokenId> draft, std::span<const TokenId> target_draws) {
  return verify_greedy(draft, target_draws);
}

// Probabilities for stochastic verification. target: [k + 1][vocab] rows of the target's sampling distribution
// (after temperature and filters, each summing to 1); draft_probs: [k][vocab] rows of the proposal distribution,
// or empty for a deterministic proposer.
struct VerifyInputs {
  std::span<const TokenId> draft;     // [k]
  std::span<const float> target;      // [(k + 1) * vocab]
  std::span<const float> draft_probs; // [k * vocab] or empty
  int32_t vocab_size = 0;
  uint64_t seed = 0;
  int64_t first_position = 0;         // output position of draft[0] (the number of tokens generated before it)
};

VerifyResult verify_sampled(const VerifyInputs& in);

// The uniforms used at output position `pos`: one for the accept test and one for a draw (resample or bonus).
float accept_uniform(uint64_t seed, int64_t pos);
float draw_uniform(uint64_t seed, int64_t pos);

// Inverse-CDF draw from non-negative weights (need not be normalised) in id order; u in [0, 1). Returns the
// last token with positive weight when rounding leaves u past the total, and -1 when every weight is zero.
TokenId draw_from_weights(std::span<const double> weights, float u);

// Acceptance counters (vLLM's vllm:spec_decode_* metrics are fed from these).
struct SpecDecodeCounters {
  int64_t num_drafts = 0;            // verification rounds with at least one draft token
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_position;  // [k]: drafts accepted at position j
  // Steps of decoding requests that may speculate, with or without drafts (adaptive speculation gives some 0).
  int64_t num_decode_steps = 0;
  void record(int32_t num_draft, int32_t num_accepted);
  // Drafts per decoding step, zeros included: the k adaptive speculation used on average.
  double mean_k() const;
  double acceptance_rate() const;
  // Mean tokens emitted per round: accepted drafts + the one token verification always adds.
  double mean_accepted_length() const;
};

}  // namespace rl::spec
