// JSON parsing that reports errors as Status (nlohmann::json throws; nothing above this file should see that).
// Every parse is bounded: nesting deeper than max_depth is an error naming the limit (checked by a linear scan
// before parsing, so no recursive consumer of the result can overflow the stack), and OrderedJson objects have
// hashed lookup (core/ordered_map.h), so an object of n keys parses in O(n).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/ordered_map.h"
#include "core/status.h"

namespace rl {

using Json = nlohmann::json;
// nlohmann::ordered_json with an order-preserving hashed object type.
using OrderedJson = nlohmann::basic_json<HashedOrderedMap>;

// Deep enough for any real config, JSON schema or message list; shallow enough for recursive consumers.
constexpr int kMaxJsonDepth = 256;

// Parses text; `what` names the source in the error ("config.json").
Result<Json> parse_json(const std::string& text, const std::string& what, int max_depth = kMaxJsonDepth);
Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what,
                                       int max_depth = kMaxJsonDepth);
Result<Json> load_json_file(const std::string& path);

// The deepest nesting of arrays and objects in text (strings skipped), scanning no further than max_depth + 1:
// a linear pass that does not need valid JSON.
int json_nesting_depth(std::string_view text, int max_depth);

}  // namespace rl
