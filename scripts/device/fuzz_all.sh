#!/usr/bin/env bash
# Runs every libFuzzer target at once from prebuilt binaries, building nothing: the fuzz preset's
# build/fuzz/fuzz_* (scripts/fuzz_pack.sh packs them for another machine). The cores are shared out over
# the targets (independent libFuzzer processes, each with its own seed, all writing into the target's
# corpus folder); with fewer cores than targets the targets run in waves, N at a time.
#
#   scripts/device/fuzz_all.sh CORES SECONDS [TARGET...]
#
# Environment: RL_FUZZ_BIN (the binaries, default build/fuzz; a .tar.xz made by scripts/fuzz_pack.sh is
# unpacked first), RL_FUZZ_WORK (corpora and crashes, kept across runs; default $OUT/fuzz or
# /tmp/rl-fuzz-all), OUT (where the stats, logs and findings go; default RL_FUZZ_WORK). Run from the
# repository root (the seeds are tests/fuzz/corpus/<target>; openai_request and chat_messages read
# models/ridgeline-tiny through RIDGELINE_SOURCE_DIR, set here to this checkout).
#
# Writes $OUT/fuzz_stats.tsv (one row per target per run: date, target, processes, wall s, CPU s, execs,
# corpus files, crash files), $OUT/findings/<target>/ (crash, leak, timeout and oom inputs, if any),
# $OUT/logs/<target>.<i>.log (the tail of each process's log), $OUT/corpus.tar.gz (the new corpus entries, when
# RL_FUZZ_PACK_CORPUS=1) and prints a table last. Exit status 1 when any target found something.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
if [ $# -lt 2 ]; then
  echo "usage: scripts/device/fuzz_all.sh CORES SECONDS [TARGET...]" >&2
  exit 2
fi
cores="$1"
seconds="$2"
shift 2
out="${OUT:-${RL_FUZZ_WORK:-/tmp/rl-fuzz-all}}"
work="${RL_FUZZ_WORK:-$out/fuzz}"
bin="${RL_FUZZ_BIN:-build/fuzz}"
mkdir -p "$out/logs" "$work"
if [ -f "$bin" ]; then  # a packed archive
  mkdir -p "$work/bin"
  tar -xJf "$bin" -C "$work/bin" || { echo "fuzz_all: cannot unpack $bin" >&2; exit 2; }
  bin="$work/bin"
fi
export RIDGELINE_SOURCE_DIR="$root"
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in tests/fuzz/fuzz_*.cpp; do
    t="$(basename "$src" .cpp)"
    targets+=("${t#fuzz_}")
  done
fi
for t in "${targets[@]}"; do
  [ -x "$bin/fuzz_$t" ] || { echo "fuzz_all: no binary $bin/fuzz_$t" >&2; exit 2; }
  [ -d "tests/fuzz/corpus/$t" ] || { echo "fuzz_all: no seeds tests/fuzz/corpus/$t" >&2; exit 2; }
  if ldd "$bin/fuzz_$t" | grep -q "not found"; then
    echo "fuzz_all: fuzz_$t misses shared libraries:" >&2
    ldd "$bin/fuzz_$t" | grep "not found" >&2
    exit 2
  fi
done

ntargets=${#targets[@]}
# Memory per process: at most 4 GiB, and no more than 80 % of the machine's memory over all processes.
mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
rss_mb=$(( mem_mb * 8 / 10 / cores ))
[ "$rss_mb" -gt 4096 ] && rss_mb=4096

# CPU seconds of a finished subshell's children, from bash's `times` (second line: "XmY.YYYs XmY.YYYs").
cpu_of_times() {
  sed -n 2p "$1" | awk '{ s = 0; for (i = 1; i <= 2; ++i) { split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2] } printf "%.1f", s }'
}

# run_target TARGET PROCESSES: PROCESSES libFuzzer processes on one target for $seconds; appends its stats row.
run_target() {
  local t="$1" n="$2" i start
  local dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/crashes" "$dir/run"
  rm -f "$dir/run/"*
  start=$(date +%s)
  for (( i = 0; i < n; ++i )); do
    (
      "$bin/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb="$rss_mb" -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/" "$dir/corpus" "tests/fuzz/corpus/$t" >"$dir/run/$i.log" 2>&1
      echo $? >"$dir/run/$i.rc"
      times >"$dir/run/$i.times"
    ) &
  done
  wait
  local wall=$(( $(date +%s) - start )) cpu=0 execs=0 rcs="" c e
  for (( i = 0; i < n; ++i )); do
    c=$(cpu_of_times "$dir/run/$i.times")
    cpu=$(awk -v a="$cpu" -v b="$c" 'BEGIN { printf "%.1f", a + b }')
    e=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/run/$i.log" | grep -o '[0-9]*$' || echo 0)
    execs=$(( execs + ${e:-0} ))
    rcs="$rcs$(cat "$dir/run/$i.rc")"
    tail -n 40 "$dir/run/$i.log" >"$out/logs/$t.$i.log"
  done
  local corpus crashes
  corpus=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/crashes" -type f | wc -l)
  if [ "$crashes" -gt 0 ]; then
    mkdir -p "$out/findings/$t"
    cp "$dir/crashes/"* "$out/findings/$t/"
  fi
  printf '%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n' "$(date -u +%FT%TZ)" "$t" "$n" "$wall" "$cpu" "$execs" \
    "$corpus" "$crashes" "$rcs" >>"$out/fuzz_stats.tsv"
}

[ -f "$out/fuzz_stats.tsv" ] ||
  printf 'date\ttarget\tprocesses\twall_s\tcpu_s\texecs\tcorpus_files\tcrash_files\texit_codes\n' >"$out/fuzz_stats.tsv"
first_row=$(( $(wc -l <"$out/fuzz_stats.tsv") + 1 ))
if [ "$cores" -ge "$ntargets" ]; then
  # Every target at once, cores / targets processes each, the remainder to the first targets.
  for (( k = 0; k < ntargets; ++k )); do
    n=$(( cores / ntargets + (k < cores % ntargets ? 1 : 0) ))
    run_target "${targets[$k]}" "$n" &
  done
  wait
else
  # Waves of CORES targets, one process each.
  for (( k = 0; k < ntargets; k += cores )); do
    for (( j = k; j < k + cores && j < ntargets; ++j )); do
      run_target "${targets[$j]}" 1 &
    done
    wait
  done
fi
if [ "${RL_FUZZ_PACK_CORPUS:-0}" = 1 ]; then
  tar -czf "$out/corpus.tar.gz" -C "$work" $(for t in "${targets[@]}"; do echo "$t/corpus"; done)
fi

echo "== fuzz_all: $cores cores, $seconds s per target, binaries $bin =="
tail -n +"$first_row" "$out/fuzz_stats.tsv" | sort -k2 |
  awk -F'\t' 'BEGIN { printf "%-16s %5s %7s %9s %13s %8s %7s\n", "target", "procs", "wall_s", "cpu_s", "execs", "corpus", "crashes" }
              { printf "%-16s %5s %7s %9s %13s %8s %7s\n", $2, $3, $4, $5, $6, $7, $8; if ($8 > 0) bad = 1 }
              END { exit bad }'
