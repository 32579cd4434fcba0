// The pushdown matcher over token ids and the grammar bound to a vocabulary with its per-node token masks.
//
// A matcher state is a set of stacks of automaton nodes (the nondeterministic PDA's configurations). Each stack is
// hash-consed in a StackArena: (node, parent) pairs, so equal stacks have equal ids and a set never holds
// duplicates. Stacks in a state are canonical: their top node has byte edges (calls are entered and final nodes are
// popped by closure()), and the state separately records whether the grammar may end here.
//
// Token masks (token_masks.h): every canonical node's context-independent mask is precomputed when the grammar is
// bound to the vocabulary (TokenGrammar::create). At run time a step ORs the accepted masks of the state's top
// nodes and walks only their uncertain tokens with the real stacks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_masks.h"
#include "grammar/token_vocab.h"

namespace rl::grammar {

inline constexpr int32_t kMaxStackDepth = 512;  // nesting deeper than this is not followed

// Hash-consed stacks. Ids below `base_size` belong to the base arena (read-only; a scratch arena layers over a
// matcher's arena so a mask walk leaves no garbage there).
class StackArena {
 public:
  static constexpr int32_t kRoot = -1;    // below the root rule: popping to it means the grammar may end
  static constexpr int32_t kBottom = -2;  // below a mask walk's node: popping to it makes tokens uncertain

  explicit StackArena(const StackArena* base = nullptr);
  int32_t get(int32_t node, int32_t parent);
  int32_t node(int32_t id) const { return id < base_size_ ? base_->node(id) : elems_[id - base_size_].node; }
  int32_t parent(int32_t id) const { return id < base_size_ ? base_->parent(id) : elems_[id - base_size_].parent; }
  int32_t depth(int32_t id) const { return id < base_size_ ? base_->depth(id) : elems_[id - base_size_].depth; }
  int32_t size() const { return base_size_ + static_cast<int32_t>(elems_.size()); }
  void clear();

 private:
  struct Elem {
    int32_t node, parent, depth;
  };
  void grow();
  const StackArena* base_;
  int32_t base_size_;
  std::vector<Elem> elems_;
  std::vector<int32_t> table_;  // open addressing: own-element index + 1, 0 = empty
};

// One position of a walk: the canonical stacks after consuming some bytes.
struct MatchState {
  std::vector<int32_t> stacks;
  bool consumed = true;  // the last byte was consumed by some path (before closure)
  bool can_end = false;  // some path completed the root rule
  bool escaped = false;  // some path popped to kBottom at this position or earlier
};

// A compiled grammar bound to a vocabulary, with every node's token mask. Shared by every request using the same
// grammar; immutable, so thread-safe.
class TokenGrammar {
 public:
  // Precomputes the masks (see token_masks.h for the cost and its caps); fails past a cap.
  static Result<std::shared_ptr<const TokenGrammar>> create(std::shared_ptr<const CompiledGrammar> g,
                                                            std::shared_ptr<const TokenVocab> vocab,
                                                            const MaskLimits& limits = {});
  const CompiledGrammar& grammar() const { return *g_; }
  const TokenVocab& vocab() const { return *vocab_; }
  // The mask of a canonical node (one with byte edges).
  const NodeMask& node_mask(int32_t node) const { return masks_.masks[masks_.node_mask[node]]; }
  const MaskStats& mask_stats() const { return masks_.stats; }

 private:
  TokenGrammar() = default;
  std::shared_ptr<const CompiledGrammar> g_;
  std::shared_ptr<const TokenVocab> vocab_;
  TokenMasks masks_;
};

// Expands raw stacks into canonical ones (appended to out->stacks) and sets out->can_end / out->escaped.
void closure(StackArena* arena, const CompiledGrammar& g, std::span<const int32_t> raw, MatchState* out);
// Consumes one byte from `in`.
void advance(StackArena* arena, const CompiledGrammar& g, const MatchState& in, uint8_t byte, MatchState* out);

// One request's grammar state. Not thread-safe (the engine thread owns it).
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const TokenGrammar> tg);

  // Advances by a token; false (state unchanged) when the grammar does not allow it. An EOS id is allowed when
  // the grammar may end, and terminates the matcher.
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, forced prefixes); false (state unchanged) when not allowed.
  bool accept_bytes(std::string_view bytes);
  // words: [vocab().mask_words()]; bit t set = token t allowed.
  void fill_mask(uint32_t* words);
  bool can_end() const { return state_.can_end; }
  bool terminated() const { return terminated_; }
  // No token but EOS can follow (the grammar is complete and cannot continue).
  bool must_end() const { return state_.stacks.empty(); }
  const TokenGrammar& token_grammar() const { return *tg_; }
  // The current state and the arena its stacks live in (tests check masks against a token-by-token walk).
  const MatchState& state() const { return state_; }
  const StackArena& arena() const { return arena_; }

 private:
  bool advance_bytes(std::string_view bytes, MatchState* out);
  void compact();
  std::shared_ptr<const TokenGrammar> tg_;
  StackArena arena_;
  MatchState state_;
  bool terminated_ = false;
  std::vector<MatchState> levels_;  // scratch for mask walks
};

}  // namespace rl::grammar
