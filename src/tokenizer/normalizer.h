// Normalizers of tokenizer.json: NFC, NFD, NFKC, NFKD (utf8proc), Replace, Prepend, Lowercase,
// Strip, Sequence. All are pure functions of valid UTF-8 text to valid UTF-8 text.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};

// Builds the normalizer described by `j`; JSON null gives nullptr. `what` names the location in
// errors
// ("tokenizer.json: normalizer").
// `depth`: Sequence nesting so far (at most kMaxComponentNesting, limits.h).
Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& j, const std::string& what, int depth = 0);

}  // namespace rl::tok
