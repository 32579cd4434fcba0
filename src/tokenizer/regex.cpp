#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace rl::tok {
namespace {

constexpr std::string_view kWordChars =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A per-thread JIT stack: the default 32 KiB machine stack is too small for long subjects with
// backtracking.
struct MatchResources {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  MatchResources() {
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchResources() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

// The PCRE2 spelling of an Oniguruma escape \\n whose meaning differs (Unicode \\s, \\d; \\h as hex digits; \\G),
// inside a character class or outside; empty when the escape passes through unchanged. Outside a class, \\w and
// \\W are expanded by the caller.
std::string_view escape_replacement(char n, bool in_class) {
  switch (n) {
    case 's': return "\\p{White_Space}";
    case 'S': return "\\P{White_Space}";
    case 'd': return "\\p{Nd}";
    case 'D': return "\\P{Nd}";
    case 'w': return in_class ? kWordChars : std::string_view();
    case 'h': return in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
    case 'H': return in_class ? std::string_view() : "[^0-9A-Fa-f]";
    case 'G': return in_class ? std::string_view() : "(?:)";
    default: return {};
  }
}

}  // namespace

std::string translate_oniguruma(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  std::vector<bool> fold_stack;  // the ASCII case-folding state to restore at each ')'
  bool fold = false;
  int class_depth = 0;
  bool class_start = false;  // just after '[' or '[^': a ']' here is a literal
  size_t i = 0;
  while (i < p.size()) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      std::string_view rep = escape_replacement(n, class_depth > 0);
      if (class_depth == 0 && (n == 'w' || n == 'W')) {
        out += n == 'w' ? "[" : "[^";
        out += kWordChars;
        out += "]";
        i += 2;
        class_start = false;
        continue;
      }
      if (!rep.empty()) {
        out += rep;
        i += 2;
      } else {
        size_t len = utf8_char_len(static_cast<unsigned char>(n));
        out.append(p.substr(i, 1 + len));
        i += 1 + len;
      }
      class_start = false;
      continue;
    }
    if (class_depth > 0) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
        size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 2;
          class_start = false;
          continue;
        }
      }
      if (c == ']' && !class_start) {
        --class_depth;
        out += c;
        ++i;
        continue;
      }
      if (c == '[') {
        out += "\\[";  // PCRE2 has no nested classes; Oniguruma's [a[b]] is rare in tokenizer files
        ++i;
        class_start = false;
        continue;
      }
      out += c;
      ++i;
      class_start = false;
      continue;
    }
    switch (c) {
      case '[':
        ++class_depth;
        out += c;
        ++i;
        if (i < p.size() && p[i] == '^') {
          out += '^';
          ++i;
        }
        class_start = true;
        continue;
      case '(':
        fold_stack.push_back(fold);
        if (p.substr(i, 4) == "(?i:") {
          fold = true;
          out += "(?:";
          i += 4;
          continue;
        }
        out += c;
        ++i;
        continue;
      case ')':
        if (!fold_stack.empty()) {
          fold = fold_stack.back();
          fold_stack.pop_back();
        }
        out += c;
        ++i;
        continue;
      default:
        break;
    }
    if (fold && is_ascii_letter(c)) {
      out += '[';
      out += static_cast<char>(c | 0x20);
      out += static_cast<char>(c & ~0x20);
      out += ']';
      ++i;
      continue;
    }
    size_t len = utf8_char_len(static_cast<unsigned char>(c));
    out.append(p.substr(i, len));
    i += len;
  }
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  std::string translated = translate_oniguruma(pattern);
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX, &error, &offset, cctx);
  pcre2_compile_context_free(cctx);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Status::error("invalid regex \"" + pattern +
                         "\": " + reinterpret_cast<const char*>(message) + " (at offset " +
                         std::to_string(offset) + " of the translated pattern \"" + translated +
                         "\")");
  }
  pcre2_jit_compile(
      code, PCRE2_JIT_COMPLETE);  // without JIT support, matching falls back to the interpreter
  return std::shared_ptr<const Regex>(new Regex(code));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<Span>* out) const {
  thread_local MatchResources resources;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc =
        pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, resources.context);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0], end = ov[1];
    if (end > start) {
      out->emplace_back(start, end);
      pos = end;
    } else {
      if (start >= text.size()) break;
      pos = start + utf8_char_len(static_cast<unsigned char>(text[start]));
    }
  }
  pcre2_match_data_free(md);
}

Result<Pattern> Pattern::from_json(const Json& j, const std::string& what) {
  if (!j.is_object())
    return Status::error(what +
                         ": pattern must be an object {\"String\": ...} or {\"Regex\": ...}");
  Pattern p;
  if (auto it = j.find("String"); it != j.end() && it->is_string()) {
    p.literal_ = it->get<std::string>();
    return p;
  }
  if (auto it = j.find("Regex"); it != j.end() && it->is_string()) {
    auto re = Regex::compile(it->get<std::string>());
    if (!re) return Status::error(what + ": " + re.message());
    p.regex_ = std::move(re).value();
    return p;
  }
  return Status::error(what + ": pattern must be an object {\"String\": ...} or {\"Regex\": ...}");
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

void Pattern::find_all(std::string_view text, std::vector<Span>* out) const {
  if (regex_) {
    regex_->find_all(text, out);
    return;
  }
  if (literal_.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    out->emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::vector<Span> spans;
  find_all(text, &spans);
  if (spans.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + spans.size() * content.size());
  size_t prev = 0;
  for (auto [s, e] : spans) {
    out.append(text.substr(prev, s - prev));
    out.append(content);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace rl::tok
