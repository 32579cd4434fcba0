// Token masks precomputed when a grammar is bound to a vocabulary (xgrammar's compile-time adaptive mask cache,
// Dong et al. 2024, re-derived here), so a grammar's first request pays no more per token than later ones.
//
// For every canonical node n (a node with byte edges), the tokens split by a walk from the stack (n, BOTTOM):
// ACCEPTED if some path consumes all the token's bytes without popping n's frame (true in every context),
// REJECTED if every path dies without popping past n's frame (false in every context), otherwise UNCERTAIN (a path
// pops past n with bytes left, so the stack below decides; the matcher walks these at run time).
//
// The walk runs the vocabulary trie (TokenVocab::trie) in preorder with one automaton state per depth, skipping a
// subtree as soon as its prefix dies. The automaton is the subset construction of the bottom-relative pushdown
// automaton, built lazily and shared by every node of the grammar: a state is an interned set of hash-consed stacks
// (stacks relative to BOTTOM do not depend on the context), a transition is computed once per (state, byte) and then
// costs one table lookup, so most of the vocabulary is classified at a table lookup per trie node.
//
// Nodes that are bisimilar (same finality, equal edges up to the classes of their targets) share one walk.
//
// Bounds (grammars are untrusted): the automaton's memory (transient, freed after the compile), the trie steps
// (the compile's time: about 10 ns each on one core) and the stored mask bytes are capped; past a cap
// compute_token_masks() fails with a Status naming the limit (a 400 at the server).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace rl::grammar {

inline constexpr int64_t kMaxMaskTableBytes = int64_t{64} << 20;  // the automaton's states and transition rows
inline constexpr int64_t kMaxMaskSteps = int64_t{1} << 28;    // trie nodes visited over all of a grammar's nodes
inline constexpr int64_t kMaxMaskBytes = int64_t{64} << 20;   // stored masks of one grammar (after deduplication)

inline constexpr int32_t kMaxMaskThreads = 8;  // walks of one grammar run on up to this many threads

struct MaskLimits {
  int64_t max_table_bytes = kMaxMaskTableBytes;
  int64_t max_steps = kMaxMaskSteps;
  int64_t max_bytes = kMaxMaskBytes;
  int32_t num_threads = 0;  // 0: min(kMaxMaskThreads, hardware threads); the caps hold for all threads together
};

// The context-independent mask of one node, stored in the smallest of three forms: the accepted ids, the
// rejected ids (every id not accepted, specials included), or a bitset.
class NodeMask {
 public:
  enum class Kind : uint8_t { kAccepted, kRejected, kBitset };
  // accepted: [mask_words] bitset; num_accepted: its popcount. uncertain: positions in TokenVocab::sorted().
  NodeMask(const std::vector<uint32_t>& accepted, int64_t num_accepted, int32_t vocab_size,
           std::vector<int32_t> uncertain);

  // words: [mask_words]. write() overwrites them with the accepted set; or_into() adds it.
  void write(uint32_t* words, int32_t vocab_size) const;
  void or_into(uint32_t* words, int32_t vocab_size) const;
  bool accepts(int32_t id) const;
  const std::vector<int32_t>& uncertain() const { return uncertain_; }
  Kind kind() const { return kind_; }
  int64_t num_bytes() const;
  bool operator==(const NodeMask& o) const = default;
  uint64_t hash() const;

 private:
  Kind kind_ = Kind::kAccepted;
  std::vector<int32_t> ids_;    // kAccepted / kRejected: ascending ids
  std::vector<uint32_t> bits_;  // kBitset
  std::vector<int32_t> uncertain_;
};

struct MaskStats {
  int64_t num_nodes = 0;   // canonical nodes (with byte edges)
  int64_t num_walks = 0;   // trie walks: one per bisimulation class of canonical nodes
  int64_t num_masks = 0;   // distinct masks after deduplication
  int64_t num_states = 0;  // automaton states built
  int64_t num_steps = 0;   // trie nodes visited
  int64_t num_bytes = 0;   // stored mask bytes
  int64_t num_uncertain = 0;  // uncertain tokens summed over the distinct masks
  int32_t num_threads = 1;
  double seconds = 0;
};

struct TokenMasks {
  std::vector<int32_t> node_mask;  // [nodes]: index into masks, -1 for a node without byte edges
  std::vector<NodeMask> masks;
  MaskStats stats;
};

// The masks of every canonical node of g over v. Linear in (nodes × visited trie nodes), bounded by the caps above.
Result<TokenMasks> compute_token_masks(const CompiledGrammar& g, const TokenVocab& v, const MaskLimits& limits = {});

}  // namespace rl::grammar
