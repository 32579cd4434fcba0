#!/usr/bin/env bash
# Runs one libFuzzer target on its seed corpus: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   TARGET: safetensors | config | tokenizer | jinja | ... (tests/fuzz/fuzz_TARGET.cpp)
# Builds the fuzz preset's binary if needed. New corpus entries go to a scratch folder, never into git:
# $RIDGELINE_FUZZ_OUT/TARGET (default /tmp/ridgeline-fuzz/TARGET)/corpus, crashes to .../crashes. A crash is
# fixed in the code and its input committed to tests/fuzz/corpus/TARGET/ as a regression seed (the replay ctest
# then runs it in every preset). Exit status: libFuzzer's (0: no crash in SECONDS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]" >&2
  echo "targets: $(ls tests/fuzz/fuzz_*.cpp | sed 's|.*/fuzz_||; s|\.cpp$||' | tr '\n' ' ')" >&2
  exit 2
fi
target="$1"
seconds="$2"
shift 2
[ -f "tests/fuzz/fuzz_${target}.cpp" ] || { echo "fuzz.sh: no tests/fuzz/fuzz_${target}.cpp" >&2; exit 2; }
[ -d "tests/fuzz/corpus/${target}" ] || { echo "fuzz.sh: no seed corpus tests/fuzz/corpus/${target}" >&2; exit 2; }
if [ ! -f build/fuzz/build.ninja ]; then cmake --preset fuzz >/dev/null; fi
cmake --build --preset fuzz --target "fuzz_${target}" >/dev/null
out="${RIDGELINE_FUZZ_OUT:-/tmp/ridgeline-fuzz}/${target}"
mkdir -p "$out/corpus" "$out/crashes"
# The scratch corpus comes first: libFuzzer writes new inputs into the first folder only.
start=$(date +%s)
set +e
"build/fuzz/fuzz_${target}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$out/crashes/" "$@" "$out/corpus" "tests/fuzz/corpus/${target}" 2>"$out/log"
rc=$?
set -e
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/log" | grep -o '[0-9]*$' || echo 0)
crashes=$(find "$out/crashes" -type f | wc -l)
echo "fuzz ${target}: rc=${rc} wall=$(( $(date +%s) - start ))s execs=${execs} crash_files=${crashes}" \
     "corpus=$(ls "$out/corpus" | wc -l) log=$out/log"
exit $rc
