// The BPE model of tokenizer.json: byte-level (GPT-2 style) and sentencepiece style (byte_fallback), with
// ignore_merges, unk_token + fuse_unk, continuing_subword_prefix and end_of_word_suffix.
//
// Merging uses a min-heap of (rank, position) over a linked list of symbols: O(n log n) per piece, so a single
// very long piece (a sentencepiece line has no pre-tokenizer) is not quadratic. Results of short pieces are
// memoised in a sharded, mutex-protected cache; encode() is const and safe to call from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `j` is tokenizer.json's "model" object; errors name `what` and the offending entry.
  static Result<std::unique_ptr<BpeModel>> from_json(const Json& j, const std::string& what);

  // Appends the ids of one pre-tokenized piece (valid UTF-8, non-empty).
  void encode(std::string_view piece, std::vector<int32_t>* out) const;

  const TokenMap& vocab() const { return vocab_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  static constexpr size_t kNumCacheShards = 64;
  static constexpr size_t kMaxCachedPieceBytes = 96;
  static constexpr size_t kMaxCacheEntriesPerShard = 4096;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::optional<int32_t> lookup(std::string_view s) const;
  void encode_uncached(std::string_view piece, std::vector<int32_t>* out) const;

  TokenMap vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::array<int32_t, 256> byte_ids_{};   // id of "<0xXX>", or -1
  std::vector<int32_t> small_char_ids_;   // id of the single-code-point token for cp < 0x800, or -1
  mutable std::array<CacheShard, kNumCacheShards> cache_;
};

}  // namespace rl::tok
