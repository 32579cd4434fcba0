# shellcheck shell=bash
# Shared by bench/peers/llama_cpp*.sh (source it): the llama.cpp source that the npm package node-llama-cpp
# bundles as llama/gitRelease.bundle, fetched once with `npm pack` into .cache/llama.cpp (git-ignored).
#   llama_cpp_src             clones it into $LLAMA_SRC_CACHE/src if missing (also llama/binariesGithubRelease.json)
#   llama_cpp_release         node-llama-cpp's release name of that source and its commit, e.g. "b1234 (abc1234)"
# $LLAMA_SRC_CACHE: .cache/llama.cpp under the checkout; gguf-py (for make_gguf.py) is $LLAMA_SRC_CACHE/src/gguf-py.
LLAMA_SRC_CACHE=${LLAMA_SRC_CACHE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.cache/llama.cpp}
llama_cpp_src() {
  [ -d "$LLAMA_SRC_CACHE/src" ] && return 0
  mkdir -p "$LLAMA_SRC_CACHE"
  (cd "$LLAMA_SRC_CACHE" && npm pack node-llama-cpp --silent > pack.txt)
  tar -xzf "$LLAMA_SRC_CACHE/$(tail -1 "$LLAMA_SRC_CACHE/pack.txt")" -C "$LLAMA_SRC_CACHE" \
    package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json
  git clone -q "$LLAMA_SRC_CACHE/package/llama/gitRelease.bundle" "$LLAMA_SRC_CACHE/src"
}
llama_cpp_release() {
  local rel
  rel=$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$LLAMA_SRC_CACHE/package/llama/binariesGithubRelease.json" \
    2>/dev/null || true)
  echo "${rel:-?} ($(git -C "$LLAMA_SRC_CACHE/src" log -1 --format=%h))"
}
