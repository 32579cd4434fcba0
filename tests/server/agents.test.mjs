// Tool calling and structured outputs through the official `openai` client, streamed and not, on the default
// model. Tool calls: each family's recorded output format (the same fixtures as tests/tools) is forced through a
// guided_choice grammar, so the tiny model writes exactly that text, and the server started with that family's
// --tool-call-parser must turn it into message.tool_calls / delta.tool_calls as OpenAI does. tool_choice
// "required" and a named function are enforced by grammars: whatever the model writes parses as calls whose
// arguments validate against the tool's parameters. Structured outputs: 24 schemas, each output of the model
// under response_format json_schema parsed and validated.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";
import { startServer, OPENAI } from "./harness.mjs";

const { default: OpenAI } = await import(pathToFileURL(OPENAI));
const servers = [];
after(async () => {
  for (const s of servers) assert.equal(await s.stop(), 0);
});
async function serve(args) {
  const server = await startServer(args);
  servers.push(server);
  return { server, client: new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 }) };
}

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: "function",
  function: { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string", maxLength: 6 } }, required: ["tz"] } },
};

// family → [parser flags, recorded output, expected {content, reasoning, calls}]
const FAMILIES = {
  hermes: [["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"],
    "<think>\nTwo cities, two calls.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>",
    { content: null, reasoning: "\nTwo cities, two calls.\n",
      calls: [["get_weather", { city: "Paris", unit: "celsius" }], ["get_weather", { city: "Oslo", unit: "celsius" }]] }],
  llama3_json: [["--tool-call-parser", "llama3_json", "--reasoning-parser", "none"],
    "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
    { content: null, calls: [["get_time", { tz: "UTC" }]] }],
  mistral: [["--tool-call-parser", "mistral", "--reasoning-parser", "none"],
    "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"unit\": \"celsius\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
    { content: null, calls: [["get_weather", { city: "Lyon", unit: "celsius" }], ["get_time", { tz: "CET" }]] }],
  harmony: [["--tool-call-parser", "harmony", "--reasoning-parser", "none"],
    "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Tokyo\",\"unit\":\"celsius\"}<|call|>",
    { content: null, reasoning: "Need the weather tool.", calls: [["get_weather", { city: "Tokyo", unit: "celsius" }]] }],
  deepseek_v3: [["--tool-call-parser", "deepseek_v3", "--reasoning-parser", "none"],
    "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"JST\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    { content: "Checking.", calls: [["get_time", { tz: "JST" }]] }],
};

const MESSAGES = [{ role: "user", content: "What is the weather?" }];

for (const [family, [flags, recorded, want]] of Object.entries(FAMILIES)) {
  test(`${family}: recorded output → tool_calls, whole and streamed`, async () => {
    const { client } = await serve(flags);
    const body = { model: undefined, messages: MESSAGES, tools: [WEATHER, TIME], max_tokens: 200, temperature: 0, guided_choice: [recorded] };
    const whole = await client.chat.completions.create(body);
    const m = whole.choices[0].message;
    assert.equal(whole.choices[0].finish_reason, "tool_calls");
    assert.equal(m.content, want.content);
    if (want.reasoning) assert.equal(m.reasoning_content, want.reasoning);
    assert.equal(m.tool_calls.length, want.calls.length);
    m.tool_calls.forEach((c, i) => {
      assert.match(c.id, /^call_[0-9a-f]{24}$/);
      assert.equal(c.type, "function");
      assert.equal(c.function.name, want.calls[i][0]);
      assert.deepEqual(JSON.parse(c.function.arguments), want.calls[i][1]);
    });

    // Streamed: the first fragment of a call has index, id, type and name with "" arguments; the arguments
    // fragments concatenate to the whole response's.
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const calls = [];
    let content = "", reasoning = "", finish = null;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      content += ch.delta.content ?? "";
      reasoning += ch.delta.reasoning_content ?? "";
      for (const t of ch.delta.tool_calls ?? []) {
        if (t.id) {
          assert.equal(t.index, calls.length);
          assert.equal(t.type, "function");
          assert.equal(t.function.arguments, "");
          calls.push({ id: t.id, name: t.function.name, arguments: "" });
        } else {
          assert.equal(t.function.name, undefined);
          calls[t.index].arguments += t.function.arguments;
        }
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    assert.equal(finish, "tool_calls");
    assert.equal(content, want.content ?? "");
    assert.equal(reasoning, want.reasoning ?? "");
    assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), want.calls);
    for (const c of calls) assert.match(c.id, /^call_[0-9a-f]{24}$/);
    assert.equal(new Set([...calls, ...m.tool_calls].map((c) => c.id)).size, calls.length * 2, "ids are unique per call");
  });
}

// A small validator for the schemas below (the C++ tests validate 240 generated schemas with a full one).
function validate(x, s, path = "#") {
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(x))) return `${path}: not in enum`;
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(x)) return `${path}: not const`;
  if (s.anyOf && !s.anyOf.some((b) => !validate(x, b, path))) return `${path}: no anyOf branch`;
  const types = s.type === undefined ? null : [].concat(s.type);
  const typeOf = (v) => v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;
  if (types && !types.some((t) => t === typeOf(x) || (t === "number" && typeof x === "number"))) return `${path}: type ${typeOf(x)}`;
  if (typeof x === "string") {
    const n = [...x].length;
    if (s.minLength !== undefined && n < s.minLength) return `${path}: minLength`;
    if (s.maxLength !== undefined && n > s.maxLength) return `${path}: maxLength`;
    if (s.pattern && !new RegExp(s.pattern, "u").test(x)) return `${path}: pattern`;
    const fmt = { date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/, uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
      email: /^[^@\s]+@[^@\s]+\.[a-z]{2,}$/i, ipv4: /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/ };
    if (s.format && !fmt[s.format].test(x)) return `${path}: format ${s.format}`;
  }
  if (typeof x === "number") {
    if (s.minimum !== undefined && x < s.minimum) return `${path}: minimum`;
    if (s.maximum !== undefined && x > s.maximum) return `${path}: maximum`;
    if (s.exclusiveMinimum !== undefined && x <= s.exclusiveMinimum) return `${path}: exclusiveMinimum`;
  }
  if (Array.isArray(x)) {
    if (s.minItems !== undefined && x.length < s.minItems) return `${path}: minItems`;
    if (s.maxItems !== undefined && x.length > s.maxItems) return `${path}: maxItems`;
    if (s.items) for (let i = 0; i < x.length; i++) { const e = validate(x[i], s.items, `${path}/${i}`); if (e) return e; }
  }
  if (x && typeof x === "object" && !Array.isArray(x)) {
    for (const r of s.required ?? []) if (!(r in x)) return `${path}: missing ${r}`;
    for (const [k, v] of Object.entries(x)) {
      if (s.properties?.[k]) { const e = validate(v, s.properties[k], `${path}/${k}`); if (e) return e; }
      else if (s.additionalProperties === false) return `${path}: extra ${k}`;
    }
  }
  return "";
}

function schemas() {
  const str = { type: "string", maxLength: 10 };
  const leaves = [str, { type: "integer", minimum: -5, maximum: 500 }, { type: "number", minimum: 0, maximum: 10 },
    { type: "boolean" }, { type: "null" }, { enum: ["red", "gr\"een", 7, null] }, { type: "string", format: "date" },
    { type: "string", format: "uuid" }, { type: "string", format: "email" }, { type: "string", format: "ipv4" },
    { type: "string", pattern: "^[A-Z]{2}-\\d{3}$" }, { type: ["string", "null"], maxLength: 4 },
    { type: "array", items: { type: "integer", maximum: 99 }, minItems: 1, maxItems: 4 },
    { anyOf: [{ type: "integer", maximum: 0 }, { type: "string", format: "date" }] }, { type: "number", exclusiveMinimum: 0 },
    { const: { k: "v" } }];
  const out = [];
  for (let i = 0; i < 24; i++) {
    const a = leaves[i % leaves.length], b = leaves[(i * 7 + 3) % leaves.length];
    out.push({
      type: "object",
      properties: { "na\"me": str, first: a, nested: { type: "object", properties: { inner: b, list: { type: "array", items: a, maxItems: 2 } }, required: ["inner", "list"], additionalProperties: false } },
      required: i % 2 ? ["first", "nested"] : ["na\"me", "first", "nested"],
      additionalProperties: false,
    });
  }
  return out;
}

test("response_format json_schema: the default model's outputs validate (24 schemas, whole and streamed)", async () => {
  const { client } = await serve([]);
  let i = 0;
  for (const schema of schemas()) {
    const body = { model: undefined, messages: [{ role: "user", content: `Record ${i}` }], max_tokens: 400,
      temperature: i % 3 === 0 ? 0 : 1, seed: i, response_format: { type: "json_schema", json_schema: { name: `s${i}`, schema } } };
    let text;
    if (i % 2) {
      let acc = "", finish = null;
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
        acc += chunk.choices[0]?.delta?.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(finish, "stop", `schema ${i} did not finish: ${acc}`);
      text = acc;
    } else {
      const r = await client.chat.completions.create(body);
      assert.equal(r.choices[0].finish_reason, "stop", `schema ${i} did not finish: ${r.choices[0].message.content}`);
      text = r.choices[0].message.content;
    }
    const doc = JSON.parse(text);
    assert.equal(validate(doc, schema), "", `schema ${i}: ${text}`);
    i++;
  }
});

test("json_object, guided_regex, guided_choice and guided_grammar constrain the output", async () => {
  const { client, server } = await serve([]);
  const r1 = await client.chat.completions.create({ messages: MESSAGES, max_tokens: 200, temperature: 0, response_format: { type: "json_object" } });
  if (r1.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(r1.choices[0].message.content), "object");
  else assert.match(r1.choices[0].message.content, /^\{/);
  const post = async (body) => (await fetch(server.url + "/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "And God said", max_tokens: 40, ...body }) })).json();
  const rx = await post({ guided_regex: "[0-9]{3}-[a-z]{2,4}" });
  assert.match(rx.choices[0].text, /^[0-9]{3}-[a-z]{2,4}$/);
  const ch = await post({ guided_choice: ["light", "darkness", "the firmament"], temperature: 1, seed: 3 });
  assert.ok(["light", "darkness", "the firmament"].includes(ch.choices[0].text));
  const gg = await post({ guided_grammar: "root ::= \"let there be \" thing \".\"\nthing ::= \"light\" | \"a \" [a-z]+", max_tokens: 30 });
  assert.match(gg.choices[0].text, /^let there be (light|a [a-z]+)\.?$/);
  const bad = await fetch(server.url + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: MESSAGES, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", uniqueItems: true } } } }) });
  assert.equal(bad.status, 400);
  const err = await bad.json();
  assert.equal(err.error.param, "response_format");
  assert.match(err.error.message, /'uniqueItems'/);
});

test("tool_choice required and named are enforced by grammars", async () => {
  const { client } = await serve(["--tool-call-parser", "hermes"]);
  // Parallel calls are unbounded: a small model may keep adding calls until max_tokens; every complete one counts.
  const req = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER, TIME], tool_choice: "required", max_tokens: 300, temperature: 0 });
  let calls = req.choices[0].message.tool_calls;
  assert.ok(["tool_calls", "length"].includes(req.choices[0].finish_reason));
  if (req.choices[0].finish_reason === "length") calls = calls.slice(0, -1);
  assert.ok(calls.length >= 1);
  for (const c of calls) {
    const tool = [WEATHER, TIME].find((t) => t.function.name === c.function.name);
    assert.ok(tool, c.function.name);
    assert.equal(validate(JSON.parse(c.function.arguments), tool.function.parameters), "");
  }
  const one = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER, TIME], tool_choice: "required", parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed: 5 });
  assert.equal(one.choices[0].finish_reason, "tool_calls");
  assert.equal(one.choices[0].message.tool_calls.length, 1);

  const named = { type: "function", function: { name: "get_time" } };
  const n1 = await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER, TIME], tool_choice: named, max_tokens: 100, temperature: 0 });
  assert.equal(n1.choices[0].message.tool_calls.length, 1);
  assert.equal(n1.choices[0].message.tool_calls[0].function.name, "get_time");
  assert.equal(validate(JSON.parse(n1.choices[0].message.tool_calls[0].function.arguments), TIME.function.parameters), "");
  let args = "", name = null;
  for await (const chunk of await client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER, TIME], tool_choice: named, max_tokens: 100, temperature: 0, stream: true })) {
    for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (t.id) name = t.function.name;
      args += t.function.arguments;
    }
  }
  assert.equal(name, "get_time");
  assert.equal(args, n1.choices[0].message.tool_calls[0].function.arguments);
  await assert.rejects(client.chat.completions.create({ messages: MESSAGES, tools: [WEATHER], tool_choice: { type: "function", function: { name: "nope" } } }), /400/);
});

test("completions echo returns the prompt before the completion, whole and streamed", async () => {
  const { client } = await serve([]);
  const prompt = "In the beginning God created";
  const whole = await client.completions.create({ model: undefined, prompt, max_tokens: 8, temperature: 0, echo: true });
  const plain = await client.completions.create({ model: undefined, prompt, max_tokens: 8, temperature: 0 });
  assert.equal(whole.choices[0].text, prompt + plain.choices[0].text);
  let text = "", first = null;
  for await (const chunk of await client.completions.create({ model: undefined, prompt, max_tokens: 8, temperature: 0, echo: true, stream: true })) {
    if (first === null) first = chunk.choices[0].text;
    text += chunk.choices[0].text;
  }
  assert.ok(first.startsWith(prompt));
  assert.equal(text, whole.choices[0].text);
});
