#!/usr/bin/env bash
# The GPU's idle time between decode steps (issue 12: no idle GPU), and what the small-copy kernel does to it: a
# step's staging upload, sampling parameters and sampled ids move as a kernel in the stream (kernel_config.h,
# kCopyKernelMaxBytes) against through the copy engine (RIDGELINE_CUDA_COPY_KERNEL=0).
# - The copy tests and the kernel trace test (its own process: the trace stays on once started).
# - Traces (--profile --profile-kernels, copy-engine copies included) of Qwen3-0.6B batch 1, Llama-3.1-8B batch 1
#   and batch 64, each form; tools/kernel_gaps.py reads the idle time in a step and between steps (a step's
#   sampling kernel to the next step's first event).
# - bench latency, the same shapes, the forms alternating, ROUNDS rounds (default 2).
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table last; logs in
# $OUT/step_gaps_logs.tgz. About 4 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
timeout 90 "$bin/rl_tests_ops" --gtest_filter='CudaCopy.*:CudaFusedOps.*:CudaSampling*' --gtest_color=no \
  > "$L/tests.txt" 2>&1
stamp "copy tests rc=$?"
timeout 60 "$bin/rl_tests_ops" --gtest_filter='CudaKernelTrace.*' --gtest_color=no > "$L/trace_test.txt" 2>&1
stamp "kernel trace test rc=$?"
shape_of() {
  case $1 in
    q06b_b1) echo "${QWEN06B[*]} --batch 1 --input-len 128" ;;
    l8b_b1) echo "${LLAMA8B[*]} --batch 1 --input-len 128" ;;
    l8b_b64) echo "${LLAMA8B[*]} --batch 64 --input-len 128 --max-num-batched-tokens 8192" ;;
  esac
}
shapes="${SHAPES:-q06b_b1 l8b_b1 l8b_b64}"
for s in $shapes; do
  for form in kernel engine; do
    (
      [ "$form" = engine ] && export RIDGELINE_CUDA_COPY_KERNEL=0
      # shellcheck disable=SC2046
      timeout 120 "$bin/ridgeline" bench latency $(shape_of "$s") --output-len 32 --profile "$L/trace_${s}_$form.json" \
        --profile-kernels > "$L/trace_${s}_$form.log" 2>&1
      echo "trace ${s}_$form rc=$?"
    )
    python3 tools/kernel_gaps.py "$L/trace_${s}_$form.json" > "$L/gaps_${s}_$form.txt" 2>&1
  done
done
stamp "traces"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for s in $shapes; do
    for form in kernel engine; do
      (
        [ "$form" = engine ] && export RIDGELINE_CUDA_COPY_KERNEL=0
        # shellcheck disable=SC2046
        lat "${s}_${form}_r$r" $(shape_of "$s") --output-len 128
      )
    done
  done
done
stamp "latency"
tar czf "$final_out/step_gaps_logs.tgz" -C "$L" .
echo "== summary =="
gtest_summary "$L/tests.txt"
gtest_summary "$L/trace_test.txt"
for f in "$L"/gaps_*.txt; do echo "$(basename "$f" .txt):"; head -2 "$f" | sed 's/^/  /'; done
for f in "$L"/lat_*.json; do
  [ -f "$f" ] || continue
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1][4:-5], round(j['decode_tokens_per_s'],1), 'tok/s', 'host', round(j.get('host_pct_of_step', 0), 2), '%', j.get('gpu', ''))" "$f"
done
