// Parity with the JS reference (@huggingface/tokenizers) on the seven real tokenizers over the corpus of
// tests/data/tokenizer: encode with and without special tokens, decode with and without skip_special_tokens,
// and decoding of arbitrary id sequences.
#include <gtest/gtest.h>

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
  ASSERT_EQ(cases.size(), lines.size()) << "reference is stale: delete build/*/tokenizer_ref and rerun";
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
    EXPECT_EQ(dec, r["decoded"].get<std::string>()) << name << ": decode of random ids " << r["ids"].dump();
    EXPECT_EQ(dec_skip, r["decoded_skip"].get<std::string>()) << name << ": decode(skip) of random ids " << r["ids"].dump();
    if (dec != r["decoded"].get<std::string>() || dec_skip != r["decoded_skip"].get<std::string>()) ++num_failures;
  }
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, Parity, ::testing::ValuesIn(tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rl::tok_test
