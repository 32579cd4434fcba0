// Post-processors of tokenizer.json: TemplateProcessing, ByteLevel (a no-op on ids), Sequence, and
// the trivial RobertaProcessing/BertProcessing (cls + A + sep). Only single sequences are encoded
// (no pairs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of one sequence; special tokens are added only when add_special_tokens.
  virtual void process(std::vector<int32_t>* ids, bool add_special_tokens) const = 0;
};

// JSON null gives nullptr; unknown types and malformed templates are errors naming `what`.
// `depth`: Sequence nesting so far (at most kMaxComponentNesting, limits.h).
Result<std::unique_ptr<PostProcessor>> parse_post_processor(const Json& j, const std::string& what, int depth = 0);

}  // namespace rl::tok
