// Fuzz target: chat-message conversion (server/chat_messages: messages, content parts, tool calls with JSON arguments
// in strings, tools, chat_template_kwargs) from a request body into template inputs, then rendering through the default
// model's chat template. Invariant: conversion either fails with a 400 naming a parameter or yields inputs the template
// renders (or rejects) without crashing.
// fuzz-libs: rl_server
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "core/json.h"
#include "server/chat_messages.h"

namespace {

const rl::ChatTemplate* chat_template() {
  static const rl::ChatTemplate* t = [] {
    std::string f = __FILE__;  // <root>/tests/fuzz/fuzz_chat_messages.cpp
    for (int i = 0; i < 3; ++i) f = f.substr(0, f.find_last_of('/'));
    auto tmpl = rl::ChatTemplate::from_model_dir(f + "/models/ridgeline-tiny");
    return tmpl ? new rl::ChatTemplate(std::move(*tmpl)) : nullptr;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto body = rl::parse_ordered_json(text, "request body", rl::server::kMaxRequestDepth);
  if (!body) return 0;
  rl::ChatTemplateInputs inputs;
  rl::server::ChatLimits limits;
  if (auto e = rl::server::to_chat_inputs(*body, limits, &inputs)) {
    if (e->status != 400) std::abort();
    return 0;
  }
  if (const rl::ChatTemplate* t = chat_template()) (void)t->apply(inputs);
  return 0;
}
