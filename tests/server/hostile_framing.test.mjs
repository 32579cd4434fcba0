// HTTP/1.1 framing attacks and edge cases over raw sockets (RFC 9112): conflicting or malformed lengths, bad
// chunking, smuggling shapes, header limits, pipelining, half-closed clients, Expect: 100-continue, static-file
// paths and ranges. After every case: no 5xx except a deliberate 503, an OpenAI-shaped error body on errors,
// /health 200, and the engine back to idle (no running or waiting request, KV usage 0).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startServer, assertIdleAndHealthy, sleep } from "./harness.mjs";

let server, port;
before(async () => {
  server = await startServer();
  port = Number(new URL(server.url).port);
});
after(async () => { assert.equal(await server.stop(), 0); });

// Sends the parts (string | Buffer; a number pauses that many ms), optionally half-closes, and collects every
// byte until the server closes or timeoutMs passes.
function exchange(parts, { halfClose = false, timeoutMs = 8000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    const chunks = [];
    let closedByServer = false;
    const timer = setTimeout(() => { sock.destroy(); finish(); }, timeoutMs);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks), closedByServer });
    };
    sock.on("data", (d) => chunks.push(d));
    sock.on("end", () => { closedByServer = true; sock.end(); finish(); });
    sock.on("error", () => finish());
    sock.on("close", () => finish());
    sock.on("connect", async () => {
      for (const p of parts) {
        if (typeof p === "number") await sleep(p);
        else sock.write(p);
      }
      if (halfClose) sock.end();
    });
  });
}

// Splits a byte stream into responses: {status, headers (lower-case), body (Buffer)}; handles Content-Length,
// chunked, and interim 1xx responses.
function parseResponses(buf) {
  const out = [];
  let i = 0;
  while (i < buf.length) {
    const end = buf.indexOf("\r\n\r\n", i);
    if (end < 0) break;
    const lines = buf.subarray(i, end).toString("latin1").split("\r\n");
    const status = Number(lines[0].split(" ")[1]);
    const headers = {};
    for (const l of lines.slice(1)) {
      const c = l.indexOf(":");
      headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
    }
    i = end + 4;
    let body = Buffer.alloc(0);
    if (status >= 100 && status < 200) { out.push({ status, headers, body }); continue; }
    if (headers["transfer-encoding"] === "chunked") {
      const parts = [];
      for (;;) {
        const le = buf.indexOf("\r\n", i);
        if (le < 0) { i = buf.length; break; }
        const n = parseInt(buf.subarray(i, le).toString("latin1"), 16);
        i = le + 2;
        if (n === 0) { i += 2; break; }
        parts.push(buf.subarray(i, i + n));
        i += n + 2;
      }
      body = Buffer.concat(parts);
    } else {
      const n = Number(headers["content-length"] ?? 0);
      body = buf.subarray(i, i + n);
      i += n;
    }
    out.push({ status, headers, body });
  }
  return out;
}

function assertErrorShape(r, name) {
  const j = JSON.parse(r.body.toString());
  assert.equal(typeof j.error, "object", name);
  assert.ok(typeof j.error.message === "string" && j.error.message.length > 0, name);
  assert.equal(typeof j.error.type, "string", name);
  assert.ok("param" in j.error && "code" in j.error, name);
}

const H = "Host: x\r\n";
const COMP = '{"prompt": "In the beginning", "max_tokens": 2}';
const post = (path, body, extra = "") =>
  `POST ${path} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
  `${extra}\r\n${body}`;
const get = (path, extra = "") => `GET ${path} HTTP/1.1\r\n${H}${extra}\r\n`;
const bigHeader = "X-Big: " + "a".repeat(70 << 10) + "\r\n";

// [name, parts, expected statuses in order (the server closes after an error), options]
const CASES = [
  ["conflicting Content-Length", [`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}{}{}`], [400]],
  ["Content-Length list with different values", [`POST /tokenize HTTP/1.1\r\n${H}Content-Length: 2, 3\r\n\r\n{}{`], [400]],
  ["Content-Length and Transfer-Encoding", [`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`], [400]],
  ["Transfer-Encoding gzip", [`POST /v1/completions HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n`], [400]],
  ["Transfer-Encoding twice", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`], [400]],
  ["Transfer-Encoding with odd spacing", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`], [400]],
  ["bad chunk size", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`], [400]],
  ["chunk longer than declared", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n`], [400]],
  ["chunk size overflow", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n`], [[400, 413]]],
  ["chunked body over the limit", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n900000\r\n`], [413]],
  ["negative Content-Length", [`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n`], [400]],
  ["non-numeric Content-Length", [`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: abc\r\n\r\n`], [400]],
  ["Content-Length over the limit", [`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: 99999999999\r\n\r\n`], [413]],
  ["header block over 64 KiB", [`GET /health HTTP/1.1\r\n${H}${bigHeader}\r\n`], [431]],
  ["request line over 64 KiB", [`GET /${"a".repeat(70 << 10)} HTTP/1.1\r\n${H}\r\n`], [431]],
  ["missing Host on HTTP/1.1", ["GET /health HTTP/1.1\r\n\r\n"], [400]],
  ["two Host headers", [`GET /health HTTP/1.1\r\n${H}${H}\r\n`], [400]],
  ["HTTP/2.0 version", [`GET /health HTTP/2.0\r\n${H}\r\n`], [400]],
  ["HTTP/9.9 version", [`GET /health HTTP/9.9\r\n${H}\r\n`], [400]],
  ["garbage request line", ["HELLO\r\n\r\n"], [400]],
  ["binary garbage", [Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03, 0x0d, 0x0a, 0x0d, 0x0a])], [400]],
  ["NUL in a header value", [`GET /health HTTP/1.1\r\n${H}X-A: a\0b\r\n\r\n`], [400]],
  ["header without a colon", [`GET /health HTTP/1.1\r\n${H}NoColonHere\r\n\r\n`], [400]],
  ["space before the colon", [`GET /health HTTP/1.1\r\n${H}Content-Length : 0\r\n\r\n`], [400]],
  ["obsolete line folding", [`GET /health HTTP/1.1\r\n${H}X-A: a\r\n b\r\nConnection: close\r\n\r\n`], [[400, 200]]],
  ["asterisk target on GET", [`GET * HTTP/1.1\r\n${H}\r\n`], [400]],
  ["authority-form target", [`GET example.com:80 HTTP/1.1\r\n${H}\r\n`], [400]],
  ["absolute-form target", [`GET http://x/health HTTP/1.1\r\n${H}Connection: close\r\n\r\n`], [200]],
  ["HTTP/1.0 without Host", ["GET /health HTTP/1.0\r\n\r\n"], [200]],
  ["empty lines before the request", [`\r\n\r\n\r\nGET /health HTTP/1.1\r\n${H}Connection: close\r\n\r\n`], [200]],
  ["unknown method on an API path", [`BREW /v1/completions HTTP/1.1\r\n${H}Connection: close\r\n\r\n`], [405]],
  ["HEAD /health", [`HEAD /health HTTP/1.1\r\n${H}Connection: close\r\n\r\n`], [200]],
  ["path traversal", [get("/../../etc/passwd", "Connection: close\r\n")], [404]],
  ["encoded path traversal", [get("/%2e%2e/%2e%2e/etc/passwd", "Connection: close\r\n")], [404]],
  ["encoded slash traversal", [get("/..%2f..%2fetc%2fpasswd", "Connection: close\r\n")], [404]],
  ["hidden file", [get("/.git/config", "Connection: close\r\n")], [404]],
  ["bad percent escape", [get("/%zz", "Connection: close\r\n")], [404]],
  ["Range past the end of a static file", [get("/index.html", "Range: bytes=99999999-\r\nConnection: close\r\n")], [416]],
  ["Range with an empty suffix", [get("/app.js", "Range: bytes=-0\r\nConnection: close\r\n")], [416]],
  ["valid Range", [get("/app.js", "Range: bytes=0-9\r\nConnection: close\r\n")], [206]],
  ["malformed Range is ignored", [get("/app.js", "Range: pages=1\r\nConnection: close\r\n")], [200]],
  ["pipelined GET, POST, GET", [get("/health") + post("/v1/completions", COMP) + get("/v1/models", "Connection: close\r\n")], [200, 200, 200]],
  ["pipelined POSTs byte by byte", [...(post("/tokenize", '{"prompt": "a b"}') + post("/tokenize", '{"prompt": "c"}', "Connection: close\r\n")).split("")], [200, 200]],
  ["pipelined chunked then plain", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\n{"pro\r\nb\r\nmpt": "hi"}\r\n0\r\n\r\n` + get("/health", "Connection: close\r\n")], [200, 200]],
  ["pipelined with an error in the middle", [get("/health") + `GET /health HTTP/1.1\r\n\r\n` + get("/health")], [200, 400]],
  ["half-closed after a GET", [get("/health")], [200], { halfClose: true }],
  ["half-closed after a completion", [post("/v1/completions", COMP)], [200], { halfClose: true }],
  ["half-closed after a stream", [post("/v1/completions", '{"prompt": "x", "max_tokens": 3, "stream": true}')], [200], { halfClose: true }],
  ["half-closed after two pipelined requests", [get("/health") + post("/tokenize", '{"prompt": "a"}')], [200, 200], { halfClose: true }],
  ["half-closed in the middle of a body", [`POST /tokenize HTTP/1.1\r\n${H}Content-Length: 100\r\n\r\n{"pro`], [400], { halfClose: true }],
  ["Expect: 100-continue", [`POST /tokenize HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 17\r\nConnection: close\r\n\r\n`, 300, '{"prompt": "a b"}'], [100, 200]],
  ["Expect: 100-continue over the limit", [`POST /tokenize HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 999999999\r\n\r\n`], [413]],
  ["chunked body with trailers", [`POST /tokenize HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n11\r\n{"prompt": "a b"}\r\n0\r\nX-Trailer: 1\r\n\r\n`], [200]],
  ["Connection: close is honoured", [get("/health", "Connection: close\r\n") + get("/health")], [200]],
  ["smuggled request after Content-Length: 0", [`POST /tokenize HTTP/1.1\r\n${H}Content-Length: 0\r\n\r\nGET /health HTTP/1.1\r\n${H}Connection: close\r\n\r\n`], [400, 200]],
];

test(`${CASES.length} framing cases answer correctly and leave the server healthy and idle`, async () => {
  assert.ok(CASES.length >= 50);
  for (const [name, parts, expected, opts] of CASES) {
    const t0 = Date.now();
    const { data, closedByServer } = await exchange(parts, opts);
    const rs = parseResponses(data);
    const got = rs.map((r) => r.status);
    const ok = got.length === expected.length &&
      expected.every((e, k) => (Array.isArray(e) ? e.includes(got[k]) : e === got[k]));
    assert.ok(ok, `${name}: statuses ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}: ` +
                  data.toString("latin1").slice(0, 300));
    for (const r of rs) {
      assert.ok(r.status < 500 || r.status === 503, `${name}: ${r.status}`);
      if (r.status >= 400) assertErrorShape(r, name);
    }
    if (rs.some((r) => r.status >= 400)) assert.ok(closedByServer, `${name}: the connection stays open after an error`);
    assert.ok(Date.now() - t0 < 6000, `${name}: took ${Date.now() - t0} ms (a stall)`);
    await assertIdleAndHealthy(server.url, name);
  }
});

test("a 413 body is read by a client that is still sending (no reset)", async () => {
  const body = "x".repeat(9 << 20);
  const { data } = await exchange([`POST /v1/completions HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`, body]);
  const rs = parseResponses(data);
  assert.equal(rs[0].status, 413);
  assertErrorShape(rs[0], "413");
  assert.match(JSON.parse(rs[0].body).error.message, /8388608/);
});

test("a half-closed streaming client gets the whole stream", async () => {
  const { data } = await exchange([post("/v1/completions", '{"prompt": "x", "max_tokens": 4, "stream": true}')],
                                  { halfClose: true });
  const rs = parseResponses(data);
  assert.equal(rs.length, 1);
  assert.match(rs[0].body.toString(), /data: \[DONE\]/);
});

test("a pipelined burst of 50 requests on one connection is answered in order without stalls", async () => {
  let req = "";
  for (let i = 0; i < 50; i++) {
    req += post("/tokenize", JSON.stringify({ prompt: "word ".repeat(i + 1) }), i === 49 ? "Connection: close\r\n" : "");
  }
  const t0 = Date.now();
  const { data } = await exchange([req]);
  const rs = parseResponses(data);
  assert.equal(rs.length, 50);
  rs.forEach((r, i) => {
    assert.equal(r.status, 200);
    assert.ok(JSON.parse(r.body).count >= i + 1);
  });
  assert.ok(Date.now() - t0 < 5000);
});
