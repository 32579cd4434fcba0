#!/usr/bin/env bash
# The FP8 (e4m3) KV cache on CUDA in one call:
# 1. the op tests that read or write an fp8 cache (CudaAttention.Fp8CacheEveryKernel, CudaOps.KvWriteIntoFp8Cache,
#    CudaFusedOps.QkNormRopeKvWriteIntoFp8Cache) with the bf16 attention and RoPE + KV write tests beside them (the
#    decode and FA2 prefill kernels gained fp8 instances), and the engine's KvCacheDtype tests on CUDA (greedy tokens
#    of the default model over an fp8 cache against bf16);
# 2. the kernel rows: decode attention over bf16 and fp8 (B1 S4k, B64 S4k, B16 S32k; TB/s of the bytes each reads,
#    and µs in a graph), the FA2 prefill over fp8 next to the production prefill, and the offline mixed step;
# 3. OFFLINE="bf16:384 fp8:384 fp8:768": `bench throughput` 1000 x 1024/1024 on the Llama-3.1-8B shape as
#    kv-dtype:max-num-seqs (each ~2 minutes; OFFLINE="" skips them). fp8 runs only where the fp8 tests passed.
# 4. LAT_ROUNDS=N (default 0): `bench latency` of the Llama-3.1-8B shape at batch 64 (128 / 128) and batch 1 over
#    the caches of LAT_KV (default "bf16 fp8"), alternating, N rounds (batch 1 runs the dense stack over either
#    cache; LAT_B1=0 leaves batch 1 out).
# OFFLINE_H200_ONLY=1 runs part 3 only on an H200 (issue 12's offline target is an H200 figure).
# EXTRA_TESTS="PATTERN[:PATTERN]" adds op tests to part 1 (e.g. '*CudaDenseStack*'). KERNELS="decode" runs only the
# decode rows of part 2. SKIP_TESTS=1 / SKIP_KERNELS=1 leave out parts 1 / 2 (the offline runs then go ahead
# without the test gate).
# Carried binaries in $RL_BIN_DIR (ridgeline, rl_tests_ops, rl_tests_model, rl_bench_kernels). Prints a short table
# last; logs in $OUT/fp8_kv_logs.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env

fp8_ok=1
touch "$L/tests.txt" "$L/model_tests.txt" "$L/bench_decode.txt" "$L/bench_prefill.txt"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  filter='CudaOps.KvWrite*:CudaFusedOps.QkNormRopeKvWrite*:CudaAttention.*'
  [ -n "${EXTRA_TESTS:-}" ] && filter="$filter:$EXTRA_TESTS"
  timeout 400 "$bin/rl_tests_ops" --gtest_color=no \
    --gtest_filter="$filter:-CudaAttention.HopperPrefillLayoutsAndPageSizes" > "$L/tests.txt" 2>&1
  stamp "op tests rc=$?"
  RIDGELINE_TEST_DEVICE=cuda timeout 120 "$bin/rl_tests_model" --gtest_color=no --gtest_filter='KvCacheDtype.*' \
    > "$L/model_tests.txt" 2>&1
  stamp "model tests rc=$?"
  for t in CudaAttention.Fp8CacheEveryKernel CudaOps.KvWriteIntoFp8Cache \
    CudaFusedOps.QkNormRopeKvWriteIntoFp8Cache; do
    grep -q "^\[       OK \] $t " "$L/tests.txt" || fp8_ok=0
  done
fi
if [ "${SKIP_KERNELS:-0}" != 1 ]; then
  for k in ${KERNELS:-decode prefill}; do
    timeout 240 "$bin/rl_bench_kernels" "$k" > "$L/bench_$k.txt" 2>&1
    stamp "bench $k rc=$?"
  done
fi
for r in $(seq 1 "${LAT_ROUNDS:-0}"); do
  for kv in ${LAT_KV:-bf16 fp8}; do
    lat "b64_${kv}_r$r" "${LLAMA8B[@]}" --kv-cache-dtype "$kv" --batch 64 --input-len 128 --output-len 128 \
      --max-num-batched-tokens 8192
    [ "${LAT_B1:-1}" = 1 ] && lat "b1_${kv}_r$r" "${LLAMA8B[@]}" --kv-cache-dtype "$kv" --batch 1 --input-len 128 \
      --output-len 128
  done
done

offline=${OFFLINE-bf16:384 fp8:384 fp8:768}
if [ "${OFFLINE_H200_ONLY:-0}" = 1 ] && ! grep -q H200 "$L/gpu.txt"; then
  echo "not an H200: offline runs left out"
  offline=""
fi
for cfg in $offline; do
  IFS=: read -r kv seqs <<< "$cfg"
  if [ "$kv" = fp8 ] && [ "$fp8_ok" != 1 ]; then
    echo "fp8 tests did not pass: $cfg left out"
    continue
  fi
  timeout "${OFFLINE_LIMIT:-300}" "$bin/ridgeline" bench throughput "${LLAMA8B[@]}" --kv-cache-dtype "$kv" \
    --max-num-seqs "$seqs" --num-prompts 1000 --input-len 1024 --output-len 1024 --json "$L/tp_${kv}_$seqs.json" \
    > "$L/tp_${kv}_$seqs.log" 2>&1
  stamp "throughput $kv $seqs rc=$?"
done

tar -C "$L" -czf "$final_out/fp8_kv_logs.tgz" .
echo "== tests"
gtest_summary "$L/tests.txt"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$L/model_tests.txt" | head -5
echo "== kernel rows"
grep -hE "^RESULT (decode_attn|decode_attn_graph|decode_attn_fp8|decode_attn_graph_fp8|decode_attn_graph_fp8_us|decode_attn_graph_us|prefill_attn|prefill_attn_fp8|mixed_attn) " \
  "$L/bench_decode.txt" "$L/bench_prefill.txt"
grep -h "RESULT prefill_lab .*_bn64 " "$L/bench_prefill.txt"
echo "== latency (decode tok/s)"
for f in "$L"/lat_*.log; do
  [ -e "$f" ] || continue
  echo "$(basename "$f" .log): $(grep -E "^decode " "$f" | tr -s ' ')"
done
echo "== offline"
for f in "$L"/tp_*.log; do
  [ -e "$f" ] || continue
  echo "$(basename "$f" .log): $(grep -E "output throughput|KV cache|preempt" "$f" | tr '\n' ' ')"
done
