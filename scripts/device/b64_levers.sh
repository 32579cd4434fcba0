#!/usr/bin/env bash
# What sessions 16 and 17 wrote without a GPU, measured in one call:
# - the CUDA op tests (the tuned GEMM, the mma_early / mma_cluster decode kernels, the fused RoPE decode attention,
#   the mixed-step split among them), then greedy ids with and without the fused RoPE attention (must match);
# - kernel rows: cuBLASLt's tuned algorithm next to its first choice and the skinny GEMM; decode attention alone,
#   20 back to back, 20 in one CUDA graph, every kernel, split slots at short contexts; the GEMV alone and in a
#   CUDA graph (issue 21.3);
# - Llama-3.1-8B batch 64 decode (B32=1: and 32) as base / tuned GEMMs (RIDGELINE_CUDA_GEMM_TUNE=1) / mma_early
#   (RIDGELINE_CUDA_DECODE_KERNEL=mma_early) / rope (RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1) / tuned + rope, in
#   alternating rounds;
# - OFFLINE: the 1000 x 1024/1024 offline engine (GEMM tuning, max-num-seqs, the mixed-step split); TRACE=1:
#   kernel timelines of batch-64 and batch-1 steps (--profile-kernels, tools/kernel_gaps.py); NSYS=1: the same
#   through Nsight Systems where it runs.
# LAT_ONLY=1 keeps only the gating op tests and the latency / offline runs; ROUNDS (default 2) alternating rounds.
# Carried binaries in $RL_BIN_DIR (ridgeline, rl_tests_ops, rl_bench_kernels). Prints a short table last; logs in
# $OUT/b64_levers_logs.tgz. About 8 minutes without OFFLINE and NSYS (run those in a call of their own), 2-3 more
# per offline run.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
# attention_levers.sh runs the Hopper prefill's layout test (every lab form against the CPU: the longest).
# LAT_ONLY=1: only the op tests that gate the variants, no kernel rows and no RoPE ids (a call that times variants).
if [ "${LAT_ONLY:-0}" = 1 ]; then
  tests='CudaOps.LinearSkinnyGemm:CudaFusedOps.*:CudaAttention.MixedBatch*:CudaAttention.Decode*'
else
  tests='*Cuda*:-CudaAttention.HopperPrefillLayoutsAndPageSizes'
fi
timeout 200 "$bin/rl_tests_ops" --gtest_filter="$tests" > "$L/tests.txt" 2>&1
stamp "tests rc=$?"
if [ "${LAT_ONLY:-0}" != 1 ]; then
  timeout 150 "$bin/rl_bench_kernels" skinny > "$L/bench_skinny.txt" 2>&1
  stamp "bench skinny rc=$?"
  { "$bin/rl_bench_kernels" copy; timeout 150 "$bin/rl_bench_kernels" decode; } > "$L/bench_decode.txt" 2>&1
  stamp "bench decode rc=$?"
  timeout 200 "$bin/rl_bench_kernels" gemv > "$L/bench_gemv.txt" 2>&1
  stamp "bench gemv rc=$?"
fi
# One variant's three latency runs, its environment set in a subshell.
variant() {
  (
    export RIDGELINE_CUDA_GEMM_TUNE=0
    [ "$1" = tuned ] && export RIDGELINE_CUDA_GEMM_TUNE=1 RIDGELINE_LOG=debug
    [ "$1" = early ] && export RIDGELINE_CUDA_DECODE_KERNEL=mma_early
    [ "$1" = rope ] && export RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1
    [ "$1" = tuned_rope ] && export RIDGELINE_CUDA_GEMM_TUNE=1 RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1
    [ "$1" = skinny_long ] && export RIDGELINE_CUDA_SKINNY_GEMM=long
    [ "$1" = skinny_long_early ] && export RIDGELINE_CUDA_SKINNY_GEMM=long RIDGELINE_CUDA_DECODE_KERNEL=mma_early
    local extra=()
    [ "$1" = bs64 ] && extra=(--block-size 64)  # production at KV block size 64 (16 by default)
    lat "b64_$1_r$2" "${LLAMA8B[@]}" --batch 64 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 \
      "${extra[@]}"
    if [ "${SHORT:-0}" != 1 ]; then
      lat "b64in16_$1_r$2" "${LLAMA8B[@]}" --batch 64 --input-len 16 --output-len 128 --max-num-batched-tokens 8192 \
        "${extra[@]}"
    fi
    if [ "${B32:-0}" = 1 ]; then
      lat "b32_$1_r$2" "${LLAMA8B[@]}" --batch 32 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 \
        "${extra[@]}"
    fi
  )
}
# VARIANTS (default: base tuned rope tuned_rope; early too if named) in alternating rounds; rope = the decode
# attention kernel doing RoPE + KV write (RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1, session 17); skinny_long = the
# skinny GEMM for the long-K / wide-N linears only (RIDGELINE_CUDA_SKINNY_GEMM=long, session 18); bs64 = production
# at KV block size 64; B32=1 adds batch 32; SHORT=1 leaves out the 16-token-prompt runs (a call that must fit its time
# limit).
# The fused RoPE decode attention end to end: greedy ids of the embedded default model and of Qwen3-0.6B (q/k norm,
# dummy weights) with the layer kernels (RIDGELINE_CUDA_DECODE_STACK=0, so batch-1 decode takes the attention
# layer's path), with and without the fusion. The fused path is bitwise the composed one, so the ids must match.
rope_ids() {
  for fused in 0 1; do
    RIDGELINE_CUDA_DECODE_STACK=0 RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=$fused timeout 90 "$bin/ridgeline" generate \
      --device cuda "$@" --max-tokens 48 --temperature 0 --ignore-eos \
      --output-ids > "$L/rope_ids_$fused.txt" 2> "$L/rope_ids_$fused.err"
  done
  if cmp -s "$L/rope_ids_0.txt" "$L/rope_ids_1.txt" && [ -s "$L/rope_ids_0.txt" ]; then echo "same ids ($*)"; else
    echo "DIFFERENT ids ($*)"; diff "$L/rope_ids_0.txt" "$L/rope_ids_1.txt" | head -6; fi
}
# (The dummy-weight model folder has no tokenizer: prompt ids.)
if [ "${LAT_ONLY:-0}" != 1 ]; then
  { rope_ids --prompt "In the beginning God created"; rope_ids -m models/configs/Qwen3-0.6B --dummy-weights \
      --prompt-ids "1 2 3 4 5 6 7 8 9 10"; } > "$L/rope_e2e.txt" 2>&1
  stamp "rope e2e: $(tr '\n' ' ' < "$L/rope_e2e.txt" | cut -c1-200)"
fi
variants="${VARIANTS:-base tuned rope tuned_rope}"
# The fused RoPE attention runs end to end only where its op test passed.
if ! grep -q "^\[       OK \] CudaFusedOps.RopeKvWriteAttentionInTheDecodeKernel " "$L/tests.txt"; then
  echo "fused RoPE attention test did not pass: rope variants left out"
  variants="$(echo "$variants" | tr ' ' '\n' | grep -v rope | tr '\n' ' ')"
fi
if ! grep -q "^\[       OK \] CudaOps.LinearSkinnyGemm " "$L/tests.txt"; then
  echo "skinny GEMM test did not pass: skinny variants left out"
  variants="$(echo "$variants" | tr ' ' '\n' | grep -v skinny | tr '\n' ' ')"
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for v in $variants; do variant "$v" "$round"; done
done
stamp "latency done"
# OFFLINE="0:256 0:384 0:256:0 0:384:1:16384": offline runs as tune:max-num-seqs[:split[:max-num-batched-tokens]]
# (split, default 1 as in production since session 18: a mixed step's decode rows through the decode kernel,
# RIDGELINE_CUDA_SPLIT_MIXED, only where its op test passed; batched tokens default 8192), in this order (each ~2-3
# minutes).
for cfg in ${OFFLINE:-}; do
  IFS=: read -r tune seqs split mbt <<< "$cfg"
  split=${split:-1}
  mbt=${mbt:-8192}
  if [ "$split" = 1 ] && ! grep -q "^\[       OK \] CudaAttention.MixedBatchLeadingDecodeRowsSplit " "$L/tests.txt"; then
    echo "split-mixed test did not pass: $cfg left out"
    continue
  fi
  tag="t${tune}_s${seqs}_m${split}_b$mbt"
  RIDGELINE_CUDA_GEMM_TUNE=$tune RIDGELINE_CUDA_SPLIT_MIXED=$split timeout "${OFFLINE_LIMIT:-300}" "$bin/ridgeline" \
    bench throughput "${LLAMA8B[@]}" --max-num-seqs "$seqs" --max-num-batched-tokens "$mbt" --num-prompts 1000 \
    --input-len 1024 --output-len 1024 --json "$L/tp_$tag.json" > "$L/tp_$tag.log" 2>&1
  stamp "throughput $tag rc=$?"
done
# TRACE=1: ridgeline's own kernel timeline (--profile --profile-kernels, CUPTI; Nsight Systems does not run on these
# machines) of Llama-3.1-8B batch-64 decode with cuBLASLt and with the skinny GEMM on the long shapes, and of
# Qwen3-0.6B batch 1 (the dense stack), each folded by tools/kernel_gaps.py into its steps' idle time between kernels
# and the hand-offs it falls in. CUPTI (libcupti.so.13) from $bin/lib or the CUDA toolkit.
if [ "${TRACE:-0}" = 1 ]; then
  # The trace's own test first, in a process of its own (the trace stays on once started).
  timeout 60 "$bin/rl_tests_ops" --gtest_filter='CudaKernelTrace.*' --gtest_color=no > "$L/trace_test.txt" 2>&1
  stamp "kernel trace test rc=$?"
  gtest_summary "$L/trace_test.txt"
fi
if [ "${TRACE:-0}" = 1 ] && grep -q "^\[       OK \] CudaKernelTrace.RecordsKernelsInAndOutOfGraphs" "$L/trace_test.txt"; then
  for v in ${TRACE_VARIANTS:-b64_base b64_skinny_long q06b_b1}; do
    (
      model=("${LLAMA8B[@]}")
      shape=(--batch 64 --input-len 128 --output-len 32 --max-num-batched-tokens 8192)
      case $v in
        b64_skinny_*) export RIDGELINE_CUDA_SKINNY_GEMM=${v#b64_skinny_} ;;
      esac
      [ "$v" = q06b_b1 ] && model=("${QWEN06B[@]}") && shape=(--batch 1 --input-len 128 --output-len 64)
      timeout 120 "$bin/ridgeline" bench latency "${model[@]}" "${shape[@]}" --profile "$L/trace_$v.json" \
        --profile-kernels > "$L/trace_$v.log" 2>&1
      echo "trace $v rc=$?"
    )
    python3 tools/kernel_gaps.py "$L/trace_$v.json" --kernels 12 > "$L/gaps_trace_$v.txt" 2>&1
    rm -f "$L/trace_$v.json.gz"
    gzip -f "$L/trace_$v.json" 2>/dev/null
    stamp "trace $v"
  done
fi
# NSYS=1: a timeline of batch-64 decode steps with cuBLASLt (default) and with the skinny GEMM, folded by
# tools/kernel_gaps.py into each step's idle time between kernels and the hand-offs it falls in (why the skinny GEMM,
# faster alone, lost end to end in session 11).
nsys="$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)"
if [ "${NSYS:-0}" = 1 ] && [ -n "$nsys" ]; then
  for v in cublaslt skinny; do
    skinny=0
    [ "$v" = skinny ] && skinny=1
    RIDGELINE_CUDA_SKINNY_GEMM=$skinny timeout 150 "$nsys" profile -t cuda --cuda-graph-trace=node --force-overwrite true \
      -o "$L/nsys_$v" "$bin/ridgeline" bench latency "${LLAMA8B[@]}" --batch 64 --input-len 128 --output-len 16 \
      --max-num-batched-tokens 8192 > "$L/nsys_$v.log" 2>&1
    timeout 120 "$nsys" stats --report cuda_gpu_trace --format csv --output "$L/nsys_$v" "$L/nsys_$v.nsys-rep" \
      >> "$L/nsys_$v.log" 2>&1
    rm -f "$L/nsys_$v.nsys-rep" "$L/nsys_$v.sqlite"
    python3 tools/kernel_gaps.py "$L/nsys_${v}_cuda_gpu_trace.csv" > "$L/gaps_$v.txt" 2>&1
    stamp "nsys $v"
  done
elif [ "${NSYS:-0}" = 1 ]; then
  echo "NSYS=1 but no nsys on this machine"
fi
tar czf "$final_out/b64_levers_logs.tgz" -C "$L" .
echo "== summary =="
gtest_summary "$L/tests.txt"
[ -f "$L/rope_e2e.txt" ] && cat "$L/rope_e2e.txt"
[ -f "$L/bench_skinny.txt" ] && grep -E "^RESULT (cublaslt|cublaslt_tuned|skinny) m(32|64)_" "$L/bench_skinny.txt" | sort -k3 | head -60
grep -E "^RESULT (copy|launch_floor|decode_attn|decode_attn_b2b|decode_attn_graph|decode_kernel) " \
  "$L/bench_decode.txt" 2>/dev/null | head -40
grep -E "^RESULT decode_lab B64_S[0-9]+_slots" "$L/bench_decode.txt" 2>/dev/null
grep -E "^RESULT (gemv|gemv_graph) m(1|16)_(4096x14336|4096x4096|4096x6144|14336x4096|4096x128256|1024x3072) " \
  "$L/bench_gemv.txt" 2>/dev/null
[ -f "$L/lat_b64_tuned_r1.log" ] && grep -h "gemm tune" "$L"/lat_b64_tuned_r1.log | head -12
for f in "$L"/lat_*.json; do
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1][4:-5], round(j['decode_tokens_per_s'],1), 'tok/s TPOT', round(j['tpot_ms'],3))" "$f"
done
for f in "$L"/gaps_*.txt; do
  [ -f "$f" ] && { echo "== ${f##*/}"; head -4 "$f"; sed -n '/us\/step  *count/,$p' "$f"; }
done
for f in "$L"/tp_*.log; do
  [ -f "$f" ] || continue
  echo "${f##*/}: $(grep -iE "output|roofline|host" "$f" | tr '\n' ' ' | cut -c1-400)"
done
