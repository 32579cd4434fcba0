#!/usr/bin/env bash
# The attention kernels' choices, measured in one call:
# - the CudaAttention op tests (every Hopper prefill turn order x V stages combination against the CPU reference);
# - `bench.sh prefill`: our kernel and its lab rows (`_cont`: the consumers' turns run on across work items; `_v3`:
#   three V stages with one Q buffer; both are production since session 18) beside torch's SDPA backends (cuDNN,
#   flash) from the same call;
# - the 32,000-token prompt's time to first token on the Llama-3.1-8B shape, production (continuous turns, 3 V
#   stages) against PREFILL_LAB's forms (default: per_item_v2, the form before session 18;
#   RIDGELINE_CUDA_PREFILL_SM90), TTFT_ROUNDS rounds (default 2), production first and last;
# - decode attention at batch 1 (issue 21.2): `rl_bench_kernels decode`, and Llama-3.1-8B batch-1 decode at 4k
#   context end to end (past the dense stack's bound: the layer kernels), production against DECODE_LAB's forms
#   (default mma_early, via RIDGELINE_CUDA_DECODE_KERNEL; rope: RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1; "" none).
# Carried binaries in $RL_BIN_DIR (ridgeline, rl_tests_ops, rl_bench_kernels). Prints a short table last; logs in
# $OUT/attention_levers_logs.tgz. About 7 minutes; NCU=1 adds about 2.5 and SANITIZE=1 about 3 (run those without
# the rest: ONLY_NCU=1, or SKIP_MAIN=1 with NCU / SANITIZE).
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
[ "${ONLY_NCU:-0}" = 1 ] && NCU=1
main() {
timeout 240 "$bin/rl_tests_ops" --gtest_filter='CudaAttention.*:CudaFusedOps.*:CudaRacecheckProbe.*' \
  > "$L/tests.txt" 2>&1
stamp "tests rc=$?"
OUT="$L/bench" RL_BIN_DIR="$bin" timeout 300 bash scripts/device/bench.sh prefill > "$L/bench.txt" 2>&1
stamp "bench prefill rc=$?"
# A lab variant runs end to end only where its op tests passed (a hang there would cost the rest of the call).
passed() { grep -q "^\[       OK \] $1 " "$L/tests.txt"; }
prefill_lab="${PREFILL_LAB:-per_item_v2}"
passed CudaAttention.HopperPrefillLayoutsAndPageSizes || { prefill_lab=""; echo "Hopper prefill lab tests failed"; }
decode_lab=""
for v in ${DECODE_LAB-mma_early}; do
  if [ "$v" = rope ]; then
    passed CudaFusedOps.RopeKvWriteAttentionInTheDecodeKernel && decode_lab="$decode_lab rope"
  elif passed CudaAttention.DecodePageBoundaries && passed CudaAttention.DecodeLongContextSplits; then
    decode_lab="$decode_lab $v"
  fi
done
ttft() {
  (
    [ "$1" != base ] && export RIDGELINE_CUDA_PREFILL_SM90="$1"
    lat "ttft32k_$1_r$2" -m models/configs/Llama-3.1-8B --dummy-weights --device cuda --batch 1 --input-len 32000 \
      --output-len 2 --max-model-len 32768 --max-num-batched-tokens 32768
  )
}
# TTFT_ROUNDS (default 2) rounds; each ends with production again (drift check).
for round in $(seq 1 "${TTFT_ROUNDS:-2}"); do
  for v in base $prefill_lab; do ttft "$v" "$round"; done
  ttft base "${round}b"
done
stamp "ttft done"
# DECODE_E2E=0 leaves out the decode part.
if [ "${DECODE_E2E:-1}" = 1 ]; then
  timeout 150 "$bin/rl_bench_kernels" decode > "$L/bench_decode.txt" 2>&1
  stamp "bench decode rc=$?"
  for round in 1 2; do
    for v in base $decode_lab; do
      (
        [ "$v" != rope ] && [ "$v" != base ] && export RIDGELINE_CUDA_DECODE_KERNEL="$v"
        [ "$v" = rope ] && export RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1
        lat "b1ctx4k_${v}_r$round" "${LLAMA8B[@]}" --batch 1 --input-len 3968 --output-len 128
      )
    done
  done
  stamp "batch-1 decode done"
fi
}
[ "${ONLY_NCU:-0}" = 1 ] || [ "${SKIP_MAIN:-0}" = 1 ] || main
# SANITIZE=1: compute-sanitizer memcheck and racecheck over the new paths: the fused RoPE decode test, the decode
# tests, and mixed / chunked prefill with the Hopper prefill's continuous turns and three V stages (production since
# session 18); then racecheck on the dense stack's ring hand-off probe in both forms (issue 21.6: the stack's
# racecheck report).
if [ "${SANITIZE:-0}" = 1 ]; then
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  small='CudaFusedOps.RopeKvWriteAttentionInTheDecodeKernel:CudaAttention.DecodeGridSizedForLongerContext:CudaAttention.MixedPrefillAndDecode:CudaAttention.ChunkedPrefillWithPrefixInCache'
  for tool in memcheck racecheck; do
    timeout 240 "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$bin/rl_tests_ops" --gtest_filter="$small" > "$L/$tool.log" 2>&1
    stamp "$tool rc=$?"
  done
  # The dense stack's ring hand-off alone (tests/ops/test_racecheck_probe.cpp), each form in a run of its own.
  for probe in RingHandoffLaneZeroArrives RingHandoffEveryThreadArrives; do
    timeout 120 "$sanitizer" --tool racecheck --error-exitcode 3 "$bin/rl_tests_ops" \
      --gtest_filter="CudaRacecheckProbe.$probe" > "$L/racecheck_$probe.log" 2>&1
    stamp "racecheck $probe rc=$?"
  done
fi
# NCU=1: where the consumers' warps wait, production and the form before session 18 (NCU_FORMS, default
# "base per_item_v2"): one 16k-token prefill's attention kernel
# (layer 0) under Nsight Compute, its warp-state and scheduler sections printed and its SASS with stall samples as
# CSV (about 70 s each).
ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
if [ "${NCU:-0}" = 1 ] && [ -n "$ncu" ]; then
  for v in ${NCU_FORMS:-base per_item_v2}; do
    (
      [ "$v" != base ] && export RIDGELINE_CUDA_PREFILL_SM90="$v"
      # --clock-control none: the GPU's own clocks, as every other figure here (the tool locks them to base otherwise)
      timeout 200 "$ncu" --clock-control none --kernel-name regex:prefill_attention_sm90 --launch-count 1 \
        --import-source no \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters \
        --force-overwrite -o "$L/ncu_$v" "$bin/ridgeline" bench latency -m models/configs/Llama-3.1-8B --dummy-weights \
        --device cuda --batch 1 --input-len 16000 --output-len 2 --max-model-len 16384 --max-num-batched-tokens 16384 \
        --num-iters 1 > "$L/ncu_$v.log" 2>&1
      echo "ncu $v rc=$?"
      "$ncu" --import "$L/ncu_$v.ncu-rep" --page details > "$L/ncu_${v}_details.txt" 2>&1
      "$ncu" --import "$L/ncu_$v.ncu-rep" --page source --csv --print-source sass > "$L/ncu_${v}_sass.csv" 2>&1
    )
    stamp "ncu $v"
  done
elif [ "${NCU:-0}" = 1 ]; then
  echo "NCU=1 but no ncu on this machine"
fi
tar czf "$final_out/attention_levers_logs.tgz" -C "$L" .
echo "== summary =="
[ -f "$L/tests.txt" ] && gtest_summary "$L/tests.txt"
for tool in memcheck racecheck racecheck_RingHandoffLaneZeroArrives racecheck_RingHandoffEveryThreadArrives; do
  [ -f "$L/$tool.log" ] && { echo "$tool:"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$L/$tool.log" | head -4; }
done
[ -f "$L/bench.txt" ] && sed -n '/== kernel benchmarks ==/,$p' "$L/bench.txt" | grep -iE "prefill|shape|---" | head -30
[ -f "$L/bench/ours.log" ] && grep -E "^RESULT prefill_lab .*(_k3|_cont|_v3|ablate)|^RESULT mixed_attn" \
  "$L/bench/ours.log" | head -44
for v in base per_item_v2; do
  [ -f "$L/ncu_${v}_details.txt" ] && { echo "== ncu $v"; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Tensor|Stall" "$L/ncu_${v}_details.txt" | head -24; }
done
[ -f "$L/bench_decode.txt" ] && grep -E \
  "^RESULT (copy|launch_floor|decode_attn|decode_attn_graph|decode_attn_graph_us) |^RESULT decode_kernel(_graph|_graph_us)? B1_" \
  "$L/bench_decode.txt"
for f in "$L"/lat_b1ctx4k_*.json; do
  [ -f "$f" ] || continue
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1][4:-5], round(j['decode_tokens_per_s'],1), 'tok/s TPOT', round(j['tpot_ms'],3))" "$f"
done
for f in "$L"/lat_ttft32k_*.json; do
  [ -f "$f" ] || continue
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
res = {r["name"]: r for r in j.get("results", [])}
pf = res.get("TTFT", {})
print(f"{sys.argv[1].split('/')[-1][4:-5]:28s} TTFT {j['ttft_ms']:8.1f} ms  roofline {pf.get('roofline_pct', 0):5.1f} %")
PY
done
