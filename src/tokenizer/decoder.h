// Decoders of tokenizer.json: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. A
// decoder rewrites the list of token strings; the decoded text is the concatenation of the final
// list.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

struct DecodeToken {
  std::string text;
  bool added =
      false;  // an added token: ByteLevel passes it through verbatim instead of mapping its bytes
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<DecodeToken>* tokens) const = 0;
};

// JSON null gives nullptr (tokens are then joined with spaces).
// `depth`: Sequence nesting so far (at most kMaxComponentNesting, limits.h).
Result<std::unique_ptr<Decoder>> parse_decoder(const Json& j, const std::string& what, int depth = 0);

// transformers' clean_up_tokenization: " ." → ".", " n't" → "n't", ... (ten literal replacements,
// in order).
std::string clean_up_tokenization(std::string_view text);

}  // namespace rl::tok
