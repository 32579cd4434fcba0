// Starts and stops a `ridgeline serve` for the node:test suites: a free port (--port 0, the URL is read from the
// server's stdout), a small KV cache, and helpers for raw HTTP and /metrics.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";

export const BIN = process.env.RIDGELINE_BIN;
if (!BIN) throw new Error("set RIDGELINE_BIN to the ridgeline binary");
export const OPENAI = path.join(process.env.RIDGELINE_SOURCE_DIR ?? process.cwd(), "tests/js/node_modules/openai/index.mjs");

export async function startServer(extraArgs = []) {
  const kv = extraArgs.includes("--kv-cache-gb") ? [] : ["--kv-cache-gb", "0.25"];
  const args = ["serve", "--port", "0", ...kv, ...extraArgs];
  const proc = spawn(BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("server did not start in 60 s: " + stderr)), 60000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/at (http:\/\/[0-9.]+:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}): ${stderr}`)); });
  });
  return {
    url,
    proc,
    stderr: () => stderr,
    // SIGTERM, then the exit code (0 for a clean shutdown).
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = once(proc, "exit");
      proc.kill("SIGTERM");
      // A shutdown that hangs is a failure to report, not a test that never ends.
      const timer = setTimeout(() => proc.kill("SIGKILL"), 20000);
      const [code, signal] = await exited;
      clearTimeout(timer);
      if (signal === "SIGKILL") throw new Error("serve did not exit within 20 s of SIGTERM: " + stderr.slice(-2000));
      return code;
    },
  };
}

// Prometheus text → {"name{labels}": value} and the value of the first sample of a family by name.
export function parseMetrics(text) {
  const samples = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const sp = line.lastIndexOf(" ");
    samples.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return samples;
}

export function metric(samples, name) {
  for (const [k, v] of samples) {
    if (k === name || k.startsWith(name + "{")) return v;
  }
  return undefined;
}

export async function getMetrics(url) {
  const res = await fetch(url + "/metrics");
  return parseMetrics(await res.text());
}

// Reads a whole SSE response as raw bytes; returns {events: [parsed JSON], done: saw [DONE], bytes}.
export async function readSse(res) {
  const buf = Buffer.from(await res.arrayBuffer());
  const text = new TextDecoder("utf-8", { fatal: true }).decode(buf);  // throws on invalid UTF-8
  const events = [];
  let done = false;
  for (const block of text.split("\n\n")) {
    for (const line of block.split("\n")) {
      if (!line.startsWith("data: ")) continue;
      const data = line.slice(6);
      if (data === "[DONE]") done = true;
      else events.push(JSON.parse(data));
    }
  }
  return { events, done, bytes: buf.length };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// After a hostile case: /health is 200 and the engine is idle again (no running or waiting request, KV usage 0)
// within 5 s.
export async function assertIdleAndHealthy(url, name) {
  assert.equal((await fetch(url + "/health")).status, 200, `${name}: /health`);
  const t0 = Date.now();
  for (;;) {
    const m = await getMetrics(url);
    if (metric(m, "vllm:num_requests_running") === 0 && metric(m, "vllm:num_requests_waiting") === 0 &&
        metric(m, "vllm:kv_cache_usage_perc") === 0) return;
    assert.ok(Date.now() - t0 < 5000, `${name}: the engine is not idle 5 s later`);
    await sleep(20);
  }
}
