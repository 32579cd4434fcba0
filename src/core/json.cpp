#include "core/json.h"

#include "core/file.h"

namespace rl {

Result<Json> parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    return Status::error(what + ": malformed JSON: " + e.what());
  }
}

Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what) {
  try {
    return OrderedJson::parse(text);
  } catch (const OrderedJson::exception& e) {
    return Status::error(what + ": malformed JSON: " + e.what());
  }
}

Result<Json> load_json_file(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_json(text, path);
}

}  // namespace rl
