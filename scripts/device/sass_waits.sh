#!/usr/bin/env bash
# Where the Hopper prefill's wgmma waits land in its SASS (issue 21.1; session 20 found ptxas had moved the wait for
# P V of tile t ahead of the softmax of S_{t+1}, docs/cuda.md).
# Needs no GPU time beyond the machine: the image has cuobjdump, which the build machine lacks (there,
# `nvcc -cubin` and tools/wait_order.py on the cubin give the same verdicts).
# - The carried binary: `cuobjdump -sass $RL_BIN_DIR/rl_bench_kernels`, the production instance above 4k keys
#   (FUNCTION, default its template arguments' mangling) and the one with the diagonal's half tiles (production up to
#   4k keys), read by tools/wait_order.py.
# - DEFINES="A B=1 ...": src/backend/cuda/prefill_attention_sm90.cu of this tree compiled alone for sm_90a, once
#   as it is and once per -D in DEFINES (a source variant behind a macro), each read the same way.
# Prints each verdict ("overlapped" / "serialized") last; listings in $OUT/sass_waits_logs.tgz. Seconds.
set -uo pipefail
source "$(dirname "$0")/common.sh"
device_env
export PATH="/usr/local/cuda/bin:$PATH"
# The production instances (the kernel's template arguments PACK .. EF, mangled: PACK INTRA KS ABLATE CONT VS LAZY
# DH TRACE EF; the first with DH, the half tiles, off and the second on).
fn="${FUNCTION:-prefill_attention_sm90_kernelILb0ELb1ELi3ELi0ELb1ELi3ELb1ELb0ELb0ELb0EE}"
if cuobjdump -sass "$bin/rl_bench_kernels" > "$L/carried.sass" 2> "$L/carried.err"; then
  python3 tools/wait_order.py "$L/carried.sass" --function "$fn" > "$L/carried.txt" 2>&1
  dh="prefill_attention_sm90_kernelILb0ELb1ELi3ELi0ELb1ELi3ELb1ELb1ELb0ELb0EE"
  python3 tools/wait_order.py "$L/carried.sass" --function "$dh" > "$L/carried_diaghalf.txt" 2>&1
else
  echo "cuobjdump failed: $(head -c 300 "$L/carried.err")" > "$L/carried.txt"
fi
compile() {  # tag, then extra nvcc flags
  local tag=$1
  shift
  nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 --expt-relaxed-constexpr -DNDEBUG -Isrc "$@" \
    src/backend/cuda/prefill_attention_sm90.cu -o "$L/$tag.cubin" > "$L/$tag.nvcc.log" 2>&1 || {
    echo "nvcc failed ($tag): $(tail -c 400 "$L/$tag.nvcc.log")" > "$L/$tag.txt"
    return
  }
  cuobjdump -sass "$L/$tag.cubin" > "$L/$tag.sass" 2>&1
  python3 tools/wait_order.py "$L/$tag.sass" --function "$fn" > "$L/$tag.txt" 2>&1
}
if [ -n "${DEFINES:-}" ]; then
  compile source
  for d in $DEFINES; do compile "D_${d//[^A-Za-z0-9_]/_}" "-D$d"; done
fi
tar czf "$final_out/sass_waits_logs.tgz" -C "$L" .
echo "== summary =="
for f in "$L"/*.txt; do
  [ "$(basename "$f")" = gpu.txt ] && continue
  echo "$(basename "$f" .txt): $(tail -1 "$f")"
  grep -m 3 "wait 0x1" "$f" | sed 's/^/  /'
done
