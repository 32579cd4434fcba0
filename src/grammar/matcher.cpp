#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/check.h"

namespace rl::grammar {

// --- StackArena ---

namespace {
inline uint64_t pair_hash(int32_t node, int32_t parent) {
  uint64_t x = (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parent);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}
}  // namespace

StackArena::StackArena(const StackArena* base) : base_(base), base_size_(base ? base->size() : 0) {
  table_.assign(256, 0);
}

void StackArena::clear() {
  elems_.clear();
  if (table_.size() > 4096) table_.assign(256, 0);
  else std::fill(table_.begin(), table_.end(), 0);
  base_size_ = base_ ? base_->size() : 0;
}

void StackArena::grow() {
  std::vector<int32_t> t(table_.size() * 2, 0);
  const size_t mask = t.size() - 1;
  for (size_t i = 0; i < elems_.size(); ++i) {
    size_t h = pair_hash(elems_[i].node, elems_[i].parent) & mask;
    while (t[h] != 0) h = (h + 1) & mask;
    t[h] = static_cast<int32_t>(i + 1);
  }
  table_.swap(t);
}

int32_t StackArena::get(int32_t node, int32_t parent) {
  const size_t mask = table_.size() - 1;
  size_t h = pair_hash(node, parent) & mask;
  while (table_[h] != 0) {
    const Elem& e = elems_[table_[h] - 1];
    if (e.node == node && e.parent == parent) return base_size_ + table_[h] - 1;
    h = (h + 1) & mask;
  }
  const int32_t d = parent < 0 ? 1 : depth(parent) + 1;
  elems_.push_back({node, parent, d});
  table_[h] = static_cast<int32_t>(elems_.size());
  if (elems_.size() * 2 > table_.size()) grow();
  return base_size_ + static_cast<int32_t>(elems_.size()) - 1;
}

// --- closure / advance ---

void closure(StackArena* arena, const CompiledGrammar& g, std::span<const int32_t> raw, MatchState* out) {
  out->stacks.clear();
  // Worklist and seen set are tiny in practice (a handful of alternatives), so plain vectors.
  thread_local std::vector<int32_t> work, seen;
  work.assign(raw.begin(), raw.end());
  seen.clear();
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    seen.push_back(s);
    const Node& nd = g.nodes[arena->node(s)];
    if (nd.has_bytes()) out->stacks.push_back(s);
    if (nd.call_end > nd.call_begin && arena->depth(s) < kMaxStackDepth) {
      const int32_t p = arena->parent(s);
      for (int32_t c = nd.call_begin; c < nd.call_end; ++c) {
        const int32_t ret = arena->get(g.calls[c].ret, p);
        work.push_back(arena->get(g.rule_start[g.calls[c].rule], ret));
      }
    }
    if (nd.final) {
      const int32_t p = arena->parent(s);
      if (p == StackArena::kRoot) {
        out->can_end = true;
      } else if (p == StackArena::kBottom) {
        out->escaped = true;
      } else {
        work.push_back(p);
      }
    }
  }
}

void advance(StackArena* arena, const CompiledGrammar& g, const MatchState& in, uint8_t byte, MatchState* out) {
  thread_local std::vector<int32_t> raw;
  raw.clear();
  for (int32_t s : in.stacks) {
    const Node& nd = g.nodes[arena->node(s)];
    for (int32_t e = nd.edge_begin; e < nd.edge_end; ++e) {
      const ByteEdge& be = g.edges[e];
      if (be.lo > byte) break;  // edges are sorted by lo
      if (byte <= be.hi) raw.push_back(arena->get(be.target, arena->parent(s)));
    }
  }
  out->consumed = !raw.empty();
  out->can_end = false;
  out->escaped = in.escaped;
  closure(arena, g, raw, out);
}

// --- the uncertain-token walk ---

namespace {

int32_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t k = 0;
  while (k < n && a[k] == b[k]) ++k;
  return static_cast<int32_t>(k);
}

// Walks the tokens at `positions` (ascending positions in vocab.sorted()) from `init` and reports the accepted
// ones. Shared prefixes are advanced once; when a prefix dies, every following token that extends it is skipped.
template <typename Report>
void walk_accepted(StackArena* arena, const CompiledGrammar& g, const TokenVocab& v, const MatchState& init,
                   const std::vector<int32_t>& positions, std::vector<MatchState>* levels, Report&& report) {
  const std::vector<int32_t>& sorted = v.sorted();
  (*levels)[0] = init;
  int32_t valid = 0;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < positions.size();) {
    const int32_t pos = positions[k];
    const std::string& s = v.bytes(sorted[pos]);
    const int32_t len = static_cast<int32_t>(s.size());
    if (static_cast<int32_t>(levels->size()) <= len) levels->resize(len + 1);
    int32_t d = prev ? std::min(valid, common_prefix(*prev, s)) : 0;
    while (d < len && !(*levels)[d].stacks.empty()) {
      advance(arena, g, (*levels)[d], static_cast<uint8_t>(s[d]), &(*levels)[d + 1]);
      ++d;
    }
    valid = d;
    if (d == len && (*levels)[len].consumed) report(pos);
    prev = &s;
    ++k;
    if (d == len) continue;
    // Dead at depth d: every following token sharing the first d bytes dies there too.
    while (k < positions.size()) {
      const std::string& s2 = v.bytes(sorted[positions[k]]);
      if (common_prefix(*prev, s2) < d) break;
      if (static_cast<int32_t>(s2.size()) == d && (*levels)[d].consumed) report(positions[k]);
      prev = &s2;
      ++k;
    }
  }
}

inline void set_bit(uint32_t* words, int32_t t) { words[t >> 5] |= 1u << (t & 31); }
inline bool get_bit(const uint32_t* words, int32_t t) { return (words[t >> 5] >> (t & 31)) & 1u; }

}  // namespace

// --- TokenGrammar ---

Result<std::shared_ptr<const TokenGrammar>> TokenGrammar::create(std::shared_ptr<const CompiledGrammar> g,
                                                                 std::shared_ptr<const TokenVocab> vocab,
                                                                 const MaskLimits& limits) {
  Result<TokenMasks> masks = compute_token_masks(*g, *vocab, limits);
  if (!masks) return masks.status();
  auto tg = std::shared_ptr<TokenGrammar>(new TokenGrammar());
  tg->g_ = std::move(g);
  tg->vocab_ = std::move(vocab);
  tg->masks_ = std::move(masks).value();
  return std::shared_ptr<const TokenGrammar>(std::move(tg));
}

// --- GrammarMatcher ---

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenGrammar> tg) : tg_(std::move(tg)), levels_(16) {
  const CompiledGrammar& g = tg_->grammar();
  const int32_t s = arena_.get(g.rule_start[g.root], StackArena::kRoot);
  closure(&arena_, g, std::span<const int32_t>(&s, 1), &state_);
}

bool GrammarMatcher::advance_bytes(std::string_view bytes, MatchState* out) {
  const CompiledGrammar& g = tg_->grammar();
  MatchState cur = state_, next;
  for (char c : bytes) {
    if (cur.stacks.empty()) return false;
    advance(&arena_, g, cur, static_cast<uint8_t>(c), &next);
    if (!next.consumed) return false;
    std::swap(cur, next);
  }
  *out = std::move(cur);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  MatchState out;
  if (!advance_bytes(bytes, &out)) return false;
  state_ = std::move(out);
  compact();
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (terminated_) return false;
  const TokenVocab& v = tg_->vocab();
  if (std::find(v.eos_ids().begin(), v.eos_ids().end(), id) != v.eos_ids().end()) {
    if (!state_.can_end) return false;
    terminated_ = true;
    return true;
  }
  if (id < 0 || id >= v.vocab_size() || v.bytes(id).empty()) return false;
  return accept_bytes(v.bytes(id));
}

void GrammarMatcher::fill_mask(uint32_t* words) {
  const TokenVocab& v = tg_->vocab();
  const int32_t vocab_size = v.vocab_size();
  if (terminated_ || state_.stacks.empty()) {
    std::memset(words, 0, static_cast<size_t>(v.mask_words()) * 4);
  } else {
    for (size_t i = 0; i < state_.stacks.size(); ++i) {
      const NodeMask& m = tg_->node_mask(arena_.node(state_.stacks[i]));
      if (i == 0) m.write(words, vocab_size);
      else m.or_into(words, vocab_size);
    }
  }
  if (terminated_) return;
  StackArena scratch(&arena_);
  thread_local std::vector<int32_t> todo;
  const std::vector<int32_t>& sorted = v.sorted();
  for (int32_t s : state_.stacks) {
    const NodeMask& m = tg_->node_mask(arena_.node(s));
    todo.clear();
    for (int32_t pos : m.uncertain())
      if (!get_bit(words, sorted[pos])) todo.push_back(pos);
    if (todo.empty()) continue;
    MatchState init;
    init.stacks = {s};
    walk_accepted(&scratch, tg_->grammar(), v, init, todo, &levels_, [&](int32_t pos) { set_bit(words, sorted[pos]); });
    scratch.clear();
  }
  if (state_.can_end)
    for (int32_t e : v.eos_ids()) set_bit(words, e);
}

void GrammarMatcher::compact() {
  if (arena_.size() < (1 << 18)) return;
  StackArena fresh;
  std::unordered_map<int32_t, int32_t> map;
  auto copy = [&](auto&& self, int32_t id) -> int32_t {
    if (id < 0) return id;
    auto it = map.find(id);
    if (it != map.end()) return it->second;
    const int32_t n = fresh.get(arena_.node(id), self(self, arena_.parent(id)));
    map[id] = n;
    return n;
  };
  for (int32_t& s : state_.stacks) s = copy(copy, s);
  arena_ = std::move(fresh);
}

}  // namespace rl::grammar
