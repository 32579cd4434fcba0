// Recursive-descent parser for the jinja2 subset chat templates use, with jinja2's operator precedence:
// conditional < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < postfix (. [] ())
// < filters and tests. Nesting is bounded so a hostile template cannot overflow the stack.
#pragma once

#include <string>

#include "chat/ast.h"

namespace rl::jinja {

// Lexes and parses; throws TemplateError naming the line (unclosed tags, unknown tags, bad syntax,
// include/import/extends, which a sandboxed chat template may not use).
Body parse_template(const std::string& source);

constexpr int kMaxParseNesting = 128;
// The height of one expression tree: operators, filters, tests, attribute, item and call chains each add a level
// (`x|trim|trim|...` with 20,000 filters is 20,000 levels deep and is refused here, at parse time).
constexpr int kMaxExprHeight = 256;

}  // namespace rl::jinja
