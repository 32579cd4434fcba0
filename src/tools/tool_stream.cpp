#include "tools/tool_stream.h"

#include <cstdio>

namespace rl::tools {

namespace {
uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}
bool extends(const std::string& s, size_t sent) { return s.size() >= sent; }
}  // namespace

std::string make_call_id(std::string_view seed, int32_t index) {
  const uint64_t a = fnv1a(seed, 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(index));
  const uint64_t b = fnv1a(seed, a * 31 + 7);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "call_%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffULL));
  return buf;
}

ToolStream::ToolStream(ParseMode mode, std::string id_seed) : mode_(std::move(mode)), seed_(std::move(id_seed)) {}

Snapshot ToolStream::parse(bool final) const {
  if (mode_.forced_name.empty()) return parse_output(mode_.tools, mode_.reasoning, text_, final);
  Snapshot s;
  CallSnapshot c;
  c.name = mode_.forced_name;
  c.arguments = text_;
  c.complete = final;
  s.calls.push_back(std::move(c));
  return s;
}

StreamDelta ToolStream::push(std::string_view text) {
  text_ += text;
  return diff(parse(false));
}

StreamDelta ToolStream::finish() { return diff(parse(true)); }

StreamDelta ToolStream::diff(Snapshot next) {
  StreamDelta d;
  // Fields only grow (parser contract); a field that did not (a decision reversed at the very end) sends nothing
  // more, and the final message carries the truth.
  if (extends(next.reasoning, reasoning_sent_)) {
    d.reasoning = next.reasoning.substr(reasoning_sent_);
    reasoning_sent_ = next.reasoning.size();
  }
  if (extends(next.content, content_sent_)) {
    d.content = next.content.substr(content_sent_);
    content_sent_ = next.content.size();
  }
  for (size_t i = 0; i < next.calls.size(); ++i) {
    const CallSnapshot& c = next.calls[i];
    if (sent_.size() <= i) sent_.resize(i + 1);
    while (ids_.size() <= i) ids_.push_back(make_call_id(seed_, static_cast<int32_t>(ids_.size())));
    Sent& s = sent_[i];
    if (c.name.empty()) break;  // calls are announced in order
    if (!s.started) {
      // The announcement is a delta of its own, with "" arguments, even when arguments came in the same text.
      s.started = true;
      ToolCallDelta head;
      head.index = static_cast<int32_t>(i);
      head.id = ids_[i];
      head.name = c.name;
      d.tool_calls.push_back(std::move(head));
    }
    ToolCallDelta td;
    td.index = static_cast<int32_t>(i);
    // Arguments given as a JSON string are unquoted only once complete: hold them until then.
    const bool hold = !c.complete && !c.arguments.empty() && c.arguments[0] == '"';
    if (!hold && extends(c.arguments, s.args)) {
      td.arguments = c.arguments.substr(s.args);
      s.args = c.arguments.size();
    }
    if (!td.arguments.empty()) d.tool_calls.push_back(std::move(td));
  }
  snap_ = std::move(next);
  return d;
}

}  // namespace rl::tools
