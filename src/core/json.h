// JSON parsing that reports errors as Status (nlohmann::json throws; nothing above this file should see that).
// Parsing is iterative (nlohmann's parser and destructor are); with max_depth > 0, nesting deeper than that is an
// error naming the limit (a linear scan before parsing), so that recursive consumers of the result (nlohmann's
// dump() and copies, template-value conversion) stay shallow: the server parses requests with a limit. OrderedJson
// objects have hashed lookup (core/ordered_map.h), so an object of n keys parses in O(n).
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

// Parses text; `what` names the source in the error ("config.json"). max_depth 0: no limit.
Result<Json> parse_json(const std::string& text, const std::string& what, int max_depth = 0);
Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what, int max_depth = 0);
Result<Json> load_json_file(const std::string& path);

// The deepest nesting of arrays and objects in text (strings skipped), scanning no further than max_depth + 1:
// a linear pass that does not need valid JSON.
int json_nesting_depth(std::string_view text, int max_depth);

}  // namespace rl
