#!/usr/bin/env bash
# Tensor parallelism on a two-GPU machine (nvidia-h200-x2, issue 19), building nothing: binaries from $RL_BIN_DIR
# (default build/cuda: ridgeline, rl_bench_nccl, rl_tests_ops; lib/ for shared libraries). Stages (one device call each stays
# under the 10-minute limit; no argument runs all of them in order):
#   ops         rl_tests_ops: the TP ops against the CPU (CudaTpOps.*) and NcclGroup.* over both GPUs
#   nccl        NCCL all-reduce bus bandwidth, 4 KB .. 64 MB (bench/tp/nccl_allreduce.cpp): the roofline's term
#   identity    TP=1 vs TP=2 greedy ids: the tiny model (real weights) and a dummy-weight Llama-3.1-8B shape
#   latency     `ridgeline bench latency` of the Llama-3.1-8B shape at B=1 and B=64, TP=1 and TP=2
#   throughput  1000 x 1024/1024 at TP=2 against two independent TP=1 replicas (one per GPU, 500 requests each)
# Results go to $OUT (default /tmp/rl_device)/tp_*.{log,json}; a summary is printed last. Every figure goes to
# docs/benchmarks.md with the date and the machine, next to `ridgeline roofline --tensor-parallel-size 2
# --allreduce-bus-gbps <measured>`.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin/lib"
# libnccl.so.2 (linked by the CUDA backend): the machine's, or the one torch ships (nvidia-nccl-cu13).
if ! ldconfig -p | grep -q libnccl.so.2; then
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"
  [ -n "$nccl" ] || nccl="$(dirname "$(find /usr/local /usr/lib /opt -maxdepth 6 -name libnccl.so.2 2>/dev/null | head -1)")"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
fi
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"  # NVLink multicast stays off (docs/distributed.md)
stages="${1:-ops nccl identity latency throughput}"
ngpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/tp_gpu.txt"
if [ "$ngpu" -lt 2 ]; then echo "tp.sh: needs two GPUs, found $ngpu"; exit 1; fi
ll=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096)
tiny=(--device cuda --temperature 0 --ignore-eos --output-ids)

for stage in $stages; do
  case "$stage" in
    ops)
      timeout 120 "$bin/rl_tests_ops" --gtest_filter='CudaTpOps.*:NcclGroup.*' --gtest_color=no 2>&1 \
        | tee "$out/tp_ops.log" | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]"
      ;;
    nccl)
      timeout 120 "$bin/rl_bench_nccl" 2 50 2>&1 | tee "$out/tp_nccl.log"
      ;;
    identity)
      ids="791 6864 315 9822 374 12366 13 578 1888 6864 304 4221 374"
      for n in 1 2; do
        timeout 120 "$bin/ridgeline" generate "${tiny[@]}" --prompt "In the beginning" --max-tokens 64 \
          --tensor-parallel-size $n > "$out/tp_tiny_$n.txt" 2> "$out/tp_tiny_$n.err"; echo "tiny tp=$n rc=$?"
        timeout 200 "$bin/ridgeline" generate "${ll[@]}" --prompt-ids "$ids" --temperature 0 --ignore-eos \
          --output-ids --max-tokens 64 --tensor-parallel-size $n > "$out/tp_llama_$n.txt" 2> "$out/tp_llama_$n.err"
        echo "llama tp=$n rc=$?"
      done
      ;;
    latency)
      for n in 1 2; do
        for b in 1 64; do
          timeout 140 "$bin/ridgeline" bench latency "${ll[@]}" --batch $b --input-len 128 --output-len 256 \
            --tensor-parallel-size $n --json "$out/tp_lat_b${b}_tp$n.json" > "$out/tp_lat_b${b}_tp$n.log" 2>&1
          echo "latency b=$b tp=$n rc=$?"
        done
      done
      ;;
    throughput)
      tp=(bench throughput "${ll[@]}" --input-len 1024 --output-len 1024 --max-num-seqs 256)
      timeout 280 "$bin/ridgeline" "${tp[@]}" --num-prompts 1000 --tensor-parallel-size 2 \
        --json "$out/tp_thr_tp2.json" > "$out/tp_thr_tp2.log" 2>&1; echo "throughput tp=2 rc=$?"
      for g in 0 1; do
        CUDA_VISIBLE_DEVICES=$g timeout 280 "$bin/ridgeline" "${tp[@]}" --num-prompts 500 --seed $((g + 1)) \
          --json "$out/tp_thr_replica$g.json" > "$out/tp_thr_replica$g.log" 2>&1 &
      done
      wait; echo "replicas done"
      ;;
    *) echo "tp.sh: unknown stage $stage (ops, nccl, identity, latency, throughput)"; exit 2 ;;
  esac
done

echo "== summary =="
[ -f "$out/tp_nccl.log" ] && grep RESULT "$out/tp_nccl.log" | sed 's/RESULT //'
for m in tiny llama; do
  if [ -f "$out/tp_${m}_1.txt" ] && [ -f "$out/tp_${m}_2.txt" ]; then
    if cmp -s "$out/tp_${m}_1.txt" "$out/tp_${m}_2.txt"; then echo "$m: TP=2 greedy identical to TP=1"; else
      python3 - "$out/tp_${m}_1.txt" "$out/tp_${m}_2.txt" "$m" <<'PY'
import sys
a, b = (open(p).read().split() for p in sys.argv[1:3])
same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(f"{sys.argv[3]}: TP=2 differs from TP=1 after {same} of {len(a)} tokens (bf16 all-reduce order)")
PY
    fi
  fi
done
for f in "$out"/tp_lat_*.json; do
  [ -f "$f" ] && python3 -c "import json,sys;j=json.load(open('$f'));print('$(basename "$f" .json)', round(j['decode_tokens_per_s'],1), 'tok/s tpot', round(j['tpot_ms'],3), 'ms')"
done
for f in "$out"/tp_thr_*.json; do
  [ -f "$f" ] && python3 -c "import json;j=json.load(open('$f'));print('$(basename "$f" .json)', round(j['output_tokens_per_s'],1), 'output tok/s', round(j['elapsed_s'],1), 's')"
done
exit 0
