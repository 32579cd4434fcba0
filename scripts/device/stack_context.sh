#!/usr/bin/env bash
# Where the dense stack's context bound belongs (decode_stack.h kStackMaxContext, issue 12): batch-1 decode of
# Qwen3-0.6B and Llama-3.1-8B after prompts of LENS tokens (default "600 1000 2000 3800", 128 tokens out), with the
# production bound (steps past it run the layer kernels) and with RIDGELINE_CUDA_STACK_MAX_CONTEXT=8192 (every step
# runs the stack), alternating, ROUNDS rounds (default 2). First the stack's model test with the bound at 2200
# (its 2,100-token prompt then decodes through the stack, held to the layer kernels' tolerance; the graph check's
# long prompt still fits the test's cache). Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a
# short table last; full logs in $OUT/stack_context_logs.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
RIDGELINE_CUDA_STACK_MAX_CONTEXT=2200 timeout 120 "$bin/rl_tests_ops" --gtest_filter='*CudaDenseStack.Matches*' \
  --gtest_color=no > "$L/stack_test_2200.log" 2>&1
stamp "stack test (bound 2200) rc=$?"
tags=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  for n in ${LENS:-600 1000 2000 3800}; do
    for mode in bound stack; do
      for m in q l; do
        if [ "$m" = q ]; then args=("${QWEN06B[@]}"); else args=("${LLAMA8B[@]}"); fi
        t="${m}${n}_${mode}_$r"
        if [ "$mode" = stack ]; then
          RIDGELINE_CUDA_STACK_MAX_CONTEXT=8192 lat "$t" "${args[@]}" --batch 1 --input-len "$n" --output-len 128
        else
          lat "$t" "${args[@]}" --batch 1 --input-len "$n" --output-len 128
        fi
        tags+=("$t")
      done
    done
  done
done
tar czf "$final_out/stack_context_logs.tgz" -C "$L" .
echo "== summary (q: Qwen3-0.6B, l: Llama-3.1-8B; N: prompt tokens; bound: production, stack: every step the stack) =="
gtest_summary "$L/stack_test_2200.log"
for t in "${tags[@]}"; do
  [ -f "$L/lat_$t.json" ] || { echo "$t: no result"; continue; }
  python3 -c "import json; j = json.load(open('$L/lat_$t.json'));
print('$t', round(j['decode_tokens_per_s'], 1), 'tok/s, TPOT', round(j['tpot_ms'], 4), 'ms')"
done
