#!/usr/bin/env bash
# Speculative decoding on the GPU machine (issue 18, item 5), building nothing: trains a >= 100 M parameter
# target on the KJV corpus with the default model's tokenizer (tools/train_tiny.py train --shape ...), then runs
# `bench latency` at batch 1, 8 and 32, plain vs n-gram vs draft model (the shipped default model drafts), greedy,
# and writes a table. Also runs the speculative engine tests on CUDA.
#   Here, first: bible -f "Gen1:1-Rev22:21" > DIR/kjv.txt, and copy the cuda build's ridgeline and
#   rl_tests_model (+ lib/) to DIR/bin; then through the device tool with carry [DIR]:
#     DATA=DIR/kjv.txt RL_BIN_DIR=DIR/bin scripts/device/spec_bench.sh
# A second draft, "small", trains beside the target the same way: 2 layers at the target's width (DRAFT_SHAPE;
# 31 M parameters). A small model's decode step costs its kernel count (each kernel >= ~3 us), not its bytes, so
# the draft keeps the width (its acceptance) and drops layers (its step time): a quarter of the default model's
# kernels per step. The drafts' own plain decode TPOT is measured too (tags draftonly_*).
# Workloads: "copy" = held-out chapters with each 3-verse passage written
# three times, so the continuation repeats text the prompt already holds (n-gram's case); "text" = the held-out
# chapters as they are; "recite" = training chapters (the target has memorised them: recitation, where target
# and drafts agree most).
# Request i's prompt is --input-len tokens of the file from token i * input_len / 2 on (bench latency
# --prompt-file). EPOCHS (default 6) passes over the training chapters, with the cosine ending there: the
# held-out loss of both models is lowest near epoch 5-6 and rises after (overfitting at 12-19 epochs: session 8's
# first run, where the models had memorised the training chapters and agreed on little else). TARGET_SHAPE
# overrides the target's shape (default 20 layers of 1024, 232 M parameters: a 10-layer target's step, 0.34 ms,
# was only 3.4x the 2-layer draft's, too little for a draft model to pay on text both had not memorised). TRAIN_SECONDS (default 120) caps training; BUDGET
# (seconds, default 420) skips what would not fit. OUTPUT_LEN (default 128) tokens per request; BATCHES (default
# "1 8 32") the batch sizes.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bin_dir="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
data="$(realpath "${DATA:-.data/kjv.txt}")"
tools="${TOOLS_DIR:-$root/tools}"
final_out="${OUT:-/tmp/rl_device}"
out="$(mktemp -d)"
mkdir -p "$final_out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin_dir/lib"
export PYTHONUNBUFFERED=1
rl="$bin_dir/ridgeline"
tiny="$root/models/ridgeline-tiny"
budget="${BUDGET:-420}"
fits() { if [ "$SECONDS" -lt "$((budget - $1))" ]; then return 0; fi; echo "skipped $2: ${SECONDS}s used of ${budget}s"; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

# 1. Prompt files from the held-out chapters.
python3 - "$tools" "$data" "$out" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from train_tiny import read_chapters, split_chapters
_, held = split_chapters(read_chapters(sys.argv[2]))
with open(sys.argv[3] + "/text.txt", "w") as f:
    for _, _, verses in held:
        f.write("\n".join(verses) + "\n")
with open(sys.argv[3] + "/copy.txt", "w") as f:
    for _, _, verses in held:
        for i in range(0, len(verses) - 2, 3):
            passage = "\n".join(verses[i:i + 3]) + "\n"
            f.write(passage * 3)
train, _ = split_chapters(read_chapters(sys.argv[2]))
with open(sys.argv[3] + "/recite.txt", "w") as f:
    for _, _, verses in train[::40]:
        f.write("\n".join(verses) + "\n")
PY

# 2. The target: Qwen3, hidden 1024, 20 layers, 16 heads / 4 KV heads of 64, MLP 2816, tied embeddings
#    (232 M parameters), trained with the default model's tokenizer.
work="$(mktemp -d)"
mkdir -p "$work/tokenizer"
cp "$tiny/tokenizer.json" "$tiny/tokenizer_config.json" "$work/tokenizer/"
shape="${TARGET_SHAPE:-hidden_size=1024,num_hidden_layers=20,num_attention_heads=16,num_key_value_heads=4,head_dim=64,intermediate_size=2816}"
secs="${TRAIN_SECONDS:-120}"
epochs="${EPOCHS:-6}"
timeout $((secs + 90)) python3 "$tools/train_tiny.py" train --data "$data" --work "$work" --tag t \
  --epochs "$epochs" --dropout 0.0 --lr 1e-3 --min-lr 1e-4 --time-limit "$secs" --shape "$shape" >"$out/train.log" 2>&1 &
tpid=$!
small="${DRAFT_SHAPE:-hidden_size=1024,num_hidden_layers=2,num_attention_heads=16,num_key_value_heads=4,head_dim=64,intermediate_size=2816}"
timeout $((secs + 90)) python3 "$tools/train_tiny.py" train --data "$data" --work "$work" --tag s \
  --epochs "$epochs" --dropout 0.0 --lr 1.5e-3 --min-lr 1.5e-4 --time-limit "$secs" --shape "$small" >"$out/train_small.log" 2>&1
echo "train small rc=$?"
wait "$tpid"
echo "train rc=$?"
grep -E "params|epoch" "$out/train.log" | tail -2
grep -E "params|epoch" "$out/train_small.log" | tail -1
target="$work/run_t/model"
cp "$tiny/tokenizer.json" "$tiny/tokenizer_config.json" "$target/"
draft_small="$work/run_s/model"
cp "$tiny/tokenizer.json" "$tiny/tokenizer_config.json" "$draft_small/"

# 3. CUDA tests of speculative decoding (deterministic kernels): greedy and seeded output equal plain decoding.
if [ -x "$bin_dir/rl_tests_model" ] && fits 250 tests; then
  RIDGELINE_TINY_MODEL="$tiny" RIDGELINE_TEST_DEVICE=cuda timeout 200 "$bin_dir/rl_tests_model" \
    --gtest_filter='SpecEngine.*:SpecStatistics.*' --gtest_color=no >"$out/test_spec_cuda.log" 2>&1
  echo "spec engine tests on cuda rc=$?"
  grep -E "^\[  (PASSED|FAILED|  OK) |Failure" "$out/test_spec_cuda.log" | head -20
fi

# 4. bench latency: greedy, 256-token prompts, 128 generated tokens; a fixed k at every batch size
#    (--speculative-adaptive off --speculative-max-running 0, so the crossover shows); with ADAPT=1 also the
#    adaptive k (tags *adapt, --speculative-adaptive on: each step chooses 0..k per request from measured step
#    times and acceptance). (The defaults are a fixed k, and no drafts above 16 running requests.)
lat() {
  local tag="$1"; shift
  timeout 90 "$rl" bench latency -m "$target" --device cuda --max-model-len 1024 --input-len 256 --output-len "$gen" \
    "$@" --json "$out/lat_$tag.json" >"$out/lat_$tag.log" 2>&1
  echo "lat_$tag rc=$?"
}
k="${K:-4}"
gen="${OUTPUT_LEN:-128}"
for b in ${BATCHES:-1 8 32}; do
  for wl in recite copy text; do
    [ "$wl" = text ] && [ "$b" != 1 ] && continue
    p=(--batch "$b" --prompt-file "$out/$wl.txt")
    fits 20 "b$b $wl" || continue
    lat "${wl}_b${b}_plain" "${p[@]}"
    lat "${wl}_b${b}_ngram" "${p[@]}" --speculative ngram --num-speculative-tokens "$k" \
      --speculative-adaptive off --speculative-max-running 0
    lat "${wl}_b${b}_draftsmall" "${p[@]}" --speculative draft --draft-model "$draft_small" \
      --num-speculative-tokens "$k" --speculative-adaptive off --speculative-max-running 0
    if [ "${ADAPT:-0}" = 1 ]; then
      lat "${wl}_b${b}_ngramadapt" "${p[@]}" --speculative ngram --num-speculative-tokens "$k" \
        --speculative-adaptive on --speculative-max-running 0
      lat "${wl}_b${b}_draftsmalladapt" "${p[@]}" --speculative draft --draft-model "$draft_small" \
        --num-speculative-tokens "$k" --speculative-adaptive on --speculative-max-running 0
    fi
    [ "$wl" = copy ] && continue
    [ "$b" != 1 ] && continue
    lat "${wl}_b${b}_drafttiny" "${p[@]}" --speculative draft --draft-model "$tiny" --num-speculative-tokens "$k" \
      --speculative-adaptive off --speculative-max-running 0
  done
done
# The drafts' own decode step (plain, batch 1), and a longer k for the small draft.
for d in small tiny; do
  dm="$draft_small"; [ "$d" = tiny ] && dm="$tiny"
  fits 10 "draftonly $d" && timeout 60 "$rl" bench latency -m "$dm" --device cuda --max-model-len 1024 --input-len 256 \
    --output-len "$gen" --batch 1 --prompt-file "$out/recite.txt" --json "$out/lat_draftonly_b1_$d.json" \
    >"$out/lat_draftonly_b1_$d.log" 2>&1
done
for wl in recite text; do
  for kk in 2 3 6; do
    fits 10 "k$kk" && lat "${wl}_b1_draftsmallk$kk" --batch 1 --prompt-file "$out/$wl.txt" --speculative draft \
      --draft-model "$draft_small" --num-speculative-tokens "$kk" --speculative-adaptive off \
      --speculative-max-running 0
  done
done
fits 10 k8 && lat recite_b1_ngramk8 --batch 1 --prompt-file "$out/recite.txt" --speculative ngram \
  --num-speculative-tokens 8 --speculative-adaptive off --speculative-max-running 0
fits 10 k8 && lat recite_b1_draftsmallk8 --batch 1 --prompt-file "$out/recite.txt" --speculative draft \
  --draft-model "$draft_small" --num-speculative-tokens 8 --speculative-adaptive off --speculative-max-running 0

# 5. The table.
python3 - "$out" "$target" <<'PY' | tee "$out/table.txt"
import glob, json, os, sys
out, target = sys.argv[1], sys.argv[2]
stats = {}
try:
    for line in open(out + "/train.log"):
        if line.startswith("[t] stats "):
            stats = json.loads(line[len("[t] stats "):])
except OSError:
    pass
small = {}
try:
    for line in open(out + "/train_small.log"):
        if line.startswith("[s] stats "):
            small = json.loads(line[len("[s] stats "):])
except OSError:
    pass
print(f"target: {stats.get('num_params', '?')} parameters, held-out loss {stats.get('heldout_loss', '?')}, "
      f"{stats.get('steps', '?')} steps in {stats.get('train_time_s', '?')} s; drafts: small "
      f"({small.get('num_params', '?')} parameters, held-out loss {small.get('heldout_loss', '?')}), "
      f"tiny (the default model, 7.9 M); draftonly rows: the drafts' own plain decode, speedup against the target")
rows = {}
for f in sorted(glob.glob(out + "/lat_*.json"), key=lambda f: (os.path.basename(f).split("_")[1], int(os.path.basename(f).split("_")[2][1:]), f)):
    tag = os.path.basename(f)[4:-5]
    rows[tag] = json.load(open(f))
print(f"{'workload':8} {'batch':>5} {'method':22} {'TPOT ms':>8} {'tok/s':>9} {'speedup':>8} {'accept':>7} {'mean len':>8} {'mean k':>6}")
for tag, j in rows.items():
    wl, b, method = tag.split("_", 2)
    plain = rows.get(f"{wl}_{b}_plain") or rows.get(f"recite_{b}_plain")
    speed = plain["tpot_ms"] / j["tpot_ms"] if plain else float("nan")
    method += f" k={j['num_speculative_tokens']}" if "num_speculative_tokens" in j else ""
    acc = j.get("spec_acceptance_rate")
    ml = j.get("spec_mean_accepted_length")
    mk = j.get("spec_mean_k")
    print(f"{wl:8} {b[1:]:>5} {method:22} {j['tpot_ms']:8.3f} {j['decode_tokens_per_s']:9.1f} {speed:8.2f} "
          f"{'' if acc is None else f'{acc:7.3f}':>7} {'' if ml is None else f'{ml:8.2f}':>8} "
          f"{'' if mk is None else f'{mk:6.2f}':>6}")
PY
tar czf "$final_out/spec_logs.tgz" -C "$out" . 2>/dev/null
cp "$out/table.txt" "$final_out/table.txt" 2>/dev/null
echo "total ${SECONDS}s"
