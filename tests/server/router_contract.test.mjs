// The metrics contract with the Gateway API Inference Extension's endpoint picker (EPP; llm-d's inference
// scheduler): the Prometheus names, types and labels its default configuration reads from each model server
// (the defaults of its --total-queued-requests-metric, --total-running-requests-metric,
// --kv-cache-usage-percentage-metric and --cache-info-metric flags; docs/deploy.md). Renaming or dropping any of
// them breaks routing for every deployment that uses the picker, so this test fails first.
// vllm:lora_requests_info (--lora-info-metric) is not exported: ridgeline serves no LoRA adapters, and the
// picker's LoRA-affinity scorer then has nothing to read, as with vLLM without --enable-lora.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./harness.mjs";

let server;
before(async () => {
  server = await startServer(["--served-model-name", "router-tiny"]);
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

// Prometheus text → {families: name → {type, samples: [{labels, value}]}}.
function parse(text) {
  const families = new Map();
  const fam = (name) => {
    if (!families.has(name)) families.set(name, { type: undefined, samples: [] });
    return families.get(name);
  };
  for (const line of text.split("\n")) {
    const t = line.match(/^# TYPE (\S+) (\S+)$/);
    if (t) {
      fam(t[1]).type = t[2];
      continue;
    }
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/);
    assert.ok(m, `malformed sample line: ${line}`);
    const labels = {};
    for (const kv of (m[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    fam(m[1]).samples.push({ labels, value: Number(m[4]) });
  }
  return families;
}

// name → [type, check(value, labels)] — exactly what the picker's extractor parses.
const CONTRACT = {
  "vllm:num_requests_waiting": ["gauge", (v) => Number.isInteger(v) && v >= 0],
  "vllm:num_requests_running": ["gauge", (v) => Number.isInteger(v) && v >= 0],
  "vllm:kv_cache_usage_perc": ["gauge", (v) => v >= 0 && v <= 1],
  "vllm:cache_config_info": ["gauge", (v, l) => v === 1 && Number(l.block_size) > 0 && Number(l.num_gpu_blocks) > 0],
};

async function scrape() {
  const res = await fetch(server.url + "/metrics");
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
  return parse(await res.text());
}

test("every metric the endpoint picker reads is exported with its type and labels", async () => {
  // Before and after traffic: the picker scrapes idle servers too.
  for (const when of ["idle", "after a request"]) {
    if (when !== "idle") {
      const r = await fetch(server.url + "/v1/completions", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ prompt: "In the beginning", max_tokens: 4 }),
      });
      assert.equal(r.status, 200);
    }
    const families = await scrape();
    for (const [name, [type, check]] of Object.entries(CONTRACT)) {
      const f = families.get(name);
      assert.ok(f, `${name} missing from /metrics (${when}): the endpoint picker reads it`);
      assert.equal(f.type, type, `${name} must be a ${type}`);
      assert.ok(f.samples.length >= 1, `${name} has no sample`);
      for (const s of f.samples) {
        assert.ok(check(s.value, s.labels), `${name} ${JSON.stringify(s)} out of contract`);
        assert.equal(s.labels.model_name ?? "router-tiny", "router-tiny");
      }
    }
  }
});

test("the queue gauges move with load as the picker expects", async () => {
  // A burst larger than one step: running must rise above 0 while requests are in flight.
  const burst = Array.from({ length: 8 }, () => fetch(server.url + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "And God said", max_tokens: 64, ignore_eos: true }),
  }));
  let seen = 0;
  for (let i = 0; i < 50 && seen === 0; i++) {
    const f = await scrape();
    seen = f.get("vllm:num_requests_running").samples[0].value + f.get("vllm:num_requests_waiting").samples[0].value;
    if (!seen) await new Promise((r) => setTimeout(r, 20));
  }
  await Promise.all(burst.map((p) => p.then((r) => r.text())));  // whole bodies: the requests are done
  assert.ok(seen > 0, "num_requests_running + num_requests_waiting never rose under load");
  // Back to idle within a scrape interval (the gauges are published at the end of each engine step).
  let idle = -1;
  for (let i = 0; i < 50 && idle !== 0; i++) {
    const f = await scrape();
    idle = f.get("vllm:num_requests_running").samples[0].value + f.get("vllm:num_requests_waiting").samples[0].value;
    if (idle) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(idle, 0, "the queue gauges did not return to 0 when idle");
});

test("readiness: /health answers 200 while the engine loop runs", async () => {
  const res = await fetch(server.url + "/health");
  assert.equal(res.status, 200);
});

test("deploy/ manifests agree with the server: port, readiness path, pool selector", async () => {
  const fs = await import("node:fs");
  const path = await import("node:path");
  const dir = path.join(process.env.RIDGELINE_SOURCE_DIR ?? process.cwd(), "deploy");
  const dep = fs.readFileSync(path.join(dir, "ridgeline-deployment.yaml"), "utf8");
  const pool = fs.readFileSync(path.join(dir, "inferencepool.yaml"), "utf8");
  const svc = fs.readFileSync(path.join(dir, "ridgeline-service.yaml"), "utf8");
  const route = fs.readFileSync(path.join(dir, "httproute.yaml"), "utf8");
  assert.match(dep, /readinessProbe:\s*\n\s*httpGet:\s*\n\s*path: \/health/);
  assert.match(dep, /containerPort: 8000/);
  assert.match(dep, /- --port\s*\n\s*- "8000"/);
  assert.match(pool, /apiVersion: inference\.networking\.k8s\.io\/v1\nkind: InferencePool/);
  assert.match(pool, /targetPorts:\s*\n\s*- number: 8000/);
  const label = dep.match(/app: (ridgeline-[\w-]+)/)[1];
  for (const f of [pool, svc]) assert.ok(f.includes(`app: ${label}`), "selectors match the pod label");
  assert.match(route, /kind: InferencePool\s*\n\s*name: ridgeline-llama-3-1-8b/);
});
