// Patterns of tokenizer.json ({"String": ...} or {"Regex": ...}). Regexes are written for Oniguruma
// (what the Rust tokenizers crate uses); they are translated to PCRE2 and compiled with UTF + UCP
// and JIT. The translation follows the semantics of the JS reference (@huggingface/tokenizers): \s
// is Unicode White_Space, \d is \p{Nd}, \w is Alphabetic|M|Nd|Pc, (?i:...) folds ASCII letters
// only, ^/$ are line anchors.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

// [start, end) byte offsets of one match.
using Span = std::pair<size_t, size_t>;

// A compiled PCRE2 regex; immutable and safe to share between threads (match data is per call).
class Regex {
 public:
  // `pattern` is Oniguruma syntax; the error names the pattern and includes PCRE2's message.
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches of valid UTF-8 `text`, left to right; empty matches are skipped. A
  // match that PCRE2 cannot finish (resource limit on pathological input) ends the search there.
  void find_all(std::string_view text, std::vector<Span>* out) const;

 private:
  explicit Regex(void* code) : code_(code) {}
  void* code_;  // pcre2_code_8*
};

// Translates an Oniguruma pattern to an equivalent PCRE2 pattern (exposed for tests).
std::string translate_oniguruma(std::string_view pattern);

// A literal string or a regex.
class Pattern {
 public:
  static Result<Pattern> from_json(const Json& j, const std::string& what);
  static Pattern literal(std::string s);
  void find_all(std::string_view text, std::vector<Span>* out) const;
  // Replaces every match with `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace rl::tok
