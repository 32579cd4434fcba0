#!/usr/bin/env bash
# The dense stack (decode_stack.cu: a batch-1 decode step's dense layers as one persistent kernel, issue 12): its model
# test (rl_tests_ops, CudaDenseStack) and memcheck on one shape, then batch-1 decode of Qwen3-0.6B and Llama-3.1-8B
# with the stack and without it (RIDGELINE_CUDA_DECODE_STACK=0: the layer kernels), alternating, ROUNDS rounds (default
# 2), a 1000-token prompt each way (past the stack's 512-key bound: both must run the layer kernels), and the lab
# ablations (RIDGELINE_CUDA_STACK_LAB, decode_stack.h: 1 no attention, 2 no GEMV arithmetic, 4 inputs read without
# waiting for their tags; ABLATIONS=0 leaves them out). MODES (default "off 0") are the alternating forms: off the
# layer kernels, a number the stack with those lab bits, base the stack of the ridgeline in $BASE_BIN (another build,
# for an A/B of two kernels). KVS (default "auto") are the KV cache dtypes each mode runs over (e.g. "bf16 fp8").
# RACECHECK=1 adds racecheck on the model test's shapes (RACECHECK_SHAPES, default qwen3), instrumenting only the
# stack kernel (--kernel-name kns=decode_stack_kernel: cuBLASLt's kernels in the same test report hazards of their
# own and, instrumented, take minutes; issue 21.6), with RACECHECK_LAB's lab bits (default 0) beside the grid's.
# MEMCHECK_FILTER (default the llama3 shape's tests) names the memcheck run's tests, MEMCHECK_LAB (default 0) its lab
# bits.
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says, for the test's fixtures). Prints a short table
# last; full logs in $OUT/decode_stack_logs.tgz. About 90 s on the H200.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
T="$bin/rl_tests_ops"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
t0=$(date +%s)
timeout 120 "$T" --gtest_filter='*CudaDenseStack*' --gtest_color=no > "$L/stack_test.log" 2>&1
echo "stack test rc=$? $(( $(date +%s) - t0 ))s"
if [ "${RACECHECK:-0}" = 1 ]; then
  # A grid of RACECHECK_GRID blocks (default 8; lab bits 16-23, decode_stack.h kStackLabGridShift): racecheck does not
  # keep the full grid resident, and a block waiting for one that never runs traps after 20 s. RACECHECK_SHAPES
  # (default qwen3): the model test's shapes, one run each (racecheck_SHAPE.log).
  race() {  # shape, then the tool's kernel filter
    local shape=$1
    shift
    RIDGELINE_CUDA_STACK_LAB=$(( (${RACECHECK_GRID:-8} << 16) | ${RACECHECK_LAB:-0} )) \
      timeout "${RACECHECK_LIMIT:-200}" "$sanitizer" --tool racecheck --error-exitcode 3 "$@" "$T" \
      --gtest_filter="Shapes/CudaDenseStack.MatchesTheLayerKernelsAndIsDeterministic/$shape" --gtest_color=no \
      > "$L/racecheck_$shape.log" 2>&1
  }
  for shape in ${RACECHECK_SHAPES:-qwen3}; do
    race "$shape" --kernel-name kns=decode_stack_kernel
    rc=$?
    # Older tools name the kernel filter --filter.
    if grep -qiE "unrecogni[sz]ed option|unknown option|invalid option" "$L/racecheck_$shape.log"; then
      race "$shape" --filter kns=decode_stack_kernel
      rc=$?
    fi
    echo "racecheck $shape rc=$rc $(( $(date +%s) - t0 ))s"
  done
fi
if [ "${MEMCHECK:-1}" = 1 ]; then  # MEMCHECK=0 leaves it out (~150 s on the H200)
  RIDGELINE_CUDA_STACK_LAB=${MEMCHECK_LAB:-0} timeout 150 "$sanitizer" --tool memcheck --error-exitcode 3 "$T" \
    --gtest_filter="${MEMCHECK_FILTER:-*CudaDenseStack*llama3}" \
    > "$L/memcheck.log" 2>&1
  echo "memcheck rc=$? $(( $(date +%s) - t0 ))s"
fi
run() {  # tag off|LAB args...: one bench latency with the stack off, or on with the given lab bits (0: production)
  local t=$1 mode=$2
  shift 2
  if [ "$mode" = off ]; then
    RIDGELINE_CUDA_DECODE_STACK=0 lat "$t" "$@"
  elif [ "$mode" = base ]; then
    local mine=$bin
    bin=$BASE_BIN
    lat "$t" "$@"
    bin=$mine
  else
    RIDGELINE_CUDA_STACK_LAB=$mode lat "$t" "$@"
  fi
}
tags=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  for kv in ${KVS:-auto}; do
    for mode in ${MODES:-off 0}; do
      x=$([ "$kv" = auto ] || echo "_$kv")
      run "q_${mode}${x}_$r" $mode "${QWEN06B[@]}" --kv-cache-dtype "$kv" --batch 1 --input-len 128 --output-len 256
      run "l_${mode}${x}_$r" $mode "${LLAMA8B[@]}" --kv-cache-dtype "$kv" --batch 1 --input-len 128 --output-len 256
      tags+=("q_${mode}${x}_$r" "l_${mode}${x}_$r")
    done
  done
done
for mode in off 0; do
  run "q1000_$mode" $mode "${QWEN06B[@]}" --batch 1 --input-len 1000 --output-len 128
  run "l1000_$mode" $mode "${LLAMA8B[@]}" --batch 1 --input-len 1000 --output-len 128
  tags+=("q1000_$mode" "l1000_$mode")
done
if [ "${ABLATIONS:-1}" = 1 ]; then
  for lab in 1 2 4; do
    run "q_lab$lab" $lab "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
    tags+=("q_lab$lab")
  done
  run l_lab4 4 "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
  tags+=(l_lab4)
fi
tar czf "$final_out/decode_stack_logs.tgz" -C "$L" .
echo "== summary (q: Qwen3-0.6B, l: Llama-3.1-8B; off: layer kernels; 0: the stack; labN: ablation) =="
echo "stack_test:"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$L/stack_test.log" | head -8
[ -f "$L/memcheck.log" ] && grep -E "ERROR SUMMARY" "$L/memcheck.log"
for f in "$L"/racecheck_*.log; do
  [ -f "$f" ] || continue
  echo "$(basename "$f" .log) (decode_stack_kernel): $(grep -cE 'Internal Sanitizer Error' "$f") internal errors;" \
    "$(grep -E 'RACECHECK SUMMARY' "$f" | head -1) $(grep -E '^\[  (PASSED|FAILED)' "$f" | head -1)"
done
for t in "${tags[@]}"; do
  [ -f "$L/lat_$t.json" ] || { echo "$t: no result"; continue; }
  python3 -c "import json; j = json.load(open('$L/lat_$t.json'));
print('$t', round(j['decode_tokens_per_s'], 1), 'tok/s, TPOT', round(j['tpot_ms'], 4), 'ms')"
done
