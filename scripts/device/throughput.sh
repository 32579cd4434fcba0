#!/usr/bin/env bash
# Serving-engine throughput on the GPU machine (`ridgeline bench throughput`, carried binary in $RL_BIN_DIR,
# default build/cuda): the Llama-3.1-8B shape with dummy bf16 weights, and a 90 %-shared-prefix workload with and
# without prefix caching. JSON reports and logs go to $OUT; a table is printed last.
#   NUM=1000 IN=1024 OUT_LEN=1024 scripts/device/throughput.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$root/$bin_dir/lib"
model="${MODEL:-models/configs/Llama-3.1-8B}"
num="${NUM:-1000}"
in_len="${IN:-1024}"
out_len="${OUT_LEN:-1024}"
pnum="${PREFIX_NUM:-400}"
common=(-m "$model" --dummy-weights --device cuda --max-num-seqs 256 --max-num-batched-tokens 8192
        --max-model-len 4096)
run() {
  local tag="$1"; shift
  echo "== $tag =="
  timeout "${LIMIT:-400}" "$bin_dir/ridgeline" bench throughput "${common[@]}" "$@" --json "$out/throughput_$tag.json" \
    2>&1 | tee "$out/throughput_$tag.log"
}
run main --num-prompts "$num" --input-len "$in_len" --output-len "$out_len"
run prefix90 --num-prompts "$pnum" --input-len 1024 --prefix-len 922 --output-len 128
run prefix90_nocache --num-prompts "$pnum" --input-len 1024 --prefix-len 922 --output-len 128 --no-prefix-caching
echo "== throughput summary =="
for f in "$out"/throughput_*.json; do
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(f\"{sys.argv[1].split('/')[-1]:34s} out {j['output_tokens_per_s']:9.1f} tok/s  total {j['total_tokens_per_s']:9.1f} tok/s  req/s {j['requests_per_s']:6.2f}  hit {100*j['prefix_cache_hit_rate']:5.1f}%  preempt {j['num_preemptions']}  sched {j['scheduler_pct_of_step']:.2f}% of step  elapsed {j['elapsed_s']:.1f}s\")" "$f"
done
