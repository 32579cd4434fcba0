#!/usr/bin/env bash
# Runs the CUDA op tests on the GPU machine, building nothing: the binaries come from the carried build/cuda
# folder (cmake --preset cuda && cmake --build --preset cuda --target rl_tests_ops). Then compute-sanitizer
# memcheck and racecheck on the small attention tests. Run from the repository root; logs go to $OUT if set.
# Prints a short summary last.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin_dir="${RL_BIN_DIR:-build/cuda}"  # the carried binaries
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
bin="$bin_dir/rl_tests_ops"
[ -x "$bin" ] || bin="$bin_dir/rl_cuda_ops_tests"  # the same tests without rl_runtime
[ -x "$bin" ] || { echo "no test binary: build rl_tests_ops or rl_cuda_ops_tests (cuda preset) here and carry it"; exit 2; }
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
small='*CudaSamplingVocab*v37:*CudaSamplingVocab*v4099:CudaAttention.MixedPrefillAndDecode:CudaAttention.ChunkedPrefillWithPrefixInCache:CudaAttention.DecodeGridSizedForLongerContext:CudaOps.ArgmaxRows*:CudaBatchInvariance.Linear*:CudaBatchInvariance.InvariantGemm*'

timeout 300 "$bin" --gtest_color=no 2>&1 | tee "$out/ops_tests.log"
tests_rc=${PIPESTATUS[0]}
timeout 240 "$sanitizer" --tool memcheck --error-exitcode 3 "$bin" --gtest_filter="$small" >"$out/memcheck.log" 2>&1
memcheck_rc=$?
timeout 240 "$sanitizer" --tool racecheck --error-exitcode 3 "$bin" --gtest_filter="$small" >"$out/racecheck.log" 2>&1
racecheck_rc=$?

echo "== summary =="
grep -E "^\[  (PASSED|FAILED) |^\[==========\]" "$out/ops_tests.log" | tail -4
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/memcheck.log" "$out/racecheck.log"
echo "rl_tests_ops rc=$tests_rc memcheck rc=$memcheck_rc racecheck rc=$racecheck_rc"
[ "$tests_rc" = 0 ] && [ "$memcheck_rc" = 0 ] && [ "$racecheck_rc" = 0 ]
