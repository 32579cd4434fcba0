// OpenAI chat request → ChatTemplateInputs: validates messages (roles system, developer, user, assistant, tool;
// content as a string, an array of text parts, or null for an assistant turn that only calls tools), tools and
// template kwargs, and normalises them into what Hugging Face chat templates expect (text parts joined, null
// content as "", tool call arguments given as JSON strings parsed into objects, as vLLM does).
#pragma once

#include <cstddef>

#include "chat/chat_template.h"
#include "server/json_fields.h"

namespace rl::server {

struct ChatLimits {
  size_t max_messages = 4096;
  size_t max_tools = 128;
};

// body: the whole request object (reads messages, tools, tool_choice, add_generation_prompt,
// chat_template_kwargs).
MaybeError to_chat_inputs(const OrderedJson& body, const ChatLimits& limits, ChatTemplateInputs* out);

}  // namespace rl::server
