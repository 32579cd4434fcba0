// Overload: a burst of 4 x max-num-seqs streams (max-num-seqs sized from the KV cache, read from /stats) with a
// slow reader and clients that disconnect at random: every stream that stays completes, none hangs, and the KV
// cache returns to idle. A full waiting queue answers 503 with Retry-After.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startServer, assertIdleAndHealthy, readSse, sleep } from "./harness.mjs";

const json = { "Content-Type": "application/json" };
const servers = [];
after(async () => { for (const s of servers) assert.equal(await s.stop(), 0); });

async function stream(url, maxTokens, signal) {
  const res = await fetch(url + "/v1/completions", {
    method: "POST", headers: json, signal,
    body: JSON.stringify({ prompt: "In the beginning", max_tokens: maxTokens, ignore_eos: true, stream: true,
                           stream_options: { include_usage: true } }),
  });
  return res;
}

test("4 x max-num-seqs streams, a slow reader and random disconnects: 0 lost, 0 hung, KV idle", async () => {
  // A small KV cache keeps the automatic max-num-seqs (and so the burst) small enough for a CPU test.
  const server = await startServer(["--kv-cache-gb", "0.02"]);
  servers.push(server);
  const stats = await (await fetch(server.url + "/stats")).json();
  const seqs = stats.max_num_seqs;
  assert.ok(Number.isInteger(seqs) && seqs >= 8, `max_num_seqs ${seqs}`);
  const burst = 4 * seqs;

  // The slow reader: a raw stream whose socket is not read for 3 s, then drained.
  const slow = new Promise((resolve) => {
    const sock = net.connect(Number(new URL(server.url).port), "127.0.0.1");
    const body = JSON.stringify({ prompt: "Slow", max_tokens: 32, ignore_eos: true, stream: true });
    let got = "";
    sock.on("connect", () => {
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                 `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      sock.pause();
      setTimeout(() => sock.resume(), 3000);
    });
    sock.on("data", (d) => { got += d; });
    sock.on("close", () => resolve(got));
  });

  const t0 = Date.now();
  const full = Array.from({ length: burst }, async () => {
    const res = await stream(server.url, 8);
    assert.equal(res.status, 200);
    const { events, done } = await readSse(res);
    const usage = events.find((e) => e.usage)?.usage;
    return { done, completion: usage?.completion_tokens };
  });
  const dropped = Array.from({ length: seqs }, async (_, i) => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20 + ((i * 37) % 400));
    try {
      const res = await stream(server.url, 200, controller.signal);
      await readSse(res);
      return "finished";
    } catch {
      return "aborted";
    }
  });
  const results = await Promise.all(full);
  await Promise.all(dropped);
  const slowText = await slow;
  const elapsed = Date.now() - t0;
  assert.equal(results.filter((r) => r.done && r.completion === 8).length, burst, "every burst stream completed");
  assert.match(slowText, /data: \[DONE\]/, "the slow reader got its whole stream");
  assert.ok(elapsed < 120000, `the burst took ${elapsed} ms`);
  await assertIdleAndHealthy(server.url, "after the burst");
});

test("a full waiting queue answers 503 with Retry-After and the rest complete", async () => {
  const server = await startServer(["--max-num-seqs", "2", "--max-waiting", "2"]);
  servers.push(server);
  const rs = await Promise.all(Array.from({ length: 16 }, async () => {
    const res = await stream(server.url, 24);
    if (res.status === 503) {
      const j = await res.json();
      return { status: 503, retry: res.headers.get("retry-after"), error: j.error };
    }
    const { done } = await readSse(res);
    return { status: res.status, done };
  }));
  const busy = rs.filter((r) => r.status === 503);
  const ok = rs.filter((r) => r.status === 200);
  assert.ok(busy.length >= 1, "some requests were refused");
  assert.equal(busy.length + ok.length, rs.length);
  for (const r of busy) {
    assert.ok(Number(r.retry) >= 1, "Retry-After");
    assert.equal(typeof r.error.message, "string");
    assert.equal(r.error.type, "server_overloaded");
  }
  for (const r of ok) assert.ok(r.done);
  await assertIdleAndHealthy(server.url, "after the 503s");
  await sleep(10);
});
