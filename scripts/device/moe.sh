#!/usr/bin/env bash
# The MoE / new-architecture device run (GPU machine, carried binaries in $RL_BIN_DIR, default build/cuda):
#   1. CUDA golden tests of every fixture (GPT-2, Qwen3-MoE, GPT-OSS included) and the MoE op tests;
#   2. the MoE expert layer at the gpt-oss-20b and Qwen3-30B-A3B shapes: ours (grouped GEMM) and the torch
#      reference (loop over experts with F.linear) in the same run;
#   3. decode with dummy weights at both shapes, batch 1 and 64 (`ridgeline bench latency`, 128 in / 128 out).
# Logs go to $OUT; a table is printed last.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
case "$bin_dir" in /*) lib_dir="$bin_dir/lib" ;; *) lib_dir="$root/$bin_dir/lib" ;; esac
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$lib_dir"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

timeout 100 "$bin_dir/rl_tests_ops" --gtest_color=no \
  --gtest_filter='CudaGolden*:CudaMoe*:CudaTinyModel*:CudaAttention*' >"$out/tests.log" 2>&1
tests_rc=$?
timeout 40 "$bin_dir/rl_tests_ops" --gtest_color=no --gtest_also_run_disabled_tests \
  --gtest_filter='CudaMoeBench.*' >"$out/moe_ours.log" 2>&1
timeout 45 python3 bench/peers/moe_torch.py >"$out/moe_torch.log" 2>&1
for model in gpt-oss-20b Qwen3-30B-A3B; do
  for batch in 1 64; do
    timeout 40 "$bin_dir/ridgeline" bench latency -m "models/configs/$model" --dummy-weights --device cuda \
      --batch "$batch" --input-len 128 --output-len 128 --num-iters 1 --max-model-len 512 \
      --json "$out/latency_${model}_b${batch}.json" >"$out/latency_${model}_b${batch}.log" 2>&1
  done
done

echo "== tests =="
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[==========\]" "$out/tests.log" | tail -12
echo "rl_tests_ops rc=$tests_rc"
echo "== MoE expert layer (ours vs torch loop) =="
grep -h MOE_BENCH "$out/moe_ours.log" "$out/moe_torch.log"
echo "== decode latency (dummy weights) =="
for f in "$out"/latency_*.log; do echo "-- $(basename "$f")"; grep -iE "tok/s|TPOT|TTFT|roofline|error" "$f" | head -8; done
