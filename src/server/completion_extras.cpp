#include "server/completion_extras.h"

#include <algorithm>

#include "server/openai_request.h"

namespace rl::server {

namespace {

struct FimTokens {
  const char *prefix, *suffix, *middle;
};
// The FIM triples of the common code models (Qwen2.5-Coder / StarCoder2 / DeepSeek-Coder / CodeLlama).
constexpr FimTokens kFim[] = {
    {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
    {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
    {"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"},
    {"▁<PRE>", "▁<SUF>", "▁<MID>"},
};

}  // namespace

MaybeError apply_suffix(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r) {
  const OrderedJson* suffix = field(body, "suffix");
  if (!suffix || suffix->is_null()) return std::nullopt;
  if (!suffix->is_string()) return invalid_param("suffix", "'suffix' must be a string");
  const OrderedJson* prompt = field(body, "prompt");
  if (!prompt || !prompt->is_string())
    return invalid_param("suffix", "'suffix' needs 'prompt' to be a single string");
  for (const FimTokens& f : kFim) {
    auto p = ctx.tokenizer->token_to_id(f.prefix), s = ctx.tokenizer->token_to_id(f.suffix),
         m = ctx.tokenizer->token_to_id(f.middle);
    if (!p || !s || !m) continue;
    std::vector<TokenId> ids;
    if (auto bos = ctx.tokenizer->bos_id(); bos && ctx.tokenizer->add_bos_token().value_or(false)) ids.push_back(*bos);
    ids.push_back(*p);
    for (TokenId t : ctx.tokenizer->encode(prompt->get<std::string>(), false)) ids.push_back(t);
    ids.push_back(*s);
    for (TokenId t : ctx.tokenizer->encode(suffix->get<std::string>(), false)) ids.push_back(t);
    ids.push_back(*m);
    r->prompts = {std::move(ids)};
    r->fim = true;
    return std::nullopt;
  }
  return invalid_param("suffix", "'suffix' needs a fill-in-the-middle model: this model's vocabulary has no FIM "
                                 "prefix/suffix/middle tokens");
}

MaybeError read_prompt_logprobs(const OrderedJson& body, GenerationRequest* r) {
  std::optional<int64_t> n;
  if (MaybeError e = read_int(body, "prompt_logprobs", 0, kMaxLogprobs, &n)) return e;
  if (!n) return std::nullopt;
  r->prompt_logprobs = static_cast<int32_t>(*n);
  r->params.prompt_logprobs = std::max(r->params.prompt_logprobs.value_or(0), static_cast<int32_t>(*n));
  return std::nullopt;
}

MaybeError apply_echo(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r) {
  if (MaybeError e = read_prompt_logprobs(body, r)) return e;
  bool echo = false;
  if (MaybeError e = read_bool(body, "echo", &echo)) return e;
  if (!echo) return std::nullopt;
  if (r->fim) return invalid_param("echo", "'echo' cannot be combined with 'suffix'");
  if (r->want_logprobs) {
    r->echo_logprobs = true;
    r->params.prompt_logprobs = std::max(r->params.prompt_logprobs.value_or(0), r->params.logprobs.value_or(0));
  }
  r->echo_text.clear();
  for (const auto& p : r->prompts) r->echo_text.push_back(ctx.tokenizer->decode(p, true));
  return std::nullopt;
}

}  // namespace rl::server
