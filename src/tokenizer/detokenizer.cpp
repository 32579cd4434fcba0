#include "tokenizer/detokenizer.h"

#include <span>

#include "tokenizer/unicode.h"

namespace rl {

CleanupStream::CleanupStream() {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) stages_.push_back({from, to, {}});
}

std::string CleanupStream::push(std::string_view text) {
  std::string in(text);
  for (Stage& s : stages_) {
    std::string buf = std::move(s.held) + in;
    s.held.clear();
    std::string out;
    out.reserve(buf.size());
    size_t i = 0;
    while (i < buf.size()) {
      if (buf.compare(i, s.from.size(), s.from) == 0) {
        out += s.to;
        i += s.from.size();
      } else if (buf.size() - i < s.from.size() &&
                 s.from.substr(0, buf.size() - i) == std::string_view(buf).substr(i)) {
        s.held = buf.substr(i);  // may still become a match
        break;
      } else {
        out += buf[i++];
      }
    }
    in = std::move(out);
  }
  return in;
}

std::string CleanupStream::flush() {
  std::string in;
  for (Stage& s : stages_) {
    std::string buf = std::move(s.held) + in;
    s.held.clear();
    // End of stream: nothing is held any more (text flushed from earlier stages may still complete
    // a match).
    std::string out;
    size_t i = 0;
    while (i < buf.size()) {
      if (buf.compare(i, s.from.size(), s.from) == 0) {
        out += s.to;
        i += s.from.size();
      } else {
        out += buf[i++];
      }
    }
    in = std::move(out);
  }
  return in;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::finish_piece(std::string raw) {
  return tokenizer_.clean_up_tokenization_spaces() ? cleanup_.push(raw) : raw;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tokenizer_.decode_raw(ids_, skip_special_tokens_);
  if (text.compare(0, emitted_.size(), emitted_) != 0)
    return {};  // unreachable by the window invariant
  size_t stable = text.size();
  while (stable >= emitted_.size() + 3 && text.compare(stable - 3, 3, tok::kReplacementChar) == 0)
    stable -= 3;
  std::string out;
  if (stable > emitted_.size()) {
    out = text.substr(emitted_.size(), stable - emitted_.size());
    emitted_.append(out);
  }
  if (text.empty()) {
    // Ids that never reach the decoder (skipped special tokens, ids naming no token) cannot affect
    // later text: drop them instead of re-decoding them on every push. (A token that decodes to ""
    // can: Llama 2's lone "▁" is stripped at the start but not before another token.)
    bool ignorable = true;
    for (int32_t i : ids_) {
      ignorable = ignorable && (tokenizer_.id_to_token(i).empty() ||
                                (skip_special_tokens_ && tokenizer_.is_special(i)));
    }
    if (ignorable) {
      ids_.clear();
      clean_ = 0;
      return {};
    }
  }
  if (stable == text.size()) {
    // A clean point at the end. Move the window start to the previous clean point when the text
    // from there has a non-space character (then the start-of-window effects of the decoders stay
    // inside emitted text).
    if (clean_ > 0) {
      std::span<const int32_t> rest(ids_.data() + clean_, ids_.size() - clean_);
      std::string base = tokenizer_.decode_raw(rest, skip_special_tokens_);
      if (base.find_first_not_of(' ') != std::string::npos && text.size() >= base.size() &&
          text.compare(text.size() - base.size(), base.size(), base) == 0) {
        ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(clean_));
        emitted_ = std::move(base);
      }
    }
    clean_ = ids_.size();
  }
  return finish_piece(std::move(out));
}

std::string IncrementalDetokenizer::flush() {
  std::string text = tokenizer_.decode_raw(ids_, skip_special_tokens_);
  std::string out = text.compare(0, emitted_.size(), emitted_) == 0 ? text.substr(emitted_.size())
                                                                    : std::string();
  ids_.clear();
  emitted_.clear();
  clean_ = 0;
  std::string result = finish_piece(std::move(out));
  if (tokenizer_.clean_up_tokenization_spaces()) result += cleanup_.flush();
  return result;
}

}  // namespace rl
