#!/usr/bin/env bash
# ridgeline against llama.cpp (CUDA, F16, flash attention on) in the same run on the GPU machine (issue 12's targets):
# batch-1 decode of the Llama-3.1-8B and Qwen3-0.6B shapes, random weights, building nothing.
#
#   run carry [".dev/bins.tar.xz", ".dev/llama_cuda.tar.xz"]:  scripts/device/peer_llama_gpu.sh [ROUNDS]   (default 3)
#
# - ridgeline: from $RL_BIN_DIR; else, where .dev/bins.tar.xz is carried, unpacked into .dev (bin/ridgeline,
#   bin/lib/); else build/cuda. `bench latency --batch 1 --input-len 128 --output-len 256` with
#   --dummy-weights (the `lat` helper of common.sh: LLAMA8B, QWEN06B), decode tok/s = 1 / TPOT.
# - llama.cpp: .dev/llama_cuda.tar.xz (bench/peers/llama_cpp_cuda.sh packs it: llama-bench for sm_90, the bundle's
#   gguf-py) unpacked into .dev/llama_cuda. F16 GGUFs of the two shapes are written with bench/peers/make_gguf.py into
#   $GGUF_DIR (default /dev/shm/rl_gguf, or /tmp/rl_gguf; kept for a later call on a warm machine). llama-bench
#   -ngl 99 -fa 1 -r 3, one process per model and round: pp512, and tg256 at depth 0 and at depth 128 (-d 128: the
#   context of our 128-token prompt). The table compares ours with tg256 at depth 128; depth 0 and pp512 beside it.
# - Rounds alternate: llama.cpp 8B, ours 8B, llama.cpp 0.6B, ours 0.6B. Medians over the rounds.
# - Roofline: bench latency's own decode prediction for the device it ran on (bytes per token / the device's
#   measured copy rate, src/perf gpu_for_device): on the H200 264 tok/s for Llama-3.1-8B and 3,477 for Qwen3-0.6B,
#   on the H100 80GB HBM3 185 and 2,453.
# Each phase is timed (date +%s); no round is started that would end past BUDGET_S (default 330) seconds from the
# start. Logs: $OUT/peer_llama_gpu_logs.tgz. The whole run takes about 4 minutes.
set -uo pipefail
ROUNDS=${1:-3}
t_start=$(date +%s)
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
if [ -z "${RL_BIN_DIR:-}" ] && [ -f .dev/bins.tar.xz ]; then
  tar -xJf .dev/bins.tar.xz -C .dev  # bin/ridgeline, bin/lib/...
  rl=$(find .dev/bin -name ridgeline -type f -perm -u+x | head -1)
  [ -n "$rl" ] && export RL_BIN_DIR="${rl%/ridgeline}"
fi
source scripts/device/common.sh
device_env
[ -x "$bin/ridgeline" ] || { echo "no ridgeline in $bin (RL_BIN_DIR or .dev/bins.tar.xz)"; exit 1; }
phase() {  # name: the seconds since the last phase, and since the start
  local now
  now=$(date +%s)
  echo "phase $1: $((now - t_phase)) s (total $((now - t_start)) s)"
  t_phase=$now
}
t_phase=$t_start

# llama.cpp's CUDA llama-bench, its libraries and gguf-py.
LC=$root/.dev/llama_cuda
rm -rf "$LC"
tar -xJf .dev/llama_cuda.tar.xz -C .dev || { echo "no .dev/llama_cuda.tar.xz"; exit 1; }
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LC/lib"
cat "$LC/VERSION"
if ! ldd "$LC/llama-bench" > "$L/llama_ldd.txt" 2>&1 || grep -q "not found" "$L/llama_ldd.txt"; then
  echo "llama-bench's libraries:"; cat "$L/llama_ldd.txt"
fi
phase unpack

# Random-weight F16 GGUFs (about 16 GB and 1.2 GB), written once per machine: into memory (/dev/shm) where it has
# room, so that no disk write-back holds the writer up, else to /tmp.
if [ -z "${GGUF_DIR:-}" ]; then
  GGUF_DIR=/tmp/rl_gguf
  shm_free=$(df -P -B1G /dev/shm 2> /dev/null | awk 'NR == 2 {print $4}')
  [ "${shm_free:-0}" -ge 24 ] && GGUF_DIR=/dev/shm/rl_gguf
fi
mkdir -p "$GGUF_DIR"
df -h "$GGUF_DIR" | tail -1
for m in Llama-3.1-8B Qwen3-0.6B; do
  f=$GGUF_DIR/$m-f16.gguf
  if [ ! -s "$f" ]; then
    PYTHONPATH=$LC/gguf-py timeout 240 python3 bench/peers/make_gguf.py "models/configs/$m/config.json" "$f.tmp" f16 \
      > "$L/gguf_$m.log" 2>&1 || { echo "make_gguf $m failed:"; tail -5 "$L/gguf_$m.log"; }
    [ -s "$f.tmp" ] && mv "$f.tmp" "$f"
  fi
  echo "$m: $(du -h "$f" 2>/dev/null | cut -f1)"
done
phase gguf

# llama-bench: one CSV row per test; avg_ts is tokens per second. Prints "pp512 tg256@0 tg256@128".
llama_run() {  # model tag
  timeout 150 "$LC/llama-bench" -m "$GGUF_DIR/$1-f16.gguf" -ngl 99 -fa 1 -p 512 -n 256 -d 0,128 -r 3 -o csv \
    > "$L/llama_$2.csv" 2> "$L/llama_$2.err"
  local rc=$?
  echo "llama $2 rc=$rc" >&2
  [ "$rc" = 0 ] || tail -5 "$L/llama_$2.err" >&2
  python3 - "$L/llama_$2.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def ts(p, n, d):
    r = [float(x["avg_ts"]) for x in rows if (int(x["n_prompt"]), int(x["n_gen"]), int(x["n_depth"])) == (p, n, d)]
    return r[0] if r else float("nan")
print("%.2f %.2f %.2f" % (ts(512, 0, 0), ts(0, 256, 0), ts(0, 256, 128)))
PY
}
ours_run() {  # tag model-args...
  local t=$1
  shift
  lat "$t" "$@" --batch 1 --input-len 128 --output-len 256 >&2
  # decode tok/s, then the roofline's decode tok/s for this device (bench latency's own: perf::gpu_for_device)
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r={x["name"]: x for x in j.get("results", [])}
print("%.2f %.2f" % (j["decode_tokens_per_s"], r.get("decode", {}).get("predicted", float("nan"))))' \
    "$L/lat_$t.json" 2> /dev/null || echo nan nan
}

declare -A res=([llama_8b]='' [ours_8b]='' [llama_06b]='' [ours_06b]='')
budget=${BUDGET_S:-330}  # no round is started that the last one's length would take past this many seconds
t_round=0
rounds_run=0
for r in $(seq 1 "$ROUNDS"); do
  if [ $(($(date +%s) - t_start + t_round)) -gt "$budget" ]; then
    echo "round $r left out: it would end past ${budget} s"
    break
  fi
  t_round=$(date +%s)
  rounds_run=$r
  for what in llama_8b ours_8b llama_06b ours_06b; do
    case $what in
      llama_8b) out=$(llama_run Llama-3.1-8B "8b_r$r") ;;
      ours_8b) out=$(ours_run "8b_r$r" "${LLAMA8B[@]}") ;;
      llama_06b) out=$(llama_run Qwen3-0.6B "06b_r$r") ;;
      ours_06b) out=$(ours_run "06b_r$r" "${QWEN06B[@]}") ;;
    esac
    unit="(decode tok/s, its roofline)"
    [ "${what%%_*}" = llama ] && unit="(pp512 tg256 tg256@d128 tok/s)"
    echo "round $r $what $out $unit"
    res[$what]+="$out;"
  done
  t_round=$(($(date +%s) - t_round))
  phase "round $r"
done
grep -h "CUDA\|ggml_cuda_init\|Device 0" "$L"/llama_8b_r1.err 2> /dev/null | head -3
for t in 8b_r1 06b_r1; do grep -h "host\|decode graph" "$L/lat_$t.log" 2> /dev/null | head -2; done
tar czf "$final_out/peer_llama_gpu_logs.tgz" -C "$L" .

echo "== batch-1 decode, ridgeline vs llama.cpp (CUDA, F16, FA on): medians of $rounds_run rounds =="
python3 - "${res[ours_8b]}" "${res[llama_8b]}" "${res[ours_06b]}" "${res[llama_06b]}" <<'PY'
import math, statistics, sys
def med(s, i=0):
    v = [float(x.split()[i]) for x in s.strip(";").split(";") if x.strip()]
    v = [x for x in v if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")
print("| model | ours tok/s | llama.cpp tg256@d128 tok/s | ours / llama.cpp | roofline | ours % | llama.cpp % "
      "| llama.cpp tg256@d0 | llama.cpp pp512 |")
print("|---|---|---|---|---|---|---|---|---|")
for name, ours, llama in (("Llama-3.1-8B", sys.argv[1], sys.argv[2]), ("Qwen3-0.6B", sys.argv[3], sys.argv[4])):
    o, l, roof = med(ours), med(llama, 2), med(ours, 1)
    print("| %s | %.1f | %.1f | %.2fx | %.0f | %.1f %% | %.1f %% | %.1f | %.0f |"
          % (name, o, l, o / l, roof, 100 * o / roof, 100 * l / roof, med(llama, 1), med(llama, 0)))
PY
echo "total $(($(date +%s) - t_start)) s"
