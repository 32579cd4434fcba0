#!/usr/bin/env bash
# Batch-1 decode and the GEMV on the GPU machine (issues 12.2, 21.3), building nothing: binaries from $RL_BIN_DIR
# (default build/cuda: ridgeline, rl_tests_ops, rl_bench_kernels; lib/ for shared libraries). CUDA op tests, the
# GEMV shapes (v3 next to v2 in one binary), batch-1 decode of Llama-3.1-8B and Qwen3-0.6B (default and
# --deterministic), batch-64 decode, and an ncu profile of one Qwen decode step (bench/ncu_step_profile.py).
# SOURCE_LINK=/path: the test binaries read fixtures from that compiled source path (made a link to this checkout).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
if [ -n "${SOURCE_LINK:-}" ] && [ ! -e "$SOURCE_LINK" ]; then mkdir -p "$(dirname "$SOURCE_LINK")" && ln -s "$root" "$SOURCE_LINK"; fi
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin/lib"
L="$(mktemp -d)"
final_out="${OUT:-/tmp/rl_device}"; mkdir -p "$final_out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$L/gpu.txt"
timeout 150 "$bin/rl_tests_ops" --gtest_filter='Cuda*:*CudaGolden*' --gtest_color=no > "$L/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$L/tests.log" | head -20
timeout 45 "$bin/rl_bench_kernels" gemv > "$L/gemv.log" 2>&1; echo "gemv rc=$?"
ll=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096)
qw=(-m models/configs/Qwen3-0.6B --dummy-weights --device cuda --max-model-len 4096)
lat() { local t=$1; shift; timeout 60 "$bin/ridgeline" bench latency "$@" --json "$L/lat_$t.json" > "$L/lat_$t.log" 2>&1; echo "lat $t rc=$?"; }
lat llama_b1 "${ll[@]}" --batch 1 --input-len 128 --output-len 256
lat qwen_b1 "${qw[@]}" --batch 1 --input-len 128 --output-len 256
lat llama_b64 "${ll[@]}" --batch 64 --input-len 128 --output-len 128
lat llama_b1_det "${ll[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
lat qwen_b1_det "${qw[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$bin/ridgeline" bench latency "${qw[@]}" --batch 1 --input-len 128 --output-len 3 > "$L/ncu_qwen.csv" 2> "$L/ncu_qwen.err"
echo "ncu rc=$?"
python3 bench/ncu_step_profile.py "$L/ncu_qwen.csv" qwen > "$L/prof_qwen.txt" 2>&1
tar czf "$final_out/decode_b1_logs.tgz" -C "$L" .
echo "== summary =="
grep RESULT "$L/gemv.log" | sed 's/.*RESULT //' | grep -v "gemv_lab v1[345]\|gemv_lab v[23]_"
for t in llama_b1 qwen_b1 llama_b64 llama_b1_det qwen_b1_det; do
  python3 -c "import json;j=json.load(open('$L/lat_$t.json'));print('$t', round(j['decode_tokens_per_s'],1), 'tok/s tpot', round(j['tpot_ms'],3), 'host%', round(j.get('host_pct_of_step',0),2))" 2>&1 | tail -1
done
head -16 "$L/prof_qwen.txt"
