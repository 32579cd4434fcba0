// JSON Schema → grammar (structured outputs: response_format json_schema / json_object, tool arguments).
//
// Supported keywords (the feature list of JSONSchemaBench, guidance-ai, as the checklist): type (incl. type
// arrays), properties, required, additionalProperties, enum, const, anyOf, oneOf, allOf (of object schemas), $ref
// (local JSON pointers, recursion allowed) with $defs / definitions, items, prefixItems, minItems, maxItems,
// minLength, maxLength, pattern, format (date, time, date-time, uuid, email, ipv4, ipv6, hostname, uri),
// minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers (any bounds) and numbers (integer-valued
// bounds), and the annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly). Every other keyword fails with "unsupported JSON schema keyword 'X'".
//
// Generated output is always valid against the schema, though not every valid document can be generated:
// properties come in schema order, additionalProperties are only generated for objects without `properties`,
// oneOf is generated as anyOf (overlapping branches could match twice), whitespace between tokens is bounded
// (one space, or a newline and up to kMaxIndent spaces), and numbers have bounded digit counts.
//
// Bounds: schema nesting depth kMaxSchemaDepth, kMaxSchemaNodes schema objects, plus the grammar's own limits.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "grammar/grammar.h"

namespace rl::grammar {

inline constexpr int kMaxSchemaDepth = 64;
inline constexpr int kMaxSchemaNodes = 20000;
inline constexpr int kMaxIndent = 12;  // whitespace between tokens: " ", or "\n" and up to 12 spaces

Result<std::shared_ptr<const CompiledGrammar>> json_schema_grammar(const OrderedJson& schema);
// Any JSON object (response_format json_object).
Result<std::shared_ptr<const CompiledGrammar>> json_object_grammar();

// Adds the schema's rules to an existing builder (tool-call grammars embed argument schemas); returns the rule of
// the schema's value.
Result<RuleId> add_json_schema(GrammarBuilder* b, const OrderedJson& schema, const std::string& prefix);

}  // namespace rl::grammar
