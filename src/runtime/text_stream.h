// The consumer side of a streamed choice: token ids → final UTF-8 text pieces, with stop strings applied
// (design.md §3, step 11). Used by the CLI, the offline API and the HTTP workers alike.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace rl {

class TextStream {
 public:
  // tokenizer must outlive the stream.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops, bool skip_special_tokens = true);

  struct Piece {
    std::string text;                  // safe to emit now
    bool stopped = false;              // a stop string matched: emit `text`, then end the choice
    std::optional<size_t> stop_index;  // which one
  };
  // After a stop, further pushes return empty pieces.
  Piece push(TokenId id);
  // End of stream: the held-back rest (empty after a stop).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  IncrementalDetokenizer detok_;
  StopMatcher stops_;
  bool stopped_ = false;
};

}  // namespace rl
