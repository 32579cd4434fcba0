// The OpenAI wire format with the official `openai` client (tests/js/node_modules) against `ridgeline serve` on
// the default model: completions and chat, streamed and not, usage, stop, n, seeds, logprobs, prompt_logprobs and
// echo, logit_bias,
// tokenize/detokenize, models, health, metrics, the playground files, and a clean SIGTERM shutdown.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { startServer, OPENAI, BIN, getMetrics, metric, readSse } from "./harness.mjs";

const { default: OpenAI } = await import(pathToFileURL(OPENAI));
let server, client, model;
const PROMPT = "In the beginning God created";

before(async () => {
  server = await startServer(["--served-model-name", "tiny-kjv"]);
  client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
  model = "tiny-kjv";
});

after(async () => {
  const code = await server.stop();
  assert.equal(code, 0, "serve exits 0 on SIGTERM");
});

async function post(path, body) {
  const res = await fetch(server.url + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

test("models, health and the playground", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ["tiny-kjv"]);
  assert.equal(list.data[0].object, "model");
  const one = await client.models.retrieve("tiny-kjv");
  assert.equal(one.id, "tiny-kjv");
  assert.equal((await fetch(server.url + "/health")).status, 200);
  const page = await fetch(server.url + "/");
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<title>ridgeline playground<\/title>/);
  assert.equal((await fetch(server.url + "/app.js")).status, 200);
});

test("greedy completion matches `ridgeline generate` and reports usage", async () => {
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 1);
  const tok = await post("/tokenize", { prompt: PROMPT });
  assert.equal(r.usage.prompt_tokens, tok.json.count);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // The CLI runs the same engine through its offline API: an independent consumer of the same tokens.
  const cli = execFileSync(BIN, ["generate", "--prompt", PROMPT, "--max-tokens", "12", "--temperature", "0",
                                 "--kv-cache-gb", "0.05"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  assert.equal(r.choices[0].text, cli.replace(/\n$/, ""));
  if (r.choices[0].finish_reason === "length") assert.equal(r.usage.completion_tokens, 12);
  else assert.equal(r.choices[0].finish_reason, "stop");
});

test("streamed completion equals the non-streamed one, with usage", async () => {
  const body = { model, prompt: PROMPT, max_tokens: 16, temperature: 0, ignore_eos: true };
  const full = await client.completions.create(body);
  const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, full.choices[0].text);
  assert.equal(finish, "length");
  assert.equal(full.choices[0].finish_reason, "length");
  assert.equal(usage.completion_tokens, 16);
  assert.equal(full.usage.completion_tokens, 16);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
});

test("chat, streamed and not", async () => {
  const messages = [{ role: "system", content: "You are the KJV." }, { role: "user", content: "Who made heaven?" }];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  const tok = await post("/tokenize", { messages });
  assert.equal(r.usage.prompt_tokens, tok.json.count);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 20);

  const stream = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0,
                                                        stream: true, stream_options: { include_usage: true } });
  let text = "", role = null, finish = null, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, "assistant");
  assert.equal(text, r.choices[0].message.content);
  assert.equal(finish, r.choices[0].finish_reason);
  assert.deepEqual(usage.completion_tokens, r.usage.completion_tokens);
});

test("max_completion_tokens, tool calls and tool results in the history", async () => {
  const r = await client.chat.completions.create({
    model, max_completion_tokens: 3, temperature: 0, ignore_eos: true,
    messages: [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function",
        function: { name: "weather", arguments: "{\"city\": \"Zion\"}" } }] },
      { role: "tool", tool_call_id: "c1", content: "fair" },
    ],
    tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }],
  });
  assert.equal(r.usage.completion_tokens, 3);
  assert.equal(r.choices[0].finish_reason, "length");
});

test("stop strings cut the text, streamed and not, with n > 1", async () => {
  const base = await client.completions.create({ model, prompt: PROMPT, max_tokens: 24, temperature: 0,
                                                 ignore_eos: true });
  const text = base.choices[0].text;
  const words = text.trim().split(/\s+/);
  assert.ok(words.length >= 4, text);
  const stop = words[2];
  const cut = text.slice(0, text.indexOf(stop));
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 24, temperature: 0, stop: [stop],
                                              ignore_eos: true });
  assert.equal(r.choices[0].text, cut);
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(r.usage.completion_tokens < 24);

  const n = await client.completions.create({ model, prompt: PROMPT, max_tokens: 24, temperature: 0, stop, n: 2,
                                              ignore_eos: true });
  assert.equal(n.choices.length, 2);
  for (const c of n.choices) {
    assert.equal(c.text, cut);
    assert.equal(c.finish_reason, "stop");
  }
  const stream = await client.completions.create({ model, prompt: PROMPT, max_tokens: 24, temperature: 0, stop,
                                                   stream: true, ignore_eos: true });
  let streamed = "", finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      streamed += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(streamed, cut);
  assert.equal(finish, "stop");
});

test("n choices and seed reproducibility", async () => {
  const body = { model, prompt: "And the LORD said", max_tokens: 12, temperature: 1.0, top_k: 0, top_p: 1,
                 n: 3, seed: 1234, ignore_eos: true };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 36);
  const others = [];
  for (const seed of [1, 2, 3]) {
    const c = await client.completions.create({ ...body, n: 1, seed });
    others.push(c.choices[0].text);
  }
  assert.ok(new Set([...others, a.choices[0].text]).size > 1, "different seeds give different samples");
  const s = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], n: 2,
                                                  max_tokens: 5, seed: 7, temperature: 1 });
  assert.equal(s.choices.length, 2);
});

test("logprobs: completions and chat", async () => {
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 3,
                                              ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.token_logprobs.length, 6);
  assert.equal(lp.top_logprobs.length, 6);
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  for (let i = 0; i < 6; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.values(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(Math.max(...top) - lp.token_logprobs[i]) < 1e-4);
  }
  assert.equal(lp.text_offset[0], 0);

  const c = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }],
                                                  max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
                                                  ignore_eos: true });
  const content = c.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const e of content) {
    assert.equal(typeof e.token, "string");
    assert.ok(e.logprob <= 0);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
  }
  const none = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }],
                                                     max_tokens: 2 });
  assert.equal(none.choices[0].logprobs, null);
});

test("prompt_logprobs and echo with logprobs: completions and chat, streamed and not", async () => {
  const ids = (await post("/tokenize", { prompt: PROMPT })).json.tokens;
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 3, temperature: 0, logprobs: 2,
                                              echo: true, prompt_logprobs: 3, ignore_eos: true });
  const pl = r.choices[0].prompt_logprobs;
  assert.equal(pl.length, ids.length);
  assert.equal(pl[0], null);
  const lp = r.choices[0].logprobs;
  // echo + logprobs: the prompt's tokens first (the first with null), then the 3 generated ones.
  assert.equal(lp.tokens.length, ids.length + 3);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  assert.equal(lp.text_offset[0], 0);
  assert.ok(r.choices[0].text.startsWith(PROMPT));
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  for (let k = 1; k < ids.length; k++) {
    const entry = pl[k][String(ids[k])];
    assert.ok(entry, `position ${k} holds the prompt token`);
    assert.ok(entry.logprob <= 0 && entry.rank >= 1);
    assert.equal(typeof entry.decoded_token, "string");
    assert.ok(Object.keys(pl[k]).length >= 3 && Object.keys(pl[k]).length <= 4);
    const ranks = Object.values(pl[k]).map((e) => e.rank).sort((a, b) => a - b);
    if (entry.rank > 3) assert.deepEqual(ranks, [1, 2, 3, entry.rank]);
    // The same score twice: vLLM's list and OpenAI's echo logprobs.
    assert.ok(Math.abs(lp.token_logprobs[k] - entry.logprob) < 1e-6);
    assert.equal(Object.keys(lp.top_logprobs[k]).length <= 2, true);
  }
  // Teacher forcing agrees with sampling: the first generated token scored as a prompt token.
  const first = await client.completions.create({ model, prompt: ids, max_tokens: 1, temperature: 0, logprobs: 0,
                                                  ignore_eos: true });
  const t1 = (await post("/tokenize", { prompt: first.choices[0].text, add_special_tokens: false })).json.tokens;
  assert.equal(t1.length, 1, `the first generated token "${first.choices[0].text}" re-tokenizes to itself`);
  const scored = await client.completions.create({ model, prompt: [...ids, ...t1], max_tokens: 1, temperature: 0,
                                                   prompt_logprobs: 0 });
  const last = scored.choices[0].prompt_logprobs[ids.length][String(t1[0])];
  assert.equal(last.rank, 1);
  assert.ok(Math.abs(last.logprob - first.choices[0].logprobs.token_logprobs[0]) < 1e-4,
            `${last.logprob} vs ${first.choices[0].logprobs.token_logprobs[0]}`);

  const c = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 2,
                                                  prompt_logprobs: 1 });
  assert.equal(c.prompt_logprobs[0], null);
  assert.equal(c.prompt_logprobs.length, c.usage.prompt_tokens);
  const stream = await client.completions.create({ model, prompt: PROMPT, max_tokens: 3, prompt_logprobs: 1,
                                                   stream: true });
  const lists = [];
  for await (const chunk of stream) if (chunk.choices[0]?.prompt_logprobs) lists.push(chunk.choices[0].prompt_logprobs);
  assert.equal(lists.length, 1, "the list comes once, in the first chunk");
  assert.equal(lists[0].length, ids.length);
});

test("logit_bias forces a token; tokenize and detokenize round-trip", async () => {
  const tok = await post("/tokenize", { prompt: " LORD", add_special_tokens: false });
  assert.equal(tok.status, 200);
  const id = tok.json.tokens[0];
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 4, temperature: 0,
                                              logit_bias: { [id]: 100 }, ignore_eos: true });
  const det = await post("/detokenize", { tokens: [id, id, id, id] });
  assert.equal(det.status, 200);
  assert.equal(r.choices[0].text, det.json.prompt);
  const round = await post("/detokenize", { tokens: (await post("/tokenize", { prompt: PROMPT })).json.tokens });
  assert.equal(round.json.prompt, PROMPT);
});

test("presence, frequency and repetition penalties, top_k, min_p are accepted", async () => {
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 8, presence_penalty: 1.5,
                                              frequency_penalty: 1.0, repetition_penalty: 1.3, top_k: 5,
                                              min_p: 0.05, top_p: 0.9, temperature: 0.7, seed: 3 });
  assert.ok(r.usage.completion_tokens >= 1);
});

test("metrics: vLLM names, histograms and counters after traffic", async () => {
  const stream = await fetch(server.url + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: 8, stream: true, ignore_eos: true }),
  });
  const { done } = await readSse(stream);
  assert.ok(done);
  const m = await getMetrics(server.url);
  for (const name of ["vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count",
                      "vllm:e2e_request_latency_seconds_count", "vllm:prompt_tokens_total",
                      "vllm:generation_tokens_total"]) {
    assert.ok(metric(m, name) > 0, name);
  }
  for (const name of ["vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
                      "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                      "vllm:num_preemptions_total"]) {
    assert.notEqual(metric(m, name), undefined, name);
  }
  // The same prompt again and again: the prefix cache was hit.
  assert.ok(metric(m, "vllm:prefix_cache_hits_total") > 0);
});
