// Tool-call and reasoning parsers: model output text → OpenAI's message.content, reasoning_content and tool_calls,
// for each model family's format:
//   hermes       Qwen2.5 / Qwen3: <tool_call>{"name": ..., "arguments": {...}}</tool_call> (repeated)
//   llama3_json  Llama 3.1 / 3.2: <|python_tag|>{"name": ..., "parameters": {...}} or plain JSON, calls separated
//                by ';'
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] and the newer [TOOL_CALLS]name[ARGS]{...}
//   harmony      GPT-OSS: <|channel|>analysis<|message|>… (reasoning), commentary to=functions.NAME (calls),
//                final (content), ended by <|end|> / <|call|> / <|return|>
//   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//                <｜tool▁call▁end｜>…<｜tool▁calls▁end｜> (and V3.1's NAME<｜tool▁sep｜>{...})
// Reasoning: "qwen3" (also DeepSeek-R1): <think>…</think> at the start → reasoning_content.
//
// A parser is a pure function of the text generated so far: parse(text, final) returns a snapshot whose fields only
// grow as text is appended (text that may still turn into a marker is held back until it is decided), so that a
// stream is the difference of consecutive snapshots (tool_stream.h). Arguments are the model's raw JSON text.
// Parsing is linear in the text per call; the text is bounded by max_tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rl::tools {

// kJsonList: the output is a JSON array [{"name": ..., "parameters"|"arguments": {...}}, ...] (tool_choice
// "required", whose grammar makes the model write exactly that, whatever its family).
enum class ToolParserKind { kNone, kHermes, kLlama3Json, kMistral, kHarmony, kDeepSeekV3, kJsonList };
enum class ReasoningKind { kNone, kThinkTags };

struct CallSnapshot {
  std::string name;       // "" until the whole name is known
  std::string arguments;  // raw JSON text so far
  bool complete = false;  // the call's text is closed
};

struct Snapshot {
  std::string reasoning;
  std::string content;
  std::vector<CallSnapshot> calls;
};

// "hermes", "llama3_json", "mistral", "harmony" (alias "openai"), "deepseek_v3"; nullopt when unknown.
std::optional<ToolParserKind> tool_parser_from_name(std::string_view name);
const char* tool_parser_name(ToolParserKind kind);
// "qwen3" (alias "deepseek_r1", "think"); nullopt when unknown.
std::optional<ReasoningKind> reasoning_parser_from_name(std::string_view name);

// Chooses the parser from the chat template, else from the tokenizer's vocabulary markers (the tool-call tokens).
ToolParserKind detect_tool_parser(std::string_view chat_template, const Tokenizer* tokenizer = nullptr);
ReasoningKind detect_reasoning_parser(std::string_view chat_template, const Tokenizer* tokenizer = nullptr);

// parse: reasoning (if any) first, then the tool-call format on the rest. final: no more text will come.
Snapshot parse_output(ToolParserKind tools, ReasoningKind reasoning, std::string_view text, bool final);

// The end of the JSON value starting at text[pos] (after optional whitespace), or nullopt while incomplete.
// Depth is bounded (kMaxJsonDepth); deeper input is treated as incomplete.
std::optional<size_t> json_value_end(std::string_view text, size_t pos);
inline constexpr int kMaxJsonDepth = 512;

}  // namespace rl::tools
