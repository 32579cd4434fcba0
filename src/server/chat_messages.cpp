#include "server/chat_messages.h"

#include <string>

namespace rl::server {
namespace {

bool known_role(const std::string& r) {
  return r == "system" || r == "developer" || r == "user" || r == "assistant" || r == "tool";
}

// content: a string, or [{type: "text", text}] joined with newlines; null only where allowed.
MaybeError convert_content(const OrderedJson& v, const std::string& where, bool null_ok, OrderedJson* out) {
  const std::string param = where + ".content";
  if (v.is_null()) {
    if (!null_ok) return invalid_param(param, "'" + param + "' must not be null for this role");
    *out = "";  // templates test and concatenate content as a string ('x' in content fails on None)
    return std::nullopt;
  }
  if (v.is_string()) {
    *out = v;
    return std::nullopt;
  }
  if (!v.is_array()) {
    return invalid_param(param, "'" + param + "' must be a string or an array of content parts, got " +
                                    json_type_name(v));
  }
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const OrderedJson& part = v[i];
    const std::string pp = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return invalid_param(pp, "'" + pp + "' must be an object");
    const OrderedJson* type = field(part, "type");
    if (!type || !type->is_string()) return invalid_param(pp, "'" + pp + ".type' must be a string");
    if (*type != "text") {
      return invalid_param(pp, "content part type '" + type->get<std::string>() +
                                   "' is not supported (this server takes text only)");
    }
    const OrderedJson* t = field(part, "text");
    if (!t || !t->is_string()) return invalid_param(pp, "'" + pp + ".text' must be a string");
    if (i > 0) text += "\n";
    text += t->get<std::string>();
  }
  *out = text;
  return std::nullopt;
}

MaybeError convert_tool_calls(const OrderedJson& v, const std::string& where, OrderedJson* out) {
  const std::string param = where + ".tool_calls";
  if (!v.is_array()) return invalid_param(param, "'" + param + "' must be an array");
  *out = OrderedJson::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const OrderedJson& call = v[i];
    const std::string cp = param + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return invalid_param(cp, "'" + cp + "' must be an object");
    const OrderedJson* fn = field(call, "function");
    if (!fn || !fn->is_object()) return invalid_param(cp, "'" + cp + ".function' must be an object");
    const OrderedJson* name = field(*fn, "name");
    if (!name || !name->is_string()) return invalid_param(cp, "'" + cp + ".function.name' must be a string");
    OrderedJson converted = call;
    const OrderedJson* args = field(*fn, "arguments");
    if (args && args->is_string()) {
      auto parsed = parse_ordered_json(args->get<std::string>(), cp, kMaxRequestDepth);
      if (parsed && parsed->is_object()) converted["function"]["arguments"] = std::move(*parsed);
    } else if (args && !args->is_object()) {
      return invalid_param(cp, "'" + cp + ".function.arguments' must be a JSON string or an object");
    }
    out->push_back(std::move(converted));
  }
  return std::nullopt;
}

MaybeError convert_message(const OrderedJson& m, size_t index, OrderedJson* out) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return invalid_param(where, "'" + where + "' must be an object, got " + json_type_name(m));
  const OrderedJson* role = field(m, "role");
  if (!role || !role->is_string()) return invalid_param(where + ".role", "'" + where + ".role' must be a string");
  const std::string r = role->get<std::string>();
  if (!known_role(r)) {
    return invalid_param(where + ".role", "'" + where + ".role' must be one of system, developer, user, "
                                          "assistant, tool; got '" + r + "'");
  }
  OrderedJson msg = OrderedJson::object();
  msg["role"] = r;
  const OrderedJson* tool_calls = field(m, "tool_calls");
  if (tool_calls && r != "assistant") {
    return invalid_param(where + ".tool_calls", "only assistant messages may carry tool_calls");
  }
  auto content_it = m.find("content");
  const bool has_calls = tool_calls && !tool_calls->empty();
  if (content_it == m.end() && !has_calls) {
    return invalid_param(where + ".content", "'" + where + ".content' is required");
  }
  OrderedJson content;
  if (content_it != m.end()) {
    if (MaybeError e = convert_content(*content_it, where, r == "assistant" && has_calls, &content)) return e;
  }
  msg["content"] = std::move(content);
  if (tool_calls) {
    OrderedJson calls;
    if (MaybeError e = convert_tool_calls(*tool_calls, where, &calls)) return e;
    msg["tool_calls"] = std::move(calls);
  }
  for (const char* key : {"name", "tool_call_id", "reasoning_content"}) {
    const OrderedJson* v = field(m, key);
    if (!v) continue;
    if (!v->is_string()) {
      return invalid_param(where + "." + key, "'" + where + "." + key + "' must be a string");
    }
    msg[key] = *v;
  }
  *out = std::move(msg);
  return std::nullopt;
}

MaybeError convert_tools(const OrderedJson& body, const ChatLimits& limits, OrderedJson* out) {
  const OrderedJson* tools = field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return invalid_param("tools", "'tools' must be an array");
  if (tools->size() > limits.max_tools) {
    return invalid_param("tools", "at most " + std::to_string(limits.max_tools) + " tools are allowed");
  }
  for (size_t i = 0; i < tools->size(); ++i) {
    const OrderedJson& t = (*tools)[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return invalid_param(p, "'" + p + "' must be an object");
    const OrderedJson* type = field(t, "type");
    if (!type || *type != "function") return invalid_param(p, "'" + p + ".type' must be \"function\"");
    const OrderedJson* fn = field(t, "function");
    if (!fn || !fn->is_object()) return invalid_param(p, "'" + p + ".function' must be an object");
    const OrderedJson* name = field(*fn, "name");
    if (!name || !name->is_string()) return invalid_param(p, "'" + p + ".function.name' must be a string");
  }
  if (!tools->empty()) *out = *tools;
  return std::nullopt;
}

}  // namespace

MaybeError to_chat_inputs(const OrderedJson& body, const ChatLimits& limits, ChatTemplateInputs* out) {
  const OrderedJson* messages = field(body, "messages");
  if (!messages) return invalid_param("messages", "'messages' is required");
  if (!messages->is_array()) {
    return invalid_param("messages", std::string("'messages' must be an array, got ") + json_type_name(*messages));
  }
  if (messages->empty()) return invalid_param("messages", "'messages' must not be empty");
  if (messages->size() > limits.max_messages) {
    return invalid_param("messages", "at most " + std::to_string(limits.max_messages) + " messages are allowed");
  }
  ChatTemplateInputs in;
  for (size_t i = 0; i < messages->size(); ++i) {
    OrderedJson msg;
    if (MaybeError e = convert_message((*messages)[i], i, &msg)) return e;
    in.messages.push_back(std::move(msg));
  }
  if (MaybeError e = convert_tools(body, limits, &in.tools)) return e;
  // tool_choice is read with the structured-output fields (server/structured_output.cpp).
  in.add_generation_prompt = true;
  if (MaybeError e = read_bool(body, "add_generation_prompt", &in.add_generation_prompt)) return e;
  if (const OrderedJson* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) return invalid_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    in.extra = *kw;
  }
  *out = std::move(in);
  return std::nullopt;
}

}  // namespace rl::server
