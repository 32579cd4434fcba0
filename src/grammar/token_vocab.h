// The tokenizer's vocabulary as byte strings, the alphabet the grammar matcher works over, sorted so that a walk
// over it visits every shared prefix once, and the same order as a byte trie in preorder (token_masks.cpp walks it,
// skipping a whole subtree when its prefix is rejected).
//
// Token bytes: a ByteLevel vocabulary (GPT-2 alphabet: Llama 3, Qwen, GPT-OSS, DeepSeek-V3) maps each code point
// back to its byte; a SentencePiece-style vocabulary (Llama 2, Gemma) maps "<0xXX>" to the byte and "▁" to a space.
// Added tokens (special or not) have no bytes here: the grammar never produces them; the end-of-sequence ids are
// allowed exactly when the grammar may end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rl::grammar {

// One trie node: the prefix of its parent plus `byte`. Nodes are stored in preorder, so a node's subtree is the
// index range [self, end) and the tokens under it are sorted()[tok_begin, trie()[end].tok_begin) (the last entry of
// trie() is a sentinel with tok_begin = sorted().size()). The tokens whose bytes end exactly here are
// sorted()[tok_begin, tok_begin + num_end).
struct TrieNode {
  int32_t end = 0;
  int32_t tok_begin = 0;
  int32_t num_end = 0;
  int32_t depth = 0;  // bytes from the root, >= 1
  uint8_t byte = 0;
};

class TokenVocab {
 public:
  // eos_ids: the ids that end generation (tokenizer EOS and the model's generation_config eos ids).
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos_ids);
  // For tests: explicit token byte strings (empty = never allowed).
  static std::shared_ptr<const TokenVocab> from_bytes(std::vector<std::string> bytes, std::vector<int32_t> eos_ids);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t mask_words() const { return (vocab_size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Token ids with non-empty bytes, in byte-lexicographic order, and the length of the common prefix of each with
  // the one before it (0 for the first).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<int32_t>& lcp() const { return lcp_; }
  // The byte trie of sorted() in preorder, plus the sentinel: [num_trie_nodes() + 1].
  const std::vector<TrieNode>& trie() const { return trie_; }
  int32_t num_trie_nodes() const { return static_cast<int32_t>(trie_.size()) - 1; }
  int32_t max_token_bytes() const { return max_token_bytes_; }

 private:
  void index();
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> sorted_, lcp_;
  std::vector<TrieNode> trie_;
  int32_t max_token_bytes_ = 0;
};

}  // namespace rl::grammar
