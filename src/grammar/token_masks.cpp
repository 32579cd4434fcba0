#include "grammar/token_masks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "grammar/matcher.h"

namespace rl::grammar {

// --- NodeMask ---

NodeMask::NodeMask(const std::vector<uint32_t>& accepted, int64_t num_accepted, int32_t vocab_size,
                   std::vector<int32_t> uncertain)
    : uncertain_(std::move(uncertain)) {
  const int64_t num_words = static_cast<int64_t>(accepted.size());
  const int64_t num_rejected = vocab_size - num_accepted;
  if (num_accepted <= num_words) {
    kind_ = Kind::kAccepted;
    for (int64_t w = 0; w < num_words; ++w)
      for (uint32_t x = accepted[w]; x; x &= x - 1) ids_.push_back(static_cast<int32_t>(w * 32 + std::countr_zero(x)));
  } else if (num_rejected <= num_words) {
    kind_ = Kind::kRejected;
    for (int32_t t = 0; t < vocab_size; ++t)
      if (!((accepted[t >> 5] >> (t & 31)) & 1u)) ids_.push_back(t);
  } else {
    kind_ = Kind::kBitset;
    bits_ = accepted;
  }
}

void NodeMask::write(uint32_t* words, int32_t vocab_size) const {
  const int32_t num_words = (vocab_size + 31) / 32;
  switch (kind_) {
    case Kind::kAccepted:
      std::memset(words, 0, static_cast<size_t>(num_words) * 4);
      for (int32_t t : ids_) words[t >> 5] |= 1u << (t & 31);
      break;
    case Kind::kRejected:
      std::memset(words, 0xFF, static_cast<size_t>(num_words) * 4);
      if (vocab_size % 32) words[num_words - 1] = (1u << (vocab_size % 32)) - 1;
      for (int32_t t : ids_) words[t >> 5] &= ~(1u << (t & 31));
      break;
    case Kind::kBitset:
      std::memcpy(words, bits_.data(), static_cast<size_t>(num_words) * 4);
      break;
  }
}

void NodeMask::or_into(uint32_t* words, int32_t vocab_size) const {
  const int32_t num_words = (vocab_size + 31) / 32;
  switch (kind_) {
    case Kind::kAccepted:
      for (int32_t t : ids_) words[t >> 5] |= 1u << (t & 31);
      break;
    case Kind::kRejected: {
      // Every id but the rejected ones, which keep the bit they already have.
      size_t k = 0;
      for (int32_t w = 0; w < num_words; ++w) {
        uint32_t add = w == num_words - 1 && vocab_size % 32 ? (1u << (vocab_size % 32)) - 1 : ~0u;
        for (; k < ids_.size() && (ids_[k] >> 5) == w; ++k) add &= ~(1u << (ids_[k] & 31));
        words[w] |= add;
      }
      break;
    }
    case Kind::kBitset:
      for (int32_t w = 0; w < num_words; ++w) words[w] |= bits_[w];
      break;
  }
}

bool NodeMask::accepts(int32_t id) const {
  switch (kind_) {
    case Kind::kAccepted:
      return std::binary_search(ids_.begin(), ids_.end(), id);
    case Kind::kRejected:
      return !std::binary_search(ids_.begin(), ids_.end(), id);
    case Kind::kBitset:
      return (bits_[id >> 5] >> (id & 31)) & 1u;
  }
  return false;
}

int64_t NodeMask::num_bytes() const {
  return static_cast<int64_t>(sizeof(NodeMask) + ids_.size() * 4 + bits_.size() * 4 + uncertain_.size() * 4);
}

uint64_t NodeMask::hash() const {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(kind_);
  auto mix = [&h](uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  };
  for (int32_t x : ids_) mix(static_cast<uint32_t>(x));
  for (uint32_t x : bits_) mix(x);
  mix(0xFFFFFFFFULL << 8);
  for (int32_t x : uncertain_) mix(static_cast<uint32_t>(x));
  return h;
}

// --- the automaton over bottom-relative matcher states ---

namespace {

constexpr int64_t kMaxRefineWork = int64_t{1} << 24;  // node + edge visits of the bisimulation refinement

// States of the lazily determinized bottom-relative automaton. A state is a MatchState reached from some (n, BOTTOM)
// by some bytes: its sorted canonical stacks plus `consumed` (the last byte was consumed) and `escaped` (some path
// popped past BOTTOM). Bytes that no edge of the grammar tells apart share a byte class, so a transition row has
// one entry per class. Invariants: equal states have equal ids; trans_[s * num_classes + class] is -1 until
// computed, then the state after a byte of that class (advance() is deterministic on hash-consed stacks).
class StateTable {
 public:
  struct Info {
    bool consumed = false;
    bool escaped = false;
    bool dead = false;  // no stacks: every extension is rejected (or uncertain when escaped)
  };

  StateTable(const CompiledGrammar& g, int64_t max_bytes) : g_(g), max_bytes_(max_bytes) {
    std::array<bool, 257> cut{};
    for (const ByteEdge& e : g.edges) {
      cut[e.lo] = true;
      cut[e.hi + 1] = true;
    }
    int32_t c = -1;
    for (int b = 0; b < 256; ++b) {
      if (b == 0 || cut[b]) ++c;
      class_of_[b] = static_cast<uint8_t>(c);
    }
    num_classes_ = c + 1;
  }

  // The state of the stack (node, BOTTOM); -1 past the table's byte cap.
  int32_t start(int32_t node) {
    MatchState ms;
    ms.stacks = {arena_.get(node, StackArena::kBottom)};
    return intern(&ms);
  }
  int32_t step(int32_t s, uint8_t byte) {
    const size_t k = static_cast<size_t>(s) * num_classes_ + class_of_[byte];
    if (trans_[k] != kUnknown) return trans_[k];
    MatchState in, out;
    in.stacks = stacks_[s];
    in.escaped = info_[s].escaped;
    advance(&arena_, g_, in, byte, &out);
    const int32_t t = intern(&out);
    trans_[k] = t;
    return t;
  }
  const Info& info(int32_t s) const { return info_[s]; }
  int32_t num_states() const { return static_cast<int32_t>(info_.size()); }
  int32_t num_classes() const { return num_classes_; }

 private:
  static constexpr int32_t kUnknown = -1;

  int32_t intern(MatchState* ms) {
    std::sort(ms->stacks.begin(), ms->stacks.end());
    key_.assign(reinterpret_cast<const char*>(ms->stacks.data()), ms->stacks.size() * sizeof(int32_t));
    key_.push_back(static_cast<char>((ms->consumed ? 1 : 0) | (ms->escaped ? 2 : 0)));
    auto it = index_.find(key_);
    if (it != index_.end()) return it->second;
    // A row, the stacks twice (state and key) and the hash-map and vector overheads.
    bytes_ += num_classes_ * 4 + static_cast<int64_t>(key_.size()) * 2 + 96;
    if (bytes_ > max_bytes_) return -1;
    const int32_t id = num_states();
    index_.emplace(key_, id);
    info_.push_back({ms->consumed, ms->escaped, ms->stacks.empty()});
    stacks_.push_back(std::move(ms->stacks));
    trans_.resize(trans_.size() + num_classes_, kUnknown);
    return id;
  }

  const CompiledGrammar& g_;
  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  std::array<uint8_t, 256> class_of_{};
  int32_t num_classes_ = 0;
  StackArena arena_;
  std::vector<Info> info_;
  std::vector<std::vector<int32_t>> stacks_;
  std::vector<int32_t> trans_;  // [num_states * num_classes]
  std::unordered_map<std::string, int32_t> index_;
  std::string key_;
};

// Bisimulation classes of the nodes (Moore's partition refinement to its fixpoint): two nodes are in one class when
// both are final or neither, and their byte edges (range → class of target) and call edges (class of the called
// rule's start → class of the return node) are equal. Bisimilar nodes accept the same bottom-relative language, so
// they get one walk and one mask; front ends often copy a value's automaton (JSON schema inlines a property's value
// in each optional-property continuation). Past a work bound (a long chain of distinct nodes) every node keeps a
// class of its own, which is only slower.
std::vector<int32_t> bisimulation_classes(const CompiledGrammar& g) {
  const int32_t n = static_cast<int32_t>(g.nodes.size());
  const int64_t per_round = static_cast<int64_t>(g.nodes.size() + g.edges.size() + g.calls.size());
  const int64_t max_rounds = std::max<int64_t>(1, kMaxRefineWork / std::max<int64_t>(per_round, 1));
  std::vector<int32_t> cls(n, 0), next(n);
  int32_t num_classes = 1;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<int32_t> sig;
  std::vector<std::pair<int32_t, int32_t>> calls;
  for (int64_t round = 0; round < max_rounds; ++round) {
    ids.clear();
    for (int32_t v = 0; v < n; ++v) {
      const Node& nd = g.nodes[v];
      sig.clear();
      sig.push_back(cls[v]);  // refinement: a class only splits
      sig.push_back(nd.final ? 1 : 0);
      for (int32_t e = nd.edge_begin; e < nd.edge_end; ++e)
        sig.insert(sig.end(), {g.edges[e].lo, g.edges[e].hi, cls[g.edges[e].target]});
      sig.push_back(-1);
      calls.clear();
      for (int32_t c = nd.call_begin; c < nd.call_end; ++c)
        calls.push_back({cls[g.rule_start[g.calls[c].rule]], cls[g.calls[c].ret]});
      std::sort(calls.begin(), calls.end());
      for (auto [a, b] : calls) sig.insert(sig.end(), {a, b});
      std::string key(reinterpret_cast<const char*>(sig.data()), sig.size() * sizeof(int32_t));
      next[v] = ids.emplace(std::move(key), static_cast<int32_t>(ids.size())).first->second;
    }
    cls.swap(next);
    if (static_cast<int32_t>(ids.size()) == num_classes) return cls;
    num_classes = static_cast<int32_t>(ids.size());
  }
  for (int32_t v = 0; v < n; ++v) cls[v] = v;
  return cls;
}

Status limit_error(const char* what, int64_t limit, const char* name) {
  return Status::error("grammar too complex to precompute its token masks: more than " + std::to_string(limit) + " " +
                       what + " (" + name + ")");
}

// One thread's walks: its own automaton (transitions are cheap to recompute, so threads share nothing).
class Walker {
 public:
  Walker(const CompiledGrammar& g, const TokenVocab& v, const MaskLimits& limits, int64_t max_table_bytes)
      : v_(v), limits_(limits), table_(g, max_table_bytes), at_depth_(static_cast<size_t>(v.max_token_bytes()) + 1),
        accepted_(static_cast<size_t>(v.mask_words())) {}

  // The mask of `node`; steps: the trie steps of all threads (the cap is checked against it at each walk's start
  // plus this walk's own steps, so threads overshoot it by at most one walk each).
  Result<NodeMask> walk(int32_t node, std::atomic<int64_t>* steps) {
    const std::vector<TrieNode>& trie = v_.trie();
    const std::vector<int32_t>& sorted = v_.sorted();
    const int32_t num_trie = v_.num_trie_nodes();
    std::fill(accepted_.begin(), accepted_.end(), 0u);
    std::vector<int32_t> uncertain;
    int64_t num_accepted = 0, own_steps = 0;
    const int64_t budget = limits_.max_steps - steps->load(std::memory_order_relaxed);
    at_depth_[0] = table_.start(node);
    if (at_depth_[0] < 0) return table_error();
    for (int32_t j = 0; j < num_trie;) {
      const TrieNode& tn = trie[j];
      const int32_t s = table_.step(at_depth_[tn.depth - 1], tn.byte);
      if (s < 0) return table_error();
      if (++own_steps > budget) return limit_error("trie steps", limits_.max_steps, "kMaxMaskSteps");
      const StateTable::Info& info = table_.info(s);
      const int32_t ends = tn.tok_begin + tn.num_end;
      if (info.consumed) {
        for (int32_t k = tn.tok_begin; k < ends; ++k) {
          accepted_[sorted[k] >> 5] |= 1u << (sorted[k] & 31);
          ++num_accepted;
        }
      } else if (info.escaped) {
        for (int32_t k = tn.tok_begin; k < ends; ++k) uncertain.push_back(k);
      }
      if (!info.dead) {
        at_depth_[tn.depth] = s;
        ++j;
        continue;
      }
      // The prefix has no stack left: every longer token under it dies here too.
      if (info.escaped)
        for (int32_t k = ends; k < trie[tn.end].tok_begin; ++k) uncertain.push_back(k);
      j = tn.end;
    }
    steps->fetch_add(own_steps, std::memory_order_relaxed);
    return NodeMask(accepted_, num_accepted, v_.vocab_size(), std::move(uncertain));
  }
  int32_t num_states() const { return table_.num_states(); }

 private:
  Status table_error() const {
    return limit_error("bytes of automaton table", limits_.max_table_bytes, "kMaxMaskTableBytes");
  }
  const TokenVocab& v_;
  const MaskLimits& limits_;
  StateTable table_;
  std::vector<int32_t> at_depth_;    // the automaton state after each depth of the current trie path
  std::vector<uint32_t> accepted_;  // [mask_words]
};

}  // namespace

Result<TokenMasks> compute_token_masks(const CompiledGrammar& g, const TokenVocab& v, const MaskLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  TokenMasks out;
  out.node_mask.assign(g.nodes.size(), -1);
  // One walk per bisimulation class of canonical nodes: reps[i] is the first node of its class.
  const std::vector<int32_t> cls = bisimulation_classes(g);
  std::vector<int32_t> class_rep(g.nodes.size(), -1), reps;
  for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n) {
    if (!g.nodes[n].has_bytes()) continue;
    ++out.stats.num_nodes;
    if (class_rep[cls[n]] < 0) {
      class_rep[cls[n]] = static_cast<int32_t>(reps.size());
      reps.push_back(n);
    }
  }
  out.stats.num_walks = static_cast<int64_t>(reps.size());

  // The walks, spread over threads (each with its share of the table cap); results land by index, so the masks do
  // not depend on the number of threads.
  int32_t num_threads = limits.num_threads > 0
                            ? limits.num_threads
                            : std::min<int32_t>(kMaxMaskThreads, static_cast<int32_t>(std::thread::hardware_concurrency()));
  num_threads = std::clamp<int32_t>(num_threads, 1, std::max<int32_t>(1, static_cast<int32_t>(reps.size() / 8)));
  std::vector<std::optional<NodeMask>> walked(reps.size());
  std::atomic<int64_t> steps{0}, states{0};
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  Status error;
  auto work = [&] {
    Walker w(g, v, limits, limits.max_table_bytes / num_threads);
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= reps.size()) break;
      Result<NodeMask> m = w.walk(reps[i], &steps);
      if (!m) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error.is_ok()) error = m.status();
        failed = true;
        break;
      }
      walked[i] = std::move(m).value();
    }
    states += w.num_states();
  };
  std::vector<std::thread> threads;
  for (int32_t t = 1; t < num_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (failed) return error;

  // Deduplicate in node order.
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash;  // mask hash → indices into out.masks
  std::vector<int32_t> rep_mask(reps.size(), -1);
  for (size_t i = 0; i < reps.size(); ++i) {
    NodeMask& m = *walked[i];
    std::vector<int32_t>& same = by_hash[m.hash()];
    int32_t found = -1;
    for (int32_t k : same)
      if (out.masks[k] == m) found = k;
    if (found < 0) {
      out.stats.num_bytes += m.num_bytes();
      if (out.stats.num_bytes > limits.max_bytes) return limit_error("mask bytes", limits.max_bytes, "kMaxMaskBytes");
      out.stats.num_uncertain += static_cast<int64_t>(m.uncertain().size());
      found = static_cast<int32_t>(out.masks.size());
      same.push_back(found);
      out.masks.push_back(std::move(m));
    }
    rep_mask[i] = found;
  }
  for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n)
    if (g.nodes[n].has_bytes()) out.node_mask[n] = rep_mask[class_rep[cls[n]]];
  out.stats.num_masks = static_cast<int64_t>(out.masks.size());
  out.stats.num_states = states;
  out.stats.num_steps = steps;
  out.stats.num_threads = num_threads;
  out.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace rl::grammar
