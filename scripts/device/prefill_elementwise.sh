#!/usr/bin/env bash
# The prefill's memory-bound kernels (issue 21.4: the 32k prompt's TTFT) in one call: the op tests of the q/k norm +
# RoPE kernel's two forms and SiLU·mul (CudaOps.*, CudaFusedOps.*), `rl_bench_kernels copy elementwise` (bytes moved /
# time beside copy), then the 32,000-token TTFT on the Llama-3.1-8B shape for the binaries in $RL_BIN_DIR against
# those in $BASE_BIN_DIR (if set) and against themselves with the variables of OFF_ENV set (if set, e.g.
# OFF_ENV="RIDGELINE_CUDA_GEMM_RESIDUAL=0"), alternating, ROUNDS rounds (default 2), and one kernel trace of each
# (tools/kernel_gaps.py --totals: each kernel's total over the prefill). TEST_FILTER: the op tests (default
# CudaOps.*:CudaFusedOps.*). SOURCE_LINK as common.sh says. Prints a short table last; logs in
# $OUT/prefill_elementwise_logs.tgz. About 4 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
timeout 240 "$bin/rl_tests_ops" --gtest_filter="${TEST_FILTER:-CudaOps.*:CudaFusedOps.*}" --gtest_color=no \
  > "$L/tests.txt" 2>&1
stamp "op tests rc=$?"
{ "$bin/rl_bench_kernels" copy; timeout 120 "$bin/rl_bench_kernels" elementwise; } > "$L/bench.txt" 2>&1
stamp "bench rc=$?"
args=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --batch 1 --input-len 32000 --output-len 2
  --max-model-len 32768 --max-num-batched-tokens 32768)
forms="new"
[ -n "${BASE_BIN_DIR:-}" ] && forms="base $forms"
[ -n "${OFF_ENV:-}" ] && forms="$forms off"
new_bin="$bin"
# Form $1's binaries in $bin, and OFF_ENV's variables exported for "off" only.
use_form() {
  local kv
  for kv in ${OFF_ENV:-}; do unset "${kv%%=*}"; done
  bin="$new_bin"
  case "$1" in
    base) bin="$(cd "$BASE_BIN_DIR" && pwd)" ;;
    off) for kv in $OFF_ENV; do export "$kv"; done ;;
  esac
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for f in $forms; do
    use_form "$f"
    lat "ttft32k_${f}_r$r" "${args[@]}"
  done
done
for f in $forms; do
  use_form "$f"
  timeout 150 "$bin/ridgeline" bench latency "${args[@]}" --profile "$L/trace_$f.json" --profile-kernels \
    > "$L/trace_$f.log" 2>&1
  python3 tools/kernel_gaps.py "$L/trace_$f.json" --totals "${TOP:-12}" > "$L/totals_$f.txt" 2>&1
  stamp "trace $f rc=$?"
done
use_form new
tar -C "$L" -czf "$final_out/prefill_elementwise_logs.tgz" .
echo "== tests"
gtest_summary "$L/tests.txt"
echo "== kernel rows"
grep -E "^RESULT (copy|qk_norm_rope_kv|silu_mul|add_rms_norm|rms_norm) " "$L/bench.txt"
echo "== 32k TTFT"
python3 - "$L"/lat_ttft32k_*.json <<'PY'
import json, os, sys
for f in sys.argv[1:]:
    j = json.load(open(f))
    r = {x["name"]: x for x in j.get("results", [])}
    pct = r.get("TTFT", {}).get("roofline_pct", 0)
    print(os.path.basename(f)[4:-5], "TTFT", round(j["ttft_ms"], 1), "ms", round(pct, 1), "%")
PY
for f in $forms; do
  echo "== kernel totals, $f"
  head -14 "$L/totals_$f.txt"
done
