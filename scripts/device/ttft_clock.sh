#!/usr/bin/env bash
# Issue 21.4: the 32,000-token prompt's attention layer by layer, beside the same kernel alone, with the SM clock under
# the power cap. ROUNDS (default 2) runs of the 32k TTFT on the Llama-3.1-8B shape; `rl_bench_kernels
# prefill_production` (4 x 4k, 16 x 1k, 1 x 16k and 1 x 32k) with REPS launches a row (default 200: about a second of
# sustained work at 1 x 32k, where 10 launches run at the boost clock) and the queries drawn from [-q, q) for each q
# in QSCALES (default "1 8"; RIDGELINE_BENCH_PREFILL_QSCALE: scores spread about 0.5 q in log2 units, the dummy-weight
# model's about 2.4); and a kernel trace of the prompt (tools/kernel_gaps.py --each: the attention kernel's time in
# each layer, and its TFLOP/s there). The SM clock, power and throttle reasons are sampled every 50 ms throughout and
# summed up per run over the samples above 250 W (the GPU at work; tools/smi_clocks.py), with the clock series through
# the traced prefills. Session 41 (H100): attention 545-555 TFLOP/s in the prompt at a median 1,500 MHz, the 1 x 32k row
# 618 at 1,680 MHz sustained and 650 at 1,980 over 10 launches: the prompt's attention runs at the clock the 700 W cap
# leaves it.
# Carried binaries in $RL_BIN_DIR (SOURCE_LINK as common.sh says). Prints a short table last; logs in
# $OUT/ttft_clock_logs.tgz. Under a minute.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
QSCALES=${QSCALES:-"1 8"}
fields=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits -lms 50 > "$L/clocks.csv" 2> "$L/smi.err" &
sampler=$!
phase() {  # phase NAME COMMAND...: runs it, and notes its start and end for the clock summary
  local name=$1 t_start
  shift
  t_start=$(date +%s.%N)
  "$@"
  echo "$name $t_start $(date +%s.%N)" >> "$L/phases.txt"
}
A32=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --batch 1 --input-len 32000 --output-len 2
  --max-model-len 32768 --max-num-batched-tokens 32768)
for r in $(seq 1 "${ROUNDS:-2}"); do
  phase "ttft_r$r" lat "ttft_r$r" "${A32[@]}"
done
stamp "ttft"
for q in $QSCALES; do
  RIDGELINE_BENCH_PREFILL_REPS=${REPS:-200} RIDGELINE_BENCH_PREFILL_QSCALE=$q phase "rows_q$q" \
    timeout 120 "$bin/rl_bench_kernels" prefill_production > "$L/rows_q$q.txt" 2>&1
done
stamp "rows"
phase trace timeout 150 "$bin/ridgeline" bench latency "${A32[@]}" --profile "$L/trace.json" --profile-kernels \
  > "$L/trace.log" 2>&1
python3 tools/kernel_gaps.py "$L/trace.json" --each prefill_attention_sm90 --min-us 1000 > "$L/attn.txt" 2>&1
python3 tools/kernel_gaps.py "$L/trace.json" --totals 8 > "$L/totals.txt" 2>&1
stamp "trace"
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
tar -C "$L" --exclude='*.json' -czf "$final_out/ttft_clock_logs.tgz" .
echo "== summary =="
head -2 "$L/smi.err"
python3 - "$L" <<'PY'
import glob, json, os, re, statistics, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import smi_clocks
d = sys.argv[1]
samples = smi_clocks.read_samples(os.path.join(d, "clocks.csv"))
print("== each run: TTFT or rows; over its samples above 250 W: count, SM MHz median (min-max), mean W, max C, "
      "throttle reasons")
for line in open(os.path.join(d, "phases.txt")):
    name, t0, t1 = line.split()
    busy = smi_clocks.window(samples, float(t0), float(t1), min_watts=250)
    clk = smi_clocks.summary(busy) if busy else "no samples above 250 W"
    what = ""
    j = os.path.join(d, f"lat_{name}.json")
    if os.path.exists(j):
        what = f"TTFT {json.load(open(j))['ttft_ms']:.1f} ms; "
    print(f"{name}: {what}{clk}")
    if name.startswith("trace") and busy:  # the clock through the traced prefills: does it fall layer by layer?
        print("  MHz every 50 ms above 250 W: " + " ".join(f"{x.mhz:.0f}" for x in busy))
print("== prefill rows (TFLOP/s)")
for f in sorted(glob.glob(os.path.join(d, "rows_q*.txt"))):
    rows = re.findall(r"^RESULT prefill_attn (\S+) (\S+) TFLOP/s", open(f).read(), re.M)
    print(os.path.basename(f)[5:-4] + ": " + ", ".join(f"{s.replace('_h32kv8d128_causal', '')} {v}" for s, v in rows))
flop = 2.0 * 32000 * 32000 * 128 * 32  # a layer's causal attention, 32 heads of 128
print("== attention in the prompt, each layer (the trace's last prefill)")
text = open(os.path.join(d, "attn.txt")).read()
m = re.search(r"launches; us: (.*)", text)
if m:
    us = [float(x) for x in m.group(1).split()][-32:]
    med = statistics.median(us)
    print(f"attention: sum {sum(us) / 1e3:.1f} ms, median {med / 1e3:.2f} ms ({flop / med / 1e6:.0f} TFLOP/s), "
          f"min {min(us) / 1e3:.2f}, max {max(us) / 1e3:.2f}; {flop * len(us) / sum(us) / 1e6:.0f} TFLOP/s over the "
          "layers")
    print("  ms by layer: " + " ".join(f"{x / 1e3:.1f}" for x in us))
else:
    print("attention: " + text.strip()[:200])
PY
