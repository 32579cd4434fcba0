#!/usr/bin/env bash
# The runtime's device run (issues 12 and 13) on the GPU machine, building nothing: the binaries come from
# $RL_BIN_DIR (default build/cuda: ridgeline, rl_tests_ops, rl_tests_model; lib/ for libcpp-httplib); models
# from $RL_ROOT (default: this checkout).
#   1. CUDA tests: the one sampling path against the CPU reference (every parameter), every engine test on CUDA
#      with the deterministic kernels, and the 1,000-request determinism test (batched == alone).
#   2. Benchmarks with dummy weights: batch-1 decode (Llama-3.1-8B, Qwen3-0.6B; host share of a step), batch-64
#      decode and 1000 x 1024/1024 offline (8B), each with and without --deterministic, and a --profile trace.
# A table is printed last. BUDGET (seconds, default 330) skips what would not fit. ONLY=tests runs the tests
# (ENGINE_FILTER narrows the engine tests); ONLY=detmix runs a Qwen --profile summary and the deterministic
# cost on 256 x 1024/256 (both modes); ONLY=det runs the tests, the batch-invariance op tests, the decode
# attention kernels in both modes, and the deterministic benchmarks (1000 x 1024/1024 first).
# SOURCE_LINK=/path: the test binaries were built in that checkout (they read fixtures by their compiled source
# path), so that path is made a link to this checkout first.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bin_dir="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
# Logs go to a scratch folder, packed into $OUT/runtime_logs_$ONLY.tgz at the end (the device returns few files).
final_out="${OUT:-/tmp/rl_device}"
out="$(mktemp -d)"
mkdir -p "$final_out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin_dir/lib"
rl="$bin_dir/ridgeline"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

if [ -n "${SOURCE_LINK:-}" ] && [ ! -e "$SOURCE_LINK" ]; then
  mkdir -p "$(dirname "$SOURCE_LINK")" && ln -s "$root" "$SOURCE_LINK"
fi
if [ "${ONLY:-all}" = det ]; then
  timeout 240 "$bin_dir/rl_tests_ops" --gtest_filter='CudaBatchInvariance.*:CudaAttention.*:CudaSampling.*' \
    --gtest_color=no >"$out/test_invariance.log" 2>&1
  echo "invariance+attention ops rc=$?" | tee -a "$out/test_rc.txt"
  grep -E "^\[  (PASSED|FAILED) |Failure" "$out/test_invariance.log" | head -20
  timeout 60 "$rl" bench kernels decode >"$out/kernels_decode.log" 2>&1
  grep -E "decode_attn" "$out/kernels_decode.log"
fi
if [ "${ONLY:-all}" = all ] || [ "${ONLY:-all}" = tests ] || [ "${ONLY:-all}" = det ]; then
echo "== tests =="
timeout 120 "$bin_dir/rl_tests_ops" --gtest_filter='CudaSampling.*:CudaOps.ArgmaxRows*' --gtest_color=no \
  >"$out/test_sampling.log" 2>&1
echo "sampling rc=$?" | tee "$out/test_rc.txt"
RIDGELINE_TINY_MODEL="$root/models/ridgeline-tiny" RIDGELINE_TEST_DEVICE=cuda timeout 300 "$bin_dir/rl_tests_model" --gtest_filter='EngineTest.*:EngineDeterminism.*' \
  --gtest_color=no ${ENGINE_FILTER:+--gtest_filter=$ENGINE_FILTER} >"$out/test_engine_cuda.log" 2>&1
echo "engine+determinism rc=$?" | tee -a "$out/test_rc.txt"
grep -E "^\[  (PASSED|FAILED|  OK) |^determinism:|Failure|differ" "$out/test_sampling.log" "$out/test_engine_cuda.log" | head -40
fi

llama=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096)
qwen=(-m models/configs/Qwen3-0.6B --dummy-weights --device cuda --max-model-len 4096)
lat() {
  local tag="$1"; shift
  timeout 180 "$rl" bench latency "$@" --json "$out/lat_$tag.json" >"$out/lat_$tag.log" 2>&1
  echo "lat_$tag rc=$?"
}
# Steps run in priority order; one that would start after $BUDGET seconds is skipped (and says so).
budget="${BUDGET:-330}"
fits() { if [ "$SECONDS" -lt "$((budget - $1))" ]; then return 0; fi; echo "skipped $2: ${SECONDS}s used of ${budget}s"; return 1; }
tp() {
  local tag="$1"; shift
  timeout "${TP_LIMIT:-220}" "$rl" bench throughput "${llama[@]}" --max-num-seqs 256 --max-num-batched-tokens 8192 \
    "$@" --json "$out/tp_$tag.json" >"$out/tp_$tag.log" 2>&1
  echo "tp_$tag rc=$?"
}
echo "== benchmarks =="
if [ "${ONLY:-all}" = all ]; then
lat llama_b1 "${llama[@]}" --batch 1 --input-len 128 --output-len 256
lat qwen_b1 "${qwen[@]}" --batch 1 --input-len 128 --output-len 256
lat qwen_b1_profile "${qwen[@]}" --batch 1 --input-len 128 --output-len 32 --profile "$out/profile_qwen_b1.json"
lat llama_b64 "${llama[@]}" --batch 64 --input-len 128 --output-len 128
fits 150 tp_1000x1024 && tp 1000x1024 --num-prompts 1000 --input-len 1024 --output-len 1024
fits 15 lat_llama_b64_det && lat llama_b64_det "${llama[@]}" --batch 64 --input-len 128 --output-len 128 --deterministic
fits 150 tp_1000x1024_det && tp 1000x1024_det --num-prompts 1000 --input-len 1024 --output-len 1024 --deterministic
fits 15 lat_llama_b1_det && lat llama_b1_det "${llama[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
fits 10 lat_qwen_b1_det && lat qwen_b1_det "${qwen[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
fi
if [ "${ONLY:-all}" = det ]; then
  fits 60 tp_1000x1024_det && tp 1000x1024_det --num-prompts 1000 --input-len 1024 --output-len 1024 --deterministic
  fits 15 lat_llama_b64_det && lat llama_b64_det "${llama[@]}" --batch 64 --input-len 128 --output-len 128 --deterministic
  fits 15 lat_llama_b1_det && lat llama_b1_det "${llama[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
  fits 10 lat_qwen_b1_det && lat qwen_b1_det "${qwen[@]}" --batch 1 --input-len 128 --output-len 256 --deterministic
fi
# The deterministic cost on a shorter offline mix when the full one does not fit: both modes, same workload.
if [ "${ONLY:-all}" = detmix ]; then
  lat qwen_b1_profile "${qwen[@]}" --batch 1 --input-len 128 --output-len 64 --profile "$out/profile_qwen_b1.json"
  tp 256x1024x256 --num-prompts 256 --input-len 1024 --output-len 256
  tp 256x1024x256_det --num-prompts 256 --input-len 1024 --output-len 256 --deterministic
  python3 - "$out/profile_qwen_b1.json" <<'PY'
import json, sys, collections, statistics
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
d = collections.defaultdict(list)
for e in ev: d[(e["tid"], e["name"])].append(e["dur"])
for (tid, name), v in sorted(d.items()):  # medians: prefill and graph-capture steps are outliers
    print(f"profile qwen b1: {['host','device','consumer'][tid]:8s} {name:14s} n={len(v):4d} median {statistics.median(v):8.1f} us")
PY
fi

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
for t in ["1000x1024", "1000x1024_det", "256x1024x256", "256x1024x256_det"]:
    j = load(f"tp_{t}.json")
    if j: print(f"tp {t:19s} out {j['output_tokens_per_s']:9.1f} tok/s  total {j['total_tokens_per_s']:9.1f}  host {j.get('host_pct_of_step', 0):.2f}% of step  preempt {j['num_preemptions']}  elapsed {j['elapsed_s']:.1f}s")
    else: print(f"tp {t:19s} (no result)")
PY
grep -h "Roofline of the mix\|^Steps:" "$out"/tp_*.log 2>/dev/null
tar czf "$final_out/runtime_logs_${ONLY:-all}.tgz" -C "$out" .
