#include "core/json.h"

#include <xxhash.h>

#include <random>

#include "core/file.h"

namespace rl {
namespace {

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Status too_deep(const std::string& what, int max_depth) {
  return Status::error(what + ": JSON nested deeper than the limit of " + std::to_string(max_depth) + " levels");
}

}  // namespace

uint64_t ordered_map_hash(std::string_view key) {
  static const uint64_t seed = random_seed();
  return XXH3_64bits_withSeed(key.data(), key.size(), seed);
}

int json_nesting_depth(std::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > max_depth) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<Json> parse_json(const std::string& text, const std::string& what, int max_depth) {
  if (max_depth > 0 && json_nesting_depth(text, max_depth) > max_depth) return too_deep(what, max_depth);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    return Status::error(what + ": malformed JSON: " + e.what());
  }
}

Result<OrderedJson> parse_ordered_json(const std::string& text, const std::string& what, int max_depth) {
  if (max_depth > 0 && json_nesting_depth(text, max_depth) > max_depth) return too_deep(what, max_depth);
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
