#include "tools/tool_parser.h"

#include <algorithm>

#include "core/json.h"

namespace rl::tools {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
size_t skip_ws(std::string_view t, size_t p) {
  while (p < t.size() && is_ws(t[p])) ++p;
  return p;
}
bool starts_with(std::string_view t, size_t p, std::string_view m) { return t.substr(p, m.size()) == m; }

// Length of the longest suffix of `t` that is a proper prefix of `marker` (text to hold back while streaming).
size_t partial_marker(std::string_view t, std::string_view marker) {
  for (size_t n = std::min(t.size(), marker.size() - 1); n > 0; --n)
    if (t.substr(t.size() - n) == marker.substr(0, n)) return n;
  return 0;
}
size_t partial_any(std::string_view t, std::initializer_list<std::string_view> markers) {
  size_t n = 0;
  for (auto m : markers) n = std::max(n, partial_marker(t, m));
  return n;
}

// The end of the JSON string starting at t[p] == '"', or npos when unterminated.
size_t string_end(std::string_view t, size_t p) {
  for (size_t i = p + 1; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string unquote(std::string_view quoted) {
  Json j = Json::parse(quoted, nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string();
}

// A call object {"name": "...", "arguments"|"parameters": {...}} starting at t[p] (after whitespace). Fills `call`
// with what is known; returns the end of the object, or npos while incomplete.
size_t parse_call_object(std::string_view t, size_t p, CallSnapshot* call, bool* is_call) {
  *is_call = true;
  p = skip_ws(t, p);
  if (p >= t.size()) return std::string_view::npos;
  if (t[p] != '{') {
    *is_call = false;
    return std::string_view::npos;
  }
  const std::optional<size_t> end = json_value_end(t, p);
  size_t i = p + 1;
  bool have_args = false;
  bool first_key = true;
  while (true) {
    i = skip_ws(t, i);
    if (i >= t.size()) break;
    if (t[i] == '}') break;
    if (t[i] == ',') {
      ++i;
      continue;
    }
    if (t[i] != '"') {
      *is_call = false;
      break;
    }
    size_t ke = string_end(t, i);
    if (ke == std::string_view::npos) break;
    const std::string key = unquote(t.substr(i, ke - i));
    if (first_key && key != "name" && key != "type" && key != "function") *is_call = false;
    first_key = false;
    i = skip_ws(t, ke);
    if (i >= t.size()) break;
    if (t[i] != ':') {
      *is_call = false;
      break;
    }
    i = skip_ws(t, i + 1);
    if (i >= t.size()) break;
    const std::optional<size_t> ve = json_value_end(t, i);
    if (key == "name") {
      if (!ve) break;
      call->name = unquote(t.substr(i, *ve - i));
    } else if (key == "arguments" || key == "parameters") {
      have_args = true;
      if (!ve) {
        call->arguments = std::string(t.substr(i));
        break;
      }
      std::string_view raw = t.substr(i, *ve - i);
      // Some models emit the arguments as a JSON string holding the object.
      if (!raw.empty() && raw[0] == '"') call->arguments = unquote(raw);
      else call->arguments = std::string(raw);
    }
    if (!ve) break;
    i = *ve;
  }
  if (end) {
    if (!have_args) call->arguments = "{}";
    call->complete = true;
    return *end;
  }
  return std::string_view::npos;
}

// The call objects of a JSON array, from p (just past its '[') to its ']' or the text's end; with final, every call
// parsed counts as complete. Stops at an element that is not a call object.
void parse_call_array(std::string_view t, size_t p, bool final, Snapshot* s) {
  p = skip_ws(t, p);
  while (p < t.size() && t[p] != ']') {
    CallSnapshot call;
    bool is_call = true;
    size_t end = parse_call_object(t, p, &call, &is_call);
    if (!is_call) return;
    if (final) call.complete = true;
    s->calls.push_back(std::move(call));
    if (end == std::string_view::npos) return;
    p = skip_ws(t, end);
    if (p < t.size() && t[p] == ',') p = skip_ws(t, p + 1);
  }
}

// --- hermes ---

void parse_hermes(std::string_view t, bool final, Snapshot* s) {
  static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  size_t pos = 0;
  while (true) {
    size_t i = t.find(kOpen, pos);
    // Text between or after calls counts only when it is more than whitespace.
    auto add = [&](std::string_view seg) {
      if (pos == 0 || skip_ws(seg, 0) < seg.size()) s->content += seg;
    };
    if (i == std::string_view::npos) {
      std::string_view tail = t.substr(pos);
      add(tail.substr(0, tail.size() - (final ? 0 : partial_marker(tail, kOpen))));
      return;
    }
    add(t.substr(pos, i - pos));
    const size_t body = i + kOpen.size();
    const size_t close = t.find(kClose, body);
    CallSnapshot call;
    bool is_call = true;
    std::string_view inner = t.substr(0, close == std::string_view::npos ? t.size() : close);
    parse_call_object(inner, body, &call, &is_call);
    if (close != std::string_view::npos || final) call.complete = call.complete || final;
    if (is_call || !call.name.empty()) s->calls.push_back(std::move(call));
    if (close == std::string_view::npos) return;
    pos = close + kClose.size();
  }
}

// --- llama3_json ---

void parse_llama3(std::string_view t, bool final, Snapshot* s) {
  static constexpr std::string_view kTag = "<|python_tag|>";
  size_t p = skip_ws(t, 0);
  bool tagged = false;
  if (starts_with(t, p, kTag)) {
    tagged = true;
    p = skip_ws(t, p + kTag.size());
  } else if (!final && p < t.size() && kTag.substr(0, t.size() - p) == t.substr(p)) {
    return;  // maybe the tag, still arriving
  }
  if (!tagged && (p >= t.size() ? !final : t[p] != '{')) {
    if (p < t.size() || final) s->content = std::string(t);
    return;
  }
  // One or more call objects separated by ';'.
  std::vector<CallSnapshot> calls;
  bool is_call = true;
  while (p < t.size()) {
    CallSnapshot call;
    size_t end = parse_call_object(t, p, &call, &is_call);
    if (!is_call) break;
    calls.push_back(std::move(call));
    if (end == std::string_view::npos) break;
    p = skip_ws(t, end);
    if (p < t.size() && t[p] == ';') p = skip_ws(t, p + 1);
    else break;
  }
  const bool undecided = calls.empty() || (calls.size() == 1 && calls[0].name.empty() && !calls[0].complete);
  if (!is_call || (final && (calls.empty() || calls[0].name.empty()))) {
    // Not a tool call after all: the whole text is content (python_tag text is code for the ipython tool).
    s->content = std::string(tagged ? t.substr(skip_ws(t, 0) + kTag.size()) : t);
    return;
  }
  if (undecided && !final) return;
  for (auto& c : calls) {
    if (final) c.complete = true;
    s->calls.push_back(std::move(c));
  }
}

// --- mistral ---

void parse_mistral(std::string_view t, bool final, Snapshot* s) {
  static constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]";
  size_t i = t.find(kCalls);
  if (i == std::string_view::npos) {
    s->content = std::string(t.substr(0, t.size() - (final ? 0 : partial_marker(t, kCalls))));
    return;
  }
  s->content = std::string(t.substr(0, i));
  size_t p = skip_ws(t, i + kCalls.size());
  if (p >= t.size()) return;
  if (t[p] == '[') {  // a JSON array of call objects
    parse_call_array(t, p + 1, final, s);
    return;
  }
  // name[ARGS]{...}, repeated with [TOOL_CALLS] between calls.
  while (p < t.size()) {
    size_t a = t.find(kArgs, p);
    if (a == std::string_view::npos) return;
    CallSnapshot call;
    call.name = std::string(t.substr(p, a - p));
    size_t v = skip_ws(t, a + kArgs.size());
    std::optional<size_t> ve = json_value_end(t, v);
    call.arguments = std::string(t.substr(v, ve ? *ve - v : std::string_view::npos));
    call.complete = ve.has_value() || final;
    s->calls.push_back(std::move(call));
    if (!ve) return;
    p = skip_ws(t, *ve);
    if (starts_with(t, p, kCalls)) p = skip_ws(t, p + kCalls.size());
    else return;
  }
}

// --- JSON list (tool_choice "required") ---

void parse_json_list(std::string_view t, bool final, Snapshot* s) {
  size_t p = skip_ws(t, 0);
  if (p >= t.size() || t[p] != '[') {
    if (final) s->content = std::string(t);
    return;
  }
  parse_call_array(t, p + 1, final, s);
}

// --- harmony (GPT-OSS) ---

void parse_harmony(std::string_view t, bool final, Snapshot* s) {
  static constexpr std::string_view kChannel = "<|channel|>", kMessage = "<|message|>", kStart = "<|start|>";
  size_t pos = 0;
  while (pos < t.size()) {
    size_t header_begin = pos;
    if (starts_with(t, pos, kStart)) header_begin = pos + kStart.size();
    size_t m = t.find(kMessage, header_begin);
    if (m == std::string_view::npos) {
      // A header still arriving, or plain text without channels (then it is content).
      if (t.find(kChannel, pos) == std::string_view::npos && !starts_with(t, pos, "<|")) {
        std::string_view tail = t.substr(pos);
        s->content += tail.substr(0, tail.size() - (final ? 0 : partial_any(tail, {kChannel, kStart})));
      }
      return;
    }
    std::string_view header = t.substr(header_begin, m - header_begin);
    std::string channel;
    if (size_t c = header.find(kChannel); c != std::string_view::npos) {
      size_t b = c + kChannel.size(), e = b;
      while (e < header.size() && !is_ws(header[e]) && header[e] != '<') ++e;
      channel = std::string(header.substr(b, e - b));
    }
    std::string recipient;
    if (size_t r = header.find("to="); r != std::string_view::npos) {
      size_t b = r + 3, e = b;
      while (e < header.size() && !is_ws(header[e]) && header[e] != '<') ++e;
      recipient = std::string(header.substr(b, e - b));
    }
    const size_t body = m + kMessage.size();
    size_t end = std::string_view::npos, end_len = 0;
    for (std::string_view term : {"<|end|>", "<|call|>", "<|return|>"}) {
      size_t e = t.find(term, body);
      if (e < end) {
        end = e;
        end_len = term.size();
      }
    }
    std::string_view text = t.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
    if (end == std::string_view::npos && !final) text = text.substr(0, text.size() - partial_any(text, {"<|end|>", "<|call|>", "<|return|>"}));
    const bool closed = end != std::string_view::npos || final;
    if (recipient.rfind("functions.", 0) == 0) {
      CallSnapshot call;
      call.name = recipient.substr(10);
      call.arguments = std::string(text);
      call.complete = closed;
      s->calls.push_back(std::move(call));
    } else if (channel == "analysis") {
      s->reasoning += text;
    } else {
      s->content += text;
    }
    if (end == std::string_view::npos) return;
    pos = end + end_len;
  }
}

// --- deepseek_v3 ---

void parse_deepseek(std::string_view t, bool final, Snapshot* s) {
  static constexpr std::string_view kBegin = "<｜tool▁calls▁begin｜>", kCall = "<｜tool▁call▁begin｜>",
                                    kSep = "<｜tool▁sep｜>", kCallEnd = "<｜tool▁call▁end｜>";
  size_t i = t.find(kBegin);
  if (i == std::string_view::npos) {
    s->content = std::string(t.substr(0, t.size() - (final ? 0 : partial_marker(t, kBegin))));
    return;
  }
  s->content = std::string(t.substr(0, i));
  size_t p = i + kBegin.size();
  while (true) {
    p = skip_ws(t, p);
    if (!starts_with(t, p, kCall)) return;
    p += kCall.size();
    size_t sep = t.find(kSep, p);
    if (sep == std::string_view::npos) return;
    std::string_view head = t.substr(p, sep - p);
    CallSnapshot call;
    size_t a = sep + kSep.size();
    if (head == "function") {
      // V3: NAME\n```json\n{...}\n```
      size_t nl = t.find('\n', a);
      if (nl == std::string_view::npos) return;
      call.name = std::string(t.substr(a, nl - a));
      size_t fence = t.find("```json", nl);
      if (fence == std::string_view::npos) {
        s->calls.push_back(std::move(call));
        return;
      }
      a = fence + 7;
    } else {
      call.name = std::string(head);  // V3.1: NAME<｜tool▁sep｜>{...}
    }
    size_t v = skip_ws(t, a);
    std::optional<size_t> ve = json_value_end(t, v);
    call.arguments = v < t.size() ? std::string(t.substr(v, ve ? *ve - v : std::string_view::npos)) : "";
    size_t ce = t.find(kCallEnd, v);
    call.complete = (ve && ce != std::string_view::npos) || final;
    s->calls.push_back(std::move(call));
    if (ce == std::string_view::npos) return;
    p = ce + kCallEnd.size();
  }
}

}  // namespace

std::optional<size_t> json_value_end(std::string_view t, size_t p) {
  p = skip_ws(t, p);
  if (p >= t.size()) return std::nullopt;
  int depth = 0;
  size_t i = p;
  if (t[i] == '"') {
    size_t e = string_end(t, i);
    if (e == std::string_view::npos) return std::nullopt;
    return e;
  }
  if (t[i] != '{' && t[i] != '[') {
    // A scalar: it ends at a delimiter; at the end of the text it may still be growing.
    while (i < t.size() && !is_ws(t[i]) && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ';' && t[i] != '<') ++i;
    if (i == t.size()) return std::nullopt;
    return i;
  }
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') {
      size_t e = string_end(t, i);
      if (e == std::string_view::npos) return std::nullopt;
      i = e - 1;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return std::nullopt;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::nullopt;
}

std::optional<ToolParserKind> tool_parser_from_name(std::string_view name) {
  if (name == "hermes" || name == "qwen" || name == "qwen3") return ToolParserKind::kHermes;
  if (name == "llama3_json" || name == "llama3" || name == "llama") return ToolParserKind::kLlama3Json;
  if (name == "mistral") return ToolParserKind::kMistral;
  if (name == "harmony" || name == "openai" || name == "gpt-oss") return ToolParserKind::kHarmony;
  if (name == "deepseek_v3" || name == "deepseek") return ToolParserKind::kDeepSeekV3;
  if (name == "none") return ToolParserKind::kNone;
  return std::nullopt;
}

const char* tool_parser_name(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::kHermes: return "hermes";
    case ToolParserKind::kLlama3Json: return "llama3_json";
    case ToolParserKind::kMistral: return "mistral";
    case ToolParserKind::kHarmony: return "harmony";
    case ToolParserKind::kDeepSeekV3: return "deepseek_v3";
    case ToolParserKind::kJsonList: return "json_list";
    case ToolParserKind::kNone: break;
  }
  return "none";
}

std::optional<ReasoningKind> reasoning_parser_from_name(std::string_view name) {
  if (name == "qwen3" || name == "deepseek_r1" || name == "think") return ReasoningKind::kThinkTags;
  if (name == "none") return ReasoningKind::kNone;
  return std::nullopt;
}

ToolParserKind detect_tool_parser(std::string_view tpl, const Tokenizer* tokenizer) {
  auto has = [&](std::string_view s) {
    return tpl.find(s) != std::string_view::npos || (tokenizer && tokenizer->token_to_id(s).has_value());
  };
  if (has("<|channel|>")) return ToolParserKind::kHarmony;
  if (has("<｜tool▁calls▁begin｜>")) return ToolParserKind::kDeepSeekV3;
  if (has("<tool_call>")) return ToolParserKind::kHermes;
  if (has("[TOOL_CALLS]")) return ToolParserKind::kMistral;
  // Llama 3.x: the python tag (3.1+), else the family's header tokens.
  if (has("<|python_tag|>") || has("<|start_header_id|>")) return ToolParserKind::kLlama3Json;
  return ToolParserKind::kNone;
}

ReasoningKind detect_reasoning_parser(std::string_view tpl, const Tokenizer* tokenizer) {
  const bool tags = tpl.find("<think>") != std::string_view::npos || tpl.find("</think>") != std::string_view::npos ||
                    (tokenizer && tokenizer->token_to_id("</think>").has_value());
  return tags ? ReasoningKind::kThinkTags : ReasoningKind::kNone;
}

Snapshot parse_output(ToolParserKind tools, ReasoningKind reasoning, std::string_view text, bool final) {
  Snapshot s;
  std::string_view rest = text;
  if (reasoning == ReasoningKind::kThinkTags) {
    static constexpr std::string_view kOpen = "<think>", kClose = "</think>";
    size_t p = skip_ws(text, 0);
    // The template may have opened the think block in the prompt: then the output starts inside it and only the
    // closing tag appears.
    const size_t close = text.find(kClose);
    if (starts_with(text, p, kOpen) || close != std::string_view::npos) {
      size_t b = starts_with(text, p, kOpen) ? p + kOpen.size() : 0;
      if (close == std::string_view::npos) {
        std::string_view r = text.substr(b);
        s.reasoning = std::string(r.substr(0, r.size() - (final ? 0 : partial_marker(r, kClose))));
        if (!final) return s;
        rest = {};
      } else {
        s.reasoning = std::string(text.substr(b, close - b));
        rest = text.substr(close + kClose.size());
        size_t q = 0;
        while (q < rest.size() && (rest[q] == '\n' || rest[q] == '\r')) ++q;
        rest = rest.substr(q);
      }
    } else if (!final && p < text.size() && kOpen.substr(0, text.size() - p) == text.substr(p)) {
      return s;  // maybe <think>, still arriving
    } else if (!final && p == text.size()) {
      return s;
    }
  }
  Snapshot t;
  switch (tools) {
    case ToolParserKind::kHermes: parse_hermes(rest, final, &t); break;
    case ToolParserKind::kLlama3Json: parse_llama3(rest, final, &t); break;
    case ToolParserKind::kMistral: parse_mistral(rest, final, &t); break;
    case ToolParserKind::kHarmony: parse_harmony(rest, final, &t); break;
    case ToolParserKind::kDeepSeekV3: parse_deepseek(rest, final, &t); break;
    case ToolParserKind::kJsonList: parse_json_list(rest, final, &t); break;
    case ToolParserKind::kNone: t.content = std::string(rest); break;
  }
  s.reasoning += t.reasoning;
  s.content = std::move(t.content);
  s.calls = std::move(t.calls);
  return s;
}

}  // namespace rl::tools
