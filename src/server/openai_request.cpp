#include "server/openai_request.h"

#include "server/completion_extras.h"
#include "server/structured_output.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace rl::server {
namespace {

// Fields both endpoints share: the sampling knobs, stop conditions, streaming.
MaybeError parse_common(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r) {
  SamplingParams& p = r->params;
  const GenerationConfig& g = *ctx.generation_config;
  p.temperature = static_cast<float>(g.temperature);
  p.top_k = static_cast<int32_t>(g.top_k);
  p.top_p = static_cast<float>(g.top_p);
  p.min_p = static_cast<float>(g.min_p);
  p.repetition_penalty = static_cast<float>(g.repetition_penalty);

  std::optional<int64_t> i;
  std::optional<double> d;
  if (MaybeError e = read_int(body, "n", 1, ctx.limits.max_n, &i)) return e;
  if (i) p.n = static_cast<int32_t>(*i);
  i.reset();
  if (MaybeError e = read_int(body, "best_of", 1, INT32_MAX, &i)) return e;
  if (i && *i != p.n) return invalid_param("best_of", "'best_of' is not supported (it must equal n when given)");
  if (MaybeError e = read_number(body, "temperature", 0.0, 10.0, &d)) return e;
  if (d) p.temperature = static_cast<float>(*d);
  d.reset();
  if (MaybeError e = read_number(body, "top_p", 0.0, 1.0, &d)) return e;
  if (d && *d == 0.0) return invalid_param("top_p", "'top_p' must be in (0, 1], got 0");
  if (d) p.top_p = static_cast<float>(*d);
  d.reset();
  i.reset();
  if (MaybeError e = read_int(body, "top_k", -1, INT32_MAX, &i)) return e;
  if (i) p.top_k = static_cast<int32_t>(*i);
  if (MaybeError e = read_number(body, "min_p", 0.0, 1.0, &d)) return e;
  if (d) p.min_p = static_cast<float>(*d);
  d.reset();
  if (MaybeError e = read_number(body, "presence_penalty", -2.0, 2.0, &d)) return e;
  if (d) p.presence_penalty = static_cast<float>(*d);
  d.reset();
  if (MaybeError e = read_number(body, "frequency_penalty", -2.0, 2.0, &d)) return e;
  if (d) p.frequency_penalty = static_cast<float>(*d);
  d.reset();
  if (MaybeError e = read_number(body, "repetition_penalty", 0.0, 10.0, &d)) return e;
  if (d && *d == 0.0) return invalid_param("repetition_penalty", "'repetition_penalty' must be > 0");
  if (d) p.repetition_penalty = static_cast<float>(*d);
  i.reset();
  if (MaybeError e = read_int(body, "seed", INT64_MIN, INT64_MAX, &i)) return e;
  if (i) p.seed = static_cast<uint64_t>(*i);
  i.reset();
  if (MaybeError e = read_int(body, "min_tokens", 0, INT32_MAX, &i)) return e;
  if (i) p.min_tokens = static_cast<int32_t>(*i);
  if (MaybeError e = read_bool(body, "ignore_eos", &p.ignore_eos)) return e;
  if (MaybeError e = read_bool(body, "skip_special_tokens", &r->skip_special_tokens)) return e;
  if (MaybeError e = read_string_or_list(body, "stop", ctx.limits.max_stop, ctx.limits.max_stop_bytes, &p.stop)) {
    return e;
  }
  if (const OrderedJson* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) return invalid_param("stop_token_ids", "'stop_token_ids' must be an array of integers");
    if (ids->size() > ctx.limits.max_stop) {
      return invalid_param("stop_token_ids", "at most " + std::to_string(ctx.limits.max_stop) +
                                                 " stop_token_ids are allowed");
    }
    for (const auto& v : *ids) {
      int64_t id = 0;
      if (MaybeError e = as_int(v, "stop_token_ids", 0, ctx.vocab_size - 1, &id)) return e;
      p.stop_token_ids.push_back(static_cast<TokenId>(id));
    }
  }
  if (const OrderedJson* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) return invalid_param("logit_bias", "'logit_bias' must be an object {token id: bias}");
    if (bias->size() > ctx.limits.max_logit_bias) {
      return invalid_param("logit_bias", "'logit_bias' has " + std::to_string(bias->size()) +
                                             " entries; at most " + std::to_string(ctx.limits.max_logit_bias) +
                                             " are allowed");
    }
    for (const auto& [key, value] : bias->items()) {
      char* end = nullptr;
      errno = 0;
      long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || errno != 0 || id < 0 || id >= ctx.vocab_size) {
        return invalid_param("logit_bias", "'logit_bias' key \"" + key + "\" is not a token id in [0, " +
                                               std::to_string(ctx.vocab_size) + ")");
      }
      if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
        return invalid_param("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
      }
      p.logit_bias[static_cast<TokenId>(id)] = value.get<float>();
    }
  }
  if (MaybeError e = read_bool(body, "stream", &r->stream)) return e;
  if (const OrderedJson* so = field(body, "stream_options")) {
    if (!so->is_object()) return invalid_param("stream_options", "'stream_options' must be an object");
    if (!r->stream) return invalid_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (MaybeError e = read_bool(*so, "include_usage", &r->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  std::optional<std::string> user;
  if (MaybeError e = read_string(body, "user", &user)) return e;
  return std::nullopt;
}

// Applies max_tokens (a default when absent) and checks that every prompt plus it fits the context.
MaybeError finish_request(const ModelContext& ctx, std::optional<int64_t> max_tokens, const char* max_param,
                          const char* prompt_param, GenerationRequest* r) {
  SamplingParams& p = r->params;
  for (const auto& prompt : r->prompts) {
    const int64_t len = static_cast<int64_t>(prompt.size());
    if (len == 0) return invalid_param(prompt_param, std::string("'") + prompt_param + "' encodes to no tokens");
    for (TokenId t : prompt) {
      if (t < 0 || t >= ctx.vocab_size) {
        return invalid_param(prompt_param, "token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                               std::to_string(ctx.vocab_size) + ")");
      }
    }
    const int64_t want = max_tokens.value_or(1);
    if (len + want > ctx.max_model_len) return context_length_error(len, want, ctx.max_model_len, prompt_param);
  }
  if (max_tokens) p.max_tokens = static_cast<int32_t>(*max_tokens);
  if (p.max_tokens && p.min_tokens > *p.max_tokens) {
    return invalid_param("min_tokens", "'min_tokens' must not exceed '" + std::string(max_param) + "'");
  }
  if (static_cast<int64_t>(r->prompts.size()) * p.n > ctx.limits.max_choices) {
    return invalid_param("n", "n x number of prompts must be at most " + std::to_string(ctx.limits.max_choices));
  }
  if (Status st = p.validate(ctx.vocab_size); !st) return bad_request(st.message());
  return std::nullopt;
}

// A completions prompt: a string, a list of strings, a list of token ids, or a list of such lists.
MaybeError parse_prompts(const OrderedJson& body, const ModelContext& ctx, std::vector<std::vector<TokenId>>* out) {
  const OrderedJson* prompt = field(body, "prompt");
  if (!prompt) return invalid_param("prompt", "'prompt' is required");
  const auto ids_of = [&](const OrderedJson& arr, std::vector<TokenId>* ids) -> MaybeError {
    for (const auto& v : arr) {
      int64_t id = 0;
      if (MaybeError e = as_int(v, "prompt", 0, ctx.vocab_size - 1, &id)) return e;
      ids->push_back(static_cast<TokenId>(id));
    }
    return std::nullopt;
  };
  if (prompt->is_string()) {
    out->push_back(ctx.tokenizer->encode(prompt->get<std::string>(), true));
    return std::nullopt;
  }
  if (!prompt->is_array() || prompt->empty()) {
    return invalid_param("prompt", "'prompt' must be a string, an array of strings, or token ids");
  }
  const OrderedJson& first = prompt->front();
  if (first.is_number()) {
    out->emplace_back();
    return ids_of(*prompt, &out->back());
  }
  if (static_cast<int64_t>(prompt->size()) > ctx.limits.max_prompts) {
    return invalid_param("prompt", "at most " + std::to_string(ctx.limits.max_prompts) + " prompts per request");
  }
  for (const auto& p : *prompt) {
    if (p.is_string()) {
      out->push_back(ctx.tokenizer->encode(p.get<std::string>(), true));
    } else if (p.is_array() && !p.empty()) {
      out->emplace_back();
      if (MaybeError e = ids_of(p, &out->back())) return e;
    } else {
      return invalid_param("prompt", "each 'prompt' entry must be a string or a non-empty array of token ids");
    }
  }
  return std::nullopt;
}

MaybeError check_body(const OrderedJson& body) {
  if (!body.is_object()) return bad_request(std::string("the request body must be a JSON object, got ") +
                                            json_type_name(body));
  return std::nullopt;
}

MaybeError render_chat(const OrderedJson& body, const ModelContext& ctx, std::vector<TokenId>* ids) {
  if (!ctx.chat_template) return bad_request("this model has no chat template: use /v1/completions");
  ChatTemplateInputs in;
  if (MaybeError e = to_chat_inputs(body, ctx.limits.chat, &in)) return e;
  Result<std::string> text = ctx.chat_template->apply(in);
  if (!text) return invalid_param("messages", "the chat template failed on these messages: " + text.message());
  *ids = ctx.tokenizer->encode(*text, false);
  return std::nullopt;
}

}  // namespace

ApiError context_length_error(int64_t num_prompt_tokens, int64_t max_tokens, int32_t max_model_len,
                              const std::string& param) {
  ApiError e = invalid_param(param, "This model's maximum context length is " + std::to_string(max_model_len) +
                                        " tokens. However, you requested " +
                                        std::to_string(num_prompt_tokens + max_tokens) + " tokens (" +
                                        std::to_string(num_prompt_tokens) + " in the prompt, " +
                                        std::to_string(max_tokens) + " for the completion). Please reduce the "
                                        "length of the prompt or of max_tokens.");
  e.code = "context_length_exceeded";
  return e;
}

MaybeError check_model(const OrderedJson& body, const std::string& served_model_name) {
  if (!body.is_object()) return std::nullopt;
  const OrderedJson* m = field(body, "model");
  if (!m) return std::nullopt;
  if (!m->is_string()) return invalid_param("model", std::string("'model' must be a string, got ") +
                                                         json_type_name(*m));
  if (m->get<std::string>() != served_model_name) {
    ApiError e = not_found("The model '" + m->get<std::string>() + "' does not exist; this server serves '" +
                               served_model_name + "'",
                           "model_not_found");
    e.param = "model";
    return e;
  }
  return std::nullopt;
}

MaybeError parse_completion_request(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* out) {
  if (MaybeError e = check_body(body)) return e;
  GenerationRequest r;
  r.endpoint = Endpoint::kCompletions;
  if (MaybeError e = parse_common(body, ctx, &r)) return e;
  if (MaybeError e = parse_structured(body, ctx, &r)) return e;
  std::optional<int64_t> logprobs;
  if (MaybeError e = read_int(body, "logprobs", 0, kMaxLogprobs, &logprobs)) return e;
  if (logprobs) {
    r.want_logprobs = true;
    r.params.logprobs = static_cast<int32_t>(*logprobs);
  }
  std::optional<int64_t> max_tokens = 16;
  if (MaybeError e = read_int(body, "max_tokens", 1, INT32_MAX, &max_tokens)) return e;
  if (MaybeError e = apply_suffix(body, ctx, &r)) return e;
  if (!r.fim) {
    if (MaybeError e = parse_prompts(body, ctx, &r.prompts)) return e;
  }
  if (MaybeError e = apply_echo(body, ctx, &r)) return e;
  if (MaybeError e = finish_request(ctx, max_tokens, "max_tokens", "prompt", &r)) return e;
  *out = std::move(r);
  return std::nullopt;
}

MaybeError parse_chat_request(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* out) {
  if (MaybeError e = check_body(body)) return e;
  GenerationRequest r;
  r.endpoint = Endpoint::kChat;
  if (MaybeError e = parse_common(body, ctx, &r)) return e;
  if (MaybeError e = read_bool(body, "logprobs", &r.want_logprobs)) return e;
  std::optional<int64_t> top;
  if (MaybeError e = read_int(body, "top_logprobs", 0, kMaxLogprobs, &top)) return e;
  if (top && !r.want_logprobs) return invalid_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (r.want_logprobs) r.params.logprobs = static_cast<int32_t>(top.value_or(0));
  if (MaybeError e = read_prompt_logprobs(body, &r)) return e;
  if (MaybeError e = parse_structured(body, ctx, &r)) return e;
  std::optional<int64_t> max_tokens;
  const char* max_param = "max_completion_tokens";
  if (MaybeError e = read_int(body, "max_completion_tokens", 1, INT32_MAX, &max_tokens)) return e;
  if (!max_tokens) {
    max_param = "max_tokens";
    if (MaybeError e = read_int(body, "max_tokens", 1, INT32_MAX, &max_tokens)) return e;
  }
  r.prompts.emplace_back();
  if (MaybeError e = render_chat(body, ctx, &r.prompts.back())) return e;
  if (MaybeError e = finish_request(ctx, max_tokens, max_param, "messages", &r)) return e;
  *out = std::move(r);
  return std::nullopt;
}

MaybeError tokenize_request(const OrderedJson& body, const ModelContext& ctx, std::vector<TokenId>* out) {
  if (MaybeError e = check_body(body)) return e;
  const bool has_prompt = field(body, "prompt") != nullptr;
  const bool has_messages = field(body, "messages") != nullptr;
  if (has_prompt == has_messages) return bad_request("give exactly one of 'prompt' or 'messages'");
  if (has_messages) return render_chat(body, ctx, out);
  std::optional<std::string> prompt;
  if (MaybeError e = read_string(body, "prompt", &prompt)) return e;
  bool add_special = true;
  if (MaybeError e = read_bool(body, "add_special_tokens", &add_special)) return e;
  *out = ctx.tokenizer->encode(*prompt, add_special);
  return std::nullopt;
}

}  // namespace rl::server
