// JSON parsing that reports errors as Status (nlohmann::json throws; nothing above this file should see that).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace rl {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses text; `what` names the source in the error ("config.json").
Result<Json> parse_json(const std::string& text, const std::string& what);
Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what);
Result<Json> load_json_file(const std::string& path);

}  // namespace rl
