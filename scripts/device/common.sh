# Shared by the device scripts that run carried binaries (source it after `set -uo pipefail`):
#   device_env                  cd to the checkout; $bin = $RL_BIN_DIR (default build/cuda) with lib/ on the library
#                               path; $L = a scratch folder for logs; $final_out = $OUT (default /tmp/rl_device);
#                               the GPU's name and clocks in $L/gpu.txt. SOURCE_LINK=/path links that compiled-in
#                               source path to this checkout (the test binaries read fixtures from it).
#   lat NAME ARGS...            `ridgeline bench latency ARGS --json $L/lat_NAME.json`, 90 s at most.
#   gtest_summary LOG           the PASSED / FAILED lines of a googletest log.
#   stamp MSG                   MSG and the seconds since device_env ran.
#   LLAMA8B, QWEN06B            arrays: the dummy-weight model arguments for bench latency.
device_env() {
  root="$(cd "$(dirname "${BASH_SOURCE[1]}")/../.." && pwd)"
  cd "$root" || exit 1
  bin="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
  if [ -n "${SOURCE_LINK:-}" ] && [ ! -e "$SOURCE_LINK" ]; then
    mkdir -p "$(dirname "$SOURCE_LINK")" && ln -s "$root" "$SOURCE_LINK"
  fi
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin/lib"
  L="$(mktemp -d)"
  final_out="${OUT:-/tmp/rl_device}"
  mkdir -p "$final_out"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$L/gpu.txt"
  t0=$(date +%s)
}
stamp() { echo "$1 ($(( $(date +%s) - t0 )) s)"; }
lat() {
  local t=$1
  shift
  timeout 90 "$bin/ridgeline" bench latency "$@" --json "$L/lat_$t.json" > "$L/lat_$t.log" 2>&1
  echo "lat $t rc=$?"
}
gtest_summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$1" | head -20; }
LLAMA8B=(-m models/configs/Llama-3.1-8B --dummy-weights --device cuda --max-model-len 4096)
QWEN06B=(-m models/configs/Qwen3-0.6B --dummy-weights --device cuda --max-model-len 4096)
