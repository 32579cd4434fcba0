#include "tokenizer/bpe.h"

#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/limits.h"

namespace rl::tok {

void U64Table::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  keys_.assign(cap, kEmpty);
  values_.assign(cap, 0);
  mask_ = cap - 1;
  size_ = 0;
}

void U64Table::insert_or_assign(uint64_t key, uint64_t value) {
  if (2 * (size_ + 1) > keys_.size()) {
    std::vector<uint64_t> old_keys = std::move(keys_), old_values = std::move(values_);
    reserve(std::max<size_t>(16, old_keys.size()));
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) insert_or_assign(old_keys[i], old_values[i]);
    }
  }
  for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == key) {
      values_[i] = value;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      values_[i] = value;
      ++size_;
      return;
    }
  }
}

Result<std::unique_ptr<BpeModel>> BpeModel::from_json(const Json& j, const std::string& what) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  auto vit = j.find("vocab");
  if (vit == j.end() || !vit->is_object())
    return Status::error(what + ": BPE needs an object \"vocab\"");
  model->vocab_.reserve(vit->size());
  for (const auto& [token, id] : vit->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return Status::error(what + ": vocab entry \"" + token + "\" has an invalid id " + json_brief(id));
    }
    model->vocab_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  if (auto it = j.find("dropout"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      return Status::error(what + ": BPE dropout " + json_brief(*it) + " is not supported (only null)");
    }
  }
  model->fuse_unk_ = flag("fuse_unk");
  model->byte_fallback_ = flag("byte_fallback");
  model->ignore_merges_ = flag("ignore_merges");
  model->continuing_subword_prefix_ = str("continuing_subword_prefix");
  model->end_of_word_suffix_ = str("end_of_word_suffix");
  if (auto it = j.find("unk_token"); it != j.end() && it->is_string()) {
    auto id = model->lookup(it->get<std::string>());
    if (!id)
      return Status::error(what + ": unk_token \"" + it->get<std::string>() +
                           "\" is not in the vocab");
    model->unk_id_ = *id;
  }
  model->byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    if (auto id = model->lookup(name)) model->byte_ids_[b] = *id;
  }
  model->char_ids_.reserve(4096);
  for (const auto& [token, id] : model->vocab_) {
    size_t pos = 0;
    if (!token.empty() && is_valid_utf8(token)) {
      char32_t cp = next_code_point(token, &pos);
      if (pos == token.size()) model->char_ids_.insert_or_assign(cp, static_cast<uint64_t>(id));
    }
  }

  auto mit = j.find("merges");
  if (mit == j.end() || !mit->is_array())
    return Status::error(what + ": BPE needs an array \"merges\"");
  model->merges_.reserve(mit->size());
  const std::string& prefix = model->continuing_subword_prefix_;
  for (size_t rank = 0; rank < mit->size(); ++rank) {
    const Json& m = (*mit)[rank];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) {
        return Status::error(what + ": merges[" + std::to_string(rank) + "] \"" + s +
                             "\" is not \"a b\"");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return Status::error(what + ": merges[" + std::to_string(rank) +
                           "] must be \"a b\" or [a, b], got " + json_brief(m));
    }
    auto ida = model->lookup(a);
    auto idb = model->lookup(b);
    if (!ida || !idb) {
      return Status::error(what + ": merges[" + std::to_string(rank) +
                           "] names a token not in the vocab: \"" + (!ida ? a : b) + "\"");
    }
    // With a continuing_subword_prefix, "a" + "##b" merges to "ab" (the prefix of b is dropped).
    std::string merged =
        a +
        (!prefix.empty() && b.compare(0, prefix.size(), prefix) == 0 ? b.substr(prefix.size()) : b);
    auto idm = model->lookup(merged);
    if (!idm) {
      return Status::error(what + ": merges[" + std::to_string(rank) + "] result \"" + merged +
                           "\" is not in the vocab");
    }
    model->merges_.insert_or_assign(
        pair_key(*ida, *idb), (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(*idm));
  }
  return model;
}

std::optional<int32_t> BpeModel::lookup(std::string_view s) const {
  auto it = vocab_.find(s);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    if (auto id = lookup(piece)) {
      out->push_back(*id);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    encode_uncached(piece, out);
    return;
  }
  CacheShard& shard = cache_[StringHash{}(piece) % kNumCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(piece);
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t begin = out->size();
  encode_uncached(piece, out);
  std::vector<int32_t> ids(out->begin() + static_cast<ptrdiff_t>(begin), out->end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kMaxCacheEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(piece), std::move(ids));
}

void BpeModel::encode_uncached(std::string_view piece, std::vector<int32_t>* out) const {
  // Symbols form a doubly linked list over `syms`; a merged-away symbol has id -1.
  struct Sym {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Sym> syms;
  syms.reserve(piece.size());
  bool last_is_unk = false;
  auto push = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, n + 1});
  };
  size_t pos = 0;
  bool plain = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  std::string buf;
  while (pos < piece.size()) {
    size_t start = pos;
    char32_t cp = next_code_point(piece, &pos);
    int32_t id = -1;
    if (plain) {
      if (const uint64_t* v = char_ids_.find(cp)) id = static_cast<int32_t>(*v);
    } else {
      buf.clear();
      if (start > 0) buf += continuing_subword_prefix_;
      buf.append(piece.substr(start, pos - start));
      if (pos == piece.size()) buf += end_of_word_suffix_;
      if (auto v = lookup(buf)) id = *v;
    }
    if (id >= 0) {
      push(id);
      last_is_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t i = start; i < pos; ++i)
        all = all && byte_ids_[static_cast<unsigned char>(piece[i])] >= 0;
      if (all) {
        for (size_t i = start; i < pos; ++i) push(byte_ids_[static_cast<unsigned char>(piece[i])]);
        last_is_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(fuse_unk_ && last_is_unk)) push(*unk_id_);
      last_is_unk = true;
    }
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  // Heap entries: (rank << 32 | left position); the smallest rank wins, ties go to the leftmost
  // pair.
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap;
  auto consider = [&](int32_t left) {
    int32_t right = syms[left].next;
    if (right < 0) return;
    if (const uint64_t* m = merges_.find(pair_key(syms[left].id, syms[right].id))) {
      heap.push((*m & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(left));
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i);
  while (!heap.empty()) {
    uint64_t top = heap.top();
    heap.pop();
    auto rank = static_cast<int32_t>(top >> 32);
    auto left = static_cast<int32_t>(top & 0xFFFFFFFFu);
    if (syms[left].id < 0) continue;
    int32_t right = syms[left].next;
    if (right < 0) continue;
    const uint64_t* m = merges_.find(pair_key(syms[left].id, syms[right].id));
    if (m == nullptr || static_cast<int32_t>(*m >> 32) != rank) continue;  // stale entry
    syms[left].id = static_cast<int32_t>(*m & 0xFFFFFFFFu);
    syms[left].next = syms[right].next;
    if (syms[right].next >= 0) syms[syms[right].next].prev = left;
    syms[right].id = -1;
    if (syms[left].prev >= 0) consider(syms[left].prev);
    consider(left);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

}  // namespace rl::tok
