// Pre-tokenizers of tokenizer.json: Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit, Sequence. Each one refines a list of pieces (valid UTF-8) into a finer list; the
// BPE model then encodes every piece on its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `section_index` is the index of the text section between added tokens (Metaspace's
  // prepend_scheme "first" prepends only in section 0). Empty pieces never survive.
  virtual void pre_tokenize(std::vector<std::string>* pieces, size_t section_index) const = 0;
};

// JSON null gives nullptr; unknown types and bad fields are errors naming `what`.
// `depth`: Sequence nesting so far (at most kMaxComponentNesting, limits.h).
Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& j, const std::string& what, int depth = 0);

}  // namespace rl::tok
