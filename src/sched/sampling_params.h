// Per-request sampling parameters (OpenAI / vLLM semantics). The scheduler carries them; runtime/sampler
// applies them; the server fills them from JSON. n > 1 is expanded by the engine into n requests: one Request
// is always one sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/kv_types.h"
#include "sched/token_constraint.h"

namespace rl {

inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr int32_t kMaxLogitBias = 1024;    // logit_bias entries per request (OpenAI allows 300)
inline constexpr int32_t kMaxStopTokenIds = 256;  // stop_token_ids per request

struct SamplingParams {
  int32_t n = 1;
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // <= 0: disabled
  float top_p = 1.0f;        // 1: disabled
  float min_p = 0.0f;        // 0: disabled
  float repetition_penalty = 1.0f;  // HF: over prompt + output tokens
  float presence_penalty = 0.0f;    // OpenAI: over output tokens
  float frequency_penalty = 0.0f;   // OpenAI: over output tokens
  std::unordered_map<TokenId, float> logit_bias;
  std::optional<uint64_t> seed;
  std::optional<int32_t> logprobs;  // top-N logprobs per sampled token, N in [0, kMaxLogprobs]
  // vLLM's prompt_logprobs: the logprob, rank and top-N alternatives of every prompt token after the first,
  // N in [0, kMaxLogprobs]. Such a request computes its whole prompt (no prefix-cache hit).
  std::optional<int32_t> prompt_logprobs;
  std::vector<TokenId> stop_token_ids;
  std::vector<std::string> stop;  // stop strings: matched on text by the engine, not by the scheduler
  int32_t min_tokens = 0;
  std::optional<int32_t> max_tokens;  // unset: up to max_model_len
  bool ignore_eos = false;
  std::string cache_salt;
  // Structured outputs: when set, every sequence's tokens are constrained by its own TokenConstraint.
  TokenConstraintFactory constraint;

  bool is_greedy() const { return temperature == 0.0f; }

  // Checks ranges; vocab_size > 0 also checks token ids (logit_bias keys, stop_token_ids).
  Status validate(int32_t vocab_size = 0) const;
};

}  // namespace rl
