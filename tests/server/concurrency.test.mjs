// Load and cancellation: 64 concurrent streams all finish with valid UTF-8 and [DONE]; a client that drops its
// stream has its request aborted and its KV blocks freed (read from /metrics).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, getMetrics, metric, readSse, sleep } from "./harness.mjs";

let server;
before(async () => { server = await startServer(); });
after(async () => { assert.equal(await server.stop(), 0); });

const json = { "Content-Type": "application/json" };

test("64 concurrent streams complete with valid UTF-8 and [DONE]", async () => {
  const prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the meek",
                   "«Ζωή» — 生命 and ✝ life", "For God so loved"];
  const results = await Promise.all(Array.from({ length: 64 }, async (_, i) => {
    const chat = i % 2 === 0;
    const body = chat
      ? { messages: [{ role: "user", content: prompts[i % prompts.length] }], max_tokens: 24, stream: true,
          seed: i, stream_options: { include_usage: true } }
      : { prompt: prompts[i % prompts.length], max_tokens: 24, stream: true, seed: i,
          stream_options: { include_usage: true } };
    const res = await fetch(server.url + (chat ? "/v1/chat/completions" : "/v1/completions"),
                            { method: "POST", headers: json, body: JSON.stringify(body) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /text\/event-stream/);
    const { events, done } = await readSse(res);  // readSse decodes with fatal UTF-8 checking
    let text = "", finish = null, usage = null;
    for (const ev of events) {
      assert.equal(ev.error, undefined, JSON.stringify(ev.error));
      if (ev.usage) usage = ev.usage;
      for (const c of ev.choices) {
        text += chat ? (c.delta.content ?? "") : c.text;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    return { done, finish, usage, text };
  }));
  for (const r of results) {
    assert.ok(r.done, "stream ended with [DONE]");
    assert.ok(["stop", "length"].includes(r.finish));
    assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
    assert.ok(!r.text.includes("\uFFFD"), "no replacement characters: " + r.text);
  }
  assert.equal((await fetch(server.url + "/health")).status, 200);
});

test("a dropped stream is aborted and its KV freed", async () => {
  const controller = new AbortController();
  const res = await fetch(server.url + "/v1/completions", {
    method: "POST", headers: json, signal: controller.signal,
    body: JSON.stringify({ prompt: "In the beginning", max_tokens: 1000, ignore_eos: true, stream: true }),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  for (let i = 0; i < 5; i++) await reader.read();
  const during = await getMetrics(server.url);
  assert.equal(metric(during, "vllm:num_requests_running"), 1);
  assert.ok(metric(during, "vllm:kv_cache_usage_perc") > 0);
  const generatedBefore = metric(during, "vllm:generation_tokens_total");
  controller.abort();
  // 1000 tokens take many seconds on the CPU; the abort must free everything well before that.
  const t0 = Date.now();
  let after;
  for (;;) {
    after = await getMetrics(server.url);
    if (metric(after, "vllm:num_requests_running") === 0 && metric(after, "vllm:kv_cache_usage_perc") === 0) break;
    assert.ok(Date.now() - t0 < 3000, "KV not freed 3 s after the disconnect");
    await sleep(50);
  }
  assert.ok(metric(after, "vllm:generation_tokens_total") - generatedBefore < 500);
});
