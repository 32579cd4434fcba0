#include "sched/sampling_params.h"

#include <cmath>

namespace rl {
namespace {

Status bad(const std::string& field, const std::string& why) {
  return Status::error("sampling params: " + field + " " + why);
}

}  // namespace

Status SamplingParams::validate(int32_t vocab_size) const {
  if (n < 1) return bad("n", "must be >= 1, got " + std::to_string(n));
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return bad("temperature", "must be a finite number >= 0, got " + std::to_string(temperature));
  }
  if (top_k < -1) return bad("top_k", "must be -1, 0 (disabled) or positive, got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", "must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", "must be in [0, 1], got " + std::to_string(min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return bad("repetition_penalty", "must be > 0, got " + std::to_string(repetition_penalty));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return bad("presence_penalty", "must be in [-2, 2], got " + std::to_string(presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty", "must be in [-2, 2], got " + std::to_string(frequency_penalty));
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return bad("logprobs", "must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                               std::to_string(*logprobs));
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return bad("prompt_logprobs", "must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                                      std::to_string(*prompt_logprobs));
  }
  if (min_tokens < 0) return bad("min_tokens", "must be >= 0, got " + std::to_string(min_tokens));
  if (max_tokens && *max_tokens < 1) return bad("max_tokens", "must be >= 1, got " + std::to_string(*max_tokens));
  if (max_tokens && min_tokens > *max_tokens) {
    return bad("min_tokens", "(" + std::to_string(min_tokens) + ") must not exceed max_tokens (" +
                                 std::to_string(*max_tokens) + ")");
  }
  if (logit_bias.size() > static_cast<size_t>(kMaxLogitBias)) {
    return bad("logit_bias", "has " + std::to_string(logit_bias.size()) + " entries, at most " +
                                 std::to_string(kMaxLogitBias) + " are allowed");
  }
  if (stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return bad("stop_token_ids", "has " + std::to_string(stop_token_ids.size()) + " entries, at most " +
                                     std::to_string(kMaxStopTokenIds) + " are allowed");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (!std::isfinite(bias)) return bad("logit_bias", "for token " + std::to_string(token) + " is not finite");
    if (token < 0 || (vocab_size > 0 && token >= vocab_size)) {
      return bad("logit_bias", "token " + std::to_string(token) + " is outside the vocabulary");
    }
  }
  for (TokenId token : stop_token_ids) {
    if (token < 0 || (vocab_size > 0 && token >= vocab_size)) {
      return bad("stop_token_ids", "token " + std::to_string(token) + " is outside the vocabulary");
    }
  }
  for (const std::string& s : stop) {
    if (s.empty()) return bad("stop", "strings must not be empty");
  }
  return Status::ok();
}

}  // namespace rl
