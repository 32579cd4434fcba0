// The web playground in headless Chromium (Debian's `chromium`, driven over the DevTools protocol on
// --remote-debugging-pipe): the page loads, a message is sent, a streamed reply is rendered with its stats, and a
// screenshot is saved (RIDGELINE_SCREENSHOT, in the build folder).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startServer, sleep } from "./harness.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
let server, browser, profile, browserLog = "";

// A DevTools client over the pipe: fd 3 carries commands to Chromium, fd 4 its replies, NUL-separated JSON.
class Cdp {
  constructor(proc) {
    this.proc = proc;
    this.nextId = 1;
    this.pending = new Map();
    let buf = "";
    proc.on("exit", (code) => {
      for (const p of this.pending.values()) p.reject(new Error(`chromium exited (${code})`));
      this.pending.clear();
    });
    proc.stdio[4].on("data", (d) => {
      buf += d.toString("utf8");
      let i;
      while ((i = buf.indexOf("\0")) >= 0) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        const p = this.pending.get(msg.id);
        if (!p) continue;
        this.pending.delete(msg.id);
        if (msg.error) p.reject(new Error(JSON.stringify(msg.error)));
        else p.resolve(msg.result);
      }
    });
  }
  // Rejects instead of hanging when Chromium dies or does not answer.
  // The default allows a slow start on a loaded 2-core CI machine (Chromium's first answer once took over 20 s
  // while the soak and tokenizer suites ran beside it).
  send(method, params = {}, sessionId = undefined, timeoutMs = 90000) {
    if (this.proc.exitCode !== null) return Promise.reject(new Error(`chromium exited (${this.proc.exitCode})`));
    const id = this.nextId++;
    this.proc.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer to ${method} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
    });
  }
}

before(async () => {
  server = await startServer();
  profile = fs.mkdtempSync(path.join(os.tmpdir(), "ridgeline-chromium-"));
  browser = spawn(CHROMIUM, [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
    `--user-data-dir=${profile}`, "--remote-debugging-pipe", "--window-size=1200,800", "about:blank",
  ], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true });
  browser.stderr.on("data", (d) => { browserLog += d; });
  // A pipe reset while Chromium is being killed must not surface as an uncaught exception after the test.
  for (const fd of [3, 4]) browser.stdio[fd].on("error", (e) => { browserLog += `\npipe ${fd}: ${e.message}\n`; });
});

after(async () => {
  try {
    if (browser && browser.exitCode === null) {
      const exited = new Promise((r) => browser.on("exit", r));
      // The whole process group: Chromium's helper processes must not outlive the test (they keep writing into
      // the profile folder).
      const killGroup = (sig) => { try { process.kill(-browser.pid, sig); } catch { browser.kill(sig); } };
      killGroup("SIGTERM");
      const timer = setTimeout(() => killGroup("SIGKILL"), 5000);  // headless Chromium sometimes lingers
      await exited;
      clearTimeout(timer);
    }
    // Helpers of an already exited Chromium may linger in its process group.
    if (browser) {
      try { process.kill(-browser.pid, "SIGKILL"); } catch { /* the group is gone */ }
    }
  } finally {
    try {
      fs.rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } catch (e) {
      // A helper still writing into the temporary profile: leaving it to the OS is harmless, and must not keep the
      // server below from being stopped (that would hang the test until ctest's timeout).
      console.error(`could not remove ${profile}: ${e.message}`);
    }
    assert.equal(await server.stop(), 0);
  }
});

test("the playground streams a chat reply and shows its stats", { timeout: 170000 }, async (t) => {
  t.after(() => { if (process.exitCode) console.error(browserLog.slice(-4000)); });
  const cdp = new Cdp(browser);
  // Chromium answers on the pipe only once it is up: wait for that first, then open the page.
  const version = await cdp.send("Browser.getVersion", {}, undefined, 150000);
  assert.match(version.product, /Chrom/);
  const { targetId } = await cdp.send("Target.createTarget", { url: server.url + "/" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const evaluate = async (expression) => {
    const r = await cdp.send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true }, sessionId);
    if (r.exceptionDetails) throw new Error(JSON.stringify(r.exceptionDetails));
    return r.result.value;
  };
  const waitFor = async (expression, what, ms = 30000) => {
    const t0 = Date.now();
    for (;;) {
      const v = await evaluate(expression).catch(() => null);
      if (v) return v;
      assert.ok(Date.now() - t0 < ms, "timed out waiting for " + what);
      await sleep(100);
    }
  };
  await waitFor("document.readyState === 'complete' && document.getElementById('model-name').textContent !== ''",
                "the page and the model name");
  assert.match(await evaluate("document.title"), /ridgeline playground/);
  await waitFor("document.getElementById('stat-kv').textContent.endsWith('%')", "the KV stats poll");
  await evaluate(`(() => {
    document.getElementById('system').value = 'Answer as the KJV.';
    document.getElementById('max_tokens').value = '40';
    document.getElementById('seed').value = '5';
    document.getElementById('input').value = 'Who created the heaven and the earth?';
    document.getElementById('send').click();
  })()`);
  // While it streams, the reply grows in place.
  await waitFor("document.querySelector('.msg.assistant .text')?.textContent.length > 0", "the first tokens");
  await waitFor("document.querySelector('.msg.assistant')?.dataset.done === 'true'", "the end of the reply");
  const reply = await evaluate("document.querySelector('.msg.assistant .text').textContent");
  const meta = await evaluate("document.querySelector('.msg.assistant .meta').textContent");
  const error = await evaluate("document.getElementById('error').textContent");
  const ttft = await evaluate("document.getElementById('stat-ttft').textContent");
  assert.equal(error, "");
  assert.ok(reply.trim().length > 0, "a non-empty reply");
  assert.match(meta, /\d+ tokens · TTFT \d+ ms/);
  assert.match(ttft, /^\d+ ms$/);
  assert.equal(await evaluate("document.querySelector('.msg.user').textContent"),
               "Who created the heaven and the earth?");
  const shot = await cdp.send("Page.captureScreenshot", { format: "png" }, sessionId);
  const out = process.env.RIDGELINE_SCREENSHOT ?? path.join(os.tmpdir(), "ridgeline-playground.png");
  fs.writeFileSync(out, Buffer.from(shot.data, "base64"));
  assert.ok(fs.statSync(out).size > 10000);
});
