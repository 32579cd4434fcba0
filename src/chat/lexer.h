// Splits a template into text and tag segments, applying jinja2's whitespace rules as transformers configures
// them: trim_blocks (the first newline after a block or comment tag is dropped), lstrip_blocks (spaces and tabs
// before a block or comment tag at the start of a line are dropped), "-" modifiers ({%- -%} {{- -}} {#- -#}
// strip all whitespace on that side), "+" disables lstrip_blocks, and one trailing newline of the template is
// dropped (keep_trailing_newline=False). {% raw %} bodies come out as text. Comments are dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rl::jinja {

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp };
  Kind kind;
  std::string text;  // name, decoded string, or operator
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 0;
};

struct Segment {
  enum class Kind { kText, kPrint, kStatement };
  Kind kind;
  std::string text;           // kText
  std::vector<Token> tokens;  // kPrint / kStatement
  int line = 0;               // where the segment starts
};

// Throws TemplateError (unclosed tags, bad strings, stray characters).
std::vector<Segment> lex(const std::string& source);

}  // namespace rl::jinja
