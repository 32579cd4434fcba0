// The tokenizer's vocabulary as byte strings, the alphabet the grammar matcher works over, sorted so that a walk
// over it visits every shared prefix once (a trie walk without building the trie).
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

 private:
  void index();
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> sorted_, lcp_;
};

}  // namespace rl::grammar
