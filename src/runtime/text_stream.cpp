#include "runtime/text_stream.h"

namespace rl {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops, bool skip_special_tokens)
    : detok_(tokenizer, skip_special_tokens), stops_(std::move(stops)) {}

TextStream::Piece TextStream::push(TokenId id) {
  Piece p;
  if (stopped_) return p;
  StopMatcher::Output o = stops_.push(detok_.push(id));
  p.text = std::move(o.text);
  if (o.stop_index) {
    stopped_ = true;
    p.stopped = true;
    p.stop_index = o.stop_index;
  }
  return p;
}

std::string TextStream::finish() {
  if (stopped_) return "";
  StopMatcher::Output o = stops_.push(detok_.flush());
  if (o.stop_index) {
    stopped_ = true;
    return o.text;
  }
  return o.text + stops_.flush();
}

}  // namespace rl
