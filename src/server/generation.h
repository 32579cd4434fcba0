// One API request in flight, on the HTTP worker's side of the engine queue (design.md §3): submits its prompts,
// multiplexes the engine's output channels, detokenizes each choice through a TextStream (never broken UTF-8),
// applies stop strings (aborting the engine request on a match) and reports text deltas, logprobs, finish
// reasons and usage. Not thread-safe: one worker thread drives it.
//
// Engine requests: one per prompt carrying all n choices, except when stop strings are given with n > 1 — then
// one per choice, since a matched stop string aborts a whole engine request. Choice index = prompt * n + i.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/text_stream.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tools/tool_stream.h"

namespace rl::server {

struct LogprobEntry {
  std::string token;  // the token's text (lossy for partial UTF-8)
  float logprob = 0;
  bool null_logprob = false;  // echo's first prompt token: no logprob (and no alternatives)
  std::vector<std::pair<std::string, float>> top;  // the most likely alternatives, best first
};

// One prompt position of vLLM's prompt_logprobs: the prompt token and the top-N alternatives, each with its
// logprob, rank (1 = the most likely) and text.
struct PromptLogprobEntry {
  struct Item {
    TokenId token = 0;
    float logprob = 0;
    int32_t rank = 0;
    std::string text;
  };
  std::vector<Item> items;  // the prompt token first, then the alternatives not equal to it
};

struct ChoiceDelta {
  int32_t index = 0;
  std::string text;  // chat with a parse mode: the content part only
  std::string reasoning;                         // chat: reasoning_content
  std::vector<tools::ToolCallDelta> tool_calls;  // chat: tool-call fragments
  bool tool_calls_finish = false;                // the finished choice made tool calls ("tool_calls")
  std::vector<LogprobEntry> logprobs;  // one per token consumed by this delta (when requested)
  // prompt_logprobs: the whole list (position 0 excluded) in the choice's first delta, when requested.
  std::vector<PromptLogprobEntry> prompt_logprobs;
  std::optional<FinishReason> finish;  // kStop or kLength when the choice ended
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

class Generation {
 public:
  // engine, tokenizer and metrics (may be null) outlive the generation.
  Generation(Engine* engine, const Tokenizer* tokenizer, std::string id,
             GenerationRequest request);
  ~Generation();  // aborts what is still running
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  void start();
  // Waits up to timeout_s for engine output and returns what it produced (possibly nothing). An error (admission
  // refused, engine failure) ends the generation.
  std::vector<ChoiceDelta> poll(double timeout_s);
  bool done() const;
  const std::optional<ApiError>& error() const { return error_; }
  // True once any choice produced a token or finished: an admission error can no longer come.
  bool admitted() const { return admitted_; }
  Usage usage() const;
  // Client went away: abort every engine request.
  void abort();
  const GenerationRequest& request() const { return request_; }
  const std::string& id() const { return id_; }

 private:
  struct Sub {
    std::string engine_id;
    std::shared_ptr<OutputChannel> channel;
    int32_t first_choice = 0;
    int32_t prompt_index = 0;
    bool closed = false;
    bool aborted = false;
  };
  struct Choice {
    std::unique_ptr<TextStream> text;
    std::unique_ptr<tools::ToolStream> parse;  // chat with a parse mode
    std::string echo;                          // completions echo: the prompt text, until the first delta
    bool lead_pending = true;                  // echo text and prompt logprobs not yet sent
    std::vector<LogprobEntry> echo_logprobs;   // echo with logprobs: the prompt's entries, until the first delta
    std::vector<PromptLogprobEntry> prompt_logprobs;  // until the first delta
    int32_t num_tokens = 0;
    bool finished = false;
    std::optional<FinishReason> finish;
  };

  void handle(Sub& sub, RequestOutput&& out, std::vector<ChoiceDelta>* deltas);
  ChoiceDelta& delta_for(int32_t index, std::vector<ChoiceDelta>* deltas);
  LogprobEntry logprob_entry(const TokenOutput& t) const;
  // Adds one prompt position's scores (engine prompt logprobs) to choice c's buffers.
  void add_prompt_logprob(Choice& c, size_t prompt, const TokenOutput& t) const;
  // The echo text, echo logprobs and prompt logprobs lead the choice's first delta.
  static void flush_lead(Choice& c, ChoiceDelta* d);
  // Text of a choice into its delta: through the choice's parser when it has one.
  static void add_text(Choice& c, const std::string& text, ChoiceDelta* d);
  static void finish_text(Choice& c, ChoiceDelta* d);

  Engine* engine_;
  const Tokenizer* tokenizer_;
  std::string id_;
  GenerationRequest request_;
  std::vector<Sub> subs_;
  std::vector<Choice> choices_;
  std::optional<ApiError> error_;
  bool admitted_ = false;
  bool started_ = false;
  int64_t cached_tokens_ = 0;
  std::vector<TokenId> eos_ids_;  // parsed choices drop their ending token
};

}  // namespace rl::server
