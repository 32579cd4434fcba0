// Bad tokenizer files give clear errors at load time, each naming what is wrong.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace rl {
namespace {

// A minimal valid byte-level tokenizer.json with `patch` merged in (a null value removes the key).
std::string tokenizer_json(const Json& patch) {
  Json j = Json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 3, "content": "<eos>", "special": true, "lstrip": false, "rstrip": false,
                      "single_word": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]}
  })");
  j.merge_patch(patch);
  return j.dump();
}

std::string load_error(const std::string& json, const std::string& config = "") {
  auto t = Tokenizer::from_json(json, config);
  return t ? std::string("(loaded)") : t.message();
}

TEST(TokenizerErrors, BaseLoads) {
  auto t = Tokenizer::from_json(tokenizer_json(Json::object()), "");
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)->encode("abab<eos>", true), (std::vector<int32_t>{2, 2, 3}));
}

TEST(TokenizerErrors, MalformedJson) {
  EXPECT_NE(load_error("{\"model\": ").find("tokenizer.json: malformed JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("tokenizer.json: must be a JSON object"), std::string::npos);
  EXPECT_NE(load_error(tokenizer_json(Json::object()), "{oops")
                .find("tokenizer_config.json: malformed JSON"),
            std::string::npos);
}

TEST(TokenizerErrors, MissingModel) {
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": null})"))),
            "tokenizer.json: missing \"model\" object");
}

TEST(TokenizerErrors, UnknownModelType) {
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"type": "Unigram"}})"))),
            "tokenizer.json: model type \"Unigram\" is not supported (only BPE)");
}

TEST(TokenizerErrors, UnknownComponents) {
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(R"({"pre_tokenizer": {"type": "UnicodeScripts"}})"))),
      "tokenizer.json: pre_tokenizer type \"UnicodeScripts\" is not supported");
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(R"({"normalizer": {"type": "BertNormalizer"}})"))),
      "tokenizer.json: normalizer type \"BertNormalizer\" is not supported");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"decoder": {"type": "CTC"}})"))),
            "tokenizer.json: decoder type \"CTC\" is not supported");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"post_processor": {"type": "Mystery"}})"))),
            "tokenizer.json: post_processor type \"Mystery\" is not supported");
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(
          R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "FixedLength"}]}})"))),
      "tokenizer.json: pre_tokenizer.pretokenizers[1] type \"FixedLength\" is not supported");
}

// Sequence components nested 100,000 deep are refused at a fixed depth (each level is a recursion), with the
// path of the offending level; the file is built as text (nlohmann's copy constructor recurses).
TEST(TokenizerErrors, DeeplyNestedSequencesAreRefused) {
  const auto nested = [&](const char* field, const char* list, int depth) {
    std::string v;
    for (int k = 0; k < depth; ++k) v += std::string(R"({"type":"Sequence",")") + list + "\":[";
    for (int k = 0; k < depth; ++k) v += "]}";
    std::string j = tokenizer_json(Json{{field, nullptr}});  // the base without `field`
    j.insert(1, std::string("\"") + field + "\":" + v + ",");
    return j;
  };
  for (const auto& [field, list] : {std::pair{"normalizer", "normalizers"}, std::pair{"pre_tokenizer", "pretokenizers"},
                                    std::pair{"decoder", "decoders"}, std::pair{"post_processor", "processors"}}) {
    std::string msg = load_error(nested(field, list, 100000));
    EXPECT_NE(msg.find("Sequence nested deeper than 32 levels"), std::string::npos) << field << ": " << msg.substr(0, 300);
    EXPECT_EQ(load_error(nested(field, list, 3)), "(loaded)") << field;
  }
}

TEST(TokenizerErrors, MergesNamingUnknownTokens) {
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"merges": ["a c"]}})"))),
            "tokenizer.json: model: merges[0] names a token not in the vocab: \"c\"");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"merges": ["b a"]}})"))),
            "tokenizer.json: model: merges[0] result \"ba\" is not in the vocab");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"merges": ["ab"]}})"))),
            "tokenizer.json: model: merges[0] \"ab\" is not \"a b\"");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"merges": [["a"]]}})"))),
            "tokenizer.json: model: merges[0] must be \"a b\" or [a, b], got [\"a\"]");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"unk_token": "<unk>"}})"))),
            "tokenizer.json: model: unk_token \"<unk>\" is not in the vocab");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"model": {"dropout": 0.1}})"))),
            "tokenizer.json: model: BPE dropout 0.1 is not supported (only null)");
}

TEST(TokenizerErrors, BadAddedTokens) {
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"added_tokens": {"id": 1}})"))),
            "tokenizer.json: \"added_tokens\" must be an array");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(R"({"added_tokens": [{"content": "<x>"}]})"))),
            "tokenizer.json: added_tokens[0] needs an integer \"id\" in [0, 16777216]");
  EXPECT_EQ(load_error(
                tokenizer_json(Json::parse(R"({"added_tokens": [{"id": -1, "content": "<x>"}]})"))),
            "tokenizer.json: added_tokens[0] needs an integer \"id\" in [0, 16777216]");
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(R"({"added_tokens": [{"id": 5, "content": ""}]})"))),
      "tokenizer.json: added_tokens[0] needs a non-empty string \"content\"");
  EXPECT_EQ(load_error(tokenizer_json(Json::parse(
                R"({"added_tokens": [{"id": 5, "content": "<x>", "special": "yes"}]})"))),
            "tokenizer.json: added_tokens[0]: \"special\" must be a boolean");
}

TEST(TokenizerErrors, BadRegexIncludesPcre2Message) {
  std::string e = load_error(tokenizer_json(Json::parse(
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})")));
  EXPECT_NE(e.find("tokenizer.json: pre_tokenizer: Split: invalid regex \"(unclosed\": missing "
                   "closing parenthesis"),
            std::string::npos)
      << e;
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(
          R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"}})"))),
      "tokenizer.json: pre_tokenizer: Split: unknown split behavior \"Sideways\"");
  EXPECT_EQ(load_error(tokenizer_json(
                Json::parse(R"({"normalizer": {"type": "Replace", "pattern": {"Glob": "*"}}})"))),
            "tokenizer.json: normalizer: Replace: pattern must be an object {\"String\": ...} or "
            "{\"Regex\": ...}");
}

TEST(TokenizerErrors, BadTemplate) {
  EXPECT_EQ(
      load_error(tokenizer_json(Json::parse(
          R"({"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>"}}], "special_tokens": {}}})"))),
      "tokenizer.json: post_processor: single[0]: special token \"<bos>\" is not defined in "
      "special_tokens");
}

TEST(TokenizerErrors, MissingFolderOrFile) {
  auto t = Tokenizer::load("/nonexistent/model");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.message(), "/nonexistent/model: no tokenizer.json in this folder");
}

}  // namespace
}  // namespace rl
