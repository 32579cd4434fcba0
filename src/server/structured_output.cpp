#include "server/structured_output.h"

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/openai_request.h"

namespace rl::server {

namespace {

// The engine-side state of one sequence: a grammar matcher behind the scheduler's TokenConstraint interface.
class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const grammar::TokenGrammar> tg) : m_(std::move(tg)) {}
  void fill_bitmask(uint32_t* words, int32_t num_words) override {
    const int32_t own = m_.token_grammar().vocab().mask_words();
    if (own >= num_words) {
      scratch_.resize(static_cast<size_t>(own));
      m_.fill_mask(scratch_.data());
      std::copy(scratch_.begin(), scratch_.begin() + num_words, words);
      return;
    }
    m_.fill_mask(words);
    std::fill(words + own, words + num_words, 0u);
  }
  bool accept(TokenId token) override { return m_.accept_token(token); }

 private:
  grammar::GrammarMatcher m_;
  std::vector<uint32_t> scratch_;
};

MaybeError grammar_error(const char* param, const Status& st) { return invalid_param(param, st.message()); }

// The schema of one tool's arguments ({} when the tool has no parameters).
OrderedJson tool_parameters(const OrderedJson& tool) {
  const OrderedJson* fn = tool.is_object() ? field(tool, "function") : nullptr;
  const OrderedJson* params = fn && fn->is_object() ? field(*fn, "parameters") : nullptr;
  return params ? *params : OrderedJson{{"type", "object"}};
}
std::string tool_name(const OrderedJson& tool) {
  const OrderedJson* fn = tool.is_object() ? field(tool, "function") : nullptr;
  const OrderedJson* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
  return name && name->is_string() ? name->get<std::string>() : std::string();
}

}  // namespace

Result<std::unique_ptr<StructuredContext>> StructuredContext::create(const Tokenizer& tokenizer,
                                                                     const std::string& chat_template,
                                                                     std::vector<int32_t> eos_ids,
                                                                     const std::string& tool_call_parser,
                                                                     const std::string& reasoning_parser) {
  auto c = std::unique_ptr<StructuredContext>(new StructuredContext());
  c->vocab_ = grammar::TokenVocab::from_tokenizer(tokenizer, std::move(eos_ids));
  if (tool_call_parser == "auto") {
    c->tool_parser_ = tools::detect_tool_parser(chat_template, &tokenizer);
  } else if (auto k = tools::tool_parser_from_name(tool_call_parser)) {
    c->tool_parser_ = *k;
  } else {
    return Status::error("unknown --tool-call-parser '" + tool_call_parser +
                         "' (hermes, llama3_json, mistral, harmony, deepseek_v3, auto, none)");
  }
  if (reasoning_parser == "auto") {
    c->reasoning_ = tools::detect_reasoning_parser(chat_template, &tokenizer);
  } else if (auto k = tools::reasoning_parser_from_name(reasoning_parser)) {
    c->reasoning_ = *k;
  } else {
    return Status::error("unknown --reasoning-parser '" + reasoning_parser + "' (qwen3, deepseek_r1, auto, none)");
  }
  return c;
}

int64_t StructuredContext::cache_misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

int64_t StructuredContext::cache_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void StructuredContext::set_cache_max_bytes(int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_bytes_ = max_bytes;
}

MaybeError parse_structured(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r) {
  const StructuredContext* sc = ctx.structured;
  const bool chat = r->endpoint == Endpoint::kChat;
  std::string key;
  const char* param = nullptr;
  std::function<Result<std::shared_ptr<const grammar::CompiledGrammar>>()> make;
  auto set = [&](const char* p, std::string k, decltype(make) m) -> MaybeError {
    if (param) return invalid_param(p, std::string("'") + p + "' cannot be combined with '" + param + "'");
    param = p;
    key = std::move(k);
    make = std::move(m);
    return std::nullopt;
  };

  if (const OrderedJson* rf = field(body, "response_format")) {
    const OrderedJson* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string()) return invalid_param("response_format", "'response_format.type' must be a string");
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      if (MaybeError e = set("response_format", "json_object", [] { return grammar::json_object_grammar(); })) return e;
    } else if (t == "json_schema") {
      const OrderedJson* js = field(*rf, "json_schema");
      const OrderedJson* schema = js && js->is_object() ? field(*js, "schema") : nullptr;
      if (!schema) return invalid_param("response_format", "'response_format.json_schema.schema' is required");
      OrderedJson s = *schema;
      if (MaybeError e = set("response_format", "schema:" + s.dump(), [s] { return grammar::json_schema_grammar(s); }))
        return e;
    } else if (t != "text") {
      return invalid_param("response_format", "'response_format.type' must be text, json_object or json_schema");
    }
  }
  if (const OrderedJson* gj = field(body, "guided_json")) {
    OrderedJson s = *gj;
    if (gj->is_string()) {
      s = OrderedJson::parse(gj->get<std::string>(), nullptr, false);
      if (s.is_discarded()) return invalid_param("guided_json", "'guided_json' is not valid JSON");
    }
    if (MaybeError e = set("guided_json", "schema:" + s.dump(), [s] { return grammar::json_schema_grammar(s); })) return e;
  }
  if (const OrderedJson* gr = field(body, "guided_regex")) {
    if (!gr->is_string()) return invalid_param("guided_regex", "'guided_regex' must be a string");
    std::string re = gr->get<std::string>();
    if (MaybeError e = set("guided_regex", "regex:" + re, [re] { return grammar::regex_grammar(re); })) return e;
  }
  if (const OrderedJson* gc = field(body, "guided_choice")) {
    if (!gc->is_array() || gc->empty() || gc->size() > 1024)
      return invalid_param("guided_choice", "'guided_choice' must be a non-empty array of at most 1024 strings");
    std::vector<std::string> choices;
    for (const auto& c : *gc) {
      if (!c.is_string()) return invalid_param("guided_choice", "'guided_choice' entries must be strings");
      choices.push_back(c.get<std::string>());
    }
    if (MaybeError e = set("guided_choice", "choice:" + gc->dump(), [choices] { return grammar::choice_grammar(choices); }))
      return e;
  }
  if (const OrderedJson* gg = field(body, "guided_grammar")) {
    if (!gg->is_string()) return invalid_param("guided_grammar", "'guided_grammar' must be a string");
    std::string g = gg->get<std::string>();
    if (MaybeError e = set("guided_grammar", "gbnf:" + g, [g] { return grammar::gbnf_grammar(g); })) return e;
  }

  // Tools (chat only).
  const OrderedJson* tools_field = chat ? field(body, "tools") : nullptr;
  const bool has_tools = tools_field && tools_field->is_array() && !tools_field->empty();
  std::string choice = has_tools ? "auto" : "none";
  std::string named;
  if (const OrderedJson* tc = chat ? field(body, "tool_choice") : nullptr) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        return invalid_param("tool_choice", "'tool_choice' must be none, auto, required or a named function");
    } else if (tc->is_object() && field(*tc, "function") && (*tc)["function"].is_object() &&
               field((*tc)["function"], "name") && (*tc)["function"]["name"].is_string()) {
      choice = "named";
      named = (*tc)["function"]["name"].get<std::string>();
    } else {
      return invalid_param("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                                          "\"function\": {\"name\": ...}}");
    }
    if ((choice == "required" || choice == "named") && !has_tools)
      return invalid_param("tool_choice", "'tool_choice' " + choice + " needs 'tools'");
  }
  bool parallel = true;
  if (chat) {
    if (MaybeError e = read_bool(body, "parallel_tool_calls", &parallel)) return e;
  }
  tools::ParseMode mode;
  if (chat && sc) {
    mode.reasoning = sc->reasoning();
    if (choice == "auto") mode.tools = sc->tool_parser();
  }
  if (choice == "named") {
    const OrderedJson* found = nullptr;
    for (const auto& t : *tools_field)
      if (tool_name(t) == named) found = &t;
    if (!found) return invalid_param("tool_choice", "'tool_choice' names '" + named + "', which is not in 'tools'");
    OrderedJson s = tool_parameters(*found);
    if (MaybeError e = set("tool_choice", "schema:" + s.dump(), [s] { return grammar::json_schema_grammar(s); })) return e;
    mode = tools::ParseMode{};
    mode.forced_name = named;
  } else if (choice == "required") {
    // [{"name": <one of the tools>, "parameters": <its arguments>}, ...]
    OrderedJson any_of = OrderedJson::array();
    for (const auto& t : *tools_field) {
      any_of.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", tool_name(t)}}}, {"parameters", tool_parameters(t)}}},
                        {"required", {"name", "parameters"}},
                        {"additionalProperties", false}});
    }
    OrderedJson s = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
    if (!parallel) s["maxItems"] = 1;
    if (MaybeError e = set("tool_choice", "schema:" + s.dump(), [s] { return grammar::json_schema_grammar(s); })) return e;
    mode = tools::ParseMode{};
    mode.tools = tools::ToolParserKind::kJsonList;
  }
  r->parse_mode = mode;
  if (!param) return std::nullopt;
  if (!sc) return invalid_param(param, std::string("'") + param + "' is not available for this model");
  Result<std::shared_ptr<const grammar::TokenGrammar>> tg = sc->get(key, make);
  if (!tg) return grammar_error(param, tg.status());
  std::shared_ptr<const grammar::TokenGrammar> g = *tg;
  r->params.constraint = [g] { return std::make_unique<GrammarConstraint>(g); };
  return std::nullopt;
}

}  // namespace rl::server
