#!/usr/bin/env bash
# Installs what building and testing ridgeline needs: Debian packages, then the npm test tools.
# Idempotent and quiet when nothing is missing. Runs apt-get update at most once, only when a package is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

debs=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libopenblas-dev libpcre2-dev libutf8proc-dev libxxhash-dev
  libgtest-dev libgmock-dev libboost-dev zlib1g-dev
  clang-14 libclang-rt-14-dev
  bible-kjv
  python3-numpy
  chromium
)
# Node.js (with npm) runs the JS reference implementations in the parity tests. A machine that already has
# node and npm (e.g. from NodeSource) keeps them; otherwise Debian's packages are installed.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then debs+=(nodejs npm); fi


missing=()
for p in "${debs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm test tools (JS reference implementations, the official openai client) into tests/js/node_modules
# (git-ignored). Reinstalled only when package.json or the lock file changed.
js="$root/tests/js"
if [ -f "$js/package.json" ]; then
  stamp="$js/node_modules/.ridgeline-stamp"
  want="$(cat "$js/package.json" "$js/package-lock.json" 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing npm test tools into tests/js/node_modules"
    if [ -f "$js/package-lock.json" ]; then
      (cd "$js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    else
      (cd "$js" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
    fi
    echo "$want" > "$stamp"
  fi
fi
