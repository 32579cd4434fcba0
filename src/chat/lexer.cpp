#include "chat/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "chat/template_error.h"

namespace rl::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') newlines_.push_back(k);
  }

  std::vector<Segment> run() {
    size_t pos = 0;
    bool strip_next = false;     // the previous tag ended with "-": drop leading whitespace of the next text
    bool line_starting = true;   // the previous tag consumed text up to a newline (or we are at the start)
    while (pos <= src_.size()) {
      size_t open = find_tag(pos);
      std::string text = src_.substr(pos, (open == std::string::npos ? src_.size() : open) - pos);
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      }
      if (open == std::string::npos) {
        emit_text(text, pos);
        break;
      }
      char kind = src_[open + 1];
      char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + l_pos, text.end(), [](char c) { return c == ' ' || c == '\t'; })) {
          text.erase(l_pos);
        }
      }
      emit_text(text, pos);
      size_t body = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      size_t end = 0;
      bool right_strip = false;
      if (kind == '#') {
        size_t close = src_.find("#}", body);
        if (close == std::string::npos) fail(line_at(open), "unclosed comment: missing '#}'");
        right_strip = close > body && src_[close - 1] == '-';
        end = close + 2;
      } else {
        Segment seg;
        seg.kind = kind == '{' ? Segment::Kind::kPrint : Segment::Kind::kStatement;
        seg.line = line_at(open);
        end = lex_tag(body, kind == '{' ? "}}" : "%}", &seg.tokens, &right_strip, seg.line);
        if (seg.kind == Segment::Kind::kStatement && seg.tokens.size() == 1 &&
            seg.tokens[0].kind == Token::Kind::kName && seg.tokens[0].text == "raw") {
          end = lex_raw(end, right_strip, &right_strip, seg.line);
        } else {
          if (seg.kind == Segment::Kind::kStatement && seg.tokens.empty()) fail(seg.line, "empty statement tag {% %}");
          if (seg.kind == Segment::Kind::kPrint && seg.tokens.empty()) fail(seg.line, "empty expression {{ }}");
          segments_.push_back(std::move(seg));
        }
      }
      strip_next = right_strip;
      line_starting = false;
      if (!right_strip && kind != '{' && end < src_.size() && src_[end] == '\n') {
        ++end;  // trim_blocks
        line_starting = true;
      }
      if (right_strip) {
        size_t k = end;
        while (k < src_.size() && is_space(src_[k])) ++k;
        line_starting = k > end && src_[k - 1] == '\n';
      }
      pos = end;
    }
    return std::move(segments_);
  }

 private:
  int line_at(size_t pos) const {
    return static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin()) + 1;
  }

  size_t find_tag(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  void emit_text(const std::string& text, size_t pos) {
    if (text.empty()) return;
    if (!segments_.empty() && segments_.back().kind == Segment::Kind::kText) {
      segments_.back().text += text;
      return;
    }
    Segment seg;
    seg.kind = Segment::Kind::kText;
    seg.text = text;
    seg.line = line_at(pos);
    segments_.push_back(std::move(seg));
  }

  // Tokenizes a tag body from `pos` up to `close` ("}}" or "%}"), returns the position after the close.
  size_t lex_tag(size_t pos, const char* close, std::vector<Token>* out, bool* right_strip, int open_line) {
    int depth = 0;  // of (, [, {: a "}}" inside a dict literal does not close the tag
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        fail(open_line, std::string("unclosed tag: missing '") + close + "'");
      }
      if (depth == 0) {
        if (src_.compare(pos, 2, close) == 0) {
          *right_strip = false;
          return pos + 2;
        }
        if ((src_[pos] == '-' || src_[pos] == '+') && src_.compare(pos + 1, 2, close) == 0) {
          *right_strip = src_[pos] == '-';
          return pos + 3;
        }
      }
      Token t;
      t.line = line_at(pos);
      char c = src_[pos];
      if (is_name_start(c)) {
        size_t k = pos;
        while (k < src_.size() && (is_name_start(src_[k]) || is_digit(src_[k]))) ++k;
        t.kind = Token::Kind::kName;
        t.text = src_.substr(pos, k - pos);
        pos = k;
      } else if (is_digit(c)) {
        pos = lex_number(pos, &t);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, &t);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        const char* match = nullptr;
        for (const char* op : kOps) {
          if (src_.compare(pos, std::strlen(op), op) == 0) {
            match = op;
            break;
          }
        }
        if (match == nullptr) fail(t.line, std::string("unexpected character '") + c + "' in tag");
        t.kind = Token::Kind::kOp;
        t.text = match;
        pos += t.text.size();
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if ((t.text == ")" || t.text == "]" || t.text == "}") && depth > 0) --depth;
      }
      out->push_back(std::move(t));
    }
  }

  size_t lex_number(size_t pos, Token* t) {
    size_t k = pos;
    std::string digits;
    auto take_digits = [&] {
      while (k < src_.size() && (is_digit(src_[k]) || (src_[k] == '_' && k + 1 < src_.size() && is_digit(src_[k + 1])))) {
        if (src_[k] != '_') digits.push_back(src_[k]);
        ++k;
      }
    };
    take_digits();
    bool is_float = false;
    if (k + 1 < src_.size() && src_[k] == '.' && is_digit(src_[k + 1])) {
      is_float = true;
      digits.push_back('.');
      ++k;
      take_digits();
    }
    if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
      size_t e = k + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        is_float = true;
        digits.append(src_, k, e - k);
        k = e;
        take_digits();
      }
    }
    if (is_float) {
      t->kind = Token::Kind::kFloat;
      t->float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t->kind = Token::Kind::kInt;
      errno = 0;
      t->int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(t->line, "integer literal too large: " + digits);
    }
    t->text = digits;
    return k;
  }

  // Python string literal with backslash escapes (jinja2 decodes them with "unicode-escape").
  size_t lex_string(size_t pos, Token* t) {
    char quote = src_[pos];
    size_t k = pos + 1;
    std::string out;
    while (true) {
      if (k >= src_.size()) fail(t->line, "unterminated string literal");
      char c = src_[k];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++k;
        continue;
      }
      if (k + 1 >= src_.size()) fail(t->line, "unterminated string literal");
      char e = src_[k + 1];
      k += 2;
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case 'a': out.push_back('\a'); break;
        case '0': out.push_back('\0'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (k + n > src_.size()) fail(t->line, std::string("truncated \\") + e + " escape in string literal");
          uint32_t cp = 0;
          for (size_t d = 0; d < n; ++d) {
            char h = src_[k + d];
            int v = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (v < 0) fail(t->line, std::string("bad \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(v);
          }
          if (cp > 0x10ffff) fail(t->line, "escape beyond U+10FFFF in string literal");
          append_utf8(cp, &out);
          k += n;
          break;
        }
        default:
          out.push_back('\\');
          out.push_back(e);
      }
    }
    t->kind = Token::Kind::kString;
    t->text = std::move(out);
    return k + 1;
  }

  // After {% raw %}: everything up to {% endraw %} is text.
  size_t lex_raw(size_t pos, bool strip_leading, bool* right_strip, int open_line) {
    size_t search = pos;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail(open_line, "unclosed {% raw %}: missing {% endraw %}");
      size_t k = open + 2;
      bool left_strip = k < src_.size() && src_[k] == '-';
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ++k;
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      k += 6;
      while (k < src_.size() && is_space(src_[k])) ++k;
      bool rs = k < src_.size() && src_[k] == '-';
      if (rs) ++k;
      if (src_.compare(k, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = src_.substr(pos, open - pos);
      if (strip_leading) {
        size_t s = 0;
        while (s < text.size() && is_space(text[s])) ++s;
        text.erase(0, s);
      }
      if (left_strip) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(text, pos);
      *right_strip = rs;
      return k + 2;
    }
  }

  const std::string& src_;
  std::vector<size_t> newlines_;
  std::vector<Segment> segments_;
};

}  // namespace

std::vector<Segment> lex(const std::string& source) {
  // jinja2 normalizes line endings to "\n" and drops one trailing newline before lexing.
  std::string src;
  src.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      src.push_back('\n');
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      src.push_back(source[k]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(src).run();
}

}  // namespace rl::jinja
