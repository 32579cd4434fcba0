#!/usr/bin/env bash
# Trains ridgeline-tiny on the GPU machine (see tools/train_tiny.py and models/ridgeline-tiny/README.md).
# Here, first: bible -f "Gen1:1-Rev22:21" > .data/kjv.txt ; then run this through the device tool with
# carry [".data"]. Results come back flat, 8 files: $OUT/ridgeline-tiny/{config.json, generation_config.json,
# model.safetensors, tokenizer.json, tokenizer_config.json, README.md}, $OUT/tiny_golden.json, $OUT/train.log.
# Copy them to models/ridgeline-tiny/ and tests/data/tiny_golden.json.
#
# Several variants (tag:epochs:residual dropout) train at once on the one GPU; finalize keeps the one with the
# lowest held-out loss. TRAIN_SECONDS caps each variant's training (its cosine schedule ends by then).
set -euo pipefail
cd "$(dirname "$0")/../.."
data="${1:-.data/kjv.txt}"
out="${OUT:?OUT is the folder the device tool brings back}"
variants="${VARIANTS:-a:10:0.0 b:20:0.1 c:30:0.2 d:40:0.3}"
seconds="${TRAIN_SECONDS:-120}"
work="$(mktemp -d)"
export PYTHONUNBUFFERED=1
mkdir -p "$out/ridgeline-tiny"

run() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers",
transformers.__version__, "tokenizers", tokenizers.__version__)'
  python3 tools/train_tiny.py tokenizer --data "$data" --work "$work"
  local pids=() v tag epochs dropout failed=0
  for v in $variants; do
    IFS=: read -r tag epochs dropout <<<"$v"
    python3 tools/train_tiny.py train --data "$data" --work "$work" --tag "$tag" --epochs "$epochs" \
      --dropout "$dropout" --time-limit "$seconds" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  echo "variants failed: $failed"
  python3 tools/train_tiny.py finalize --data "$data" --work "$work" --out "$out/ridgeline-tiny" \
    --golden "$out/tiny_golden.json"
}
run 2>&1 | tee "$out/train.log"
