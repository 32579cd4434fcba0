// Malformed and hostile requests against a server with --api-key: each gets the right status and an
// OpenAI-shaped error ({"error": {"message", "type", "param", "code"}}), and the server stays up.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import zlib from "node:zlib";
import { startServer, assertIdleAndHealthy } from "./harness.mjs";

const KEY = "sekret";
let server;
before(async () => { server = await startServer(["--api-key", KEY]); });
after(async () => { assert.equal(await server.stop(), 0); });

const auth = { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` };
const ids = (n) => JSON.stringify(Array.from({ length: n }, (_, i) => 10 + (i % 100)));
const P = '"prompt": "In the beginning"';
const M = '"messages": [{"role": "user", "content": "Hi"}]';
const bias = (n) => "{" + Array.from({ length: n }, (_, i) => `"${i}": 1`).join(",") + "}";
const keys = (n) => "{" + Array.from({ length: n }, (_, i) => `"k${i}": ${i}`).join(",") + "}";
const deep = (n) => "[".repeat(n) + "]".repeat(n);
const deepObj = (n) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
const gz = (s) => zlib.gzipSync(Buffer.from(s));
const gzHeaders = { ...{ "Content-Type": "application/json", Authorization: `Bearer ${KEY}` }, "Content-Encoding": "gzip" };
// A gzip bomb built in pieces: 64 MiB of zeros compress to ~64 KiB.
function bomb() {
  const z = zlib.createGzip({ level: 9 });
  const parts = [];
  z.on("data", (d) => parts.push(d));
  const zeros = Buffer.alloc(1 << 20, 0x20);
  z.write(Buffer.from('{"prompt": "'));
  for (let i = 0; i < 64; i++) z.write(zeros);
  z.write(Buffer.from('"}'));
  z.end();
  return new Promise((r) => z.on("end", () => r(Buffer.concat(parts))));
}
const BOMB = await bomb();

// [name, method, path, body (string | Buffer | undefined), expected status, expected param or code (optional),
//  headers (default: with the key)]
const CASES = [
  ["bad JSON", "POST", "/v1/completions", "{bad", 400, "invalid_json"],
  ["empty body", "POST", "/v1/completions", "", 400, "invalid_json"],
  ["truncated JSON", "POST", "/v1/chat/completions", '{"messages": [', 400, "invalid_json"],
  ["array body", "POST", "/v1/completions", "[1, 2]", 400],
  ["string body", "POST", "/v1/chat/completions", '"hello"', 400],
  ["prompt is a number", "POST", "/v1/completions", '{"prompt": 5}', 400, "prompt"],
  ["prompt missing", "POST", "/v1/completions", "{}", 400, "prompt"],
  ["prompt id outside the vocab", "POST", "/v1/completions", '{"prompt": [1, 99999999]}', 400, "prompt"],
  ["negative prompt id", "POST", "/v1/completions", '{"prompt": [-1]}', 400, "prompt"],
  ["17 prompts", "POST", "/v1/completions", `{"prompt": ${JSON.stringify(Array(17).fill("a"))}}`, 400, "prompt"],
  ["temperature string", "POST", "/v1/completions", `{${P}, "temperature": "hot"}`, 400, "temperature"],
  ["temperature negative", "POST", "/v1/completions", `{${P}, "temperature": -1}`, 400, "temperature"],
  ["temperature huge", "POST", "/v1/completions", `{${P}, "temperature": 1e300}`, 400, "temperature"],
  ["top_p 0", "POST", "/v1/completions", `{${P}, "top_p": 0}`, 400, "top_p"],
  ["top_p 2", "POST", "/v1/completions", `{${P}, "top_p": 2}`, 400, "top_p"],
  ["top_k -5", "POST", "/v1/completions", `{${P}, "top_k": -5}`, 400, "top_k"],
  ["min_p 2", "POST", "/v1/completions", `{${P}, "min_p": 2}`, 400, "min_p"],
  ["presence_penalty -3", "POST", "/v1/completions", `{${P}, "presence_penalty": -3}`, 400, "presence_penalty"],
  ["frequency_penalty 5", "POST", "/v1/completions", `{${P}, "frequency_penalty": 5}`, 400, "frequency_penalty"],
  ["n 0", "POST", "/v1/completions", `{${P}, "n": 0}`, 400, "n"],
  ["n huge", "POST", "/v1/completions", `{${P}, "n": 100000}`, 400, "n"],
  ["n string", "POST", "/v1/completions", `{${P}, "n": "2"}`, 400, "n"],
  ["best_of", "POST", "/v1/completions", `{${P}, "best_of": 3}`, 400, "best_of"],
  ["max_tokens -1", "POST", "/v1/completions", `{${P}, "max_tokens": -1}`, 400, "max_tokens"],
  ["max_tokens 0", "POST", "/v1/completions", `{${P}, "max_tokens": 0}`, 400, "max_tokens"],
  ["max_tokens 1e20", "POST", "/v1/completions", `{${P}, "max_tokens": 1e20}`, 400, "max_tokens"],
  ["max_tokens over the context", "POST", "/v1/completions", `{${P}, "max_tokens": 5000}`, 400,
   "context_length_exceeded"],
  ["prompt over the context", "POST", "/v1/completions", `{"prompt": ${ids(1100)}}`, 400, "context_length_exceeded"],
  ["chat over the context", "POST", "/v1/chat/completions",
   `{"messages": [{"role": "user", "content": "${"word ".repeat(3000)}"}]}`, 400, "context_length_exceeded"],
  ["seed string", "POST", "/v1/completions", `{${P}, "seed": "abc"}`, 400, "seed"],
  ["stream string", "POST", "/v1/completions", `{${P}, "stream": "yes"}`, 400, "stream"],
  ["stream_options without stream", "POST", "/v1/completions", `{${P}, "stream_options": {"include_usage": true}}`,
   400, "stream_options"],
  ["17 stop strings", "POST", "/v1/completions", `{${P}, "stop": ${JSON.stringify(Array(17).fill("x"))}}`, 400,
   "stop"],
  ["stop too long", "POST", "/v1/completions", `{${P}, "stop": "${"x".repeat(300)}"}`, 400, "stop"],
  ["stop number", "POST", "/v1/completions", `{${P}, "stop": 7}`, 400, "stop"],
  ["logit_bias 1025 entries", "POST", "/v1/completions", `{${P}, "logit_bias": ${bias(1025)}}`, 400, "logit_bias"],
  ["logit_bias bad key", "POST", "/v1/completions", `{${P}, "logit_bias": {"x": 1}}`, 400, "logit_bias"],
  ["logit_bias bad value", "POST", "/v1/completions", `{${P}, "logit_bias": {"5": 1000}}`, 400, "logit_bias"],
  ["logprobs 100", "POST", "/v1/completions", `{${P}, "logprobs": 100}`, 400, "logprobs"],
  ["echo with suffix", "POST", "/v1/completions", `{${P}, "echo": true, "logprobs": 2, "suffix": "x"}`, 400, "suffix"],
  ["suffix without FIM tokens", "POST", "/v1/completions", `{${P}, "suffix": "end"}`, 400, "suffix"],
  ["prompt_logprobs 21", "POST", "/v1/completions", `{${P}, "prompt_logprobs": 21}`, 400, "prompt_logprobs"],
  ["prompt_logprobs string", "POST", "/v1/chat/completions",
   '{"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": "1"}', 400, "prompt_logprobs"],
  ["empty messages", "POST", "/v1/chat/completions", '{"messages": []}', 400, "messages"],
  ["messages not an array", "POST", "/v1/chat/completions", '{"messages": {"role": "user"}}', 400, "messages"],
  ["bad role", "POST", "/v1/chat/completions", '{"messages": [{"role": "god", "content": "x"}]}', 400,
   "messages[0].role"],
  ["content missing", "POST", "/v1/chat/completions", '{"messages": [{"role": "user"}]}', 400,
   "messages[0].content"],
  ["content a number", "POST", "/v1/chat/completions", '{"messages": [{"role": "user", "content": 3}]}', 400,
   "messages[0].content"],
  ["image part", "POST", "/v1/chat/completions",
   '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}', 400,
   "messages[0].content[0]"],
  ["top_logprobs without logprobs", "POST", "/v1/chat/completions", `{${M}, "top_logprobs": 3}`, 400, "top_logprobs"],
  ["top_logprobs 50", "POST", "/v1/chat/completions", `{${M}, "logprobs": true, "top_logprobs": 50}`, 400,
   "top_logprobs"],
  ["unsupported schema keyword", "POST", "/v1/chat/completions",
   `{${M}, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "patternProperties": {}}}}}`,
   400, "response_format"],
  ["unknown response_format", "POST", "/v1/chat/completions", `{${M}, "response_format": {"type": "yaml"}}`,
   400, "response_format"],
  ["left-recursive guided_grammar", "POST", "/v1/completions", `{${P}, "guided_grammar": "root ::= root \\"x\\""}`,
   400, "guided_grammar"],
  ["two guided fields", "POST", "/v1/completions", `{${P}, "guided_regex": "a+", "guided_choice": ["a"]}`,
   400, "guided_choice"],
  ["unknown model", "POST", "/v1/chat/completions", `{${M}, "model": "gpt-9"}`, 404, "model_not_found"],
  ["unknown model (GET)", "GET", "/v1/models/gpt-9", undefined, 404, "model_not_found"],
  ["missing key", "POST", "/v1/completions", `{${P}}`, 401, "invalid_api_key", { "Content-Type": "application/json" }],
  ["wrong key", "POST", "/v1/chat/completions", `{${M}}`, 401, "invalid_api_key", { Authorization: "Bearer nope" }],
  ["missing key on models", "GET", "/v1/models", undefined, 401, "invalid_api_key", {}],
  ["GET on completions", "GET", "/v1/completions", undefined, 405, "method_not_allowed"],
  ["DELETE on chat", "DELETE", "/v1/chat/completions", undefined, 405, "method_not_allowed"],
  ["POST on health", "POST", "/health", "{}", 405, "method_not_allowed"],
  ["unknown route", "GET", "/v1/nothing", undefined, 404, "not_found"],
  ["unknown route (POST)", "POST", "/v2/completions", "{}", 404, "not_found"],
  ["10 MB body", "POST", "/v1/completions", `{"prompt": "${"a".repeat(10 << 20)}"}`, 413, "payload_too_large"],
  ["invalid UTF-8", "POST", "/v1/completions",
   Buffer.concat([Buffer.from('{"prompt": "bad '), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]), 400,
   "invalid_json"],
  ["deep nesting", "POST", "/v1/completions", "[".repeat(100000), 400, "invalid_json"],
  ["tokenize without prompt", "POST", "/tokenize", "{}", 400],
  ["detokenize bad id", "POST", "/detokenize", '{"tokens": [-1]}', 400, "tokens"],
  ["detokenize not an array", "POST", "/detokenize", '{"tokens": "1 2"}', 400, "tokens"],
  // Depth: every place the issue found a stack overflow, 20,000 deep; the error names the limit of 64.
  ["deep chat_template_kwargs", "POST", "/v1/chat/completions", `{${M}, "chat_template_kwargs": {"x": ${deep(20000)}}}`,
   400, "invalid_json", undefined, /64/],
  ["deep object in chat_template_kwargs", "POST", "/v1/chat/completions",
   `{${M}, "chat_template_kwargs": ${deepObj(20000)}}`, 400, "invalid_json", undefined, /64/],
  ["deep tool parameters", "POST", "/v1/chat/completions",
   `{${M}, "tools": [{"type": "function", "function": {"name": "f", "parameters": ${deepObj(20000)}}}]}`, 400,
   "invalid_json", undefined, /64/],
  ["deep tool-call arguments (a JSON string)", "POST", "/v1/chat/completions",
   JSON.stringify({ max_tokens: 1, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "",
     tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: deep(20000) } }] }] }), 200],
  ["tool-call arguments over the depth limit stay a string", "POST", "/v1/chat/completions",
   JSON.stringify({ max_tokens: 1, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "",
     tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: deep(100) } }] }] }), 200],
  ["deep /tokenize messages", "POST", "/tokenize", `{"messages": [{"role": "user", "content": ${deep(20000)}}]}`,
   400, "invalid_json", undefined, /64/],
  ["depth 65 in a prompt", "POST", "/v1/completions", `{"prompt": ${deep(64)}}`, 400, "invalid_json", undefined, /64/],
  ["depth 63 in metadata is fine", "POST", "/v1/completions", `{${P}, "max_tokens": 1, "metadata": ${deep(62)}}`, 200],
  ["deep stop list", "POST", "/v1/completions", `{${P}, "stop": ${deep(5000)}}`, 400, "invalid_json"],
  ["deep response_format schema", "POST", "/v1/chat/completions",
   `{${M}, "response_format": {"type": "json_schema", "json_schema": {"schema": ${deepObj(20000)}}}}`, 400,
   "invalid_json"],
  ["deep logit_bias value", "POST", "/v1/completions", `{${P}, "logit_bias": {"5": ${deep(30000)}}}`, 400,
   "invalid_json"],
  // Huge key counts: linear parsing, answered within the per-case time limit.
  ["200,000 keys in metadata", "POST", "/v1/completions", `{${P}, "max_tokens": 1, "metadata": ${keys(200000)}}`, 200],
  ["100,000 logit_bias entries", "POST", "/v1/completions", `{${P}, "logit_bias": ${bias(100000)}}`, 400,
   "logit_bias", undefined, /1024/],
  ["200,000 keys in chat_template_kwargs", "POST", "/v1/chat/completions",
   `{${M}, "max_tokens": 1, "chat_template_kwargs": ${keys(200000)}}`, 200],
  ["200,000 duplicate keys", "POST", "/v1/completions",
   `{${P}, "max_tokens": 1, ${Array(200000).fill('"user": "u"').join(",")}}`, 200],
  ["100,000 keys in a message", "POST", "/v1/chat/completions",
   `{"messages": [${keys(100000).slice(0, -1)}, "role": "user", "content": "hi"}], "max_tokens": 1}`, 200],
  ["100,000 keys in tool parameters", "POST", "/v1/chat/completions",
   `{${M}, "max_tokens": 1, "tools": [{"type": "function", "function": {"name": "f", "parameters": ${keys(100000)}}}]}`,
   200],
  ["100,000 stop strings", "POST", "/v1/completions", `{${P}, "stop": ${JSON.stringify(Array(100000).fill("x"))}}`,
   400, "stop"],
  ["100,000 prompts", "POST", "/v1/completions", `{"prompt": ${JSON.stringify(Array(100000).fill("a"))}}`, 400,
   "prompt"],
  ["100,000 messages", "POST", "/v1/chat/completions",
   `{"messages": ${JSON.stringify(Array(100000).fill({ role: "user", content: "a" }))}}`, 400, "messages"],
  ["100,000 tools", "POST", "/v1/chat/completions",
   `{${M}, "tools": ${JSON.stringify(Array(100000).fill({ type: "function", function: { name: "f" } }))}}`, 400,
   "tools"],
  ["100,000 stop_token_ids", "POST", "/v1/completions", `{${P}, "stop_token_ids": ${ids(100000)}}`, 400,
   "stop_token_ids"],
  // Compressed bodies: decompressed size is capped (413 naming the limit); corrupt or unknown codings are clean 4xx.
  ["gzip body", "POST", "/v1/completions", gz(`{${P}, "max_tokens": 1}`), 200, undefined, gzHeaders],
  ["deflate body", "POST", "/v1/completions", zlib.deflateSync(Buffer.from(`{${P}, "max_tokens": 1}`)), 200,
   undefined, { ...gzHeaders, "Content-Encoding": "deflate" }],
  ["raw deflate body", "POST", "/tokenize", zlib.deflateRawSync(Buffer.from(`{${P}}`)), 200, undefined,
   { ...gzHeaders, "Content-Encoding": "deflate" }],
  ["gzip bomb (64 MiB inflated)", "POST", "/v1/completions", BOMB, 413, "payload_too_large", gzHeaders, /8388608/],
  ["corrupt gzip", "POST", "/v1/completions", Buffer.from("not gzip at all"), 400, undefined, gzHeaders],
  ["truncated gzip", "POST", "/v1/completions", gz(`{${P}}`).subarray(0, 12), 400, undefined, gzHeaders],
  ["gzip with trailing garbage", "POST", "/v1/completions", Buffer.concat([gz(`{${P}}`), Buffer.from("xx")]), 400,
   undefined, gzHeaders],
  ["brotli body", "POST", "/v1/completions", Buffer.from("x"), 415, "unsupported_content_encoding",
   { ...gzHeaders, "Content-Encoding": "br" }],
  ["gzip twice", "POST", "/v1/completions", gz(gz(`{${P}}`)), 415, "unsupported_content_encoding",
   { ...gzHeaders, "Content-Encoding": "gzip, gzip" }],
];

async function check([name, method, path, body, status, expect, headers, messageRe]) {
  const t0 = Date.now();
  const res = await fetch(server.url + path, { method, headers: headers ?? auth, body });
  const text = await res.text();
  assert.equal(res.status, status, `${name}: ${text.slice(0, 300)}`);
  assert.ok(Date.now() - t0 < 10000, `${name}: took ${Date.now() - t0} ms`);
  const j = JSON.parse(text);
  if (status < 400) return;
  if (messageRe) assert.match(j.error.message, messageRe, name);
  assert.equal(typeof j.error, "object", name);
  assert.equal(typeof j.error.message, "string", name);
  assert.ok(j.error.message.length > 0, name);
  assert.equal(typeof j.error.type, "string", name);
  assert.ok("param" in j.error && "code" in j.error, name);
  if (expect) assert.ok(j.error.param === expect || j.error.code === expect, `${name}: ${text.slice(0, 300)}`);
}

test(`${CASES.length} malformed or hostile requests get the right status and error shape`, async () => {
  assert.ok(CASES.length >= 90);
  for (const c of CASES) {
    await check(c);
    await assertIdleAndHealthy(server.url, c[0]);
  }
  // Some of them at once, too.
  await Promise.all(CASES.filter((c) => c[4] !== 413 && c[4] !== 200).map(check));
  await assertIdleAndHealthy(server.url, "all at once");
});

test("a slow client does not block others and is dropped", async () => {
  const sock = net.connect(new URL(server.url).port, "127.0.0.1");
  await new Promise((r) => sock.on("connect", r));
  sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 1000\r\n\r\n{"pro`);
  const closed = new Promise((r) => { sock.on("close", r); sock.on("error", r); sock.resume(); });
  // Meanwhile the server answers others.
  for (let i = 0; i < 3; i++) assert.equal((await fetch(server.url + "/health")).status, 200);
  const r = await fetch(server.url + "/v1/completions", { method: "POST", headers: auth,
                                                         body: `{${P}, "max_tokens": 2}` });
  assert.equal(r.status, 200);
  const t0 = Date.now();
  await closed;  // the read timeout drops it
  assert.ok(Date.now() - t0 < 20000);
});

test("the server is healthy and serving after all of that", async () => {
  assert.equal((await fetch(server.url + "/health")).status, 200);
  const r = await fetch(server.url + "/v1/chat/completions", { method: "POST", headers: auth,
                                                              body: `{${M}, "max_tokens": 3}` });
  assert.equal(r.status, 200);
  const j = await r.json();
  assert.equal(j.object, "chat.completion");
});
