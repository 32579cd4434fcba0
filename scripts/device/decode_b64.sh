#!/usr/bin/env bash
# Where a batch-64 decode step's time goes as the context grows (issue 12's batch-64 target; docs/cuda.md): the
# Llama-3.1-8B shape at 128/128 with the whole prefill in one step (--max-num-batched-tokens 8192, so every measured
# step is a batch-64 decode step), its per-kernel GPU time under ncu (tools/ncu_steps.py), the same with 16-token
# prompts, and the decode-attention lab rows of `rl_bench_kernels decode` (batch 64 at 80 / 192 / 512 keys under a
# 4k graph's split count, one, two or four pages a warp). Carried binaries in $RL_BIN_DIR (ridgeline,
# rl_bench_kernels). Prints a short table last; logs in $OUT/decode_b64_logs.tgz. About 4 minutes on the H200.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
t0=$(date +%s)
ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
for in_len in 16 128; do
  args=("${LLAMA8B[@]}" --batch 64 --input-len "$in_len" --max-num-batched-tokens 8192)
  lat "b64_in$in_len" "${args[@]}" --output-len 128
  timeout 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    "$bin/ridgeline" bench latency "${args[@]}" --output-len 8 > "$L/ncu_in$in_len.csv" 2> "$L/ncu_in$in_len.err"
  echo "ncu input $in_len rc=$? ($(( $(date +%s) - t0 )) s)"
  python3 tools/ncu_steps.py "$L/ncu_in$in_len.csv" "$L/lat_b64_in$in_len.json" > "$L/ncu_in$in_len.txt" 2>&1
done
timeout 120 "$bin/rl_bench_kernels" decode > "$L/bench_decode.txt" 2>&1
echo "bench decode rc=$? ($(( $(date +%s) - t0 )) s)"
tar czf "$final_out/decode_b64_logs.tgz" -C "$L" .
echo "== summary =="
for in_len in 16 128; do
  python3 -c "import json; j = json.load(open('$L/lat_b64_in$in_len.json'));
print('batch 64, input $in_len:', round(j['decode_tokens_per_s'], 1), 'tok/s, TPOT', round(j['tpot_ms'], 3), 'ms')"
  head -10 "$L/ncu_in$in_len.txt"
done
grep -E "B64_S" "$L/bench_decode.txt"
