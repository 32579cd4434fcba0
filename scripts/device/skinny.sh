#!/usr/bin/env bash
# The skinny GEMM (gemm_skinny_sm90.cu, opt-in linear for 16 < M <= 64 on the H200): its op tests, `rl_bench_kernels
# skinny` (ours next to cuBLASLt and the GEMV, same run), Llama-3.1-8B decode at batch 64 and 32 with it and
# without it (RIDGELINE_CUDA_SKINNY_GEMM=1 switches it on, 0 leaves cuBLASLt), alternating, ROUNDS rounds; then
# memcheck and racecheck on its op test within what is left of BUDGET_S seconds. Carried binaries in $RL_BIN_DIR.
# Prints a short table last; full logs in $OUT/skinny_logs.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
ops="$bin/rl_cuda_ops_tests"
[ -x "$ops" ] || ops="$bin/rl_tests_ops"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
t0=$(date +%s)
timeout 150 "$ops" --gtest_filter='CudaOps.Linear*' --gtest_color=no > "$L/ops.log" 2>&1; echo "ops rc=$? $(( $(date +%s) - t0 ))s"
timeout 90 "$bin/rl_bench_kernels" skinny > "$L/skinny.log" 2>&1; echo "bench rc=$? $(( $(date +%s) - t0 ))s"
for round in $(seq 1 "${ROUNDS:-1}"); do
  for b in 64 32; do
    for sk in 1 0; do
      RIDGELINE_CUDA_SKINNY_GEMM=$sk lat "b${b}_sk${sk}_r$round" "${LLAMA8B[@]}" --batch $b --input-len 128 --output-len 128
    done
  done
done
echo "e2e done $(( $(date +%s) - t0 ))s"
# The sanitizers last, within what is left of ${BUDGET_S:-540} s.
for tool in memcheck racecheck; do
  left=$(( ${BUDGET_S:-540} - ($(date +%s) - t0) - 10 ))
  [ $left -gt 30 ] || { echo "$tool: no time left"; continue; }
  timeout $left "$sanitizer" --tool $tool --error-exitcode 3 "$ops" --gtest_filter='CudaOps.LinearSkinnyGemm' \
    > "$L/$tool.log" 2>&1; echo "$tool rc=$? $(( $(date +%s) - t0 ))s"
done
tar czf "$final_out/skinny_logs.tgz" -C "$L" .
echo "== summary =="
gtest_summary "$L/ops.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$L/memcheck.log" "$L/racecheck.log" 2>/dev/null
grep RESULT "$L/skinny.log" | grep -v skinny_lab | sed 's/.*RESULT //' | awk '{printf "%s %s %s\n", $1, $2, $3}'
# The best lab configuration per shape.
grep "RESULT skinny_lab" "$L/skinny.log" | awk '{split($3, a, "_st"); if ($4 > best[a[1]]) {best[a[1]] = $4; cfg[a[1]] = $3}}
  END {for (s in best) print "best", cfg[s], best[s]}' | sort
for f in "$L"/lat_*.json; do
  python3 -c "import json,sys;j=json.load(open('$f'));print('$(basename "$f" .json)', round(j['decode_tokens_per_s'],1), 'tok/s tpot', round(j['tpot_ms'],3))" 2>&1 | tail -1
done
