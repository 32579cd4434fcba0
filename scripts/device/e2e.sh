#!/usr/bin/env bash
# End-to-end latency on the GPU machine: `ridgeline bench latency` ($RL_BIN_DIR/ridgeline, default build/cuda,
# carried) and its peer bench/peers/transformers_e2e.py in the same call, for each CASE given as
# CONFIG_DIR:BATCH (dummy weights, bf16, --input-len / --output-len from IN and OUT, default 128 / 256).
# JSON reports and logs go to $OUT; a table is printed last.
# usage: scripts/device/e2e.sh models/configs/Llama-3.1-8B:1 models/configs/Llama-3.1-8B:64 ...
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
# $RL_BIN_DIR/lib: shared libraries the GPU image lacks (libcpp-httplib, brotli), carried beside the binary.
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$root/$bin_dir/lib"
export PYTHONUNBUFFERED=1
in_len="${IN:-128}"
out_len="${OUT_LEN:-256}"
for case in "$@"; do
  dir="${case%%:*}"
  batch="${case##*:}"
  tag="$(basename "$dir")_b$batch"
  echo "== ours: $tag =="
  timeout 240 "$bin_dir/ridgeline" bench latency -m "$dir" --dummy-weights --device cuda --batch "$batch" \
    --input-len "$in_len" --output-len "$out_len" --json "$out/latency_$tag.json" 2>&1 | tee -a "$out/e2e_ours.log"
  echo "== transformers: $tag =="
  timeout 240 python3 bench/peers/transformers_e2e.py "$dir" --batch "$batch" --input-len "$in_len" \
    --output-len "$out_len" 2>&1 | grep -v Warning | tee -a "$out/e2e_peers.log"
done
echo "== end-to-end latency (decode tok/s, TPOT ms, TTFT ms) =="
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
peers = {}
for line in open(os.path.join(out, "e2e_peers.log")) if os.path.exists(os.path.join(out, "e2e_peers.log")) else []:
    f = line.split()
    if len(f) >= 6 and f[0] == "RESULT":
        peers[(f[1], f[2])] = float(f[3])
for path in sorted(glob.glob(os.path.join(out, "latency_*.json"))):
    j = json.load(open(path))
    res = {r["name"]: r for r in j["results"]}
    d = res["decode"]
    peer = [v for (k, s), v in peers.items() if k == "e2e_decode" and s.endswith(
        f"_b{j['batch']}_in{j['input_len']}_out{j['output_len']}") and j["model"].split(" ")[0] in s]
    print(f"{os.path.basename(path):40s} decode {d['measured']:9.1f} tok/s  roofline {d.get('predicted', 0):9.1f} "
          f"({d.get('roofline_pct', 0):5.1f} %)  TPOT {j['tpot_ms']:7.3f} ms  TTFT {j['ttft_ms']:8.2f} ms  "
          f"transformers {peer[0] if peer else float('nan'):9.1f} tok/s")
PY
