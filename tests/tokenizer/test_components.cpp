// Components the seven real tokenizers do not exercise, on small hand-made tokenizer.json files.
// Expected ids follow the documented semantics of the Rust tokenizers (SplitDelimiterBehavior,
// Metaspace, Digits, added token lstrip/rstrip/single_word); each expectation is derived by hand in
// the comment beside it.
#include <gtest/gtest.h>

#include <thread>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace rl {
namespace {

// A BPE tokenizer whose vocab is `tokens` (id = index) with the given merges and components.
std::unique_ptr<Tokenizer> make(const std::vector<std::string>& tokens,
                                const std::vector<std::string>& merges,
                                const Json& components = Json::object(),
                                const Json& added = Json::array()) {
  Json vocab = Json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  Json j = {{"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", nullptr},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  j.merge_patch(components);
  auto t = Tokenizer::from_json(j.dump(), "");
  EXPECT_TRUE(t) << t.message();
  return t ? std::move(t).value() : nullptr;
}

using Ids = std::vector<int32_t>;

Json split(const std::string& behavior, bool invert = false) {
  return {{"pre_tokenizer",
           {{"type", "Split"},
            {"pattern", {{"String", "-"}}},
            {"behavior", behavior},
            {"invert", invert}}}};
}

TEST(Components, SplitBehaviors) {
  // 0:a 1:- 2:b 3:a- 4:-b 5:a-b 6:-- ; merges in rank order.
  std::vector<std::string> v = {"a", "-", "b", "a-", "-b", "a-b", "--"};
  std::vector<std::string> m = {"a -", "- b", "a- b", "- -"};
  EXPECT_EQ(make(v, m)->encode("a-b", false), (Ids{5}));  // one piece: a- then a-b
  EXPECT_EQ(make(v, m, split("Isolated"))->encode("a-b", false), (Ids{0, 1, 2}));  // a | - | b
  EXPECT_EQ(make(v, m, split("Removed"))->encode("a-b", false), (Ids{0, 2}));      // a | b
  EXPECT_EQ(make(v, m, split("MergedWithPrevious"))->encode("a-b", false), (Ids{3, 2}));  // a- | b
  EXPECT_EQ(make(v, m, split("MergedWithNext"))->encode("a-b", false), (Ids{0, 4}));      // a | -b
  EXPECT_EQ(make(v, m, split("Contiguous"))->encode("a--b", false), (Ids{0, 6, 2}));  // a | -- | b
  EXPECT_EQ(make(v, m, split("Isolated"))->encode("a--b", false),
            (Ids{0, 1, 1, 2}));  // a | - | - | b
  EXPECT_EQ(make(v, m, split("Removed", true))->encode("a-b", false),
            (Ids{1}));  // inverted: keep "-"
}

TEST(Components, MetaspacePreTokenizer) {
  // 0:▁ 1:h 2:i 3:▁h 4:▁hi 5:i▁ ; "i ▁" has the best rank, so without splitting "▁hi▁hi" merges i▁
  // first.
  std::vector<std::string> v = {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi",
                                "i\xE2\x96\x81"};
  std::vector<std::string> m = {"i \xE2\x96\x81", "\xE2\x96\x81 h", "\xE2\x96\x81h i"};
  auto meta = [](const std::string& scheme, bool split_pieces) {
    return Json{{"pre_tokenizer",
                 {{"type", "Metaspace"},
                  {"replacement", "\xE2\x96\x81"},
                  {"prepend_scheme", scheme},
                  {"split", split_pieces}}}};
  };
  EXPECT_EQ(make(v, m, meta("always", true))->encode("hi hi", false), (Ids{4, 4}));  // ▁hi | ▁hi
  EXPECT_EQ(make(v, m, meta("always", false))->encode("hi hi", false),
            (Ids{3, 5, 1, 2}));  // ▁h i▁ h i
  EXPECT_EQ(make(v, m, meta("never", true))->encode("hi hi", false), (Ids{1, 2, 4}));  // h i | ▁hi
  Json added = Json::array({{{"id", 6}, {"content", "<x>"}, {"special", true}}});
  auto first = make(v, m, meta("first", true), added);
  EXPECT_EQ(first->encode("hi<x>hi", false), (Ids{4, 6, 1, 2}));  // only section 0 gets the ▁
}

TEST(Components, Digits) {
  std::vector<std::string> v = {"a", "1", "2", "3", "12", "123", "a1"};
  std::vector<std::string> m = {"a 1", "1 2", "12 3"};
  auto digits = [](bool individual) {
    return Json{{"pre_tokenizer", {{"type", "Digits"}, {"individual_digits", individual}}}};
  };
  EXPECT_EQ(make(v, m)->encode("a123", false), (Ids{6, 2, 3}));  // a1 2 3 (a 1 ranks first)
  EXPECT_EQ(make(v, m, digits(false))->encode("a123", false), (Ids{0, 5}));       // a | 123
  EXPECT_EQ(make(v, m, digits(true))->encode("a123", false), (Ids{0, 1, 2, 3}));  // a | 1 | 2 | 3
}

TEST(Components, PunctuationWhitespaceSplit) {
  std::vector<std::string> v = {"a", "b", ",", "!", " ", "ab", "a,"};
  std::vector<std::string> m = {"a ,", "a b"};
  EXPECT_EQ(make(v, m, Json{{"pre_tokenizer", {{"type", "Punctuation"}}}})->encode("a,!b", false),
            (Ids{0, 2, 3, 1}));
  EXPECT_EQ(make(v, m)->encode("a,!b", false), (Ids{6, 3, 1}));
  EXPECT_EQ(
      make(v, m, Json{{"pre_tokenizer", {{"type", "WhitespaceSplit"}}}})->encode(" ab  a ", false),
      (Ids{5, 0}));
  EXPECT_EQ(make(v, m, Json{{"pre_tokenizer", {{"type", "Whitespace"}}}})->encode("ab a,!", false),
            (Ids{5, 0, 2, 3}));
}

TEST(Components, AddedTokenStripAndSingleWord) {
  std::vector<std::string> v = {"a", "b", " ", "c", "t", "o", "n", "s"};
  auto added = [](bool lstrip, bool rstrip, bool single_word) {
    return Json::array(
        {{{"id", 8}, {"content", "<m>"}, {"special", true}, {"lstrip", lstrip}, {"rstrip", rstrip}},
         {{"id", 9}, {"content", "cat"}, {"special", false}, {"single_word", single_word}}});
  };
  EXPECT_EQ(make(v, {}, Json::object(), added(false, false, false))->encode("a <m> b", false),
            (Ids{0, 2, 8, 2, 1}));
  EXPECT_EQ(make(v, {}, Json::object(), added(true, false, false))->encode("a  <m> b", false),
            (Ids{0, 8, 2, 1}));
  EXPECT_EQ(make(v, {}, Json::object(), added(false, true, false))->encode("a <m>  b", false),
            (Ids{0, 2, 8, 1}));
  // single_word: "cat" only when no letter/digit touches it: "cat" yes, "concat" no, "cats" no.
  EXPECT_EQ(
      make(v, {}, Json::object(), added(false, false, true))->encode("cat concat cats", false),
      (Ids{9, 2, 3, 5, 6, 3, 0, 4, 2, 3, 0, 4, 7}));
  EXPECT_EQ(make(v, {}, Json::object(), added(false, false, false))->encode("concat", false),
            (Ids{3, 5, 6, 9}));
}

TEST(Components, Normalizers) {
  std::vector<std::string> v = {"f", "i", "x", " ", "\xC3\xA4", "b", "_"};
  auto norm = [](const Json& n) { return Json{{"normalizer", n}}; };
  EXPECT_EQ(make(v, {}, norm({{"type", "NFKC"}}))->encode("\xEF\xAC\x81", false),
            (Ids{0, 1}));  // ﬁ → f i
  EXPECT_EQ(make(v, {}, norm({{"type", "NFC"}}))->encode("a\xCC\x88", false),
            (Ids{4}));  // a + U+0308 → ä
  EXPECT_EQ(make(v, {}, norm({{"type", "Lowercase"}}))
                ->encode("\xC3\x84"
                         "B",
                         false),
            (Ids{4, 5}));  // ÄB → äb
  EXPECT_EQ(make(v, {}, norm({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}))
                ->encode(" \t x \n", false),
            (Ids{2}));
  Json seq = {
      {"type", "Sequence"},
      {"normalizers",
       Json::array({{{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}},
                    {{"type", "Prepend"}, {"prepend", "x"}}})}};
  EXPECT_EQ(make(v, {}, norm(seq))->encode("f \t i", false), (Ids{2, 0, 6, 1}));  // "x" + "f_i"
}

TEST(Components, Decoders) {
  std::vector<std::string> v = {"\xE2\x96\x81hi", "<0xE4>", "<0xB8>", "<0xAD>", "<0xFF>", "x"};
  Json dec = {
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         Json::array(
             {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}}};
  auto t = make(v, {}, dec);
  EXPECT_EQ(t->decode(Ids{0, 1, 2, 3, 0}, false),
            "hi\xE4\xB8\xAD hi");                                      // 中 from three byte tokens
  EXPECT_EQ(t->decode(Ids{5, 1, 2, 5}, false), "x\xEF\xBF\xBDx");      // truncated 中: one U+FFFD
  EXPECT_EQ(t->decode(Ids{4, 1}, false), "\xEF\xBF\xBD\xEF\xBF\xBD");  // FF invalid, E4 truncated
  EXPECT_EQ(t->decode(Ids{-1, 99, 5}, false), "x");                    // unknown ids are skipped
  Json meta = {
      {"decoder",
       {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}}};
  EXPECT_EQ(make(v, {}, meta)->decode(Ids{0, 0}, false), "hi hi");
}

TEST(Components, ByteLevelRoundTripAndRegex) {
  // Byte-level alphabet (ids 0..255 in byte order), plus "Ġw" from the merge "Ġ w".
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(tok::byte_to_unicode()[b]);
  v.push_back("\xC4\xA0w");  // Ġw
  Json comp = {
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  auto t = make(v, {"\xC4\xA0 w"}, comp);
  // " wow" after the prefix space check (already starts with a space): pieces " wow" → Ġw o w.
  EXPECT_EQ(t->encode(" wow", false), (Ids{256, 'o', 'w'}));
  EXPECT_EQ(t->encode("w", false), (Ids{256}));  // add_prefix_space: "w" → " w"
  std::string bytes = "caf\xC3\xA9 \xF0\x9F\x98\x80 \x01\x7F";
  EXPECT_EQ(t->decode(t->encode(bytes, false), false), " " + bytes);
  // Invalid UTF-8 input is replaced by U+FFFD first.
  EXPECT_EQ(t->decode(t->encode("a\xFF", false), false), " a\xEF\xBF\xBD");
}

TEST(Components, Utf8LossyMaximalSubparts) {
  // The example of the Unicode Standard, section 3.9 (U+FFFD substitution of maximal subparts).
  EXPECT_EQ(tok::utf8_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d");
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(tok::utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(tok::utf8_lossy(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Components, VeryLongPieceIsNotQuadratic) {
  // One 400k-character piece (no pre-tokenizer) through a merge chain; the heap BPE does this in
  // well under a second, a quadratic rescan would take minutes.
  std::vector<std::string> v = {"a", "b", "ab", "abab"};
  auto t = make(v, {"a b", "ab ab"});
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "ab";
  auto ids = t->encode(text, false);
  EXPECT_EQ(ids, Ids(100000, 3));
}

TEST(Components, ConcurrentEncodeMatchesSerial) {
  const Tokenizer* t = tok_test::tokenizer("qwen3");
  ASSERT_NE(t, nullptr);
  const auto& lines = tok_test::corpus();
  std::vector<Ids> want;
  for (const auto& l : lines) want.push_back(t->encode(l.bytes, true));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t i = 0; i < lines.size(); ++i)
          mismatches[k] += t->encode(lines[(i + k * 7) % lines.size()].bytes, true) !=
                           want[(i + k * 7) % lines.size()];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

}  // namespace
}  // namespace rl
