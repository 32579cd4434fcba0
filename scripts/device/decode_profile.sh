#!/usr/bin/env bash
# Where a batch-1 decode step's GPU time goes (issue 12), on the GPU machine, building nothing: Nsight Compute
# times every kernel of a short `ridgeline bench latency` run (each kernel node of the decode graph alone, clocks
# left alone), for the unfused and the fused decode path; tools/ncu_steps.py folds the CSV into kernel time per
# decode step by kernel name, beside the measured TPOT, so (TPOT - kernel time) is what the gaps between kernels
# cost.
#   BIN=dir (ridgeline) MODELS="models/configs/Qwen3-0.6B ..." scripts/device/decode_profile.sh
# Logs and CSVs go to $OUT/decode_profile.tgz; a table is printed last.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bin="$(cd "${BIN:-build/cuda}" && pwd)"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
final_out="${OUT:-/tmp/rl_device}"; mkdir -p "$final_out"
out="$(mktemp -d)"
steps="${STEPS:-8}"
for model in ${MODELS:-models/configs/Qwen3-0.6B}; do
  name="$(basename "$model")"
  for mode in unfused fused; do
    fused=0; [ "$mode" = fused ] && fused=1
    args=(bench latency -m "$model" --dummy-weights --device cuda --max-model-len 1024 --input-len 16 --batch 1)
    # The measured step, without the profiler.
    RIDGELINE_CUDA_FUSED_DECODE=$fused timeout 60 "$bin/ridgeline" "${args[@]}" --output-len 256 \
      --json "$out/${name}_${mode}_lat.json" > "$out/${name}_${mode}_lat.log" 2>&1
    # Every kernel of a run with $steps decode steps, each timed alone.
    RIDGELINE_CUDA_FUSED_DECODE=$fused timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
      --csv --page raw "$bin/ridgeline" "${args[@]}" --output-len "$steps" \
      > "$out/${name}_${mode}_ncu.csv" 2> "$out/${name}_${mode}_ncu.err"
    echo "$name $mode: ncu rc=$? ($(wc -l < "$out/${name}_${mode}_ncu.csv") lines)"
    python3 tools/ncu_steps.py "$out/${name}_${mode}_ncu.csv" "$out/${name}_${mode}_lat.json" \
      > "$out/${name}_${mode}_table.txt" 2>&1
  done
done
tar czf "$final_out/decode_profile.tgz" -C "$out" .
for t in "$out"/*_table.txt; do echo "== $(basename "$t" _table.txt) =="; head -30 "$t"; done
