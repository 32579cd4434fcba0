#include "server/openai_response.h"

namespace rl::server {
namespace {

OrderedJson bytes_of(const std::string& s) {
  OrderedJson b = OrderedJson::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

OrderedJson chat_logprobs(const std::vector<LogprobEntry>& entries) {
  OrderedJson content = OrderedJson::array();
  for (const LogprobEntry& e : entries) {
    OrderedJson item = OrderedJson::object();
    item["token"] = e.token;
    item["logprob"] = e.logprob;
    item["bytes"] = bytes_of(e.token);
    OrderedJson top = OrderedJson::array();
    for (const auto& [tok, lp] : e.top) {
      OrderedJson t = OrderedJson::object();
      t["token"] = tok;
      t["logprob"] = lp;
      t["bytes"] = bytes_of(tok);
      top.push_back(std::move(t));
    }
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  OrderedJson out = OrderedJson::object();
  out["content"] = std::move(content);
  return out;
}

// vLLM's shape: [null, {"<token id>": {"logprob", "rank", "decoded_token"}, ...}, ...] (position 0 has none).
OrderedJson prompt_logprobs_json(const std::vector<PromptLogprobEntry>& entries) {
  OrderedJson list = OrderedJson::array();
  list.push_back(OrderedJson());
  for (const PromptLogprobEntry& e : entries) {
    OrderedJson pos = OrderedJson::object();
    for (const PromptLogprobEntry::Item& it : e.items) {
      pos[std::to_string(it.token)] = {{"logprob", it.logprob}, {"rank", it.rank}, {"decoded_token", it.text}};
    }
    list.push_back(std::move(pos));
  }
  return list;
}

OrderedJson completion_logprobs(const std::vector<LogprobEntry>& entries, int64_t* text_offset) {
  OrderedJson tokens = OrderedJson::array(), lps = OrderedJson::array(), tops = OrderedJson::array(),
              offsets = OrderedJson::array();
  for (const LogprobEntry& e : entries) {
    const std::string& tok = e.token;
    tokens.push_back(tok);
    if (e.null_logprob) {  // echo's first prompt token
      lps.push_back(OrderedJson());
      tops.push_back(OrderedJson());
      offsets.push_back(*text_offset);
      *text_offset += static_cast<int64_t>(tok.size());
      continue;
    }
    lps.push_back(e.logprob);
    OrderedJson top = OrderedJson::object();
    for (const auto& [t, lp] : e.top) {
      const std::string& key = t;
      if (!top.contains(key)) top[key] = lp;
    }
    tops.push_back(std::move(top));
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(tok.size());
  }
  OrderedJson out = OrderedJson::object();
  out["tokens"] = std::move(tokens);
  out["token_logprobs"] = std::move(lps);
  out["top_logprobs"] = std::move(tops);
  out["text_offset"] = std::move(offsets);
  return out;
}

OrderedJson envelope(const ResponseMeta& meta, bool chunk) {
  OrderedJson r = OrderedJson::object();
  r["id"] = meta.id;
  if (meta.endpoint == Endpoint::kChat) {
    r["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    r["object"] = "text_completion";
  }
  r["created"] = meta.created;
  r["model"] = meta.model;
  if (!meta.system_fingerprint.empty()) r["system_fingerprint"] = meta.system_fingerprint;
  return r;
}

}  // namespace

std::string dump_json(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

const char* finish_reason_json(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }

OrderedJson usage_json(const Usage& u) {
  OrderedJson j = OrderedJson::object();
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  OrderedJson details = OrderedJson::object();
  details["cached_tokens"] = u.cached_tokens;
  j["prompt_tokens_details"] = std::move(details);
  return j;
}

OrderedJson full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices, const Usage& usage) {
  OrderedJson r = envelope(meta, false);
  OrderedJson list = OrderedJson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    OrderedJson choice = OrderedJson::object();
    choice["index"] = static_cast<int64_t>(i);
    int64_t offset = 0;
    if (meta.endpoint == Endpoint::kChat) {
      OrderedJson msg = OrderedJson::object();
      msg["role"] = "assistant";
      msg["content"] = c.text.empty() && !c.tool_calls.empty() ? OrderedJson() : OrderedJson(c.text);
      if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        OrderedJson calls = OrderedJson::array();
        for (const ToolCallResult& t : c.tool_calls)
          calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
        msg["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(msg);
      choice["logprobs"] = meta.want_logprobs ? chat_logprobs(c.logprobs) : OrderedJson();
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = meta.want_logprobs ? completion_logprobs(c.logprobs, &offset) : OrderedJson();
      if (meta.want_prompt_logprobs) choice["prompt_logprobs"] = prompt_logprobs_json(c.prompt_logprobs);
    }
    const bool calls = c.tool_calls_finish && c.finish == FinishReason::kStop;
    choice["finish_reason"] = calls ? "tool_calls" : finish_reason_json(c.finish);
    list.push_back(std::move(choice));
  }
  r["choices"] = std::move(list);
  if (meta.endpoint == Endpoint::kChat && meta.want_prompt_logprobs && !choices.empty()) {
    r["prompt_logprobs"] = prompt_logprobs_json(choices.front().prompt_logprobs);
  }
  r["usage"] = usage_json(usage);
  return r;
}

OrderedJson delta_chunk(const ResponseMeta& meta, const ChoiceDelta& d, int64_t* text_offset) {
  OrderedJson r = envelope(meta, true);
  OrderedJson choice = OrderedJson::object();
  choice["index"] = d.index;
  if (meta.endpoint == Endpoint::kChat) {
    OrderedJson delta = OrderedJson::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.text.empty() || (!d.finish && d.reasoning.empty() && d.tool_calls.empty())) delta["content"] = d.text;
    if (!d.tool_calls.empty()) {
      // As OpenAI streams them: the first fragment of a call carries id, type and name with empty arguments.
      OrderedJson calls = OrderedJson::array();
      for (const tools::ToolCallDelta& t : d.tool_calls) {
        OrderedJson c = {{"index", t.index}};
        OrderedJson fn = OrderedJson::object();
        if (!t.id.empty()) {
          c["id"] = t.id;
          c["type"] = "function";
          fn["name"] = t.name;
        }
        fn["arguments"] = t.arguments;
        c["function"] = std::move(fn);
        calls.push_back(std::move(c));
      }
      delta["tool_calls"] = std::move(calls);
    }
    choice["delta"] = std::move(delta);
    choice["logprobs"] = meta.want_logprobs ? chat_logprobs(d.logprobs) : OrderedJson();
  } else {
    choice["text"] = d.text;
    choice["logprobs"] = meta.want_logprobs ? completion_logprobs(d.logprobs, text_offset) : OrderedJson();
  }
  // Streams carry prompt_logprobs once per choice, in its first chunk (chat: in the choice, as vLLM streams it).
  if (meta.want_prompt_logprobs && !d.prompt_logprobs.empty()) {
    choice["prompt_logprobs"] = prompt_logprobs_json(d.prompt_logprobs);
  }
  choice["finish_reason"] = !d.finish ? OrderedJson()
                            : d.tool_calls_finish && *d.finish == FinishReason::kStop ? OrderedJson("tool_calls")
                                                  : OrderedJson(finish_reason_json(*d.finish));
  r["choices"] = OrderedJson::array({std::move(choice)});
  return r;
}

void accumulate(ChoiceResult* r, ChoiceDelta&& d) {
  r->text += d.text;
  r->reasoning += d.reasoning;
  for (tools::ToolCallDelta& t : d.tool_calls) {
    if (!t.id.empty()) r->tool_calls.push_back({t.id, t.name, ""});
    if (t.index >= 0 && t.index < static_cast<int32_t>(r->tool_calls.size()))
      r->tool_calls[static_cast<size_t>(t.index)].arguments += t.arguments;
  }
  for (LogprobEntry& e : d.logprobs) r->logprobs.push_back(std::move(e));
  for (PromptLogprobEntry& e : d.prompt_logprobs) r->prompt_logprobs.push_back(std::move(e));
  if (d.finish) r->finish = *d.finish;
  if (d.tool_calls_finish) r->tool_calls_finish = true;
}

OrderedJson role_chunk(const ResponseMeta& meta, int32_t index) {
  OrderedJson r = envelope(meta, true);
  OrderedJson choice = OrderedJson::object();
  choice["index"] = index;
  OrderedJson delta = OrderedJson::object();
  delta["role"] = "assistant";
  delta["content"] = "";
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  r["choices"] = OrderedJson::array({std::move(choice)});
  return r;
}

OrderedJson usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  OrderedJson r = envelope(meta, true);
  r["choices"] = OrderedJson::array();
  r["usage"] = usage_json(usage);
  return r;
}

}  // namespace rl::server
