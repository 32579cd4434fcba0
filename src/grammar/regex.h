// Regular expressions (the ECMAScript subset that JSON Schema `pattern` and vLLM's guided_regex use) → grammar
// expressions. Supported: literals (UTF-8), `.`, classes `[...]`/`[^...]` with ranges, escapes \d \D \w \W \s \S
// \n \r \t \f \v \0 \xHH \uHHHH and escaped punctuation, groups `(...)`, `(?:...)`, named groups `(?<n>...)`,
// alternation, quantifiers * + ? {n} {n,} {n,m} (lazy forms match the same language), `^` at the start and `$` at
// the end. Backreferences, lookaround and inner anchors fail with a Status naming them.
//
// json_string: the language is of JSON string *content*: a literal '"' or '\' or control character is produced in
// its escaped form (\" \\ \n \t \r \b \f); classes produce the same escapes for those characters; other control
// characters are not produced.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace rl::grammar {

inline constexpr size_t kMaxRegexBytes = 16384;

// full_match: the output is exactly a word of the regex (guided_regex). Otherwise search semantics (JSON Schema
// `pattern`): an unanchored start or end may be preceded / followed by anything.
Result<ExprId> regex_to_expr(GrammarBuilder* b, std::string_view pattern, bool json_string, bool full_match);

// Convenience for guided_regex: a grammar whose root is the full-match language of `pattern`.
Result<std::shared_ptr<const CompiledGrammar>> regex_grammar(std::string_view pattern);

}  // namespace rl::grammar
