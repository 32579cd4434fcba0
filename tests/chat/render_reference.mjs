// Renders the chat-template parity cases with @huggingface/jinja (the reference implementation), so the C++
// test can compare byte for byte. Usage: node render_reference.mjs CASES.json OUT.json
// Each case's output is {"output": "..."} or {"error": "..."}. strftime_now sees the case's fixed clock (UTC).
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

process.env.TZ = "UTC";
const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..");
const modules = join(repo, "tests", "js", "node_modules");
if (!existsSync(join(modules, "@huggingface", "jinja"))) {
  console.error(`missing ${modules}/@huggingface/jinja: run scripts/setup.sh to install the npm test tools`);
  process.exit(2);
}
const require = createRequire(join(modules, "noop.js"));
const { Template } = require("@huggingface/jinja");

const RealDate = Date;
let fixedMillis = 0;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixedMillis);
    else super(...args);
  }
  static now() {
    return fixedMillis;
  }
};

const SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
const tokenText = (v) => (typeof v === "string" ? v : v && typeof v.content === "string" ? v.content : null);

function loadTemplate(spec) {
  if (spec.tokenizer_config) {
    const cfg = JSON.parse(readFileSync(join(repo, spec.tokenizer_config), "utf8"));
    const tokens = {};
    for (const k of SPECIAL) {
      const t = cfg[k] === undefined || cfg[k] === null ? null : tokenText(cfg[k]);
      if (t !== null) tokens[k] = t;
    }
    if (Array.isArray(cfg.additional_special_tokens)) {
      tokens.additional_special_tokens = cfg.additional_special_tokens.map(tokenText);
    }
    return { source: cfg.chat_template, tokens };
  }
  return { source: readFileSync(join(repo, spec.source), "utf8"), tokens: spec.special_tokens ?? {} };
}

const [casesPath, outPath] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(casesPath, "utf8"));
const templates = {};
for (const [name, t] of Object.entries(spec.templates)) {
  const loaded = loadTemplate(t);
  templates[name] = { template: new Template(loaded.source), tokens: loaded.tokens };
}
const results = {};
for (const c of spec.cases) {
  const t = templates[c.template];
  fixedMillis = (c.now ?? spec.now) * 1000;
  const vars = {
    messages: c.messages,
    tools: c.tools ?? null,
    documents: c.documents ?? null,
    add_generation_prompt: c.add_generation_prompt ?? false,
    ...t.tokens,
    ...(c.extra ?? {}),
  };
  try {
    results[c.name] = { output: t.template.render(vars) };
  } catch (e) {
    results[c.name] = { error: String(e.message ?? e) };
  }
}
writeFileSync(outPath, JSON.stringify(results, null, 1));
