#!/usr/bin/env bash
# Sets up, builds the cpu preset and runs every test that needs no GPU (ctest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$(nproc)"
ctest --preset cpu -j "$(nproc)" "$@"
