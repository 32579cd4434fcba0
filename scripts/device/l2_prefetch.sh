#!/usr/bin/env bash
# The decode attention kernel's L2 prefetch of the output projection's weight (kernel_config.h
# kDecodeL2PrefetchPercent; RIDGELINE_CUDA_L2_PREFETCH=percent), A/B on the Llama-3.1-8B shape:
# 1. the decode attention op tests and the engine's KvCacheDtype tests with the prefetch on (results must not move);
# 2. a kernel trace of batch 64 (128 / 128) per percentage (tools/kernel_gaps.py --kernels: the O projection's GEMM
#    and the attention kernel's time a step side by side);
# 3. `bench latency` batch 64, 128 / 128, over the caches of KV (default "bf16"), the percentages of PCTS (default
#    "0 100") alternating, ROUNDS rounds (default 2).
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table last; logs in
# $OUT/l2_prefetch_logs.tgz. About 4 minutes with the defaults.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
t0=$(date +%s)
stamp() { echo "$1 ($(( $(date +%s) - t0 )) s)"; }
pcts="${PCTS:-0 100}"
on="$(echo "$pcts" | tr ' ' '\n' | sort -n | tail -1)"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  RIDGELINE_CUDA_L2_PREFETCH="$on" timeout 200 "$bin/rl_tests_ops" --gtest_color=no \
    --gtest_filter='CudaAttention.*Decode*:CudaAttention.Fp8CacheEveryKernel' > "$L/tests.txt" 2>&1
  stamp "op tests (prefetch $on %) rc=$?"
  RIDGELINE_CUDA_L2_PREFETCH="$on" RIDGELINE_TEST_DEVICE=cuda timeout 120 "$bin/rl_tests_model" --gtest_color=no \
    --gtest_filter='KvCacheDtype.*' > "$L/model_tests.txt" 2>&1
  stamp "model tests (prefetch $on %) rc=$?"
fi
b64=("${LLAMA8B[@]}" --batch 64 --input-len 128 --max-num-batched-tokens 8192)
if [ "${SKIP_TRACES:-0}" != 1 ]; then
  for p in $pcts; do
    RIDGELINE_CUDA_L2_PREFETCH="$p" timeout 120 "$bin/ridgeline" bench latency "${b64[@]}" --output-len 32 \
      --profile "$L/trace_$p.json" --profile-kernels > "$L/trace_$p.log" 2>&1
    echo "trace $p rc=$?"
    python3 tools/kernel_gaps.py "$L/trace_$p.json" --kernels 12 > "$L/gaps_$p.txt" 2>&1
  done
  stamp "traces"
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for kv in ${KV:-bf16}; do
    for p in $pcts; do
      RIDGELINE_CUDA_L2_PREFETCH="$p" lat "b64_${kv}_p${p}_r$r" "${b64[@]}" --kv-cache-dtype "$kv" --output-len 128
    done
  done
done
stamp "latency rounds"

tar -C "$L" -czf "$final_out/l2_prefetch_logs.tgz" .
echo "== tests (prefetch $on %)"
gtest_summary "$L/tests.txt"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$L/model_tests.txt" | head -5
echo "== batch 64 kernels a step, by percentage"
for p in $pcts; do
  [ -e "$L/gaps_$p.txt" ] || continue
  echo "-- $p %"
  grep -iE "step|gemm|nvjet|sm90|decode_attention|cutlass" "$L/gaps_$p.txt" | head -16
done
echo "== batch 64 decode tok/s"
for f in "$L"/lat_*.log; do
  [ -e "$f" ] || continue
  echo "$(basename "$f" .log): $(grep -E "^decode " "$f" | tr -s ' ')"
done
