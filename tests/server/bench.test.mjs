// `ridgeline bench serve` against a live server: every request completes and the report and JSON carry vLLM's
// metric names.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startServer, BIN } from "./harness.mjs";

let server;
before(async () => { server = await startServer(); });
after(async () => { assert.equal(await server.stop(), 0); });

test("bench serve reports TTFT, TPOT, ITL, E2EL and throughput", () => {
  const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "ridgeline-bench-")), "serve.json");
  const out = execFileSync(BIN, ["bench", "serve", "--url", server.url, "--request-rate", "50",
                                 "--max-concurrency", "4", "--num-prompts", "12", "--input-len", "32",
                                 "--output-len", "8", "--json", json], { encoding: "utf8" });
  for (const name of ["Successful requests:", "Request throughput (req/s):", "Output token throughput (tok/s):",
                      "Mean TTFT (ms):", "Median TTFT (ms):", "P90 TTFT (ms):", "P99 TTFT (ms):", "Mean TPOT (ms):",
                      "Mean ITL (ms):", "P99 ITL (ms):", "Mean E2EL (ms):"]) {
    assert.ok(out.includes(name), name);
  }
  const r = JSON.parse(fs.readFileSync(json, "utf8"));
  assert.equal(r.completed, 12);
  assert.equal(r.failed, 0);
  assert.equal(r.total_input_tokens, 12 * 32);
  assert.equal(r.total_output_tokens, 12 * 8);  // ignore_eos + min_tokens: exactly output-len each
  for (const k of ["mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_itl_ms",
                   "mean_e2el_ms", "request_throughput", "output_throughput"]) {
    assert.ok(r[k] > 0, k);
  }
  assert.ok(r.p99_ttft_ms >= r.median_ttft_ms && r.mean_e2el_ms >= r.mean_ttft_ms);
});
