#!/usr/bin/env bash
# Packs the fuzz preset's binaries for another machine (scripts/device/fuzz_all.sh unpacks them):
#   scripts/fuzz_pack.sh OUTPUT.tar.xz
# Builds the fuzz targets if needed, drops their debug info (the symbol table stays, so sanitizer reports still
# name functions) and checks that they need no shared library beyond glibc, libstdc++, zlib and OpenBLAS (the
# fuzz preset links pcre2, utf8proc and xxhash statically).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[ $# -eq 1 ] || { echo "usage: scripts/fuzz_pack.sh OUTPUT.tar.xz" >&2; exit 2; }
dest="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
if [ ! -f build/fuzz/build.ninja ]; then cmake --preset fuzz >/dev/null; fi
cmake --build --preset fuzz
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for src in tests/fuzz/fuzz_*.cpp; do
  name="$(basename "$src" .cpp)"
  objcopy --strip-debug "build/fuzz/$name" "$tmp/$name"
  extra=$(ldd "$tmp/$name" | awk '{ print $1 }' |
          grep -Ev '^(linux-vdso|/lib64/ld-linux-x86-64|libc|libm|libgcc_s|libstdc\+\+|libz|libopenblas|libgfortran|libquadmath)\.' || true)
  if [ -n "$extra" ]; then
    echo "fuzz_pack: $name needs shared libraries a bare machine may lack: $extra" >&2
    exit 1
  fi
done
tar -cJf "$dest" -C "$tmp" .
echo "fuzz_pack: $(ls "$tmp" | wc -l) binaries, $(du -h "$dest" | cut -f1) in $dest"
