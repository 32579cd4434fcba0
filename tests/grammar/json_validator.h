// An independent JSON Schema validator for the tests (written separately from the grammar compiler, from the
// JSON Schema 2020-12 validation spec): type, properties, required, additionalProperties, enum, const, anyOf,
// oneOf, allOf, $ref (local pointers), items, prefixItems, minItems, maxItems, minLength, maxLength (code points),
// pattern (std::regex ECMAScript, search), format (date, time, date-time, uuid, email, ipv4, ipv6, hostname,
// uri), minimum, maximum, exclusiveMinimum, exclusiveMaximum. Returns "" when valid, else the first violation.
#pragma once

#include <string>

#include "core/json.h"

namespace rl::grammar_test {

std::string validate(const OrderedJson& instance, const OrderedJson& schema);

}  // namespace rl::grammar_test
