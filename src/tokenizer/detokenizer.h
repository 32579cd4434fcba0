// Incremental detokenizer for streaming: feed ids one at a time, get the text that became final.
//
// Guarantees: every returned piece is valid UTF-8 (a partial character is held until it completes),
// and the concatenation of all pieces plus flush() equals tokenizer.decode(all ids,
// skip_special_tokens).
//
// How: it decodes a short window of ids [window start, end) and emits what extends the text already
// emitted from that window. The window start only moves to a "clean" point (the decoded window text
// did not end in a partial character) whose following text contains a non-space character, so
// start-of-text effects (Metaspace/Strip decoders drop a leading space) stay inside already-emitted
// text. The clean-up step
// (" ." → "." ...) runs as a streaming transducer that holds back a suffix only while it may start
// a rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rl {

// transformers' clean_up_tokenization as a stream: push(a) + push(b) + flush() == clean_up(a + b).
class CleanupStream {
 public:
  CleanupStream();
  std::string push(std::string_view text);
  std::string flush();

 private:
  struct Stage {
    std::string_view from, to;
    std::string held;  // a proper prefix of `from`, waiting for more text
  };
  std::vector<Stage> stages_;
};

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Returns the text that became final with this id (often empty while a character is incomplete).
  std::string push(int32_t id);
  // Returns the rest at the end of the stream and resets to an empty stream.
  std::string flush();

 private:
  std::string finish_piece(std::string raw);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  // ids_ holds the window: ids from the window start to the newest. Invariant: emitted_ is a prefix
  // of decode_raw(ids_) and is exactly the part of it already returned; clean_ indexes the last
  // clean point.
  std::vector<int32_t> ids_;
  std::string emitted_;
  size_t clean_ = 0;
  CleanupStream cleanup_;
};

}  // namespace rl
