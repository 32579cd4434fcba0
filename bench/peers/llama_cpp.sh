#!/usr/bin/env bash
# llama.cpp's CPU llama-bench against ridgeline on this machine, in the same run, alternating.
#
#   bench/peers/llama_cpp.sh [ROUNDS]      (default 3; env THREADS=2, PROMPT=64, GEN=32, CONFIG=Qwen3-0.6B)
#
# 1. Builds llama-bench (CPU, GGML_NATIVE) into .cache/llama.cpp (git-ignored) from the source that the npm
#    package node-llama-cpp bundles as llama/gitRelease.bundle (fetched with `npm pack`). Nothing of llama.cpp is
#    committed. The build is slow on 2 busy cores: it runs under `nice`, once; later runs reuse it.
# 2. Writes random-weight GGUF files of the config's shapes (F16 and Q8_0) with the bundle's gguf-py
#    (bench/peers/make_gguf.py; needs python3-numpy).
# 3. Runs, ROUNDS times, alternately: llama-bench F16, ridgeline bf16, llama-bench Q8_0, ridgeline int8, each
#    with THREADS threads, a PROMPT-token prefill (pp) and GEN generated tokens (tg). ridgeline runs
#    `bench latency` with random weights of the same config: prefill tok/s = PROMPT / TTFT, decode = 1 / TPOT.
#    llama-bench's tg test starts from an empty context, ours after the PROMPT tokens: TG_DEPTH=N (default 0) runs
#    llama.cpp's tg at a depth of N tokens (llama-bench -d), e.g. TG_DEPTH=$PROMPT for the same context as ours.
# Prints one line per run and, last, a table of the medians with the ratios ridgeline / llama.cpp.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-3}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-64}
GEN=${GEN:-32}
MAX_LEN=$((PROMPT + GEN > 512 ? PROMPT + GEN : 512))  # ridgeline --max-model-len: the run fits
TG_DEPTH=${TG_DEPTH:-0}
CONFIG=${CONFIG:-$ROOT/models/configs/Qwen3-0.6B}
RIDGELINE=${RIDGELINE:-$ROOT/build/cpu/ridgeline}
source "$ROOT/bench/peers/llama_cpp_common.sh"  # llama_cpp_src, llama_cpp_release
CACHE=$LLAMA_SRC_CACHE
LOG=$CACHE/runs
PY=${PYTHON:-/usr/bin/python3}  # Debian's python3, where python3-numpy is installed
mkdir -p "$CACHE" "$LOG"

if [ ! -x "$CACHE/build/bin/llama-bench" ]; then
  llama_cpp_src
  nice -n 19 cmake -S "$CACHE/src" -B "$CACHE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON > "$CACHE/configure.log"
  nice -n 19 cmake --build "$CACHE/build" --target llama-bench -j2 > "$CACHE/build.log"
fi

name=$(basename "$CONFIG")
for kind in f16 q8_0; do
  f=$CACHE/$name-$kind.gguf
  if [ ! -s "$f" ]; then
    PYTHONPATH=$CACHE/src/gguf-py "$PY" "$ROOT/bench/peers/make_gguf.py" "$CONFIG/config.json" "$f.tmp" $kind
    mv "$f.tmp" "$f"
  fi
done

# llama-bench: CSV, one row per test; avg_ts is tokens per second.
llama_run() {  # kind
  local depths=0
  [ "$TG_DEPTH" -gt 0 ] && depths=0,$TG_DEPTH
  "$CACHE/build/bin/llama-bench" -m "$CACHE/$name-$1.gguf" -t "$THREADS" -p "$PROMPT" -n "$GEN" -d "$depths" -r 2 \
    -o csv 2> "$LOG/llama-$1.err" | "$PY" -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
pp = [float(r["avg_ts"]) for r in rows if int(r["n_prompt"]) > 0 and int(r["n_depth"]) == 0]
tg = [float(r["avg_ts"]) for r in rows if int(r["n_gen"]) > 0 and int(r["n_depth"]) == int(sys.argv[1])]
print("%.2f %.2f" % (pp[0], tg[0]))' "$TG_DEPTH"
}
ridgeline_run() {  # extra flags
  "$RIDGELINE" bench latency -m "$CONFIG" --dummy-weights --threads "$THREADS" --input-len "$PROMPT" \
    --output-len "$GEN" --kv-cache-gb 0.25 --max-model-len "$MAX_LEN" --json "$LOG/ours.json" "$@" > "$LOG/ours.out" 2>&1
  "$PY" -c '
import json, sys
r = {x["name"]: x["measured"] for x in json.load(open(sys.argv[1]))["results"]}
print("%.2f %.2f" % (float(sys.argv[2]) / (r["TTFT"] / 1e3), 1e3 / r["TPOT"]))' "$LOG/ours.json" "$PROMPT"
}

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); llama.cpp $(llama_cpp_release)," \
     "ridgeline $(git -C "$ROOT" rev-parse --short HEAD); $name, $THREADS threads, pp$PROMPT tg$GEN" \
     "(llama.cpp tg at depth $TG_DEPTH)"
declare -A runs
for r in $(seq 1 "$ROUNDS"); do
  for what in llama_f16 ours_bf16 llama_q8_0 ours_int8; do
    case $what in
      llama_f16) out=$(llama_run f16) ;;
      llama_q8_0) out=$(llama_run q8_0) ;;
      ours_bf16) out=$(ridgeline_run --dtype bf16) ;;
      ours_int8) out=$(ridgeline_run --dtype bf16 --quantization int8) ;;
    esac
    echo "round $r $what prefill_tok_s decode_tok_s $out (load $(cut -d' ' -f1 /proc/loadavg))"
    runs[$what]+="$out;"
  done
done

"$PY" - "${runs[llama_f16]}" "${runs[ours_bf16]}" "${runs[llama_q8_0]}" "${runs[ours_int8]}" <<'PY'
import statistics, sys
def med(s, i):
    return statistics.median(float(x.split()[i]) for x in s.strip(";").split(";"))
lf, ob, lq, oi = sys.argv[1:5]
print("| | llama.cpp F16 | ridgeline bf16 | ratio | llama.cpp Q8_0 | ridgeline int8 | ratio |")
print("|---|---|---|---|---|---|---|")
for name, i in (("prefill tok/s", 0), ("decode tok/s", 1)):
    a, b, c, d = med(lf, i), med(ob, i), med(lq, i), med(oi, i)
    print("| %s (median) | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx |" % (name, a, b, b / a, c, d, d / c))
PY
