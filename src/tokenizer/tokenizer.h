// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) for BPE models: normalizer →
// added-token split → pre-tokenizer → BPE → post-processor, and the decoder chain. Matches
// @huggingface/tokenizers (the JS reference) id for id on the supported components.
//
// Defined behaviours:
// - encode() takes arbitrary bytes: each ill-formed UTF-8 subsequence is replaced by U+FFFD first
// (as Rust's
//   String::from_utf8_lossy does; HF tokenizers only accept valid strings).
// - decode() skips ids that name no token (negative, >= vocab_size(), or a hole in the id space);
// it never
//   fails. Invalid UTF-8 produced by byte tokens is decoded lossily (U+FFFD per maximal ill-formed
//   subpart).
// - add_bos_token/add_eos_token of tokenizer_config.json are reported but do not change encode():
// special
//   tokens come from tokenizer.json's post_processor, as in the Rust and JS libraries.
// - clean_up_tokenization_spaces (tokenizer_config.json; default true as in transformers.js)
// applies
//   transformers' clean-up to decoded text.
// Thread-safety: a loaded Tokenizer is immutable apart from an internal, locked cache; every const
// method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace rl {

class Tokenizer {
 public:
  // Reads model_dir/tokenizer.json and, when present, model_dir/tokenizer_config.json.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& model_dir);
  // tokenizer_config_json may be "" (no config).
  static Result<std::unique_ptr<Tokenizer>> from_json(const std::string& tokenizer_json,
                                                      const std::string& tokenizer_config_json);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // decode() without the clean-up step (the incremental detokenizer applies it as a stream).
  std::string decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One more than the largest id of the vocab and the added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string, or "" for an id that names no token.
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> pad_id() const { return pad_id_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  std::optional<bool> add_bos_token() const { return add_bos_token_; }
  std::optional<bool> add_eos_token() const { return add_eos_token_; }
  bool clean_up_tokenization_spaces() const { return clean_up_tokenization_spaces_; }
  // The Jinja chat template of tokenizer_config.json ("" when absent), for the chat module.
  const std::string& chat_template() const { return chat_template_; }

 private:
  Tokenizer() = default;
  Status init(const Json& tokenizer, const Json* config);
  Status init_config(const Json& config);
  void encode_text(std::string_view text, size_t section_index, std::vector<int32_t>* ids) const;

  enum class Kind : uint8_t { kNone, kModel, kAdded };
  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tok::BpeModel> model_;
  std::unique_ptr<tok::PostProcessor> post_processor_;
  std::unique_ptr<tok::Decoder> decoder_;
  std::vector<tok::AddedToken> added_;
  tok::AddedTokenMatcher raw_matcher_;  // added tokens with normalized=false (or no normalizer)
  tok::AddedTokenMatcher
      normalized_matcher_;          // normalized=true tokens, by their normalized content
  tok::TokenMap added_by_content_;  // content → index into added_
  std::vector<std::string> id_to_token_;
  std::vector<Kind> kind_;
  std::vector<uint8_t> special_;
  std::optional<int32_t> bos_id_, eos_id_, pad_id_, unk_id_;
  std::string bos_token_, eos_token_;
  std::optional<bool> add_bos_token_, add_eos_token_;
  bool clean_up_tokenization_spaces_ = true;
  std::string chat_template_;
};

}  // namespace rl
