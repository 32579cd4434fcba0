#!/usr/bin/env bash
# Kernel benchmarks on the GPU machine: our kernels ($RL_BIN_DIR/rl_bench_kernels, default build/cuda, carried) and the torch peers
# (bench/peers/torch_peers.py) in the same call, then one table (bench/peers/report.py) printed last.
# Optional argument: copy | linear | decode | prefill to run one group (copy is always run for the ceiling).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"  # the carried binaries
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
only="${1:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
if [ -z "$only" ]; then groups="copy linear decode prefill"; else groups="copy $only"; fi
for g in $groups; do timeout 240 "$bin_dir/rl_bench_kernels" "$g"; done 2>&1 | tee "$out/ours.log"
for g in $groups; do timeout 240 python3 bench/peers/torch_peers.py "$g"; done 2>&1 | tee "$out/peers.log"
echo "== kernel benchmarks =="
python3 bench/peers/report.py "$out/ours.log" "$out/peers.log" | tee "$out/table.txt"
