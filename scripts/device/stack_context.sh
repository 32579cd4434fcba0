#!/usr/bin/env bash
# Where the dense stack's context bound belongs (decode_stack.h kStackMaxContext, issue 12): batch-1 decode of
# Qwen3-0.6B and Llama-3.1-8B after prompts of LENS tokens (default "600 1000 2000 3800", 128 tokens out), with the
# production bound (steps past it run the layer kernels) and with RIDGELINE_CUDA_STACK_MAX_CONTEXT=8192 (every step
# runs the stack), alternating, ROUNDS rounds (default 2). Timing only: the stack's model test cannot run under a
# bound past ~980 keys (its graph check prefills the bound + 40 tokens in one step of at most 1,024; session 42's
# first form of this script ran it at 2,200 and it stopped on that limit), so nothing here checks the stack's output
# past 512 keys. Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a
# short table last; full logs in $OUT/stack_context_logs.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
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
for t in "${tags[@]}"; do
  [ -f "$L/lat_$t.json" ] || { echo "$t: no result"; continue; }
  python3 -c "import json; j = json.load(open('$L/lat_$t.json'));
print('$t', round(j['decode_tokens_per_s'], 1), 'tok/s, TPOT', round(j['tpot_ms'], 4), 'ms')"
done
