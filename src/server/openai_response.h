// Native results → OpenAI response JSON: whole responses ("text_completion", "chat.completion"), streamed chunks
// ("text_completion", "chat.completion.chunk") and usage, with logprobs in each endpoint's own shape
// (completions: tokens / token_logprobs / top_logprobs / text_offset; chat: content[{token, logprob, bytes,
// top_logprobs}]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/generation.h"

namespace rl::server {

struct ResponseMeta {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::kCompletions;
  bool want_logprobs = false;
  bool want_prompt_logprobs = false;  // vLLM's prompt_logprobs: completions per choice, chat at the top level
  std::string system_fingerprint;  // Engine::system_fingerprint(); omitted when empty
};

// One choice of a whole response, accumulated from its deltas.
struct ToolCallResult {
  std::string id, name, arguments;
};

struct ChoiceResult {
  std::string text;
  std::string reasoning;
  std::vector<ToolCallResult> tool_calls;
  bool tool_calls_finish = false;
  std::vector<LogprobEntry> logprobs;
  std::vector<PromptLogprobEntry> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
};

OrderedJson usage_json(const Usage& u);
OrderedJson full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices, const Usage& usage);
// A streamed chunk for one choice's delta. text_offset: the choice's running text offset (completions logprobs).
OrderedJson delta_chunk(const ResponseMeta& meta, const ChoiceDelta& delta, int64_t* text_offset);
// Chat streams open each choice with {"role": "assistant", "content": ""}.
OrderedJson role_chunk(const ResponseMeta& meta, int32_t index);
OrderedJson usage_chunk(const ResponseMeta& meta, const Usage& usage);
// Serializes; token text may end mid-character (byte-level BPE), so invalid UTF-8 becomes U+FFFD instead of
// throwing (the chat logprobs' bytes fields keep the exact bytes).
std::string dump_json(const OrderedJson& j);
// Accumulates a delta into a whole-response choice.
void accumulate(ChoiceResult* r, ChoiceDelta&& d);
// "stop" / "length" (anything else as "stop").
const char* finish_reason_json(FinishReason r);

}  // namespace rl::server
