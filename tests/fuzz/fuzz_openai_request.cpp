// Fuzz target: OpenAI request bodies (server/openai_request) for /v1/completions, /v1/chat/completions and /tokenize
// against the default model's tokenizer and chat template: JSON parsing under the request depth limit, every field's
// type and range checks, chat-message conversion, template rendering and tokenization. Invariants: an accepted request
// has prompts that fit the context with max_tokens, token ids inside the vocabulary, and n and the number of choices
// within the limits.
// fuzz-libs: rl_server
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "core/json.h"
#include "loader/model_config.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace {

// The default model in the source tree (RIDGELINE_SOURCE_DIR is set by tests/fuzz/tests.cmake: __FILE__ can be a
// relative path, which breaks when the test runs from another directory).
std::string model_dir() { return std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny"; }

struct Context {
  std::unique_ptr<rl::Tokenizer> tokenizer;
  std::unique_ptr<rl::ChatTemplate> chat_template;
  rl::GenerationConfig generation_config;
  rl::server::ModelContext ctx;
};

const Context& context() {
  static const Context* c = [] {
    auto* c = new Context();
    auto tok = rl::Tokenizer::load(model_dir());
    if (!tok) std::abort();
    c->tokenizer = std::move(*tok);
    auto tmpl = rl::ChatTemplate::from_model_dir(model_dir());
    if (tmpl) c->chat_template = std::make_unique<rl::ChatTemplate>(std::move(*tmpl));
    c->ctx.served_model_name = "ridgeline-tiny";
    c->ctx.tokenizer = c->tokenizer.get();
    c->ctx.chat_template = c->chat_template.get();
    c->ctx.generation_config = &c->generation_config;
    c->ctx.max_model_len = 1024;
    c->ctx.vocab_size = static_cast<int32_t>(c->tokenizer->vocab_size());
    return c;
  }();
  return *c;
}

void check(const rl::server::GenerationRequest& r, const rl::server::ModelContext& ctx) {
  if (r.prompts.empty() || r.params.n < 1 || r.params.n > ctx.limits.max_n) std::abort();
  if (r.prompts.size() * static_cast<size_t>(r.params.n) > static_cast<size_t>(ctx.limits.max_choices)) std::abort();
  for (const auto& p : r.prompts) {
    if (static_cast<int64_t>(p.size()) + r.params.max_tokens.value_or(1) > ctx.max_model_len) std::abort();
    for (rl::TokenId id : p) {
      if (id < 0 || id >= ctx.vocab_size) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Context& c = context();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto body = rl::parse_ordered_json(text, "request body", rl::server::kMaxRequestDepth);
  if (!body) return 0;
  if (rl::server::check_model(*body, c.ctx.served_model_name)) return 0;
  rl::server::GenerationRequest completion, chat;
  if (!rl::server::parse_completion_request(*body, c.ctx, &completion)) check(completion, c.ctx);
  if (!rl::server::parse_chat_request(*body, c.ctx, &chat)) check(chat, c.ctx);
  std::vector<rl::TokenId> ids;
  (void)rl::server::tokenize_request(*body, c.ctx, &ids);
  return 0;
}
