// Streaming of a parsed message as OpenAI chat-completion deltas: the difference between consecutive snapshots of
// tools::parse_output. A tool call first appears as {index, id, type: function, name, arguments: ""} once its name
// is complete (a delta of its own, even when arguments arrived with the name), then as argument fragments;
// concatenating a call's fragments gives its final arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/tool_parser.h"

namespace rl::tools {

struct ToolCallDelta {
  int32_t index = 0;
  std::string id;    // set on the first delta of the call only
  std::string name;  // set on the first delta of the call only
  std::string arguments;
};

struct StreamDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// How a chat choice's text is read.
struct ParseMode {
  ToolParserKind tools = ToolParserKind::kNone;
  ReasoningKind reasoning = ReasoningKind::kNone;
  std::string forced_name;  // named tool_choice: the whole output is this function's arguments
  bool active() const { return tools != ToolParserKind::kNone || reasoning != ReasoningKind::kNone || !forced_name.empty(); }
};

class ToolStream {
 public:
  // id_seed makes the call ids ("call_" + 24 hex digits) unique per request and choice.
  ToolStream(ParseMode mode, std::string id_seed);

  StreamDelta push(std::string_view text);
  StreamDelta finish();
  // The message so far (after finish(): the final one).
  const Snapshot& snapshot() const { return snap_; }
  // Ids of the calls, by index.
  const std::vector<std::string>& call_ids() const { return ids_; }

 private:
  StreamDelta diff(Snapshot next);
  Snapshot parse(bool final) const;
  ParseMode mode_;
  std::string seed_;
  std::string text_;
  Snapshot snap_;
  size_t reasoning_sent_ = 0, content_sent_ = 0;
  struct Sent {
    bool started = false;
    size_t args = 0;
  };
  std::vector<Sent> sent_;
  std::vector<std::string> ids_;
};

// "call_" + 24 lowercase hex digits derived from (seed, index).
std::string make_call_id(std::string_view seed, int32_t index);

}  // namespace rl::tools
