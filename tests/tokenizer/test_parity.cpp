// Parity with the JS reference (@huggingface/tokenizers) on the seven real tokenizers over the
// corpus of tests/data/tokenizer: encode with and without special tokens, decode with and without
// skip_special_tokens, decoding of arbitrary id sequences, and the incremental detokenizer against
// decode().
#include <gtest/gtest.h>

#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace rl::tok_test {
namespace {

std::vector<int32_t> ids_of(const Json& j) { return j.get<std::vector<int32_t>>(); }

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, MatchesJsReference) {
  const std::string& name = GetParam();
  std::string error;
  const Json* ref = reference(name, &error);
  ASSERT_NE(ref, nullptr) << error;
  const Tokenizer* tok = tokenizer(name);
  ASSERT_NE(tok, nullptr);
  const auto& lines = corpus();
  const Json& cases = (*ref)["cases"];
  ASSERT_EQ(cases.size(), lines.size())
      << "reference is stale: delete build/*/tokenizer_ref and rerun";
  int num_failures = 0;
  for (size_t i = 0; i < lines.size() && num_failures < 10; ++i) {
    const Json& c = cases[i];
    ASSERT_EQ(c["name"].get<std::string>(), lines[i].name);
    SCOPED_TRACE(name + " / corpus line \"" + lines[i].name + "\"");
    auto ids = tok->encode(lines[i].bytes, true);
    auto ids_plain = tok->encode(lines[i].bytes, false);
    std::string d1 = describe_id_mismatch(*tok, ids, ids_of(c["ids"]));
    std::string d2 = describe_id_mismatch(*tok, ids_plain, ids_of(c["ids_plain"]));
    EXPECT_EQ(d1, "") << "encode(add_special_tokens=true)";
    EXPECT_EQ(d2, "") << "encode(add_special_tokens=false)";
    auto ref_ids = ids_of(c["ids"]);
    std::string dec = tok->decode(ref_ids, false);
    std::string dec_skip = tok->decode(ref_ids, true);
    EXPECT_EQ(dec, c["decoded"].get<std::string>()) << "decode(skip_special_tokens=false)";
    EXPECT_EQ(dec_skip, c["decoded_skip"].get<std::string>()) << "decode(skip_special_tokens=true)";
    if (!d1.empty() || !d2.empty() || dec != c["decoded"].get<std::string>()) ++num_failures;
  }
  num_failures = 0;
  for (const Json& r : (*ref)["random"]) {
    if (num_failures >= 10) break;
    auto ids = ids_of(r["ids"]);
    std::string dec = tok->decode(ids, false);
    std::string dec_skip = tok->decode(ids, true);
    EXPECT_EQ(dec, r["decoded"].get<std::string>())
        << name << ": decode of random ids " << r["ids"].dump();
    EXPECT_EQ(dec_skip, r["decoded_skip"].get<std::string>())
        << name << ": decode(skip) of random ids " << r["ids"].dump();
    if (dec != r["decoded"].get<std::string>() || dec_skip != r["decoded_skip"].get<std::string>())
      ++num_failures;
  }
}

// Streams ids through the detokenizer: every piece is valid UTF-8, the text so far is always a
// prefix of the final decode, and pieces + flush == decode(ids). Without clean-up, text is emitted
// as soon as it is final: whenever decode(prefix) ends in a complete character, everything up to it
// has been emitted.
void check_detokenizer(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                       const std::string& what) {
  IncrementalDetokenizer detok(tok, skip);
  std::string want = tok.decode(ids, skip);
  std::string got;
  constexpr size_t kEagerCheckIds = 200;  // the eager check decodes every prefix: keep it short
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = detok.push(ids[i]);
    ASSERT_TRUE(tok::is_valid_utf8(piece)) << what << ": piece " << i << " is not valid UTF-8";
    got += piece;
    ASSERT_EQ(want.compare(0, got.size(), got), 0)
        << what << ": after id " << i << " emitted " << Json(got).dump() << " is not a prefix of "
        << Json(want).dump();
    if (!tok.clean_up_tokenization_spaces() && i < kEagerCheckIds) {
      std::string prefix = tok.decode(std::span<const int32_t>(ids.data(), i + 1), skip);
      if (prefix.size() < 3 || prefix.compare(prefix.size() - 3, 3, tok::kReplacementChar) != 0) {
        ASSERT_EQ(got, prefix) << what << ": text held back after id " << i;
      }
    }
  }
  got += detok.flush();
  EXPECT_EQ(got, want) << what;
}

TEST_P(Parity, DetokenizerStreamsDecode) {
  const std::string& name = GetParam();
  std::string error;
  const Json* ref = reference(name, &error);
  ASSERT_NE(ref, nullptr) << error;
  const Tokenizer* tok = tokenizer(name);
  ASSERT_NE(tok, nullptr);
  for (const Json& c : (*ref)["cases"]) {
    for (bool skip : {false, true}) {
      check_detokenizer(*tok, ids_of(c["ids"]), skip, name + " / " + c["name"].get<std::string>());
    }
  }
  for (const Json& r : (*ref)["random"]) {
    for (bool skip : {false, true})
      check_detokenizer(*tok, ids_of(r["ids"]), skip, name + " / random " + r["ids"].dump());
  }
  // Leading spaces and special tokens before text (start-of-text effects of the decoders).
  std::vector<int32_t> specials;
  for (auto id : {tok->bos_id(), tok->eos_id()}) {
    if (id) specials.push_back(*id);
  }
  // A lone space token ("▁" decodes to "" at the very start but to " " before another token).
  for (const char* space : {"\xE2\x96\x81", "\xC4\xA0", " "}) {
    auto id = tok->token_to_id(space);
    if (!id) continue;
    for (size_t i = 0; i < 10 && i < corpus().size(); ++i) {
      std::vector<int32_t> ids = {*id};
      auto more = tok->encode(corpus()[i].bytes, false);
      ids.insert(ids.end(), more.begin(), more.end());
      for (bool skip : {false, true})
        check_detokenizer(*tok, ids, skip, name + " / space token + " + corpus()[i].name);
    }
  }
  const auto& lines = corpus();
  for (size_t i = 0; i < 20 && i < lines.size(); ++i) {
    for (const char* prefix : {" ", "  ", "\n "}) {
      std::vector<int32_t> ids = tok->encode(prefix, false);
      ids.insert(ids.end(), specials.begin(), specials.end());
      auto more = tok->encode(std::string(prefix) + lines[i].bytes, false);
      ids.insert(ids.end(), more.begin(), more.end());
      for (bool skip : {false, true})
        check_detokenizer(*tok, ids, skip, name + " / prefixed " + lines[i].name);
    }
  }
  // Out-of-range and negative ids are skipped, never a crash.
  check_detokenizer(*tok, {-5, tok->vocab_size(), 1000, -1, INT32_MAX, 1001}, false,
                    name + " / invalid ids");
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, Parity, ::testing::ValuesIn(tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rl::tok_test
