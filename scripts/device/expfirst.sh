#!/usr/bin/env bash
# The Hopper prefill's exponentials first (lab, kernel_config.h; PrefillSm90Options::exp_first) under test and against
# production in one call: the prefill tests (the layout test, whose bit 512 is this form, and
# CudaAttention.HopperPrefillWideScores, where rows take both of its paths); compute-sanitizer memcheck and racecheck
# with it on the small prefill tests, memcheck on the wide test; prefill_vs_cudnn.sh with production, expfirst (the form
# above 4k keys, where production has no half tiles), expfirst_nodiaghalf (at every length) and cuDNN, each row 40
# launches, ROUNDS rounds (default 3); the 32k TTFT (Llama-3.1-8B shape), production and expfirst alternating,
# TTFT_ROUNDS rounds (default 2). Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table
# last; logs in $OUT/expfirst_logs.tgz. About 4 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
timeout 150 "$bin/rl_tests_ops" --gtest_color=no \
  --gtest_filter='CudaAttention.Hopper*:CudaAttention.*Prefill*:CudaAttention.LargeRandomBatch' > "$L/tests.txt" 2>&1
stamp "prefill tests rc=$?"
small=CudaAttention.ChunkedPrefillWithPrefixInCache:CudaAttention.MixedPrefillAndDecode
for tool in memcheck racecheck; do
  RIDGELINE_CUDA_PREFILL_SM90=continuous_v3_lazy_autosnake_expfirst timeout 100 "$sanitizer" --tool "$tool" \
    --error-exitcode 3 "$bin/rl_tests_ops" --gtest_color=no --gtest_filter="$small" > "$L/$tool.txt" 2>&1
  stamp "$tool (expfirst) rc=$?"
done
timeout 120 "$sanitizer" --tool memcheck --error-exitcode 3 "$bin/rl_tests_ops" --gtest_color=no \
  --gtest_filter=CudaAttention.HopperPrefillWideScores > "$L/memcheck_wide.txt" 2>&1
stamp "memcheck wide rc=$?"
RL_BIN_DIR="$bin" OUT="$L/cmp" RIDGELINE_BENCH_PREFILL_REPS=40 ROUNDS="${ROUNDS:-3}" \
  FORMS="production expfirst expfirst_nodiaghalf peers" timeout 240 bash "$(dirname "$0")/prefill_vs_cudnn.sh" \
  > "$L/cmp.txt" 2>&1
stamp "prefill against cuDNN rc=$?"
for r in $(seq 1 "${TTFT_ROUNDS:-2}"); do
  for form in production expfirst; do
    (
      [ "$form" = expfirst ] && export RIDGELINE_CUDA_PREFILL_SM90=continuous_v3_lazy_autosnake_autodiaghalf_expfirst
      lat "ttft32k_${form}_r$r" -m models/configs/Llama-3.1-8B --dummy-weights --device cuda --batch 1 \
        --input-len 32000 --output-len 2 --max-model-len 32768 --max-num-batched-tokens 32768
    )
  done
done
stamp "ttft"
tar czf "$final_out/expfirst_logs.tgz" -C "$L" .
echo "== summary =="
gtest_summary "$L/tests.txt"
for f in memcheck racecheck memcheck_wide; do
  echo "$f: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/$f.txt" | head -1)"
done
for f in "$L"/lat_ttft32k_*.json; do
  [ -f "$f" ] || continue
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1][4:-5], \
    round(j['ttft_ms'], 1), 'ms')" "$f"
done
sed -n '/== TFLOP/,$p' "$L/cmp.txt"
