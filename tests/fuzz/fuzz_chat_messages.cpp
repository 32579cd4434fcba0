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
    // The default model in the source tree (RIDGELINE_SOURCE_DIR: tests/fuzz/tests.cmake).
    auto tmpl = rl::ChatTemplate::from_model_dir(std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny");
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
