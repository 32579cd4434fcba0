// Soak: many short requests against one `ridgeline serve` on loopback, sampling the server's RSS as it goes, to
// show memory stays flat (no leak per request). A mix of traffic: completions and chat, streamed and not, with
// and without usage, tokenize, and 4xx errors (bad JSON, bad parameters), over keep-alive connections.
//
//   node tests/server/soak.mjs [--requests N] [--concurrency C] [--max-seconds S] [--json FILE]
// starts its own server (RIDGELINE_BIN) and prints a table: requests done, RSS (MiB) every 10% of the run, and
// the RSS slope after warm-up in MiB per 10k requests. Bounded by count and by time; exit 1 on any failed request.
import fs from "node:fs";
import { startServer, readSse } from "./harness.mjs";

const json = { "Content-Type": "application/json" };

export function rssMiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]) / 1024;
}

// Request i of the mix: [path, body, expected status, streamed].
function requestOf(i) {
  const prompt = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the meek"][i % 4];
  switch (i % 10) {
    case 0: return ["/v1/completions", { prompt, max_tokens: 2, stream: true, stream_options: { include_usage: true } }, 200, true];
    case 1: return ["/v1/chat/completions", { messages: [{ role: "user", content: prompt }], max_tokens: 2 }, 200, false];
    case 2: return ["/v1/chat/completions", { messages: [{ role: "user", content: prompt }], max_tokens: 2, stream: true }, 200, true];
    case 3: return ["/tokenize", { prompt }, 200, false];
    case 4: return ["/v1/completions", "{bad json", 400, false];
    case 5: return ["/v1/completions", { prompt, temperature: -1 }, 400, false];
    case 6: return ["/v1/completions", { prompt, max_tokens: 1, logprobs: 2, n: 2 }, 200, false];
    case 7: return ["/v1/completions", { prompt, max_tokens: 2, stop: ["\n"], seed: i }, 200, false];
    case 8: return ["/v1/chat/completions", { messages: [{ role: "user", content: prompt }], max_tokens: 1, logit_bias: { "5": 2 } }, 200, false];
    default: return ["/v1/completions", { prompt: [1, 2, 3, 4], max_tokens: 2, temperature: 0.8 }, 200, false];
  }
}

async function one(url, i) {
  const [path, body, status, streamed] = requestOf(i);
  const res = await fetch(url + path, { method: "POST", headers: json,
                                        body: typeof body === "string" ? body : JSON.stringify(body) });
  if (res.status !== status) throw new Error(`request ${i} ${path}: HTTP ${res.status}: ${await res.text()}`);
  if (streamed) {
    const { done } = await readSse(res);
    if (!done) throw new Error(`request ${i}: the stream ended without [DONE]`);
  } else {
    JSON.parse(await res.text());
  }
}

// Runs `requests` requests at `concurrency` against url; samples rssMiB(pid) every `sampleEvery` requests.
export async function runSoak({ url, pid, requests, concurrency, maxSeconds, sampleEvery = 1000, log = () => {} }) {
  const samples = [];  // [requests done, RSS MiB]
  let next = 0, done = 0, failed = 0, firstError = "";
  const t0 = Date.now();
  samples.push([0, rssMiB(pid)]);
  async function worker() {
    while (next < requests && (Date.now() - t0) / 1000 < maxSeconds) {
      const i = next++;
      try {
        await one(url, i);
      } catch (e) {
        failed++;
        if (!firstError) firstError = String(e.message ?? e);
      }
      done++;
      if (done % sampleEvery === 0) {
        samples.push([done, rssMiB(pid)]);
        log(`${done} requests, RSS ${samples.at(-1)[1].toFixed(1)} MiB, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  samples.push([done, rssMiB(pid)]);
  const seconds = (Date.now() - t0) / 1000;
  // Slope after warm-up (the first 20 % of the run, at least one sample): least squares, MiB per 10k requests.
  const warm = samples.filter(([n]) => n >= Math.max(sampleEvery, done * 0.2));
  let slope = 0;
  if (warm.length >= 2) {
    const mx = warm.reduce((a, [n]) => a + n, 0) / warm.length;
    const my = warm.reduce((a, [, r]) => a + r, 0) / warm.length;
    const sxy = warm.reduce((a, [n, r]) => a + (n - mx) * (r - my), 0);
    const sxx = warm.reduce((a, [n]) => a + (n - mx) ** 2, 0);
    slope = sxx > 0 ? (sxy / sxx) * 10000 : 0;
  }
  const growth = warm.length >= 2 ? warm.at(-1)[1] - warm[0][1] : 0;
  return { requests: done, failed, firstError, seconds, samples, slopeMiBPer10k: slope,
           growthAfterWarmupMiB: growth, warmStart: warm[0]?.[0] ?? 0 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : dflt;
  };
  const requests = Number(arg("--requests", 100000));
  const concurrency = Number(arg("--concurrency", 16));
  const maxSeconds = Number(arg("--max-seconds", 7200));
  const server = await startServer();
  let r;
  try {
    r = await runSoak({ url: server.url, pid: server.proc.pid, requests, concurrency, maxSeconds,
                        sampleEvery: Math.max(1000, Math.floor(requests / 20)), log: (s) => console.error(s) });
  } finally {
    await server.stop();
  }
  console.log(`| requests | failed | seconds | req/s | RSS start MiB | RSS after warm-up (${r.warmStart}) | RSS end | ` +
              `slope MiB/10k |`);
  console.log("|---|---|---|---|---|---|---|---|");
  const warm = r.samples.find(([n]) => n === r.warmStart);
  console.log(`| ${r.requests} | ${r.failed} | ${r.seconds.toFixed(0)} | ${(r.requests / r.seconds).toFixed(0)} | ` +
              `${r.samples[0][1].toFixed(1)} | ${warm[1].toFixed(1)} | ${r.samples.at(-1)[1].toFixed(1)} | ` +
              `${r.slopeMiBPer10k.toFixed(3)} |`);
  console.log("samples (requests: RSS MiB): " + r.samples.map(([n, m]) => `${n}: ${m.toFixed(1)}`).join(", "));
  const out = arg("--json", "");
  if (out) fs.writeFileSync(out, JSON.stringify(r, null, 1));
  if (r.failed) console.error("first error: " + r.firstError);
  process.exit(r.failed || r.slopeMiBPer10k > 1 ? 1 : 0);
}
