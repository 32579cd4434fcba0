#!/usr/bin/env bash
# The staged decode attention kernel (issue 21.2; DecodeKernel::kStaged*, session 27) on the GPU machine, building
# nothing: binaries from $RL_BIN_DIR (default build/cuda: ridgeline, rl_tests_ops, rl_bench_kernels; lib/ for shared
# libraries). The copy bandwidth, the decode attention op tests (every kernel against the CPU; TEST_FILTER widens
# them), the decode kernel rows (each kernel lone and 20 in a CUDA graph at B1 S4k, B64 S4k, B16 S32k), and
# Llama-3.1-8B decode end to end with each of KERNELS (RIDGELINE_CUDA_DECODE_KERNEL; "auto" = production) at batch 1
# and ~4k keys and at batch 16 and ~2k keys (FP8=1: batch 1 over an fp8 cache too), then production at batch 1 with
# each of SPLITS forced (RIDGELINE_CUDA_DECODE_SPLITS), ROUNDS rounds alternating. SANITIZE=1 then runs memcheck
# and racecheck over SAN_FILTER (SAN_TIMEOUT seconds each). SKIP_BENCH=1 leaves the kernel rows out.
# SOURCE_LINK=/path: the test binaries read fixtures from that compiled source path (made a link to this checkout).
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
ROUNDS=${ROUNDS:-2}
KERNELS=${KERNELS:-"mma auto"}
SPLITS=${SPLITS:-}
timeout 60 "$bin/rl_bench_kernels" copy > "$L/copy.log" 2>&1; echo "bench copy rc=$?"
timeout 300 "$bin/rl_tests_ops" --gtest_filter="${TEST_FILTER:-CudaAttention.Decode*:CudaAttention.Mixed*}" \
  --gtest_color=no > "$L/tests.log" 2>&1
echo "tests rc=$?"
gtest_summary "$L/tests.log"
stamp "tests"
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout 200 "$bin/rl_bench_kernels" decode > "$L/decode.log" 2>&1
  echo "bench decode rc=$?"
fi
touch "$L/decode.log"
stamp "bench"
LONG=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 8192)
runs=()
for r in $(seq 1 "$ROUNDS"); do
  for k in $KERNELS; do
    env_k=$k
    [ "$k" = auto ] && env_k=""
    RIDGELINE_CUDA_DECODE_KERNEL=$env_k lat "b1_4k_${k}_$r" "${LONG[@]}" --batch 1 --input-len 4000 --output-len 128
    RIDGELINE_CUDA_DECODE_KERNEL=$env_k lat "b16_2k_${k}_$r" "${LONG[@]}" --batch 16 --input-len 2000 --output-len 128
    runs+=("b1_4k_${k}_$r" "b16_2k_${k}_$r")
    if [ -n "${FP8:-}" ]; then
      RIDGELINE_CUDA_DECODE_KERNEL=$env_k lat "b1_4k_fp8_${k}_$r" "${LONG[@]}" --kv-cache-dtype fp8 --batch 1 \
        --input-len 4000 --output-len 128
      runs+=("b1_4k_fp8_${k}_$r")
    fi
  done
  for n in $SPLITS; do
    RIDGELINE_CUDA_DECODE_SPLITS=$n lat "b1_4k_splits${n}_$r" "${LONG[@]}" --batch 1 --input-len 4000 --output-len 128
    runs+=("b1_4k_splits${n}_$r")
  done
done
stamp "e2e"
# SANITIZE=1: compute-sanitizer memcheck and racecheck over SAN_FILTER (default: the cluster merge's bit test).
if [ -n "${SANITIZE:-}" ]; then
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for tool in memcheck racecheck; do
    timeout ${SAN_TIMEOUT:-150} "$sanitizer" --tool "$tool" "$bin/rl_tests_ops" \
      --gtest_filter="${SAN_FILTER:-CudaAttention.DecodeClusterMerge*}" --gtest_color=no > "$L/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$tool.log" | tail -1)"
  done
  stamp "sanitizers"
fi
tar czf "$final_out/decode_staged_logs.tgz" -C "$L" .
echo "== summary =="
grep RESULT "$L/copy.log" | sed 's/.*RESULT //'
grep RESULT "$L/decode.log" | sed 's/.*RESULT //' | grep -E "decode_kernel|decode_attn_graph|launch_floor|grid_for_128k"
for t in "${runs[@]}"; do
  python3 -c "import json;j=json.load(open('$L/lat_$t.json'));print('$t', round(j['decode_tokens_per_s'],2), 'tok/s')" 2>&1 | tail -1
done
