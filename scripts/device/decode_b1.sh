#!/usr/bin/env bash
# Batch-1 decode and the GEMV on the GPU machine (issues 12.2, 21.3), building nothing: binaries from $RL_BIN_DIR
# (default build/cuda: ridgeline, rl_tests_ops, rl_bench_kernels; lib/ for shared libraries). CUDA op tests, the
# GEMV shapes (v3 next to v2 in one binary), batch-1 decode of Llama-3.1-8B and Qwen3-0.6B (default and
# --deterministic), batch-64 decode, and an ncu profile of one Qwen decode step (bench/ncu_step_profile.py).
# SOURCE_LINK=/path: the test binaries read fixtures from that compiled source path (made a link to this checkout).
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
timeout 150 "$bin/rl_tests_ops" --gtest_filter='Cuda*:*CudaGolden*' --gtest_color=no > "$L/tests.log" 2>&1; echo "tests rc=$?"
gtest_summary "$L/tests.log"
timeout 45 "$bin/rl_bench_kernels" gemv > "$L/gemv.log" 2>&1; echo "gemv rc=$?"
lat llama_b1 "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
lat qwen_b1 "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
lat llama_b64 "${LLAMA8B[@]}" --batch 64 --input-len 128 --output-len 128
lat llama_b1_det "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
lat qwen_b1_det "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$bin/ridgeline" bench latency "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 3 > "$L/ncu_qwen.csv" 2> "$L/ncu_qwen.err"
echo "ncu rc=$?"
python3 bench/ncu_step_profile.py "$L/ncu_qwen.csv" qwen > "$L/prof_qwen.txt" 2>&1
tar czf "$final_out/decode_b1_logs.tgz" -C "$L" .
echo "== summary =="
grep RESULT "$L/gemv.log" | sed 's/.*RESULT //' | grep -v "gemv_lab v1[345]\|gemv_lab v[23]_"
for t in llama_b1 qwen_b1 llama_b64 llama_b1_det qwen_b1_det; do
  python3 -c "import json;j=json.load(open('$L/lat_$t.json'));print('$t', round(j['decode_tokens_per_s'],1), 'tok/s tpot', round(j['tpot_ms'],3), 'host%', round(j.get('host_pct_of_step',0),2))" 2>&1 | tail -1
done
head -16 "$L/prof_qwen.txt"
