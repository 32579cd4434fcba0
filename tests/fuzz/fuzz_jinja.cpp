// Fuzz target: the Jinja engine (lexer, parser, interpreter). Input: template source, optionally followed by a
// NUL byte and a JSON messages list (default: a short conversation), rendered as a chat template with
// add_generation_prompt, under tighter limits than the defaults so each input stays fast.
// fuzz-libs: rl_chat
#include <cstdint>
#include <cstring>
#include <string>

#include "chat/chat_template.h"
#include "core/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t src_len = nul ? static_cast<size_t>(static_cast<const char*>(nul) - p) : size;
  const std::string source(p, src_len);
  auto tmpl = rl::ChatTemplate::from_source(source, rl::OrderedJson{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  if (!tmpl.is_ok()) return 0;
  rl::ChatTemplateInputs in;
  in.now_unix_seconds = 0;
  in.add_generation_prompt = true;
  if (nul) {
    auto m = rl::parse_ordered_json(std::string(p + src_len + 1, size - src_len - 1), "messages");
    if (!m.is_ok()) return 0;
    in.messages = std::move(*m);
  } else {
    in.messages = rl::OrderedJson::parse(
        R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <b>there</b>"},)"
        R"({"role":"assistant","content":"Hello!","tool_calls":[{"function":{"name":"f","arguments":{"a":[1,2.5,null]}}}]},)"
        R"({"role":"user","content":"2+2?"}])");
  }
  in.tools = rl::OrderedJson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  tmpl->limits().max_output_bytes = 1 << 20;
  tmpl->limits().max_loop_iterations = 100'000;
  tmpl->limits().max_work = 20'000'000;
  (void)tmpl->apply(in);
  return 0;
}
