#include "grammar/gbnf.h"

#include <cctype>

#include "tokenizer/unicode.h"

namespace rl::grammar {

namespace {

constexpr int kMaxNesting = 64;

class GbnfParser {
 public:
  GbnfParser(GrammarBuilder* b, std::string_view s) : b_(b), s_(s) {}

  Status parse() {
    skip_space(true);
    while (pos_ < s_.size()) {
      std::string name = parse_name();
      if (name.empty()) return error("expected a rule name");
      skip_space(false);
      if (s_.compare(pos_, 3, "::=") != 0) return error("expected '::=' after '" + name + "'");
      pos_ += 3;
      skip_space(true);
      RuleId r = rule(name);
      if (defined_.size() <= static_cast<size_t>(r)) defined_.resize(r + 1, false);
      if (defined_[r]) return error("rule '" + name + "' is defined twice");
      defined_[r] = true;
      RL_ASSIGN_OR_RETURN(ExprId e, parse_alt(0));
      b_->define(r, e);
      skip_space(true);
    }
    return Status::ok();
  }

 private:
  Status error(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    return Status::error("grammar: " + what + " (line " + std::to_string(line) + ")");
  }
  RuleId rule(const std::string& name) {
    RuleId r = b_->find(name);
    return r >= 0 ? r : b_->declare(name);
  }
  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }
  std::string parse_name() {
    size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  // Skips spaces and comments; newlines only when `newlines` (inside parentheses, or between rules).
  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }
  // True when the text at pos_ (after spaces/newlines) starts a new rule definition.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.compare(p, 3, "::=") == 0;
  }

  Result<char32_t> parse_char() {
    if (pos_ >= s_.size()) return error("unexpected end of grammar");
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      if (++pos_ >= s_.size()) return error("trailing backslash");
      char e = s_[pos_++];
      switch (e) {
        case 'n': return U'\n';
        case 'r': return U'\r';
        case 't': return U'\t';
        case '\\': return U'\\';
        case '"': return U'"';
        case '\'': return U'\'';
        case '[': return U'[';
        case ']': return U']';
        case '-': return U'-';
        case '^': return U'^';
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > s_.size()) return error("short escape");
          char32_t v = 0;
          for (size_t i = 0; i < n; ++i) {
            char h = s_[pos_ + i];
            int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) return error("bad hex digit");
            v = v * 16 + static_cast<char32_t>(d);
          }
          pos_ += n;
          return v;
        }
        default: return error(std::string("unknown escape \\") + e);
      }
    }
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (pos_ + n > s_.size()) n = 1;
    char32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  Result<ExprId> parse_alt(int depth) {
    if (depth > kMaxNesting) return error("parentheses nested too deeply");
    std::vector<ExprId> opts;
    RL_ASSIGN_OR_RETURN(ExprId e, parse_seq(depth));
    opts.push_back(e);
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      RL_ASSIGN_OR_RETURN(ExprId n, parse_seq(depth));
      opts.push_back(n);
    }
    return b_->alt(std::move(opts));
  }

  Result<ExprId> parse_seq(int depth) {
    std::vector<ExprId> parts;
    while (true) {
      skip_space(depth > 0);
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '\n') {
        // A newline ends the rule unless the next line continues it (does not start `name ::=`).
        size_t save = pos_;
        skip_space(true);
        if (pos_ >= s_.size() || at_rule_start()) break;
        if (s_[pos_] == '|' || s_[pos_] == ')') {
          if (s_[pos_] == ')') pos_ = save;
          break;
        }
        continue;
      }
      if (c == '|' || c == ')') break;
      RL_ASSIGN_OR_RETURN(ExprId atom, parse_atom(depth));
      RL_ASSIGN_OR_RETURN(ExprId q, parse_postfix(atom));
      parts.push_back(q);
    }
    return b_->seq(std::move(parts));
  }

  Result<ExprId> parse_atom(int depth) {
    char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      std::string lit;
      while (pos_ < s_.size() && s_[pos_] != '"') {
        RL_ASSIGN_OR_RETURN(char32_t cp, parse_char());
        tok::append_utf8(&lit, cp);
      }
      if (pos_ >= s_.size()) return error("unterminated string literal");
      ++pos_;
      return b_->literal(lit);
    }
    if (c == '[') {
      ++pos_;
      bool neg = false;
      if (pos_ < s_.size() && s_[pos_] == '^') {
        neg = true;
        ++pos_;
      }
      std::vector<CodeRange> ranges;
      while (pos_ < s_.size() && s_[pos_] != ']') {
        RL_ASSIGN_OR_RETURN(char32_t lo, parse_char());
        char32_t hi = lo;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          RL_ASSIGN_OR_RETURN(hi, parse_char());
          if (hi < lo) return error("character range out of order");
        }
        ranges.push_back({lo, hi});
      }
      if (pos_ >= s_.size()) return error("unterminated character class");
      ++pos_;
      return b_->char_class(std::move(ranges), neg);
    }
    if (c == '.') {
      ++pos_;
      return b_->any_char();
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      RL_ASSIGN_OR_RETURN(ExprId e, parse_alt(depth + 1));
      skip_space(true);
      if (pos_ >= s_.size() || s_[pos_] != ')') return error("missing ')'");
      ++pos_;
      return e;
    }
    if (name_char(c)) {
      std::string name = parse_name();
      return b_->ref(rule(name));
    }
    return error(std::string("unexpected character '") + c + "'");
  }

  Result<ExprId> parse_postfix(ExprId atom) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '*') {
        ++pos_;
        atom = b_->star(atom);
      } else if (c == '+') {
        ++pos_;
        atom = b_->plus(atom);
      } else if (c == '?') {
        ++pos_;
        atom = b_->optional(atom);
      } else if (c == '{') {
        ++pos_;
        auto num = [&](int64_t* out) {
          size_t start = pos_;
          int64_t v = 0;
          while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
            v = std::min<int64_t>(v * 10 + (s_[pos_] - '0'), 1 << 30);
            ++pos_;
          }
          *out = v;
          return pos_ > start;
        };
        int64_t lo = 0, hi = 0;
        skip_space(false);
        if (!num(&lo)) return error("expected a number in {}");
        skip_space(false);
        hi = lo;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          skip_space(false);
          if (!num(&hi)) hi = -1;
          skip_space(false);
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') return error("expected '}'");
        ++pos_;
        if (lo > kMaxRepeat || hi > kMaxRepeat) return error("repetition bound above " + std::to_string(kMaxRepeat));
        if (hi >= 0 && hi < lo) return error("repetition {m,n} with n < m");
        atom = b_->repeat(atom, static_cast<int32_t>(lo), hi < 0 ? kUnbounded : static_cast<int32_t>(hi));
      } else {
        break;
      }
    }
    return atom;
  }

  GrammarBuilder* b_;
  std::string_view s_;
  size_t pos_ = 0;
  std::vector<bool> defined_;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> gbnf_grammar(std::string_view text) {
  if (text.size() > kMaxGrammarBytes) return Status::error("grammar longer than " + std::to_string(kMaxGrammarBytes) + " bytes");
  GrammarBuilder b;
  GbnfParser p(&b, text);
  RL_RETURN_IF_ERROR(p.parse());
  RuleId root = b.find("root");
  if (root < 0) return Status::error("grammar has no 'root' rule");
  return compile(b, root);
}

Result<std::shared_ptr<const CompiledGrammar>> choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return Status::error("guided_choice must not be empty");
  GrammarBuilder b;
  RuleId root = b.declare("root");
  std::vector<ExprId> opts;
  for (const auto& c : choices) opts.push_back(b.literal(c));
  b.define(root, b.alt(std::move(opts)));
  return compile(b, root);
}

}  // namespace rl::grammar
