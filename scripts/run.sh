#!/usr/bin/env bash
# Sets up, builds the cpu preset (quietly, only what changed) and runs ridgeline with the given arguments.
#   scripts/run.sh generate --prompt "In the beginning"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$(nproc)" --target ridgeline >/dev/null
exec "$root/build/cpu/ridgeline" "$@"
