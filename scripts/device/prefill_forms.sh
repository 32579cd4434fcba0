#!/usr/bin/env bash
# The Hopper prefill's forms against production in one call: production (the lazy rescale since session 20) against the
# eager rescale (RIDGELINE_CUDA_PREFILL_SM90=continuous_v3). The layout test (every form against the CPU; the lab forms
# on the test's subset), `rl_bench_kernels copy prefill` (production at block sizes 16 / 64 / 128, the lab rows, the
# ablations), PEER=1 (default) torch's SDPA peers in the same call (bench/peers/torch_peers.py prefill: cuDNN, flash),
# and the 32,000-token TTFT on the Llama-3.1-8B shape, each form that passed the test alternating, ROUNDS rounds
# (default 2), production also at each KV block size in BLOCK_SIZES (default "64"). LAB_FORMS replaces the lab forms
# (RIDGELINE_CUDA_PREFILL_SM90 values, e.g. "continuous_v3_lazy_snake", "continuous_v3_lazy_diaghalf_autosnake").
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table last; logs in
# $OUT/prefill_forms_logs.tgz. About 4 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
t0=$(date +%s)
timeout 90 "$bin/rl_tests_ops" --gtest_filter='CudaAttention.HopperPrefillLayoutsAndPageSizes' --gtest_color=no \
  > "$L/tests.txt" 2>&1
echo "layout test rc=$? $(( $(date +%s) - t0 ))s"
{ "$bin/rl_bench_kernels" copy; timeout 120 "$bin/rl_bench_kernels" prefill; } > "$L/bench_prefill.txt" 2>&1
echo "bench prefill rc=$? $(( $(date +%s) - t0 ))s"
if [ "${PEER:-1}" = 1 ]; then
  timeout 150 python3 bench/peers/torch_peers.py prefill > "$L/peers_prefill.txt" 2>&1
  echo "torch peers rc=$? $(( $(date +%s) - t0 ))s"
fi
# A form: production (no variable) or a RIDGELINE_CUDA_PREFILL_SM90 value; bsN: production at KV block size N.
forms="production"
grep -q "^\[       OK \] CudaAttention.HopperPrefillLayoutsAndPageSizes" "$L/tests.txt" &&
  forms="$forms ${LAB_FORMS-continuous_v3}"
for bs in ${BLOCK_SIZES-64}; do forms="$forms bs$bs"; done
for r in $(seq 1 "${ROUNDS:-2}"); do
  for f in $forms; do
    (
      extra=()
      case $f in
        production) ;;
        bs*) extra=(--block-size "${f#bs}") ;;
        *) export RIDGELINE_CUDA_PREFILL_SM90=$f ;;
      esac
      lat "ttft32k_${f}_r$r" -m models/configs/Llama-3.1-8B --dummy-weights --device cuda \
        --batch 1 --input-len 32000 --output-len 2 --max-model-len 32768 --max-num-batched-tokens 32768 "${extra[@]}"
    )
  done
done
tar czf "$final_out/prefill_forms_logs.tgz" -C "$L" .
echo "== summary =="
gtest_summary "$L/tests.txt"
rows="^RESULT (copy|prefill_attn) |_bs(64|128) |_v3_cont |_v3_cont_lazy |_snake "
grep -E "$rows|_diaghalf |_abl" "$L/bench_prefill.txt"
[ -f "$L/peers_prefill.txt" ] && grep -E "^RESULT" "$L/peers_prefill.txt"
for f in "$L"/lat_ttft32k_*.json; do
  [ -f "$f" ] || continue
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); r={x['name']: x for x in j.get('results', [])}; print(sys.argv[1].split('/')[-1][4:-5], 'TTFT', round(j['ttft_ms'],1), 'ms', round(r.get('TTFT', {}).get('roofline_pct', 0),1), '%')" "$f"
done
