#!/usr/bin/env bash
# Issue 12's H200 figures in one call, on an H200 only (elsewhere it prints the GPU's name and exits 0, so a call that
# gets an H100 costs seconds): the copy bandwidth and the decode rows (`rl_bench_kernels decode`), Llama-3.1-8B batch 1
# at ~4k keys with the staged decode kernel's split count as production chooses it and forced to 12 and 16
# (RIDGELINE_CUDA_DECODE_SPLITS: on the H200 a block's share of the bandwidth may bound batch 1 at 8 splits),
# Llama-3.1-8B and Qwen3-0.6B batch 1 (128 + 256), Llama-3.1-8B batch 64 (128 + 128, one prefill step), ROUNDS rounds
# (default 1); then the offline 1000 x 1024/1024 run over an fp8 cache at 768 sequences (fp8_kv.sh's part 3). Carried
# binaries in $RL_BIN_DIR. Prints a short table last; logs in $OUT/h200_targets_logs.tgz. About 5 minutes.
set -uo pipefail
source "$(dirname "$0")/common.sh"
grep -q H200 <(nvidia-smi --query-gpu=name --format=csv,noheader) || {
  nvidia-smi --query-gpu=name --format=csv,noheader
  echo "not an H200: nothing run"
  exit 0
}
device_env
timeout 60 "$bin/rl_bench_kernels" copy > "$L/copy.log" 2>&1
timeout 150 "$bin/rl_bench_kernels" decode > "$L/decode.log" 2>&1
stamp "kernels"
LONG=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 8192)
for r in $(seq 1 "${ROUNDS:-1}"); do
  for n in auto 12 16; do
    (
      [ "$n" = auto ] || export RIDGELINE_CUDA_DECODE_SPLITS=$n
      lat "b1_4k_splits_${n}_r$r" "${LONG[@]}" --batch 1 --input-len 4000 --output-len 128
    )
  done
  lat "llama_b1_r$r" "${LLAMA8B[@]}" --batch 1 --input-len 128 --output-len 256
  lat "qwen_b1_r$r" "${QWEN06B[@]}" --batch 1 --input-len 128 --output-len 256
  # The 64 prompts in one prefill step, as every batch-64 figure since session 14: with the default 2,048 tokens a
  # step, the first prompts decode beside the later ones' chunks and the mixed steps count in TPOT (session 34 read
  # 10,746 tok/s that way, host 16 % of a step).
  lat "llama_b64_r$r" "${LLAMA8B[@]}" --batch 64 --input-len 128 --output-len 128 --max-num-batched-tokens 8192
done
stamp "latency"
OUT="$L/offline" RL_BIN_DIR="$bin" SKIP_TESTS=1 SKIP_KERNELS=1 LAT_ROUNDS=0 OFFLINE="fp8:768" \
  OFFLINE_LIMIT="${OFFLINE_LIMIT:-240}" timeout 300 bash "$(dirname "$0")/fp8_kv.sh" > "$L/offline.log" 2>&1
echo "offline rc=$?"
tar czf "$final_out/h200_targets_logs.tgz" -C "$L" .
echo "== summary =="
grep RESULT "$L/copy.log" | sed 's/.*RESULT //'
grep RESULT "$L/decode.log" | sed 's/.*RESULT //' | grep -E "^decode_attn_graph|B1_S4096_splits|launch_floor"
for f in "$L"/lat_*.json; do
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1][4:-5],
    round(j['decode_tokens_per_s'], 1), 'tok/s, host', round(j['host_pct_of_step'], 2), '% of a step')" "$f"
done
tail -8 "$L/offline.log"
