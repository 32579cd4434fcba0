// The BPE model of tokenizer.json: byte-level (GPT-2 style) and sentencepiece style
// (byte_fallback), with ignore_merges, unk_token + fuse_unk, continuing_subword_prefix and
// end_of_word_suffix.
//
// Merging uses a min-heap of (rank, position) over a linked list of symbols: O(n log n) per piece,
// so a single very long piece (a sentencepiece line has no pre-tokenizer) is not quadratic. Results
// of short pieces are memoised in a sharded, mutex-protected cache; encode() is const and safe to
// call from many threads.
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

// Open-addressing hash table from uint64 keys to uint64 values (linear probing, power-of-two
// capacity): the BPE inner loop looks up merges and single-character ids here. Built once, then
// read-only. Key ~0 is reserved.
class U64Table {
 public:
  void reserve(size_t n);
  void insert_or_assign(uint64_t key, uint64_t value);
  const uint64_t* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  std::vector<uint64_t> keys_, values_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

class BpeModel {
 public:
  // `j` is tokenizer.json's "model" object; errors name `what` and the offending entry.
  static Result<std::unique_ptr<BpeModel>> from_json(const Json& j, const std::string& what);

  // Appends the ids of one pre-tokenized piece (valid UTF-8, non-empty).
  void encode(std::string_view piece, std::vector<int32_t>* out) const;

  const TokenMap& vocab() const { return vocab_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }

 private:
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
  U64Table merges_;    // pair_key(a, b) → rank << 32 | merged id; a later duplicate merge wins
  U64Table char_ids_;  // code point → id of the single-character token (plain models only)
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::array<int32_t, 256> byte_ids_{};  // id of "<0xXX>", or -1
  mutable std::array<CacheShard, kNumCacheShards> cache_;
};

}  // namespace rl::tok
