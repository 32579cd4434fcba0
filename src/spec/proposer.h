// Speculative decoding proposers (design.md §8 "Speculation is a proposer"): a proposer guesses up to k next
// tokens for each decoding request; the target model then scores all of them in one forward pass and the
// verifier (spec/verify.h) keeps the longest prefix that the target's distribution accepts.
//
// A proposer is either deterministic (n-gram lookup: its proposal distribution is a point mass on the drafted
// token) or a model (draft model, MTP or EAGLE heads), which also reports q(draft token) per position so that
// stochastic verification can apply the rejection rule.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/kv_types.h"

namespace rl::spec {

// What a proposer sees of one request: its prompt and the tokens generated so far.
struct ProposalInput {
  std::span<const TokenId> prompt;
  std::span<const TokenId> output;
  int32_t max_draft_tokens = 0;  // at most this many drafts (the scheduler's budget for this request)
  // For proposers with their own KV (a draft model): the request's identity while it lives, and the target's
  // block table, which covers every context position plus max_draft_tokens more. A draft model keeps its KV in
  // its own storage at the same block ids, so the target's allocation and rollback serve both.
  uint64_t key = 0;
  std::span<const int32_t> block_table;
};

// Draft tokens for one request, in order; empty when the proposer has no guess.
struct Proposal {
  std::vector<TokenId> tokens;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  // True when every draft is a point mass (q(d) = 1): verification then needs no draft probabilities.
  virtual bool deterministic() const = 0;
  // Fills (*out)[i] for inputs[i]; out is resized to inputs.size().
  virtual void propose(std::span<const ProposalInput> inputs, std::vector<Proposal>* out) = 0;
  // True when propose() is host work without state (n-gram): adaptive speculation then checks, at steps where a
  // request proposes nothing, whether its first draft would have been accepted (a point-mass draft is accepted
  // exactly when it equals the token the target drew), so its acceptance stays measured for free.
  virtual bool free_to_shadow() const { return false; }
  // After verification: only the first num_tokens positions of request `key` hold verified KV.
  virtual void verified(uint64_t key, int32_t num_tokens) {
    (void)key;
    (void)num_tokens;
  }
  // The request finished or was preempted (its blocks are gone): drop its state.
  virtual void forget(uint64_t key) { (void)key; }
};

struct NgramConfig {
  int32_t min_n = 1;  // shortest suffix that may match
  int32_t max_n = 4;  // longest suffix tried first
  int32_t num_speculative_tokens = 4;  // k
  Status validate() const;
};

// Prompt lookup: the longest suffix of (prompt ++ output) of length in [min_n, max_n] that also occurs earlier in
// the context; the tokens that followed its most recent earlier occurrence are proposed. Cost per request is
// O(context length × max_n), with no state between steps.
class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const NgramConfig& config) : config_(config) {}
  std::string name() const override { return "ngram"; }
  bool deterministic() const override { return true; }
  void propose(std::span<const ProposalInput> inputs, std::vector<Proposal>* out) override;
  bool free_to_shadow() const override { return true; }

  // The lookup on one context (exposed for tests): up to k tokens.
  std::vector<TokenId> lookup(std::span<const TokenId> prompt, std::span<const TokenId> output, int32_t k) const;

 private:
  NgramConfig config_;
};

}  // namespace rl::spec
