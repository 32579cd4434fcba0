#!/usr/bin/env bash
# Fuzzes on the GPU machine's spare cores while another command uses the GPU, so a device call spends its CPUs too.
#
#   FUZZ_PLAN="http_request:3 jinja:2 ..." FUZZ_SECONDS=580 FUZZ_CPUS=2-15 \
#     scripts/device/fuzz_beside.sh [COMMAND...]
#
# Each TARGET:N of FUZZ_PLAN is one scripts/device/fuzz_all.sh run of N libFuzzer processes on that target, all
# pinned (taskset) to FUZZ_CPUS; COMMAND, if given, runs meanwhile pinned to the other cores (FOREGROUND_CPUS,
# default 0-1). The fuzzers' binaries come from RL_FUZZ_BIN (a scripts/fuzz_pack.sh archive, unpacked once here);
# corpora stay in RL_FUZZ_WORK (default /tmp/rl-fuzz) so a second call on the same warm machine continues them.
# Stats go to $OUT/fuzz (fuzz_stats.tsv, logs, findings). Exit status: COMMAND's, or 1 when a fuzzer found something.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/rl_device}"
work="${RL_FUZZ_WORK:-/tmp/rl-fuzz}"
bin="${RL_FUZZ_BIN:-build/fuzz}"
seconds="${FUZZ_SECONDS:-60}"
fuzz_cpus="${FUZZ_CPUS:-2-15}"
fg_cpus="${FOREGROUND_CPUS:-0-1}"
mkdir -p "$out/fuzz" "$work"
if [ -f "$bin" ]; then
  mkdir -p "$work/bin"
  tar -xJf "$bin" -C "$work/bin" || { echo "fuzz_beside: cannot unpack $bin" >&2; exit 2; }
  bin="$work/bin"
fi
[ -n "${FUZZ_PLAN:-}" ] || { echo "fuzz_beside: FUZZ_PLAN is empty" >&2; exit 2; }

pids=()
for item in $FUZZ_PLAN; do
  target="${item%%:*}"
  n="${item##*:}"
  OUT="$out/fuzz" RL_FUZZ_WORK="$work" RL_FUZZ_BIN="$bin" \
    taskset -c "$fuzz_cpus" scripts/device/fuzz_all.sh "$n" "$seconds" "$target" >"$out/fuzz/$target.table" 2>&1 &
  pids+=($!)
done

rc=0
if [ $# -gt 0 ]; then
  taskset -c "$fg_cpus" "$@"
  rc=$?
fi
fuzz_rc=0
for p in "${pids[@]}"; do wait "$p" || fuzz_rc=1; done

echo "== fuzz beside (${seconds} s, cpus $fuzz_cpus) =="
awk -F'\t' 'NR > 1 { printf "%-16s procs %2s  wall %4s s  cpu %8s s  execs %11s  corpus %6s  crashes %s\n", $2, $3, $4, $5, $6, $7, $8 }' \
  "$out/fuzz/fuzz_stats.tsv"
[ "$rc" = 0 ] || exit "$rc"
exit "$fuzz_rc"
