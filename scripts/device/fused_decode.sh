#!/usr/bin/env bash
# The fused decode ops (issue 12) on the GPU machine, building nothing: CUDA op tests (fused ops, all CudaOps,
# batch invariance), the CUDA golden model tests, then batch-1 decode of Qwen3-0.6B and Llama-3.1-8B with
# main's binary (before), this branch's by default (the unfused kernels, same build) and with
# RIDGELINE_CUDA_FUSED_DECODE=1 (after: the fused kernels are opt-in until this run has checked them); each prints
# its decode graph's kernels per step (this branch only).
# AFTER=dir (ridgeline, rl_cuda_ops_tests, rl_tests_ops), BEFORE=dir (main's ridgeline; optional).
# SOURCE_LINKS="path ...": the binaries' compiled source paths, made links to this checkout (fixtures).
# LD_LIBRARY_PATH may name a folder of carried shared libraries (OpenBLAS); /usr/local/cuda/lib64 is put first.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"  # RL_ROOT: a checkout, when the script travels alone
cd "$root"
after="$(cd "${AFTER:-build/cuda}" && pwd)"
before="${BEFORE:-}"
for l in ${SOURCE_LINKS:-}; do
  if [ ! -e "$l" ]; then mkdir -p "$(dirname "$l")" && ln -s "$root" "$l"; fi
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
final_out="${OUT:-/tmp/rl_device}"; mkdir -p "$final_out"
out="$(mktemp -d)"  # logs; packed into $OUT/fused_decode_logs.tgz (the device returns at most 8 files)
pack() { tar czf "$final_out/fused_decode_logs.tgz" -C "$out" .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
timeout 200 "$after/rl_cuda_ops_tests" --gtest_filter='CudaFusedOps.*:CudaOps.*:CudaBatchInvariance.*' \
  --gtest_color=no > "$out/ops.log" 2>&1; echo "op tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/ops.log" | head -20
timeout 150 "$after/rl_tests_ops" --gtest_filter='*CudaGolden*:CudaTinyModel*' --gtest_color=no \
  > "$out/golden.log" 2>&1; echo "golden (unfused) rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/golden.log" | head -20
RIDGELINE_CUDA_FUSED_DECODE=1 timeout 150 "$after/rl_tests_ops" --gtest_filter='*CudaGolden*:CudaTinyModel*' \
  --gtest_color=no > "$out/golden_fused.log" 2>&1; echo "golden (fused) rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/golden_fused.log" | head -20
pack
lat() {
  local name=$1 bin=$2; shift 2
  timeout 60 "$bin/ridgeline" bench latency "$@" --json "$out/lat_$name.json" > "$out/lat_$name.log" 2>&1
  local rc=$?
  echo "lat $name rc=$rc $(summary "$name")"
}
# tok/s, TPOT ms, kernels per decode step
summary() {
  python3 -c "import json;j=json.load(open('$out/lat_$1.json'));print(round(j['decode_tokens_per_s'],1), round(j['tpot_ms'],3), j.get('decode_graph_kernels','-'))" 2>&1 | tail -1
}
qw=(-m models/configs/Qwen3-0.6B --dummy-weights --device cuda --max-model-len 4096 --input-len 128)
ll=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096 --input-len 128)
b1=(--batch 1 --output-len 256)
b16=(--batch 16 --output-len 128)
runs=()
for round in 1 2; do
  for m in qwen llama; do
    if [ "$m" = llama ] && [ "$round" = 2 ]; then continue; fi
    if [ "$m" = qwen ]; then args=("${qw[@]}"); else args=("${ll[@]}"); fi
    if [ -n "$before" ]; then
      lat "${m}_before_$round" "$before" "${args[@]}" "${b1[@]}"
      runs+=("${m}_before_$round")
    fi
    lat "${m}_unfused_$round" "$after" "${args[@]}" "${b1[@]}"
    RIDGELINE_CUDA_FUSED_DECODE=1 lat "${m}_after_$round" "$after" "${args[@]}" "${b1[@]}"
    runs+=("${m}_unfused_$round" "${m}_after_$round")
  done
done
# Batch 16 (two n8 tiles: the prologue instances run 4 blocks per SM, kernel_config.h kFusedNormLinearMaxM).
for m in qwen llama; do
  if [ "$m" = qwen ]; then args=("${qw[@]}"); else args=("${ll[@]}"); fi
  lat "${m}_b16_unfused" "$after" "${args[@]}" "${b16[@]}"
  RIDGELINE_CUDA_FUSED_DECODE=1 lat "${m}_b16_after" "$after" "${args[@]}" "${b16[@]}"
  runs+=("${m}_b16_unfused" "${m}_b16_after")
done
pack
echo "== summary (tok/s, TPOT ms, kernels per step) =="
for r in "${runs[@]}"; do echo "$r $(summary "$r")"; done
