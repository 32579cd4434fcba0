#!/usr/bin/env bash
# Where a long prompt's time to first token goes (issue 21.4): `bench latency` of the Llama-3.1-8B shape at batch 1
# with INPUT_LEN tokens (default 32000) in one prefill step, once plain (TTFT), once with a kernel trace
# (--profile --profile-kernels); tools/kernel_gaps.py --totals reads the trace: each kernel's total time and share,
# and the time the GPU runs nothing.
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table last; logs in
# $OUT/ttft_profile_logs.tgz. About 1.5 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
n="${INPUT_LEN:-32000}"
args=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --batch 1 --input-len "$n" --output-len 2
  --max-model-len 32768 --max-num-batched-tokens 32768)
lat "ttft_$n" "${args[@]}"
timeout 150 "$bin/ridgeline" bench latency "${args[@]}" --profile "$L/trace_$n.json" --profile-kernels \
  > "$L/trace_$n.log" 2>&1
echo "trace rc=$?"
python3 tools/kernel_gaps.py "$L/trace_$n.json" --totals "${TOP:-16}" > "$L/totals_$n.txt" 2>&1
tar -C "$L" -czf "$final_out/ttft_profile_logs.tgz" .
echo "== $n-token prompt, TTFT"
grep -iE "ttft|prefill" "$L/lat_ttft_$n.log" | head -4
echo "== kernels over the traced run (the prefill step and 2 decode steps)"
cat "$L/totals_$n.txt"
