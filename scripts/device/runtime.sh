#!/usr/bin/env bash
# The runtime's device run (issues 12 and 13) on the GPU machine, building nothing: the binaries come from
# $RL_BIN_DIR (default build/cuda: ridgeline, rl_tests_ops, rl_tests_model; lib/ for libcpp-httplib).
#   1. CUDA tests: the one sampling path against the CPU reference (every parameter), every engine test on CUDA
#      with the deterministic kernels, and the 1,000-request determinism test (batched == alone).
#   2. Benchmarks with dummy weights: batch-1 decode (Llama-3.1-8B, Qwen3-0.6B; host share of a step), batch-64
#      decode and 1000 x 1024/1024 offline (8B), each with and without --deterministic, and a --profile trace.
# Logs and JSON go to $OUT; a table is printed last. FULL_DET=0 skips the deterministic 1000 x 1024/1024 run.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$root/$bin_dir/lib"
rl="$bin_dir/ridgeline"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

echo "== tests =="
timeout 120 "$bin_dir/rl_tests_ops" --gtest_filter='CudaSampling.*:CudaOps.ArgmaxRows*' --gtest_color=no \
  >"$out/test_sampling.log" 2>&1
echo "sampling rc=$?" | tee "$out/test_rc.txt"
RIDGELINE_TEST_DEVICE=cuda timeout 300 "$bin_dir/rl_tests_model" --gtest_filter='EngineTest.*:EngineDeterminism.*' \
  --gtest_color=no >"$out/test_engine_cuda.log" 2>&1
echo "engine+determinism rc=$?" | tee -a "$out/test_rc.txt"
grep -E "^\[  (PASSED|FAILED|  OK) |^determinism:|Failure|differ" "$out/test_sampling.log" "$out/test_engine_cuda.log" | head -40

llama=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096)
qwen=(-m models/configs/Qwen3-0.6B --dummy-weights --device cuda --max-model-len 4096)
lat() {
  local tag="$1"; shift
  timeout 180 "$rl" bench latency "$@" --json "$out/lat_$tag.json" >"$out/lat_$tag.log" 2>&1
  echo "lat_$tag rc=$?"
}
echo "== latency =="
lat llama_b1 "${llama[@]}" --batch 1 --input-len 128 --output-len 256 --profile "$out/profile_llama_b1.json"
lat qwen_b1 "${qwen[@]}" --batch 1 --input-len 128 --output-len 256 --profile "$out/profile_qwen_b1.json"
lat llama_b64 "${llama[@]}" --batch 64 --input-len 128 --output-len 128
lat llama_b1_det "${llama[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
lat qwen_b1_det "${qwen[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
lat llama_b64_det "${llama[@]}" --batch 64 --input-len 128 --output-len 128 --deterministic

tp() {
  local tag="$1"; shift
  timeout "${TP_LIMIT:-200}" "$rl" bench throughput "${llama[@]}" --max-num-seqs 256 --max-num-batched-tokens 8192 \
    "$@" --json "$out/tp_$tag.json" >"$out/tp_$tag.log" 2>&1
  echo "tp_$tag rc=$?"
}
echo "== throughput =="
tp 1000x1024 --num-prompts 1000 --input-len 1024 --output-len 1024
if [ "${FULL_DET:-1}" = 1 ]; then tp 1000x1024_det --num-prompts 1000 --input-len 1024 --output-len 1024 --deterministic; fi

echo "== runtime summary =="
cat "$out/test_rc.txt"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(n):
    p = os.path.join(out, n)
    return json.load(open(p)) if os.path.exists(p) else None
print(f"{'run':22s} {'decode tok/s':>12s} {'TPOT ms':>8s} {'TTFT ms':>8s} {'host %':>7s} {'host us':>8s}")
for t in ["llama_b1", "llama_b1_det", "qwen_b1", "qwen_b1_det", "llama_b64", "llama_b64_det"]:
    j = load(f"lat_{t}.json")
    if j: print(f"{t:22s} {j['decode_tokens_per_s']:12.1f} {j['tpot_ms']:8.3f} {j['ttft_ms']:8.2f} {j.get('host_pct_of_step', 0):7.2f} {j.get('host_us_per_step', 0):8.1f}")
    else: print(f"{t:22s} (no result)")
for t in ["1000x1024", "1000x1024_det"]:
    j = load(f"tp_{t}.json")
    if j: print(f"tp {t:19s} out {j['output_tokens_per_s']:9.1f} tok/s  total {j['total_tokens_per_s']:9.1f}  host {j.get('host_pct_of_step', 0):.2f}% of step  preempt {j['num_preemptions']}  elapsed {j['elapsed_s']:.1f}s")
    else: print(f"tp {t:19s} (no result)")
PY
