#!/usr/bin/env bash
# Multi-head latent attention on CUDA (issue 15) on the GPU machine, building nothing. Binaries from $BIN (default
# build/cuda): rl_tests_ops, rl_bench_kernels, ridgeline (the cuda preset). Sources from $RL_ROOT (default: this
# checkout). Steps, each with a timeout (at most 390 s in all):
#   1. the MLA op tests (CudaMla.*: each op vs the CPU at DeepSeek widths, deterministic rows, absorbed = expanded),
#      the DeepSeek MoE routing test, and the CUDA golden tests of deepseek_v3 and deepseek_v3_fp8 (bf16 rule,
#      greedy eager = graphs) and of the other MoE fixtures (the routing kernel changed);
#   2. MLA decode attention at the DeepSeek-V2-Lite / V3 widths (16 / 128 heads), batch 1 and 64, context 4096:
#      ours (rl_bench_kernels mla) and the naive torch absorbed MLA (bench/peers/torch_peers.py mla) in the same run;
#   3. `ridgeline bench latency` of DeepSeek-V2-Lite with dummy weights at batch 1 and 64.
# Logs are packed into $OUT/mla_logs.tgz; a short table is printed last.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bin="$(cd "${BIN:-build/cuda}" && pwd)"
final_out="${OUT:-/tmp/rl_device}"
mkdir -p "$final_out"
out="$(mktemp -d)"
pack() { tar czf "$final_out/mla_logs.tgz" -C "$out" .; }
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin/lib"
# libnccl.so.2 (linked by the CUDA backend): the machine's, or the one torch ships.
if ! ldconfig -p | grep -q libnccl.so.2; then
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"
  [ -n "$nccl" ] || nccl="$(dirname "$(find /usr/local /usr/lib /opt -maxdepth 6 -name libnccl.so.2 2>/dev/null | head -1)")"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
fi
export RIDGELINE_SOURCE_ROOT="$root" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

timeout "${OPS_TIMEOUT:-90}" "$bin/rl_tests_ops" --gtest_color=no \
  --gtest_filter="${OPS_FILTER:-CudaMla.*:CudaMoe.DeepSeekRoutingMatchesCpu}" >"$out/ops.log" 2>&1
echo "mla op tests rc=$?" | tee -a "$out/rc.txt"
# DeepSeek first; then the other MoE fixtures, whose routing kernel this branch changed.
timeout "${GOLDEN_TIMEOUT:-90}" "$bin/rl_tests_ops" --gtest_color=no \
  --gtest_filter="${GOLDEN_FILTER:-*CudaGolden*deepseek*:*CudaGolden*moe*:*CudaGolden*gpt_oss*}" >"$out/golden.log" 2>&1
echo "golden tests rc=$?" | tee -a "$out/rc.txt"
pack

timeout 30 "$bin/rl_bench_kernels" copy >"$out/ours.log" 2>&1
timeout 50 "$bin/rl_bench_kernels" mla >>"$out/ours.log" 2>&1
echo "bench ours rc=$?" | tee -a "$out/rc.txt"
timeout 40 python3 bench/peers/torch_peers.py mla >"$out/peers.log" 2>&1
echo "bench torch rc=$?" | tee -a "$out/rc.txt"
python3 bench/peers/report.py "$out/ours.log" "$out/peers.log" >"$out/table.txt" 2>&1
pack

for batch in 1 64; do
  timeout 45 "$bin/ridgeline" bench latency -m models/configs/DeepSeek-V2-Lite --dummy-weights --device cuda \
    --batch "$batch" --input-len 128 --output-len 128 --num-iters 1 --max-model-len 512 \
    --json "$out/latency_b$batch.json" >"$out/latency_b$batch.log" 2>&1
  echo "latency DeepSeek-V2-Lite b$batch rc=$?" | tee -a "$out/rc.txt"
done
pack

echo "== tests =="
grep -hE "^\[  FAILED  \]|^\[==========\]|^\[  PASSED  \]" "$out/ops.log" "$out/golden.log" | head -30
grep -hE "^\[       OK \] CudaGolden.*deepseek" "$out/golden.log"
echo "== MLA decode attention: ours vs naive torch (TB = latent bytes/s, TF = FLOP/s) =="
grep -E "^kernel|^mla|^copy|^\(units" "$out/table.txt"
grep -h "mla_lab" "$out/ours.log" | head -20
echo "== DeepSeek-V2-Lite decode (dummy weights) =="
for b in 1 64; do
  echo "-- batch $b: $(grep -iE "tok/s|TPOT|error" "$out/latency_b$b.log" | head -4 | tr '\n' ' ')"
done
cat "$out/rc.txt"
