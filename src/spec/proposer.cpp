#include "spec/proposer.h"

#include <algorithm>

namespace rl::spec {

Status NgramConfig::validate() const {
  if (min_n < 1) return Status::error("ngram: min_n must be >= 1, got " + std::to_string(min_n));
  if (max_n < min_n || max_n > 64) {
    return Status::error("ngram: max_n must be in [min_n, 64], got " + std::to_string(max_n));
  }
  if (num_speculative_tokens < 1 || num_speculative_tokens > 32) {
    return Status::error("ngram: num_speculative_tokens must be in [1, 32], got " +
                                    std::to_string(num_speculative_tokens));
  }
  return Status::ok();
}

namespace {

// The context as one indexable sequence without copying: prompt then output.
struct Context {
  std::span<const TokenId> prompt, output;
  int64_t size() const { return static_cast<int64_t>(prompt.size() + output.size()); }
  TokenId operator[](int64_t i) const {
    const auto p = static_cast<int64_t>(prompt.size());
    return i < p ? prompt[i] : output[i - p];
  }
};

}  // namespace

std::vector<TokenId> NgramProposer::lookup(std::span<const TokenId> prompt, std::span<const TokenId> output,
                                           int32_t k) const {
  const Context ctx{prompt, output};
  const int64_t len = ctx.size();
  std::vector<TokenId> draft;
  if (k <= 0 || len < 2) return draft;
  // For every earlier end position e (the token at e is the last of a candidate occurrence, e < len - 1), the
  // length of the common suffix of ctx[..e] and ctx[..len-1], capped at max_n. Scanning e from the end finds the
  // most recent occurrence first; a longer match wins, ties keep the most recent.
  int32_t best_n = 0;
  int64_t best_end = -1;
  for (int64_t e = len - 2; e >= 0; --e) {
    int32_t n = 0;
    while (n < config_.max_n && e - n >= 0 && ctx[e - n] == ctx[len - 1 - n]) ++n;
    if (n > best_n) {
      best_n = n;
      best_end = e;
      if (n == config_.max_n) break;
    }
  }
  if (best_n < config_.min_n) return draft;
  for (int64_t i = best_end + 1; i < len && static_cast<int32_t>(draft.size()) < k; ++i) draft.push_back(ctx[i]);
  return draft;
}

void NgramProposer::propose(std::span<const ProposalInput> inputs, std::vector<Proposal>* out) {
  out->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int32_t k = std::min(inputs[i].max_draft_tokens, config_.num_speculative_tokens);
    (*out)[i].tokens = lookup(inputs[i].prompt, inputs[i].output, k);
  }
}

}  // namespace rl::spec
