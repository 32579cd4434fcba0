// Added tokens (tokenizer.json "added_tokens") and the matcher that splits them out of the text
// before normalization (tokens with normalized=false) or after it (normalized=true), as the Rust
// tokenizers do: leftmost-longest, non-overlapping; lstrip/rstrip swallow the whitespace beside a
// match; single_word only matches when no word character (alphanumeric or '_') touches the match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rl::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// One piece of text after splitting: either plain text (token < 0) or the index of an added token.
struct Segment {
  std::string_view text;
  int32_t token = -1;
};

// A byte trie over the patterns. Immutable after construction; thread-safe.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // patterns[i] is matched as token index tokens[i] (an index into the tokenizer's added-token
  // table).
  AddedTokenMatcher(const std::vector<std::string>& patterns, const std::vector<int32_t>& tokens,
                    const std::vector<AddedToken>* table);
  bool empty() const { return nodes_.size() <= 1; }
  // Appends the segments of text (never an empty one) to out.
  void split(std::string_view text, std::vector<Segment>* out) const;

 private:
  struct Node {
    int32_t token = -1;  // the token ending here, or -1
  };
  int32_t child(int32_t node, unsigned char byte) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
  }
  bool boundary_ok(std::string_view text, size_t start, size_t end) const;

  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) → child node
  bool first_byte_[256] = {};
  const std::vector<AddedToken>* table_ = nullptr;
};

}  // namespace rl::tok
