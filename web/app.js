// The ridgeline playground: chat against /v1/chat/completions with streaming (fetch + SSE parsing), sampling
// controls, and live TTFT, tokens/s and KV-cache usage (polling /stats). Plain JS, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const history = [];  // [{role, content}] of the conversation so far (without the system prompt)
let modelName = null;
let controller = null;

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function showError(text) { $("error").textContent = text || ""; }

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  div.appendChild(body);
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

function samplingFields() {
  const body = {
    temperature: parseFloat($("temperature").value),
    top_p: parseFloat($("top_p").value),
    top_k: parseInt($("top_k").value || "0", 10),
    max_tokens: parseInt($("max_tokens").value || "128", 10),
  };
  const seed = $("seed").value.trim();
  if (seed !== "") body.seed = parseInt(seed, 10);
  return body;
}

// Reads an SSE stream and calls onEvent(parsedJson) per "data:" event; resolves at [DONE] or the end.
async function readSse(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let sep;
    while ((sep = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, sep);
      buffer = buffer.slice(sep + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  showError("");
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const div = addMessage("assistant", "");
  div.classList.add("streaming");
  const textEl = div.querySelector(".text");
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history);
  const body = Object.assign({ messages, stream: true, stream_options: { include_usage: true } }, samplingFields());
  if (modelName) body.model = modelName;

  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  const start = performance.now();
  let first = null, last = null, chunks = 0, usage = null, reply = "";
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => null);
      throw new Error(err && err.error ? `${res.status}: ${err.error.message}` : `HTTP ${res.status}`);
    }
    await readSse(res, (ev) => {
      if (ev.error) throw new Error(ev.error.message);
      if (ev.usage) usage = ev.usage;
      for (const c of ev.choices || []) {
        const piece = c.delta && c.delta.content;
        if (!piece) continue;
        const now = performance.now();
        if (first === null) {
          first = now;
          $("stat-ttft").textContent = `${Math.round(first - start)} ms`;
        }
        last = now;
        chunks++;
        reply += piece;
        textEl.textContent = reply;
        if (chunks > 1) $("stat-tps").textContent = `${((chunks - 1) / ((last - first) / 1000)).toFixed(1)} tok/s`;
        $("stat-tokens").textContent = String(chunks);
        $("messages").scrollTop = $("messages").scrollHeight;
      }
    });
  } catch (e) {
    if (e.name !== "AbortError") showError(String(e.message || e));
  } finally {
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    div.classList.remove("streaming");
    history.push({ role: "assistant", content: reply });
    const tokens = usage ? usage.completion_tokens : chunks;
    const meta = document.createElement("span");
    meta.className = "meta";
    const parts = [`${tokens} tokens`];
    if (first !== null) parts.push(`TTFT ${Math.round(first - start)} ms`);
    if (first !== null && last > first && tokens > 1) {
      parts.push(`${((tokens - 1) / ((last - first) / 1000)).toFixed(1)} tok/s`);
    }
    meta.textContent = parts.join(" · ");
    div.appendChild(meta);
    div.dataset.done = "true";
  }
}

async function pollStats() {
  try {
    const [health, stats] = await Promise.all([fetch("/health"), fetch("/stats")]);
    $("stat-health").className = "dot " + (health.ok ? "ok" : "bad");
    if (stats.ok) {
      const s = await stats.json();
      $("stat-kv").textContent = `${(100 * s.kv_cache_usage).toFixed(1)}%`;
      $("stat-running").textContent = `${s.num_requests_running} / ${s.num_requests_waiting} waiting`;
    }
  } catch (e) {
    $("stat-health").className = "dot bad";
  }
}

async function loadModel() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    if (!res.ok) return;
    const list = await res.json();
    if (list.data && list.data.length) {
      modelName = list.data[0].id;
      $("model-name").textContent = `${modelName} · context ${list.data[0].max_model_len}`;
    }
  } catch (e) { /* the server is not up yet: the stats poll shows it */ }
}

function bindRange(id) {
  const update = () => { $(id + "-value").textContent = $(id).value; };
  $(id).addEventListener("input", update);
  update();
}

function init() {
  bindRange("temperature");
  bindRange("top_p");
  $("api_key").value = localStorage.getItem("ridgeline_api_key") || "";
  $("api_key").addEventListener("change", () => {
    localStorage.setItem("ridgeline_api_key", $("api_key").value);
    loadModel();
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text || controller) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => { if (controller) controller.abort(); });
  $("clear").addEventListener("click", () => {
    history.length = 0;
    $("messages").innerHTML = "";
    showError("");
  });
  loadModel();
  pollStats();
  setInterval(pollStats, 1000);
}

init();
