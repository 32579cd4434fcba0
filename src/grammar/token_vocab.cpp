#include "grammar/token_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace rl::grammar {

namespace {

// The bytes of a ByteLevel token, or false when a code point is outside the GPT-2 alphabet.
bool byte_level_bytes(const std::string& s, std::string* out) {
  out->clear();
  size_t pos = 0;
  while (pos < s.size()) {
    int b = tok::unicode_to_byte(tok::next_code_point(s, &pos));
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string sentencepiece_bytes(const std::string& s) {
  if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
    return std::string(1, static_cast<char>(hex(s[3]) * 16 + hex(s[4])));
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xE2\x96\x81") == 0) {  // ▁
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos_ids) {
  const int32_t n = tok.vocab_size();
  // Decide the vocabulary's kind by majority: in a ByteLevel vocabulary every model token maps to bytes.
  int64_t byte_level = 0, total = 0;
  std::string tmp;
  for (int32_t id = 0; id < n; ++id) {
    const std::string s = tok.id_to_token(id);
    if (s.empty() || tok.is_special(id)) continue;
    ++total;
    byte_level += byte_level_bytes(s, &tmp) ? 1 : 0;
  }
  const bool is_byte_level = total > 0 && byte_level * 100 >= total * 99;
  std::vector<std::string> bytes(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string s = tok.id_to_token(id);
    if (s.empty() || tok.is_special(id)) continue;
    // Non-special added tokens (e.g. Qwen's <tool_call>) are plain text in both kinds of vocabulary.
    bytes[id] = is_byte_level && byte_level_bytes(s, &tmp) ? tmp : sentencepiece_bytes(s);
  }
  return from_bytes(std::move(bytes), std::move(eos_ids));
}

std::shared_ptr<const TokenVocab> TokenVocab::from_bytes(std::vector<std::string> bytes,
                                                         std::vector<int32_t> eos_ids) {
  auto v = std::shared_ptr<TokenVocab>(new TokenVocab());
  v->bytes_ = std::move(bytes);
  for (int32_t e : eos_ids)
    if (e >= 0 && e < v->vocab_size()) v->eos_ids_.push_back(e);
  v->index();
  return v;
}

void TokenVocab::index() {
  for (int32_t id = 0; id < vocab_size(); ++id)
    if (!bytes_[id].empty()) sorted_.push_back(id);
  for (int32_t e : eos_ids_) bytes_[e].clear();
  std::erase_if(sorted_, [&](int32_t id) { return bytes_[id].empty(); });
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[sorted_[i - 1]];
    const std::string& b = bytes_[sorted_[i]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = static_cast<int32_t>(k);
  }
  // The trie: token i shares its first lcp[i] bytes (the path to depth lcp[i]) with token i - 1 and adds a node
  // for each further byte. A token equal to the one before it (lcp == its length) ends at the same node.
  std::vector<int32_t> path;  // node index at each depth - 1
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& s = bytes_[sorted_[i]];
    const size_t shared = i == 0 ? 0 : static_cast<size_t>(lcp_[i]);
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(s.size()));
    while (path.size() > shared) {
      trie_[path.back()].end = static_cast<int32_t>(trie_.size());
      path.pop_back();
    }
    if (path.size() == s.size()) {
      ++trie_[path.back()].num_end;
      continue;
    }
    for (size_t d = path.size(); d < s.size(); ++d) {
      TrieNode n;
      n.tok_begin = static_cast<int32_t>(i);
      n.depth = static_cast<int32_t>(d + 1);
      n.byte = static_cast<uint8_t>(s[d]);
      path.push_back(static_cast<int32_t>(trie_.size()));
      trie_.push_back(n);
    }
    trie_[path.back()].num_end = 1;
  }
  for (int32_t n : path) trie_[n].end = static_cast<int32_t>(trie_.size());
  TrieNode sentinel;
  sentinel.tok_begin = static_cast<int32_t>(sorted_.size());
  sentinel.end = static_cast<int32_t>(trie_.size()) + 1;
  trie_.push_back(sentinel);
}

}  // namespace rl::grammar
