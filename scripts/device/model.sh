#!/usr/bin/env bash
# The model-layer device run (issue 14) on the GPU machine, building nothing: binaries from $RL_BIN_DIR
# (rl_tests_ops, rl_tests_model of the cuda preset), sources from $RL_ROOT (default: this checkout).
# In this order (so that the tests come first when device time is short; each step has a timeout):
#   1. every CUDA op test (layer ops, MoE, window attention) and the CUDA golden tests (bf16 rule);
#   2. the engine tests on CUDA (deterministic kernels) and the sliding-window release test;
#   3. transformers' routing margins: tools/make_fixtures.py remakes the MoE fixtures into a scratch folder; the
#      script checks that their logits equal the committed ones and copies each golden.json (now with
#      routing_margins from transformers) over the checkout's and into $OUT/golden.tgz to be committed.
# Logs go to $OUT; a table is printed last.
set -uo pipefail
root="${RL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bin_dir="$(cd "${RL_BIN_DIR:-build/cuda}" && pwd)"
out="${OUT:-/tmp/rl_device}"
mkdir -p "$out/golden"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$bin_dir/lib"
# libnccl.so.2 (linked by the CUDA backend): the machine's, or the one torch ships.
if ! ldconfig -p | grep -q libnccl.so.2; then
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"
  [ -n "$nccl" ] || nccl="$(dirname "$(find /usr/local /usr/lib /opt -maxdepth 6 -name libnccl.so.2 2>/dev/null | head -1)")"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
fi
export RIDGELINE_SOURCE_ROOT="$root" RIDGELINE_TINY_MODEL="$root/models/ridgeline-tiny"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

timeout "${OPS_TIMEOUT:-100}" "$bin_dir/rl_tests_ops" --gtest_color=no >"$out/ops_tests.log" 2>&1
echo "rl_tests_ops rc=$?" | tee -a "$out/rc.txt"
RIDGELINE_TEST_DEVICE=cuda timeout "${ENGINE_TIMEOUT:-70}" "$bin_dir/rl_tests_model" --gtest_color=no \
  --gtest_filter="${ENGINE_FILTER:-EngineTest.*:SlidingWindowEngine.*:EngineDeterminism.*}" >"$out/engine_cuda.log" 2>&1
echo "engine tests (cuda) rc=$?" | tee -a "$out/rc.txt"

scratch="$(mktemp -d)"
timeout "${FIXTURES_TIMEOUT:-60}" python3 tools/make_fixtures.py --out "$scratch" --cases "${FIXTURE_CASES:-qwen3_moe,qwen3_moe_step2,gpt_oss}" \
  >"$out/fixtures.log" 2>&1
echo "make_fixtures rc=$?" | tee -a "$out/rc.txt"
python3 - "$scratch" "$out/golden" >>"$out/fixtures.log" 2>&1 <<'PY'
import json, os, shutil, sys
from safetensors.torch import load_file
scratch, dest = sys.argv[1], sys.argv[2]
for case in sorted(os.listdir(scratch)):
    new, old = os.path.join(scratch, case), os.path.join("tests/data/golden", case)
    if not os.path.exists(os.path.join(new, "golden.json")) or not os.path.isdir(old):
        continue
    a, b = load_file(os.path.join(new, "logits.safetensors"))["logits"], load_file(os.path.join(old, "logits.safetensors"))["logits"]
    same = a.shape == b.shape and float((a - b).abs().max()) == 0.0
    g = json.load(open(os.path.join(new, "golden.json")))
    rm = g.get("routing_margins")
    print(f"GOLDEN {case}: logits identical to the committed ones: {same}; routing margins: "
          f"{'none' if rm is None else f'min {min(rm):.4f}, below 0.02 at {[i for i, v in enumerate(rm) if v < 0.02]}'}")
    if same and rm is not None:
        os.makedirs(os.path.join(dest, case), exist_ok=True)
        shutil.copy(os.path.join(new, "golden.json"), os.path.join(dest, case, "golden.json"))
        shutil.copy(os.path.join(new, "golden.json"), os.path.join(old, "golden.json"))
PY

# The device returns few files: the golden.json files travel as one archive (unpack over tests/data/golden).
if [ -n "$(ls -A "$out/golden")" ]; then tar czf "$out/golden.tgz" -C "$out/golden" . && rm -rf "$out/golden"; fi

echo "== fixtures =="
grep -E "^GOLDEN|FAILED|routing margins" "$out/fixtures.log" | head -20
echo "== CUDA tests =="
grep -hE "^\[  FAILED  \]|^\[==========\]|^\[  PASSED  \]" "$out/ops_tests.log" "$out/engine_cuda.log" | head -30
grep -hE "^\[       OK \] CudaGolden.*(gpt_oss|moe|gpt2)" "$out/ops_tests.log" | head -12
cat "$out/rc.txt"
