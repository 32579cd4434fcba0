#!/usr/bin/env bash
# Issue 21.1's comparison, alternating: production's prefill rows (`rl_bench_kernels prefill_production`: 4 x 4k, 16 x
# 1k, 1 x 16k and 1 x 32k, causal, GQA 32 / 8, head_dim 128) and torch's SDPA peers (bench/peers/torch_peers.py prefill:
# cuDNN, flash), ROUNDS rounds (default 3), the SM clock, power and temperature sampled every 100 ms (nvidia-smi) and
# summed up over each run (tools/smi_clocks.py: the clock's median and range, mean power, highest temperature). In one
# long `rl_bench_kernels prefill` process a row's figure moved by up to 10 % with its place in the run; alternating
# short processes, each form's rounds agree within 1 %. FORMS (default "production peers") are the runs of a round:
# production, peers, snake (RIDGELINE_CUDA_PREFILL_SM90=continuous_v3_lazy_snake), diaghalf (the diagonal's half tiles
# at every length: continuous_v3_lazy_diaghalf_autosnake), nodiaghalf (production without them:
# continuous_v3_lazy_autosnake_expfirst), expfirst (the exponentials first where production has no half tiles: above 2k
# keys; production's form since session 35), noexpfirst (production without them: the form before session 35),
# expfirst_nodiaghalf (them at every length, without the half tiles), qring (Q in the K stages' ring at every length:
# PrefillSm90Options::q_ring; production's up to 4k keys since session 39), noqring (production without it: the form of
# sessions 35-38; the forms above keep production's choice of it), bsN (production over a KV cache of block size N),
# alt_NAME (the production rows of another build, carried in $ALT_DIR/NAME/rl_bench_kernels: a kernel variant built from
# another tree). Carried binaries in $RL_BIN_DIR. Each run prints its outputs' XXH3 words; the summary lists the
# distinct words of each shape and form (forms that claim the same bits show one word).
# RIDGELINE_BENCH_PREFILL_EXTRA="8x2048,6x3072" adds those causal shapes to our rows (not the peers'): lengths between
# the four fixed shapes, where production's choices by length change (kernel_config.h).
# Prints a short table last; logs in $OUT/prefill_vs_cudnn_logs.tgz. About 1 minute at 3 rounds.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 \
  > "$L/clocks.csv" 2>/dev/null &
sampler=$!
# Each lab form is production's kernel with one choice changed, named by its RIDGELINE_CUDA_PREFILL_SM90 words.
declare -A lab_forms=(
  [snake]=continuous_v3_lazy_snake
  [diaghalf]=continuous_v3_lazy_diaghalf_autosnake
  [nodiaghalf]=continuous_v3_lazy_autosnake_expfirst_autoqring
  [noexpfirst]=continuous_v3_lazy_autosnake_autodiaghalf_autoqring
  [expfirst]=continuous_v3_lazy_autosnake_autodiaghalf_expfirst_autoqring
  [expfirst_nodiaghalf]=continuous_v3_lazy_autosnake_expfirst_autoqring
  [qring]=continuous_v3_lazy_autosnake_autodiaghalf_expfirst_qring
  [noqring]=continuous_v3_lazy_autosnake_autodiaghalf_expfirst
)
for r in $(seq 1 "${ROUNDS:-3}"); do
  for who in ${FORMS:-production peers}; do
    t_start=$(date +%s.%N)
    if [ -n "${lab_forms[$who]:-}" ]; then
      RIDGELINE_CUDA_PREFILL_SM90=${lab_forms[$who]} timeout 120 "$bin/rl_bench_kernels" prefill_production
    else
      case "$who" in
        peers) timeout 150 python3 bench/peers/torch_peers.py prefill ;;
        bs*) timeout 120 "$bin/rl_bench_kernels" "prefill_production_$who" ;;
        alt_*) timeout 120 "${ALT_DIR:?alt forms need ALT_DIR}/${who#alt_}/rl_bench_kernels" prefill_production ;;
        *) timeout 120 "$bin/rl_bench_kernels" prefill_production ;;
      esac
    fi > "$L/${who}_r$r.txt" 2>&1
    echo "$who $r rc=$? $t_start $(date +%s.%N)" | tee -a "$L/phases.txt"
  done
done
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
tar -C "$L" -czf "$final_out/prefill_vs_cudnn_logs.tgz" .
python3 - "$L" <<'PY'
import glob, os, re, statistics, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import smi_clocks
d = sys.argv[1]
samples = smi_clocks.read_samples(os.path.join(d, "clocks.csv"))
rows = {}  # (shape, form or peer) -> [value by round]
names = {}  # in order of appearance
hashes = {}  # shape -> form -> the output words its runs printed
print("== phases (over each run's samples: count, SM MHz median (min-max), mean W, max C)")
for line in open(os.path.join(d, "phases.txt")):
    who, r, rc, t0, t1 = line.split()
    print(f"{who} round {r} {rc}: {smi_clocks.summary(smi_clocks.window(samples, float(t0), float(t1)))}")
    text = open(os.path.join(d, f"{who}_r{r}.txt")).read()
    for m in re.finditer(r"^RESULT prefill_attn (\S+) (\S+) TFLOP/s ?(\S*)", text, re.M):
        name = m.group(3) or who
        rows.setdefault((m.group(1), name), []).append(float(m.group(2)))
        names.setdefault(name, None)
    for m in re.finditer(r"^# output (\S+): XXH3 (\S+)", text, re.M):
        hashes.setdefault(m.group(1), {}).setdefault(who, set()).add(m.group(2))
print("== TFLOP/s by round")
shapes = sorted({k[0] for k in rows}, key=lambda x: (len(x), x))
for shape in shapes:
    line = shape
    cudnn = rows.get((shape, "sdpa_cudnn"), [])
    for name in names:
        v = rows.get((shape, name), [])
        line += f" | {name} " + " / ".join(f"{x:.1f}" for x in v)
        if v and cudnn and not name.startswith("sdpa"):
            line += f" ({statistics.median(v) / statistics.median(cudnn):.3f}x cuDNN)"
    print(line)
if hashes:
    print("== output words (XXH3) by form")
    for shape in sorted(hashes, key=lambda x: (len(x), x)):
        print(shape + " | " + " | ".join(f"{who} {' '.join(sorted(w))}" for who, w in hashes[shape].items()))
PY
