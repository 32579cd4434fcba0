#include "grammar/grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace rl::grammar {

// --- builder ---

ExprId GrammarBuilder::add(Expr e) {
  if (static_cast<int32_t>(exprs_.size()) >= kMaxExprs) {
    fail("grammar too large: more than " + std::to_string(kMaxExprs) + " expressions");
    if (exprs_.empty()) exprs_.push_back(Expr{});
    return 0;
  }
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

RuleId GrammarBuilder::declare(std::string name) {
  rules_.push_back(Rule{std::move(name), -1});
  return static_cast<RuleId>(rules_.size() - 1);
}

void GrammarBuilder::define(RuleId rule, ExprId body) { rules_[rule].body = body; }

RuleId GrammarBuilder::find(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<RuleId>(i);
  return -1;
}

ExprId GrammarBuilder::empty() { return add(Expr{}); }

ExprId GrammarBuilder::literal(std::string_view bytes) {
  if (bytes.empty()) return empty();
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = std::string(bytes);
  return add(std::move(e));
}

ExprId GrammarBuilder::char_class(std::vector<CodeRange> ranges, bool negated) {
  // Normalize: clamp to scalar values, sort, merge, complement if negated, drop surrogates.
  std::vector<CodeRange> rs;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) std::swap(lo, hi);
    if (lo > 0x10FFFF) continue;
    rs.push_back({lo, std::min<char32_t>(hi, 0x10FFFF)});
  }
  std::sort(rs.begin(), rs.end());
  std::vector<CodeRange> merged;
  for (const auto& r : rs) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodeRange> comp;
    char32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) comp.push_back({next, r.first - 1});
      next = r.second + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged.swap(comp);
  }
  std::vector<CodeRange> out;
  for (auto [lo, hi] : merged) {  // cut out the surrogates D800-DFFF
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  Expr e;
  e.kind = ExprKind::kClass;
  e.ranges = std::move(out);
  return add(std::move(e));
}

ExprId GrammarBuilder::seq(std::vector<ExprId> parts) {
  if (parts.empty()) return empty();
  if (parts.size() == 1) return parts[0];
  Expr e;
  e.kind = ExprKind::kSeq;
  e.children = std::move(parts);
  return add(std::move(e));
}

ExprId GrammarBuilder::alt(std::vector<ExprId> options) {
  if (options.size() == 1) return options[0];
  Expr e;
  e.kind = ExprKind::kAlt;  // no options: matches nothing
  e.children = std::move(options);
  return add(std::move(e));
}

ExprId GrammarBuilder::repeat(ExprId body, int32_t min, int32_t max) {
  if (min < 0 || (max != kUnbounded && max < min) || min > kMaxRepeat || max > kMaxRepeat) {
    fail("repetition bounds {" + std::to_string(min) + "," + std::to_string(max) + "} out of range (at most " +
         std::to_string(kMaxRepeat) + ")");
    return empty();
  }
  if (min == 1 && max == 1) return body;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.children = {body};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

ExprId GrammarBuilder::ref(RuleId rule) {
  Expr e;
  e.kind = ExprKind::kRef;
  e.rule = rule;
  return add(std::move(e));
}

// --- UTF-8 ranges ---

namespace {

int utf8_len(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }
char32_t max_of_len(int n) { return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : 0x10FFFF; }

void encode(char32_t cp, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  static const uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// Splits [lo, hi] (same encoded length n) into ranges whose encodings differ only in a suffix of full
// continuation ranges, the classic construction (as in RE2 / Rust's regex-syntax utf8 module).
void split_same_len(char32_t lo, char32_t hi, int n, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  for (int i = 1; i < n; ++i) {
    const char32_t m = (1u << (6 * i)) - 1;  // the low bits covered by i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_len(lo, lo | m, n, out);
        split_same_len((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_len(lo, (hi & ~m) - 1, n, out);
        split_same_len(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, n, a);
  encode(hi, n, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not scalar values
    if (lo < 0xD800) out = utf8_sequences(lo, 0xD7FF);
    if (hi > 0xDFFF) {
      auto more = utf8_sequences(0xE000, hi);
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }
  while (lo <= hi) {
    const int n = utf8_len(lo);
    const char32_t end = std::min(hi, max_of_len(n));
    split_same_len(lo, end, n, &out);
    if (end == 0x10FFFF) break;
    lo = end + 1;
  }
  return out;
}

// --- compilation ---

namespace {

// One rule's automaton with epsilon edges, before elimination.
struct TNode {
  std::vector<int32_t> eps;
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;
};

class Compiler {
 public:
  explicit Compiler(const GrammarBuilder& b) : b_(b) {}

  Result<std::shared_ptr<const CompiledGrammar>> run(RuleId root) {
    RL_RETURN_IF_ERROR(b_.status());
    if (root < 0 || root >= b_.num_rules()) return Status::error("grammar has no root rule");
    // Rule bodies: the builder's rules, then helper rules made for large repeated bodies.
    for (RuleId r = 0; r < b_.num_rules(); ++r) {
      bodies_.push_back(b_.rule_body(r));
      names_.push_back(b_.rule_name(r));
    }
    g_ = std::make_shared<CompiledGrammar>();
    g_->root = root;
    rule_done_.assign(bodies_.size(), false);
    g_->rule_start.assign(bodies_.size(), -1);
    std::vector<RuleId> todo = {root};
    rule_done_[root] = true;
    while (!todo.empty()) {
      RuleId r = todo.back();
      todo.pop_back();
      if (bodies_[r] < 0) return Status::error("grammar rule '" + names_[r] + "' is referenced but not defined");
      RL_RETURN_IF_ERROR(compile_rule(r, &todo));
    }
    g_->rule_start.resize(bodies_.size(), -1);
    g_->rule_names = names_;
    RL_RETURN_IF_ERROR(check_left_recursion());
    return std::shared_ptr<const CompiledGrammar>(std::move(g_));
  }

 private:
  int32_t new_node() {
    t_.emplace_back();
    return static_cast<int32_t>(t_.size() - 1);
  }

  bool simple(ExprId e) const {
    const Expr& x = b_.expr(e);
    return x.kind == ExprKind::kClass || x.kind == ExprKind::kRef || x.kind == ExprKind::kEmpty ||
           (x.kind == ExprKind::kBytes && x.bytes.size() <= 8);
  }

  // Small non-recursive rules are inlined where they are referenced: a call boundary makes every token that
  // crosses it context-dependent for the mask cache (a JSON string's characters as a rule of their own would make
  // every multi-character token uncertain). Returns the inlined expression size, or -1 when not inlinable.
  int32_t inline_size(RuleId r) {
    if (inline_memo_.size() < static_cast<size_t>(b_.num_rules())) inline_memo_.resize(b_.num_rules(), -2);
    int32_t& memo = inline_memo_[r];
    if (memo != -2) return memo == -3 ? -1 : memo;
    memo = -3;  // in progress: a cycle makes the rule not inlinable
    int32_t size = 0;
    if (bodies_[r] < 0) return -1;
    std::vector<ExprId> st = {bodies_[r]};
    while (!st.empty() && size >= 0) {
      const Expr& x = b_.expr(st.back());
      st.pop_back();
      size += x.kind == ExprKind::kClass ? static_cast<int32_t>(x.ranges.size()) : 1;
      if (x.kind == ExprKind::kRepeat && (x.min > 4 || x.max > 4 || x.max == kUnbounded)) size += 8;
      if (x.kind == ExprKind::kRef) {
        const int32_t sub = x.rule >= 0 && x.rule < b_.num_rules() ? inline_size(x.rule) : -1;
        size = sub < 0 ? -1 : size + sub;
      }
      for (ExprId c : x.children) st.push_back(c);
      if (size > kMaxInlineSize) size = -1;
    }
    memo = size < 0 ? -3 : size;
    return size;
  }
  static constexpr int32_t kMaxInlineSize = 64;
  static constexpr int64_t kMaxInlineCopies = 8192;

  RuleId helper_rule(ExprId body, RuleId parent) {
    auto it = helper_of_.find(body);
    if (it != helper_of_.end()) return it->second;
    RuleId r = static_cast<RuleId>(bodies_.size());
    bodies_.push_back(body);
    names_.push_back(names_[parent] + "_rep" + std::to_string(r));
    rule_done_.push_back(false);
    helper_of_[body] = r;
    return r;
  }

  Status frag(ExprId e, int32_t from, int32_t to, RuleId rule, std::vector<RuleId>* todo, int depth) {
    if (depth > 2000) return Status::error("grammar expression nested too deeply");
    if (static_cast<int64_t>(t_.size()) + total_nodes_ > kMaxNodes)
      return Status::error("grammar too large: more than " + std::to_string(kMaxNodes) + " automaton states");
    const Expr& x = b_.expr(e);
    switch (x.kind) {
      case ExprKind::kEmpty:
        t_[from].eps.push_back(to);
        return Status::ok();
      case ExprKind::kBytes: {
        int32_t cur = from;
        for (size_t i = 0; i < x.bytes.size(); ++i) {
          int32_t next = i + 1 == x.bytes.size() ? to : new_node();
          uint8_t c = static_cast<uint8_t>(x.bytes[i]);
          t_[cur].bytes.push_back({c, c, next});
          cur = next;
        }
        return Status::ok();
      }
      case ExprKind::kClass: {
        // Sequences sharing a prefix of byte ranges share nodes, so a class costs about as many nodes as
        // distinct lead ranges.
        std::map<std::vector<std::pair<uint8_t, uint8_t>>, int32_t> prefix_node;
        for (const auto& [lo, hi] : x.ranges) {
          for (const auto& s : utf8_sequences(lo, hi)) {
            int32_t cur = from;
            std::vector<std::pair<uint8_t, uint8_t>> prefix;
            for (size_t i = 0; i < s.size(); ++i) {
              prefix.push_back(s[i]);
              if (i + 1 == s.size()) {
                t_[cur].bytes.push_back({s[i].first, s[i].second, to});
                break;
              }
              auto it = prefix_node.find(prefix);
              if (it == prefix_node.end()) {
                int32_t n = new_node();
                t_[cur].bytes.push_back({s[i].first, s[i].second, n});
                it = prefix_node.emplace(prefix, n).first;
              }
              cur = it->second;
            }
          }
        }
        return Status::ok();
      }
      case ExprKind::kSeq: {
        int32_t cur = from;
        for (size_t i = 0; i < x.children.size(); ++i) {
          int32_t next = i + 1 == x.children.size() ? to : new_node();
          RL_RETURN_IF_ERROR(frag(x.children[i], cur, next, rule, todo, depth + 1));
          cur = next;
        }
        return Status::ok();
      }
      case ExprKind::kAlt:
        for (ExprId c : x.children) RL_RETURN_IF_ERROR(frag(c, from, to, rule, todo, depth + 1));
        return Status::ok();
      case ExprKind::kRef:
        if (x.rule >= 0 && x.rule < b_.num_rules() && inline_size(x.rule) >= 0)
          return frag(bodies_[x.rule], from, to, rule, todo, depth + 1);
        t_[from].calls.push_back({x.rule, to});
        if (x.rule < 0 || x.rule >= static_cast<RuleId>(bodies_.size()))
          return Status::error("grammar references an unknown rule");
        if (!rule_done_[x.rule]) {
          rule_done_[x.rule] = true;
          todo->push_back(x.rule);
        }
        return Status::ok();
      case ExprKind::kRepeat: {
        ExprId body = x.children[0];
        const bool copies = x.min > 1 || (x.max != kUnbounded && x.max > 1);
        if (copies && !simple(body)) {
          RuleId h = helper_rule(body, rule);
          if (!rule_done_[h]) {
            rule_done_[h] = true;
            todo->push_back(h);
          }
          body = -1 - h;  // marker: call the helper rule
        }
        auto one = [&](int32_t a, int32_t z) -> Status {
          if (body < 0) {
            t_[a].calls.push_back({-1 - body, z});
            return Status::ok();
          }
          const Expr& bx = b_.expr(body);
          // Many copies of an inlinable rule: call it instead once the copies would pass kMaxInlineCopies nodes.
          if (bx.kind == ExprKind::kRef &&
              static_cast<int64_t>(std::max(x.min, x.max)) * std::max(inline_size(bx.rule), 1) > kMaxInlineCopies) {
            t_[a].calls.push_back({bx.rule, z});
            if (!rule_done_[bx.rule]) {
              rule_done_[bx.rule] = true;
              todo->push_back(bx.rule);
            }
            return Status::ok();
          }
          return frag(body, a, z, rule, todo, depth + 1);
        };
        int32_t cur = from;
        for (int32_t i = 0; i < x.min; ++i) {
          int32_t next = new_node();
          RL_RETURN_IF_ERROR(one(cur, next));
          cur = next;
        }
        if (x.max == kUnbounded) {
          int32_t loop = new_node();
          t_[cur].eps.push_back(loop);
          int32_t back = new_node();
          RL_RETURN_IF_ERROR(one(loop, back));
          t_[back].eps.push_back(loop);
          t_[loop].eps.push_back(to);
          return Status::ok();
        }
        for (int32_t i = x.min; i < x.max; ++i) {
          t_[cur].eps.push_back(to);
          int32_t next = new_node();
          RL_RETURN_IF_ERROR(one(cur, next));
          cur = next;
        }
        t_[cur].eps.push_back(to);
        return Status::ok();
      }
    }
    return Status::ok();
  }

  Status compile_rule(RuleId r, std::vector<RuleId>* todo) {
    t_.clear();
    const int32_t start = new_node(), end = new_node();
    RL_RETURN_IF_ERROR(frag(bodies_[r], start, end, r, todo, 0));
    // Epsilon elimination: node n gets the byte and call edges of every node in its epsilon closure, and is
    // final when the closure holds `end`. Then only nodes reachable from `start` are kept.
    const int32_t n = static_cast<int32_t>(t_.size());
    std::vector<int32_t> mark(n, -1), stack, closure;
    std::vector<int32_t> id(n, -1);
    std::vector<int32_t> order = {start};
    id[start] = 0;
    struct Out {
      bool final = false;
      std::vector<ByteEdge> bytes;
      std::vector<CallEdge> calls;
    };
    std::vector<Out> outs;
    int64_t work = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const int32_t v = order[k];
      closure.clear();
      stack = {v};
      mark[v] = v;
      while (!stack.empty()) {
        int32_t u = stack.back();
        stack.pop_back();
        closure.push_back(u);
        for (int32_t w : t_[u].eps)
          if (mark[w] != v) {
            mark[w] = v;
            stack.push_back(w);
          }
      }
      work += static_cast<int64_t>(closure.size());
      if (work > 8 * static_cast<int64_t>(kMaxNodes))
        return Status::error("grammar too large: epsilon closure work exceeds its bound");
      Out o;
      auto target = [&](int32_t w) {
        if (id[w] < 0) {
          id[w] = static_cast<int32_t>(order.size());
          order.push_back(w);
        }
        return id[w];
      };
      for (int32_t u : closure) {
        if (u == end) o.final = true;
        for (const ByteEdge& e : t_[u].bytes) o.bytes.push_back({e.lo, e.hi, target(e.target)});
        for (const CallEdge& c : t_[u].calls) o.calls.push_back({c.rule, target(c.ret)});
      }
      std::sort(o.bytes.begin(), o.bytes.end(), [](const ByteEdge& a, const ByteEdge& b) {
        return a.lo != b.lo ? a.lo < b.lo : a.hi != b.hi ? a.hi < b.hi : a.target < b.target;
      });
      o.bytes.erase(std::unique(o.bytes.begin(), o.bytes.end(),
                                [](const ByteEdge& a, const ByteEdge& b) {
                                  return a.lo == b.lo && a.hi == b.hi && a.target == b.target;
                                }),
                    o.bytes.end());
      outs.push_back(std::move(o));
    }
    const int32_t base = static_cast<int32_t>(g_->nodes.size());
    if (g_->rule_start.size() <= static_cast<size_t>(r)) g_->rule_start.resize(r + 1, -1);
    total_nodes_ += static_cast<int64_t>(outs.size());
    if (total_nodes_ > kMaxNodes)
      return Status::error("grammar too large: more than " + std::to_string(kMaxNodes) + " automaton states");
    g_->rule_start[r] = base;
    for (const Out& o : outs) {
      Node nd;
      nd.rule = r;
      nd.final = o.final;
      nd.edge_begin = static_cast<int32_t>(g_->edges.size());
      for (ByteEdge e : o.bytes) {
        e.target += base;
        g_->edges.push_back(e);
      }
      nd.edge_end = static_cast<int32_t>(g_->edges.size());
      nd.call_begin = static_cast<int32_t>(g_->calls.size());
      for (CallEdge c : o.calls) {
        c.ret += base;
        g_->calls.push_back(c);
      }
      nd.call_end = static_cast<int32_t>(g_->calls.size());
      g_->nodes.push_back(nd);
    }
    return Status::ok();
  }

  // Nullable rules by fixpoint, then the graph "r may call s before consuming a byte"; a cycle is left recursion,
  // which a top-down pushdown matcher cannot run.
  Status check_left_recursion() {
    const CompiledGrammar& g = *g_;
    const size_t num_rules = g.rule_start.size();
    std::vector<uint8_t> nullable(num_rules, 0);
    // Nodes reachable from a rule's start without consuming bytes (through nullable calls).
    auto nullable_reach = [&](RuleId r, std::vector<int32_t>* nodes) {
      nodes->clear();
      std::vector<int32_t> st = {g.rule_start[r]};
      std::unordered_map<int32_t, bool> seen{{g.rule_start[r], true}};
      while (!st.empty()) {
        int32_t v = st.back();
        st.pop_back();
        nodes->push_back(v);
        for (int32_t c = g.nodes[v].call_begin; c < g.nodes[v].call_end; ++c)
          if (nullable[g.calls[c].rule] && !seen[g.calls[c].ret]) {
            seen[g.calls[c].ret] = true;
            st.push_back(g.calls[c].ret);
          }
      }
    };
    std::vector<int32_t> nodes;
    for (bool changed = true; changed;) {
      changed = false;
      for (RuleId r = 0; r < static_cast<RuleId>(num_rules); ++r) {
        if (g.rule_start[r] < 0 || nullable[r]) continue;
        nullable_reach(r, &nodes);
        for (int32_t v : nodes)
          if (g.nodes[v].final) {
            nullable[r] = 1;
            changed = true;
            break;
          }
      }
    }
    std::vector<std::vector<RuleId>> first_calls(num_rules);
    for (RuleId r = 0; r < static_cast<RuleId>(num_rules); ++r) {
      if (g.rule_start[r] < 0) continue;
      nullable_reach(r, &nodes);
      for (int32_t v : nodes)
        for (int32_t c = g.nodes[v].call_begin; c < g.nodes[v].call_end; ++c)
          first_calls[r].push_back(g.calls[c].rule);
    }
    std::vector<uint8_t> color(num_rules, 0);  // 0 new, 1 on the DFS path, 2 done
    for (RuleId s = 0; s < static_cast<RuleId>(num_rules); ++s) {
      if (color[s] || g.rule_start[s] < 0) continue;
      std::vector<std::pair<RuleId, size_t>> st = {{s, 0}};
      color[s] = 1;
      while (!st.empty()) {
        auto& [r, i] = st.back();
        if (i < first_calls[r].size()) {
          RuleId t = first_calls[r][i++];
          if (color[t] == 1) return Status::error("grammar rule '" + names_[t] + "' is left-recursive");
          if (color[t] == 0) {
            color[t] = 1;
            st.push_back({t, 0});
          }
        } else {
          color[r] = 2;
          st.pop_back();
        }
      }
    }
    return Status::ok();
  }

  const GrammarBuilder& b_;
  std::vector<ExprId> bodies_;
  std::vector<std::string> names_;
  std::vector<bool> rule_done_;
  std::unordered_map<ExprId, RuleId> helper_of_;
  std::vector<int32_t> inline_memo_;  // per builder rule: -2 unknown, -3 not inlinable, else size
  std::vector<TNode> t_;
  int64_t total_nodes_ = 0;
  std::shared_ptr<CompiledGrammar> g_;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> compile(const GrammarBuilder& builder, RuleId root) {
  return Compiler(builder).run(root);
}

}  // namespace rl::grammar
