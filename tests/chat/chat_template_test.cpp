// ChatTemplate: template selection from tokenizer_config.json and the variables transformers passes.
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"

namespace rl {
namespace {

ChatTemplateInputs user_says(const std::string& text) {
  ChatTemplateInputs in;
  in.messages = OrderedJson::array({{{"role", "user"}, {"content", text}}});
  return in;
}

TEST(ChatTemplate, SpecialTokensAsStringsOrAddedTokens) {
  auto config = OrderedJson::parse(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "unk_token": null,
    "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ messages[0].content }}"})");
  auto t = ChatTemplate::from_tokenizer_config(config, "tokenizer_config.json");
  ASSERT_TRUE(t) << t.message();
  auto out = t->apply(user_says("hi"));
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(*out, "<s>|</s>|False|hi");
}

TEST(ChatTemplate, NamedTemplatesPickToolUseOnlyWithTools) {
  auto config = OrderedJson::parse(R"({"chat_template": [
    {"name": "default", "template": "default:{{ tools }}"},
    {"name": "tool_use", "template": "tool_use:{{ tools | length }}"},
    {"name": "rag", "template": "rag"}]})");
  auto t = ChatTemplate::from_tokenizer_config(config, "cfg");
  ASSERT_TRUE(t) << t.message();
  ChatTemplateInputs in = user_says("x");
  EXPECT_EQ(*t->apply(in), "default:None");
  in.tools = OrderedJson::array({{{"type", "function"}}});
  EXPECT_EQ(*t->apply(in), "tool_use:1");
}

TEST(ChatTemplate, KwargsGenerationPromptAndDocuments) {
  auto t = ChatTemplate::from_source(
      "{{ add_generation_prompt }} {{ enable_thinking }} {{ documents }} {{ strftime_now('%d %b %Y') }}",
      OrderedJson::object());
  ASSERT_TRUE(t) << t.message();
  ChatTemplateInputs in = user_says("x");
  in.add_generation_prompt = true;
  in.extra = {{"enable_thinking", false}};
  in.now_unix_seconds = 1721952000;  // 2024-07-26 00:00:00 UTC
  EXPECT_EQ(*t->apply(in), "True False None 26 Jul 2024");
}

TEST(ChatTemplate, ClearErrors) {
  auto none = ChatTemplate::from_tokenizer_config(OrderedJson::parse(R"({"eos_token": "</s>"})"), "cfg.json");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.message(), "cfg.json: no chat_template (this model has no chat template)");
  auto bad = ChatTemplate::from_source("{% if x %}", OrderedJson::object());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "chat template: line 1: unclosed '{% if %}': missing '{% endif %}' before the end of the template");
  auto t = ChatTemplate::from_source("{{ raise_exception('no system role') }}", OrderedJson::object());
  ASSERT_TRUE(t);
  auto out = t->apply(user_says("x"));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.message(), "chat template: line 1: no system role");
  ChatTemplateInputs in = user_says("x");
  in.extra = {{"messages", 1}};
  EXPECT_FALSE(t->apply(in));
  in = user_says("x");
  in.messages = "not a list";
  EXPECT_EQ(t->apply(in).message(), "chat template: messages must be a JSON array");
}

}  // namespace
}  // namespace rl
