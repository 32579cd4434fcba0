// Bounds on what a tokenizer.json may ask for, so a hostile file is an error rather than a crash or a hang.
#pragma once

#include <string>

#include "core/json.h"

namespace rl::tok {

// Nesting of Sequence components (normalizers, pre-tokenizers, decoders, post-processors). Released tokenizers
// nest at most two levels; parsing recurses once per level.
constexpr int kMaxComponentNesting = 32;

// A value for an error message: scalars as JSON cut to 64 characters, containers by kind only (dumping a
// 100,000-deep array would recurse that deep).
inline std::string json_brief(const Json& v) {
  if (v.is_structured()) {
    // A short list or object of scalars is shown as it is; anything else by kind.
    bool flat = v.size() <= 16;
    for (const Json& e : v) flat = flat && !e.is_structured();
    if (!flat) return v.is_array() ? "an array" : "an object";
  }
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

}  // namespace rl::tok
