// Structured outputs below HTTP on the test device (RIDGELINE_TEST_DEVICE=cuda on the GPU machine, the CPU
// otherwise): a completions body with response_format / guided_* → parse_completion_request → the compiled
// grammar's TokenConstraint → its masks applied by the device sampler inside a batch of constrained rows. Every
// output of the default model must parse and meet its schema, greedy and sampled, and a greedy constrained output
// is the same alone and in a batch.
#include <gtest/gtest.h>

#include <regex>

#include "core/json.h"
#include "engine_test_util.h"
#include "runtime/engine.h"
#include "server/openai_request.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace rl::server {
namespace {

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<StructuredContext> structured;
  std::unique_ptr<Engine> engine;
  ModelContext ctx;
};

Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    auto t = Tokenizer::load(test_util::tiny_model_dir());
    EXPECT_TRUE(t.is_ok()) << t.message();
    if (t.is_ok()) x.tokenizer = std::move(t).value();
    EngineConfig c = test_util::tiny_engine_config(64ll << 20);
    c.max_num_seqs = 16;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.is_ok()) << e.message();
    if (e.is_ok()) x.engine = std::move(e).value();
    if (!x.tokenizer || !x.engine) return x;
    std::vector<int32_t> eos;
    for (int64_t id : x.engine->model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
    auto sc = StructuredContext::create(*x.tokenizer, "", eos, "none", "none");
    EXPECT_TRUE(sc.is_ok()) << sc.message();
    if (sc.is_ok()) x.structured = std::move(sc).value();
    x.ctx.served_model_name = "ridgeline-tiny";
    x.ctx.tokenizer = x.tokenizer.get();
    x.ctx.generation_config = &x.engine->generation_config();
    x.ctx.vocab_size = static_cast<int32_t>(x.engine->model_config().vocab_size);
    x.ctx.max_model_len = 1024;
    x.ctx.structured = x.structured.get();
    return x;
  }();
  return f;
}

// The engine's outputs for a completions body: its prompt repeated `copies` times, one batch.
std::vector<std::string> run(const OrderedJson& body, int copies) {
  Fixture& f = fixture();
  GenerationRequest r;
  const MaybeError err = parse_completion_request(body, f.ctx, &r);
  EXPECT_FALSE(err.has_value()) << (err ? err->message : "");
  if (err || !r.params.constraint) return {};
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < copies; ++i) prompts.push_back(r.prompts.at(0));
  std::vector<std::string> texts;
  for (const auto& choices : f.engine->generate(prompts, r.params)) {
    EXPECT_NE(choices.at(0).finish, FinishReason::kError) << choices.at(0).error;
    texts.push_back(f.tokenizer->decode(choices.at(0).token_ids, true));
  }
  return texts;
}

TEST(StructuredEngine, JsonSchemaOutputsValidateGreedyAndSampled) {
  Fixture& f = fixture();
  ASSERT_TRUE(f.engine && f.structured);
  const OrderedJson schema = parse_ordered_json(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "tier": {"enum": ["gold", "silver", "bronze"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3}},
      "required": ["name", "age", "tier", "tags"], "additionalProperties": false})",
                                                 "schema")
                                   .value();
  for (const double temperature : {0.0, 1.0}) {
    OrderedJson body = {{"model", "ridgeline-tiny"},
                        {"prompt", "A person record:"},
                        {"max_tokens", 120},
                        {"temperature", temperature},
                        {"seed", 7},
                        {"response_format", {{"type", "json_schema"},
                                             {"json_schema", {{"name", "person"}, {"schema", schema}}}}}};
    const std::vector<std::string> outs = run(body, 8);
    ASSERT_EQ(outs.size(), 8u);
    for (const std::string& text : outs) {
      auto j = parse_ordered_json(text, "output");
      ASSERT_TRUE(j.is_ok()) << "temperature " << temperature << ": not JSON: " << text;
      const OrderedJson& v = *j;
      ASSERT_TRUE(v.is_object()) << text;
      EXPECT_EQ(v.size(), 4u) << text;
      ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
      EXPECT_LE(v["name"].get<std::string>().size(), 8u) << text;
      ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << text;
      EXPECT_GE(v["age"].get<int64_t>(), 0) << text;
      EXPECT_LE(v["age"].get<int64_t>(), 120) << text;
      ASSERT_TRUE(v.contains("tier") && v["tier"].is_string()) << text;
      const std::string tier = v["tier"].get<std::string>();
      EXPECT_TRUE(tier == "gold" || tier == "silver" || tier == "bronze") << text;
      ASSERT_TRUE(v.contains("tags") && v["tags"].is_array()) << text;
      EXPECT_LE(v["tags"].size(), 3u) << text;
    }
    if (temperature == 0.0) {
      for (const std::string& text : outs) EXPECT_EQ(text, outs[0]) << "greedy rows of one batch differ";
      const std::vector<std::string> alone = run(body, 1);
      ASSERT_EQ(alone.size(), 1u);
      EXPECT_EQ(alone[0], outs[0]) << "greedy: alone and in a batch of 8 differ";
    }
  }
}

TEST(StructuredEngine, GuidedRegexAndChoiceHoldInABatch) {
  Fixture& f = fixture();
  ASSERT_TRUE(f.engine && f.structured);
  OrderedJson regex_body = {{"model", "ridgeline-tiny"}, {"prompt", "Phone:"},  {"max_tokens", 40},
                            {"temperature", 1.0},       {"seed", 3},           {"guided_regex", "[0-9]{3}-[0-9]{4}"}};
  for (const std::string& text : run(regex_body, 12)) {
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{3}-[0-9]{4}"))) << text;
  }
  OrderedJson choice_body = {{"model", "ridgeline-tiny"},
                             {"prompt", "Answer:"},
                             {"max_tokens", 16},
                             {"temperature", 1.0},
                             {"seed", 5},
                             {"guided_choice", {"yes", "no", "maybe later"}}};
  for (const std::string& text : run(choice_body, 12)) {
    EXPECT_TRUE(text == "yes" || text == "no" || text == "maybe later") << text;
  }
}

}  // namespace
}  // namespace rl::server
