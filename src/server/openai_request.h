// OpenAI /v1/completions and /v1/chat/completions bodies → a native GenerationRequest (token ids and
// SamplingParams): the only place request JSON is interpreted. Runs on the HTTP worker thread, including the
// chat template and the tokenizer. Defaults follow vLLM: sampling values the request omits come from the model's
// generation_config.json; max_tokens defaults to 16 for completions and to the rest of the context for chat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "loader/model_config.h"
#include "sched/sampling_params.h"
#include "server/chat_messages.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_stream.h"

namespace rl::server {

class StructuredContext;

struct RequestLimits {
  int32_t max_n = 16;                 // choices per prompt
  int32_t max_choices = 64;           // n x number of prompts
  int32_t max_prompts = 16;           // entries of a completions prompt list
  size_t max_stop = 16;               // stop strings (and stop_token_ids)
  size_t max_stop_bytes = 256;        // bytes per stop string
  size_t max_logit_bias = 1024;       // logit_bias entries
  ChatLimits chat;
};

// What parsing needs from the loaded model; all pointers outlive the call.
struct ModelContext {
  std::string served_model_name;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: the model has none (chat requests get a 400)
  const GenerationConfig* generation_config = nullptr;
  int32_t max_model_len = 0;
  int32_t vocab_size = 0;
  RequestLimits limits;
  const StructuredContext* structured = nullptr;  // null: no grammars, no tool-call parsing
};

enum class Endpoint { kCompletions, kChat };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<std::vector<TokenId>> prompts;  // one per prompt; each gets params.n choices
  SamplingParams params;                      // params.stop: stop strings, applied on text by the server
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  bool skip_special_tokens = true;
  // Chat: logprobs is a bool and top_logprobs a count; completions: logprobs is the count. Either way
  // params.logprobs holds the number of top alternatives when logprobs are wanted.
  bool want_logprobs = false;
  // Chat: how each choice's text becomes content, reasoning_content and tool_calls (structured_output.h).
  tools::ParseMode parse_mode;
  // Completions (completion_extras.h): the prompt text to echo, per prompt (empty: no echo); a FIM prompt.
  std::vector<std::string> echo_text;
  bool fim = false;
  // vLLM's prompt_logprobs (both endpoints): the top-N count of the response's prompt_logprobs list, which
  // params.prompt_logprobs computes (it may ask for more: echo's logprobs share it).
  std::optional<int32_t> prompt_logprobs;
  // Completions echo with logprobs (OpenAI): the prompt's tokens lead each choice's logprobs (the first with a
  // null logprob), scored from params.prompt_logprobs.
  bool echo_logprobs = false;
};

// model: the "model" field (absent: the served model); an unknown name is a 404 with code "model_not_found".
MaybeError check_model(const OrderedJson& body, const std::string& served_model_name);
MaybeError parse_completion_request(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* out);
MaybeError parse_chat_request(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* out);
// The prompt for /tokenize-style bodies: "prompt" (a string) or "messages" (through the chat template).
MaybeError tokenize_request(const OrderedJson& body, const ModelContext& ctx, std::vector<TokenId>* out);

// 400 "context_length_exceeded" when a prompt plus max_tokens does not fit the model's context.
ApiError context_length_error(int64_t num_prompt_tokens, int64_t max_tokens, int32_t max_model_len,
                              const std::string& param);

}  // namespace rl::server
