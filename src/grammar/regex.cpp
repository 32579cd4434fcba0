#include "grammar/regex.h"

#include <algorithm>
#include <string>
#include <vector>

namespace rl::grammar {

namespace {

constexpr int kMaxGroupDepth = 64;

std::vector<CodeRange> digit_ranges() { return {{'0', '9'}}; }
std::vector<CodeRange> word_ranges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
std::vector<CodeRange> space_ranges() {
  return {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

std::vector<CodeRange> complement(const std::vector<CodeRange>& in) {
  std::vector<CodeRange> rs = in;
  std::sort(rs.begin(), rs.end());
  std::vector<CodeRange> out;
  char32_t next = 0;
  for (const auto& r : rs) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = std::max<char32_t>(next, r.second + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

class RegexParser {
 public:
  RegexParser(GrammarBuilder* b, std::string_view p, bool json_string) : b_(b), p_(p), json_(json_string) {}

  Result<ExprId> parse(bool full_match) {
    bool anchored_start = false, anchored_end = false;
    if (!p_.empty() && p_[0] == '^') {
      anchored_start = true;
      pos_ = 1;
    }
    std::string_view body = p_;
    if (body.size() > pos_ && body.back() == '$' && !escaped_at(body.size() - 1)) {
      anchored_end = true;
      end_ = body.size() - 1;
    } else {
      end_ = body.size();
    }
    RL_ASSIGN_OR_RETURN(ExprId e, parse_alt(0));
    if (pos_ != end_) return error("unbalanced ')'");
    if (full_match) return e;
    std::vector<ExprId> parts;
    if (!anchored_start) parts.push_back(b_->star(any_content()));
    parts.push_back(e);
    if (!anchored_end) parts.push_back(b_->star(any_content()));
    return b_->seq(parts);
  }

 private:
  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && p_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }
  Status error(const std::string& what) const {
    return Status::error("regex: " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= end_; }
  char peek() const { return p_[pos_]; }

  char32_t next_cp() {
    const unsigned char c = static_cast<unsigned char>(p_[pos_]);
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (pos_ + n > end_) n = 1;
    char32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  // A class (code point ranges) as an expression; in JSON string mode the characters needing escapes become
  // their escape sequences.
  ExprId class_expr(std::vector<CodeRange> ranges, bool negated) {
    if (negated) ranges = complement(ranges);
    if (!json_) return b_->char_class(std::move(ranges));
    auto contains = [&](char32_t c) {
      for (auto& r : ranges)
        if (r.first <= c && c <= r.second) return true;
      return false;
    };
    std::vector<ExprId> opts;
    // Safe characters: everything but '"', '\' and U+0000-U+001F.
    std::vector<CodeRange> safe;
    for (auto [lo, hi] : ranges) {
      lo = std::max<char32_t>(lo, 0x20);
      if (lo > hi) continue;
      for (char32_t bad : {char32_t('"'), char32_t('\\')}) {
        if (lo <= bad && bad <= hi) {
          if (lo < bad) safe.push_back({lo, bad - 1});
          lo = bad + 1;
        }
      }
      if (lo <= hi) safe.push_back({lo, hi});
    }
    if (!safe.empty()) opts.push_back(b_->char_class(std::move(safe)));
    static const std::pair<char32_t, const char*> kEsc[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"},
                                                            {'\t', "\\t"},  {'\r', "\\r"},   {'\b', "\\b"},
                                                            {'\f', "\\f"}};
    for (const auto& [c, esc] : kEsc)
      if (contains(c)) opts.push_back(b_->literal(esc));
    return b_->alt(std::move(opts));
  }
  ExprId any_content() { return class_expr({{'\n', '\n'}}, true); }
  ExprId literal_cp(char32_t cp) { return class_expr({{cp, cp}}, false); }

  // After '\' (outside or inside a class): the ranges of a class escape, or a single code point.
  Result<std::vector<CodeRange>> escape(bool* is_class) {
    if (at_end()) return error("trailing backslash");
    const char c = peek();
    ++pos_;
    *is_class = true;
    switch (c) {
      case 'd': return digit_ranges();
      case 'D': return complement(digit_ranges());
      case 'w': return word_ranges();
      case 'W': return complement(word_ranges());
      case 's': return space_ranges();
      case 'S': return complement(space_ranges());
      default: break;
    }
    *is_class = false;
    auto one = [](char32_t cp) { return std::vector<CodeRange>{{cp, cp}}; };
    switch (c) {
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x':
      case 'u': {
        const size_t n = c == 'x' ? 2 : 4;
        if (pos_ + n > end_) return error("short \\" + std::string(1, c) + " escape");
        char32_t v = 0;
        for (size_t i = 0; i < n; ++i) {
          const char h = p_[pos_ + i];
          int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return error("bad hex digit in escape");
          v = v * 16 + static_cast<char32_t>(d);
        }
        pos_ += n;
        return one(v);
      }
      case 'b':
      case 'B':
        return error("word boundary \\" + std::string(1, c) + " is not supported");
      default:
        if (c >= '1' && c <= '9') return error("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
          return error("unknown escape \\" + std::string(1, c));
        --pos_;
        return one(next_cp());
    }
  }

  Result<ExprId> parse_class() {
    // pos_ is after '['.
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    bool first = true;
    while (true) {
      if (at_end()) return error("unterminated character class");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      std::vector<CodeRange> item;
      bool is_class = false;
      if (peek() == '\\') {
        ++pos_;
        RL_ASSIGN_OR_RETURN(item, escape(&is_class));
      } else {
        char32_t cp = next_cp();
        item = {{cp, cp}};
      }
      if (!is_class && pos_ + 1 < end_ && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        std::vector<CodeRange> hi_item;
        bool hi_class = false;
        if (peek() == '\\') {
          ++pos_;
          RL_ASSIGN_OR_RETURN(hi_item, escape(&hi_class));
        } else {
          char32_t cp = next_cp();
          hi_item = {{cp, cp}};
        }
        if (hi_class) return error("a class escape cannot end a range");
        if (hi_item[0].first < item[0].first) return error("character range out of order");
        ranges.push_back({item[0].first, hi_item[0].first});
      } else {
        ranges.insert(ranges.end(), item.begin(), item.end());
      }
    }
    return class_expr(std::move(ranges), negated);
  }

  Result<ExprId> parse_alt(int depth) {
    if (depth > kMaxGroupDepth) return error("groups nested too deeply");
    std::vector<ExprId> options;
    RL_ASSIGN_OR_RETURN(ExprId first, parse_seq(depth));
    options.push_back(first);
    while (!at_end() && peek() == '|') {
      ++pos_;
      RL_ASSIGN_OR_RETURN(ExprId next, parse_seq(depth));
      options.push_back(next);
    }
    return b_->alt(std::move(options));
  }

  Result<ExprId> parse_seq(int depth) {
    std::vector<ExprId> parts;
    while (!at_end() && peek() != '|' && peek() != ')') {
      RL_ASSIGN_OR_RETURN(ExprId atom, parse_atom(depth));
      RL_ASSIGN_OR_RETURN(ExprId q, parse_quantifier(atom));
      parts.push_back(q);
    }
    return b_->seq(std::move(parts));
  }

  Result<ExprId> parse_atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (!at_end() && peek() == '?') {
        if (pos_ + 1 < end_ && p_[pos_ + 1] == ':') {
          pos_ += 2;
        } else if (pos_ + 1 < end_ && p_[pos_ + 1] == '<' && pos_ + 2 < end_ && p_[pos_ + 2] != '=' &&
                   p_[pos_ + 2] != '!') {
          size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos || close >= end_) return error("unterminated group name");
          pos_ = close + 1;
        } else {
          return error("lookaround and inline flags are not supported");
        }
      }
      RL_ASSIGN_OR_RETURN(ExprId inner, parse_alt(depth + 1));
      if (at_end() || peek() != ')') return error("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') {
      ++pos_;
      return parse_class();
    }
    if (c == '.') {
      ++pos_;
      return any_content();
    }
    if (c == '\\') {
      ++pos_;
      bool is_class = false;
      RL_ASSIGN_OR_RETURN(std::vector<CodeRange> r, escape(&is_class));
      return class_expr(std::move(r), false);
    }
    if (c == '^' || c == '$') return error("anchors inside the pattern are not supported");
    if (c == '*' || c == '+' || c == '?') return error("quantifier without an operand");
    if (c == '{') {
      // A '{' that does not start a valid quantifier is a literal in ECMAScript's Annex B.
      ++pos_;
      return literal_cp('{');
    }
    return literal_cp(next_cp());
  }

  bool parse_int(int32_t* out) {
    size_t start = pos_;
    int64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) v = 1000000;
      ++pos_;
    }
    *out = static_cast<int32_t>(v);
    return pos_ > start;
  }

  Result<ExprId> parse_quantifier(ExprId atom) {
    if (at_end()) return atom;
    int32_t lo = 0, hi = kUnbounded;
    const char c = peek();
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{') {
      const size_t save = pos_;
      ++pos_;
      if (!parse_int(&lo)) {
        pos_ = save;
        return atom;
      }
      hi = lo;
      if (!at_end() && peek() == ',') {
        ++pos_;
        if (!parse_int(&hi)) hi = kUnbounded;
      }
      if (at_end() || peek() != '}') {
        pos_ = save;
        return atom;
      }
      ++pos_;
      if (hi != kUnbounded && hi < lo) return error("quantifier {n,m} with m < n");
      if (lo > kMaxRepeat || hi > kMaxRepeat) return error("quantifier bound above " + std::to_string(kMaxRepeat));
    } else {
      return atom;
    }
    if (!at_end() && peek() == '?') ++pos_;  // lazy: same language
    if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?')) return error("nested quantifier");
    return b_->repeat(atom, lo, hi);
  }

  GrammarBuilder* b_;
  std::string_view p_;
  bool json_;
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

Result<ExprId> regex_to_expr(GrammarBuilder* b, std::string_view pattern, bool json_string, bool full_match) {
  if (pattern.size() > kMaxRegexBytes) return Status::error("regex longer than " + std::to_string(kMaxRegexBytes) + " bytes");
  return RegexParser(b, pattern, json_string).parse(full_match);
}

Result<std::shared_ptr<const CompiledGrammar>> regex_grammar(std::string_view pattern) {
  GrammarBuilder b;
  RuleId root = b.declare("root");
  RL_ASSIGN_OR_RETURN(ExprId e, regex_to_expr(&b, pattern, false, true));
  b.define(root, e);
  return compile(b, root);
}

}  // namespace rl::grammar
