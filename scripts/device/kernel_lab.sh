#!/usr/bin/env bash
# The GEMV kernel lab and the sampler on the GPU machine (issues 21.3, 12.2, 17.2), building nothing: binaries from
# $RL_BIN_DIR (default build/cuda: rl_bench_kernels, rl_cuda_ops_tests, rl_tests_ops, ridgeline; lib/ for shared
# libraries). The CUDA op tests first (the lab's configurations are only worth timing if the production one is
# correct), then `rl_bench_kernels sample` (the sampler with and without a structured-output mask, and the mask's
# upload), `rl_bench_kernels gemv` (the production GEMV per projection shape and every lab configuration at the
# shapes that stream furthest below the copy ceiling), an ncu look at the 8B o_proj GEMV (4096 → 4096, M = 1;
# NCU=0 leaves it out), batch-1 decode of Llama-3.1-8B and Qwen3-0.6B (greedy and sampled) and batch-16 decode
# of Llama-3.1-8B.
# GEMV=0 leaves the GEMV lab (and its ncu look) out; GEMV_CONFIGS="1 6" and ROPE_AB=1 add end-to-end A/B runs
# (below). Logs in $OUT/kernel_lab_logs.tgz; a summary table last.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
timeout 240 "$bin/rl_cuda_ops_tests" --gtest_color=no > "$L/ops.log" 2>&1; echo "cuda ops tests rc=$?"
gtest_summary "$L/ops.log"
if [ -x "$bin/rl_tests_ops" ]; then
  timeout 240 "$bin/rl_tests_ops" --gtest_color=no > "$L/tests_ops.log" 2>&1; echo "rl_tests_ops rc=$?"
  gtest_summary "$L/tests_ops.log"
fi
timeout 60 "$bin/rl_bench_kernels" copy > "$L/copy.log" 2>&1; echo "copy rc=$?"
timeout 90 "$bin/rl_bench_kernels" sample > "$L/sample.log" 2>&1; echo "sample rc=$?"
if [ "${GEMV:-1}" = 1 ]; then
  timeout 240 "$bin/rl_bench_kernels" gemv > "$L/gemv.log" 2>&1; echo "gemv rc=$?"
fi
if [ "${GEMV:-1}" = 1 ] && [ "${NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
  # The first GEMV launches of `bench kernels gemv` are the production kernel at 4096 → 4096, M = 1 (3 warm-ups,
  # then the timed ones): one timed launch with the memory and occupancy sections.
  timeout 120 ncu --clock-control none -k regex:gemv_stream --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    "$bin/rl_bench_kernels" gemv > "$L/ncu_gemv.txt" 2>&1
  echo "ncu rc=$?"
fi
lat llama_b1 "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
lat qwen_b1 "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
lat llama_b16 "${LLAMA8B[@]}" --batch 16 --input-len 128 --output-len 128
# Sampled batch-1 decode with the models' own generation_config defaults (Llama 3.1: temperature 0.6, top-p 0.9;
# Qwen3: temperature 0.6, top-k 20, top-p 0.95): what the sampler's radix selects add to a step.
lat llama_b1_sampled "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256 --temperature 0.6 --top-p 0.9
lat qwen_b1_sampled "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256 --temperature 0.6 --top-k 20 \
  --top-p 0.95
lat llama_b16_sampled "${LLAMA8B[@]}" --batch 16 --input-len 128 --output-len 128 --temperature 0.6 --top-p 0.9
# End-to-end A/B (greedy batch 1, and batch 16 for Llama): each lab GEMV configuration named in GEMV_CONFIGS
# (RIDGELINE_CUDA_GEMV_CONFIG) in place of the tuned one, and (ROPE_AB=1) the composed q/k norm + RoPE and KV write
# in place of the fused kernel (RIDGELINE_CUDA_FUSED_ROPE_KV_WRITE=0).
ab_runs=()
for c in ${GEMV_CONFIGS:-}; do
  RIDGELINE_CUDA_GEMV_CONFIG=$c lat "llama_b1_g$c" "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
  RIDGELINE_CUDA_GEMV_CONFIG=$c lat "qwen_b1_g$c" "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
  RIDGELINE_CUDA_GEMV_CONFIG=$c lat "llama_b16_g$c" "${LLAMA8B[@]}" --batch 16 --input-len 128 --output-len 128
  ab_runs+=("llama_b1_g$c" "qwen_b1_g$c" "llama_b16_g$c")
done
if [ "${ROPE_AB:-0}" = 1 ]; then
  RIDGELINE_CUDA_FUSED_ROPE_KV_WRITE=0 lat llama_b1_rope0 "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
  RIDGELINE_CUDA_FUSED_ROPE_KV_WRITE=0 lat qwen_b1_rope0 "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
  ab_runs+=(llama_b1_rope0 qwen_b1_rope0)
fi
tar czf "$final_out/kernel_lab_logs.tgz" -C "$L" .
echo "== summary =="
grep RESULT "$L/copy.log" "$L/sample.log" | sed 's/.*RESULT //'
[ -f "$L/gemv.log" ] && python3 - "$L/gemv.log" <<'PY'
import re, sys, collections
prod, lab = {}, collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 5 or p[0] != "RESULT": continue
    if p[1] == "gemv": prod[p[2]] = float(p[3])
    if p[1] == "gemv_lab":
        m = re.match(r"v(\d+)_m(\d+)(?:_(\d+x\d+))?$", p[2])
        shape = m.group(3) or "4096x14336"
        lab[(shape, int(m.group(2)))][int(m.group(1))] = float(p[3])
print("shape m | production TB/s | best lab variant TB/s | all lab variants")
for (shape, m), v in sorted(lab.items()):
    best = max(v, key=v.get)
    print(f"{shape} m{m} | {prod.get(f'm{m}_{shape}', v.get(10, 0)):.2f} | v{best} {v[best]:.2f} | " +
          " ".join(f"{k}:{x:.2f}" for k, x in sorted(v.items())))
for k in sorted(prod): print("gemv", k, prod[k])
PY
[ -f "$L/ncu_gemv.txt" ] && grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Grid Size|Registers|Cluster|Waves" "$L/ncu_gemv.txt" | head -20
for t in llama_b1 qwen_b1 llama_b16 llama_b1_sampled qwen_b1_sampled llama_b16_sampled "${ab_runs[@]}"; do
  python3 -c "import json;j=json.load(open('$L/lat_$t.json'));print('$t', round(j['decode_tokens_per_s'],1), 'tok/s tpot', round(j['tpot_ms'],3))" 2>&1 | tail -1
done
