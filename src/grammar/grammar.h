// A context-free grammar over bytes, built from expressions (literals, Unicode character classes, sequences,
// alternatives, bounded or unbounded repetition, rule references), and its compiled form: one small automaton per
// rule whose edges either consume a byte range or call another rule. A stack of automaton nodes is a pushdown
// automaton state (see matcher.h). JSON schema, regex, choice and GBNF front ends all build through GrammarBuilder.
//
// Bounds (untrusted input): every front end stops with a Status once the grammar would exceed kMaxExprs expressions
// or the compiled form kMaxNodes nodes; compilation is linear in the expression size (repetitions of anything but a
// single character class become calls to a helper rule, so a repeat never copies a large body).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace rl::grammar {

inline constexpr int32_t kMaxExprs = 200000;
inline constexpr int32_t kMaxNodes = 400000;
inline constexpr int32_t kMaxRepeat = 10000;  // the largest finite bound of a repetition
inline constexpr int32_t kUnbounded = -1;

using ExprId = int32_t;
using RuleId = int32_t;

// Inclusive code point range.
using CodeRange = std::pair<char32_t, char32_t>;

enum class ExprKind : uint8_t { kEmpty, kBytes, kClass, kSeq, kAlt, kRepeat, kRef };

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  std::string bytes;                // kBytes: the literal
  std::vector<CodeRange> ranges;    // kClass: sorted, disjoint, non-empty code point ranges (no surrogates)
  std::vector<ExprId> children;     // kSeq, kAlt: parts; kRepeat: the body (one child)
  int32_t min = 0, max = 0;         // kRepeat: max == kUnbounded for no bound
  RuleId rule = -1;                 // kRef
};

class GrammarBuilder {
 public:
  // Rules are declared first (so they can be referenced before their body exists), then defined once.
  RuleId declare(std::string name);
  void define(RuleId rule, ExprId body);
  // The rule named `name`, or -1.
  RuleId find(std::string_view name) const;
  const std::string& rule_name(RuleId r) const { return rules_[r].name; }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  ExprId empty();
  ExprId literal(std::string_view bytes);
  // Code points in the ranges (negated: every scalar value outside them). Ranges need not be sorted.
  ExprId char_class(std::vector<CodeRange> ranges, bool negated = false);
  ExprId any_char() { return char_class({}, true); }
  ExprId seq(std::vector<ExprId> parts);
  ExprId alt(std::vector<ExprId> options);
  ExprId repeat(ExprId body, int32_t min, int32_t max);
  ExprId optional(ExprId body) { return repeat(body, 0, 1); }
  ExprId star(ExprId body) { return repeat(body, 0, kUnbounded); }
  ExprId plus(ExprId body) { return repeat(body, 1, kUnbounded); }
  ExprId ref(RuleId rule);

  // Set once a limit was hit; every later call returns a placeholder and compile() reports this error.
  const Status& status() const { return status_; }
  void fail(std::string message) {
    if (status_.is_ok()) status_ = Status::error(std::move(message));
  }

  const Expr& expr(ExprId e) const { return exprs_[e]; }
  ExprId rule_body(RuleId r) const { return rules_[r].body; }

 private:
  ExprId add(Expr e);
  struct Rule {
    std::string name;
    ExprId body = -1;
  };
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  Status status_;
};

// The compiled grammar: per rule an epsilon-free automaton. Node ids are global. A node's byte edges
// [edge_begin, edge_end) consume one byte in [lo, hi]; its call edges [call_begin, call_end) enter `rule` and
// continue at `ret` when that rule completes; a final node may complete its rule.
struct ByteEdge {
  uint8_t lo = 0, hi = 0;
  int32_t target = 0;
};
struct CallEdge {
  RuleId rule = 0;
  int32_t ret = 0;
};
struct Node {
  RuleId rule = 0;
  bool final = false;
  int32_t edge_begin = 0, edge_end = 0;
  int32_t call_begin = 0, call_end = 0;
  bool has_bytes() const { return edge_end > edge_begin; }
};

struct CompiledGrammar {
  std::vector<Node> nodes;
  std::vector<ByteEdge> edges;
  std::vector<CallEdge> calls;
  std::vector<int32_t> rule_start;  // [num_rules]: the start node of each rule
  std::vector<std::string> rule_names;
  RuleId root = 0;
};

// Compiles the rule `root` (and every rule it reaches). Fails on an undefined reachable rule, on left recursion
// (a rule that can call itself before consuming a byte) and on the size limits.
Result<std::shared_ptr<const CompiledGrammar>> compile(const GrammarBuilder& builder, RuleId root);

// The UTF-8 byte-range sequences that encode exactly the code points of [lo, hi] (surrogates excluded).
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi);

}  // namespace rl::grammar
