// StopMatcher: adversarial hand-made cases, and a randomized comparison with a plain search over
// the whole text.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/stop_matcher.h"

namespace rl {
namespace {

// Feeds pieces; returns everything emitted (plus flush() when nothing matched) and the matched
// stop.
std::pair<std::string, std::optional<size_t>> run(std::vector<std::string> stops,
                                                  const std::vector<std::string>& pieces) {
  StopMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    auto o = m.push(p);
    out += o.text;
    if (o.stop_index) return {out, o.stop_index};
  }
  out += m.flush();
  return {out, std::nullopt};
}

TEST(StopMatcher, StopSpanningPieces) {
  auto [text, stop] = run({"<|im_end|>"}, {"Hello <|", "im", "_e", "nd|> after"});
  EXPECT_EQ(text, "Hello ");
  EXPECT_EQ(stop, 0u);
}

TEST(StopMatcher, HoldsOnlyPossiblePrefix) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abc S").text, "abc ");
  EXPECT_EQ(m.push("T").text, "");
  EXPECT_EQ(m.push("x").text, "STx");  // "STx" can no longer start STOP
  EXPECT_EQ(m.push("ST").text, "");
  EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, StopAtVeryStart) {
  auto [text, stop] = run({"</s>"}, {"</s>hello"});
  EXPECT_EQ(text, "");
  EXPECT_EQ(stop, 0u);
}

TEST(StopMatcher, RepeatedPartialPrefixes) {
  auto [text, stop] = run({"aab"}, {"a", "a", "a", "a", "b", "tail"});
  EXPECT_EQ(text, "aa");
  EXPECT_EQ(stop, 0u);
  auto [t2, s2] = run({"abab"}, {"ab", "ab", "a", "c"});
  EXPECT_EQ(t2, "");
  EXPECT_EQ(s2, 0u);
  auto [t3, s3] = run({"abac"}, {"ab", "ab", "ac"});
  EXPECT_EQ(t3, "ab");
  EXPECT_EQ(s3, 0u);
}

TEST(StopMatcher, OverlappingStopsEarliestStartWins) {
  auto [text, stop] = run({"bcd", "abc"}, {"xab", "cd"});
  EXPECT_EQ(text, "x");
  EXPECT_EQ(stop, 1u);
  auto [t2, s2] = run({"abc", "b"}, {"zab"});  // "b" is complete and starts first
  EXPECT_EQ(t2, "za");
  EXPECT_EQ(s2, 1u);
  auto [t3, s3] = run({"ab", "abc"}, {"xabc"});  // same start: the one listed first
  EXPECT_EQ(t3, "x");
  EXPECT_EQ(s3, 0u);
}

TEST(StopMatcher, IgnoresInputAfterMatchAndEmptyStops) {
  StopMatcher m({"", "END"});
  auto o = m.push("the END is here");
  EXPECT_EQ(o.text, "the ");
  EXPECT_EQ(o.stop_index, 1u);
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("more").text, "");
  EXPECT_EQ(m.flush(), "");
  auto [text, stop] = run({}, {"a", "b"});
  EXPECT_EQ(text, "ab");
  EXPECT_FALSE(stop);
}

TEST(StopMatcher, MultiByteStopKeepsUtf8Whole) {
  StopMatcher m({"。\n"});
  EXPECT_EQ(m.push("你好。").text, "你好");
  EXPECT_EQ(m.push("再见").text, "。再见");
  auto o = m.push("。\n");
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(o.stop_index, 0u);
}

// Random texts over a tiny alphabet (many partial matches), random piece boundaries. Reference:
// after each piece, search the whole text seen so far; the first time any stop occurs, the earliest
// start wins (ties: the first listed) and the text before it is the output.
TEST(StopMatcher, RandomizedAgainstWholeTextSearch) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    auto rand_str = [&](int max_len) {
      std::string s;
      int n = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_len));
      for (int i = 0; i < n; ++i) s += static_cast<char>('a' + rng() % 3);
      return s;
    };
    std::vector<std::string> stops;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) stops.push_back(rand_str(4));
    std::string text = rand_str(30);
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      size_t n = 1 + rng() % 4;
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    std::string want = text;
    std::optional<size_t> want_stop;
    std::string seen;
    for (const auto& p : pieces) {
      seen += p;
      size_t best_pos = std::string::npos, best = 0;
      for (size_t i = 0; i < stops.size(); ++i) {
        size_t pos = seen.find(stops[i]);
        if (pos < best_pos) best_pos = pos, best = i;
      }
      if (best_pos != std::string::npos) {
        want = seen.substr(0, best_pos);
        want_stop = best;
        break;
      }
    }
    auto [got, stop] = run(stops, pieces);
    EXPECT_EQ(got, want) << text;
    EXPECT_EQ(stop, want_stop) << text;
  }
}

}  // namespace
}  // namespace rl
