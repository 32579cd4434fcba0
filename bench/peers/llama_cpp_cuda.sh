#!/usr/bin/env bash
# llama.cpp's llama-bench built with CUDA for the H200 (sm_90) on this GPU-less machine, and packed to be carried to
# the device machine, where scripts/device/peer_llama_gpu.sh runs it beside ridgeline (issue 12).
#
#   bench/peers/llama_cpp_cuda.sh            build if needed, then pack   (env JOBS=2, NVCC=/usr/local/cuda/bin/nvcc)
#   bench/peers/llama_cpp_cuda.sh pack       pack only (the build must be there)
#
# 1. Source: the llama.cpp that node-llama-cpp bundles (bench/peers/llama_cpp_common.sh, shared with the CPU peer
#    bench/peers/llama_cpp.sh), cloned again into .cache/llama.cpp-cuda/src (git-ignored) because this build patches
#    it: the 22 MMQ template instances (matrix products of quantized weights, the slowest files to compile) are
#    replaced by one stub that aborts. The benchmark's weights are F16, which never take the MMQ path.
# 2. Build: Release, static libraries into one llama-bench (cudart and cuBLAS stay shared: the device has them under
#    /usr/local/cuda/lib64), CUDA architecture 90-real only, FlashAttention kernels for an F16 KV cache only
#    (GGML_CUDA_FA_QUANTS=f16-f16), no NCCL, OpenSSL, tests, examples, server or app. Only the llama-bench target is
#    built, under `nice -n 19`, JOBS jobs (default 2). Slow on 2 shared cores (tens of minutes); later runs reuse it.
# 3. Pack .dev/llama_cuda.tar.xz (.dev/ is git-excluded), unpacked on the device into .dev/llama_cuda/:
#    llama-bench (stripped), any shared libraries of the build it needs, the bundle's gguf-py (for make_gguf.py) and
#    VERSION. Prints its size: it rides in the device call's carry (64 MiB with ridgeline's binaries).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/peers/llama_cpp_common.sh"
CACHE=$ROOT/.cache/llama.cpp-cuda
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
JOBS=${JOBS:-2}
TAR=$ROOT/.dev/llama_cuda.tar.xz
mkdir -p "$CACHE"

# The source patches, each done once (the stub files mark them): kernels that this benchmark never runs are left out,
# their template instances replaced by stubs that abort.
# - MMQ (matrix products of quantized weights): the benchmark's weights are F16.
# - FlashAttention's MMA kernels for head sizes other than FA_HEAD_DIMS (default 128, both models' head size).
patch_src() {
  local ti=$CACHE/src/ggml/src/ggml-cuda/template-instances f t keep
  if [ ! -f "$ti/mmq-stub-ridgeline.cu" ]; then
    grep -q '"template-instances/mmq\*.cu"' "$ti/../CMakeLists.txt" || {
      echo "llama_cpp_cuda.sh: ggml-cuda/CMakeLists.txt no longer globs mmq*.cu: update the patch" >&2; exit 1; }
    {
      echo '// ridgeline (bench/peers/llama_cpp_cuda.sh): stands in for the MMQ template instances.'
      echo '#include "../common.cuh"'
      echo 'struct mmq_args;'
      echo 'template <ggml_type type>'
      echo 'void mul_mat_q_case(ggml_backend_cuda_context &, const mmq_args &, cudaStream_t) {'
      echo '    GGML_ABORT("this llama.cpp build has no MMQ kernels (quantized weights)");'
      echo '}'
      sed -n 's/^extern DECL_MMQ_CASE(\(GGML_TYPE_[A-Z0-9_]*\));$/\1/p' "$ti/../mmq.cuh" | while read -r t; do
        echo "template void mul_mat_q_case<$t>(ggml_backend_cuda_context &, const mmq_args &, cudaStream_t);"
      done
    } > "$ti/mmq-stub-ridgeline.cu.tmp"
    [ "$(grep -c '^template void' "$ti/mmq-stub-ridgeline.cu.tmp")" -ge 10 ] || {
      echo "llama_cpp_cuda.sh: no MMQ cases found in mmq.cuh: the stub would not link" >&2; exit 1; }
    sed -i 's|"template-instances/mmq\*.cu"|"template-instances/mmq-stub-ridgeline.cu"|' "$ti/../CMakeLists.txt"
    mv "$ti/mmq-stub-ridgeline.cu.tmp" "$ti/mmq-stub-ridgeline.cu"
  fi
  if [ ! -f "$ti/fattn-mma-f16-stub-ridgeline.cu" ]; then
    keep=${FA_HEAD_DIMS:-128}
    keep=${keep// /|}
    {
      echo '// ridgeline (bench/peers/llama_cpp_cuda.sh): stands in for the FlashAttention MMA instances of head sizes'
      echo "// other than ${FA_HEAD_DIMS:-128}."
      echo '#include "../common.cuh"'
      echo 'template <int DKQ, int DV, int ncols1, int ncols2>'
      echo 'void ggml_cuda_flash_attn_ext_mma_f16_case(ggml_backend_cuda_context &, ggml_tensor *) {'
      echo '    GGML_ABORT("this llama.cpp build has FlashAttention MMA kernels for other head sizes only");'
      echo '}'
      for f in "$ti"/fattn-mma-f16-instance-*.cu; do
        grep -E '^DECL_FATTN_MMA_F16_CASE\(' "$f" | grep -Ev "^DECL_FATTN_MMA_F16_CASE\(($keep), " \
          | sed -n 's/^DECL_FATTN_MMA_F16_CASE(\(.*\));$/\1/p' | while read -r t; do
            echo "template void ggml_cuda_flash_attn_ext_mma_f16_case<$t>(ggml_backend_cuda_context &, ggml_tensor *);"
          done
        sed -i -E "/^DECL_FATTN_MMA_F16_CASE\(($keep), /!{/^DECL_FATTN_MMA_F16_CASE\(/d}" "$f"
      done
    } > "$ti/fattn-mma-f16-stub-ridgeline.cu.tmp"
    mv "$ti/fattn-mma-f16-stub-ridgeline.cu.tmp" "$ti/fattn-mma-f16-stub-ridgeline.cu"
  fi
}

build() {
  llama_cpp_src
  [ -d "$CACHE/src" ] || git clone -q "$LLAMA_SRC_CACHE/src" "$CACHE/src"
  patch_src
  # Configured every time (quick; nothing rebuilt): the source globs pick up the stub files.
  nice -n 19 cmake -S "$CACHE/src" -B "$CACHE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF \
    -DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DGGML_CUDA_FA_QUANTS=f16-f16 -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF > "$CACHE/configure.log" 2>&1 \
    || { tail -30 "$CACHE/configure.log"; exit 1; }
  echo "building llama-bench (CUDA) $(date -u +%T): log $CACHE/build.log"
  nice -n 19 cmake --build "$CACHE/build" --target llama-bench -j"$JOBS" > "$CACHE/build.log" 2>&1 \
    || { tail -40 "$CACHE/build.log"; exit 1; }
  echo "built $(date -u +%T)"
}

pack() {
  local exe=$CACHE/build/bin/llama-bench stage=$CACHE/pack/llama_cuda
  [ -x "$exe" ] || { echo "llama_cpp_cuda.sh: no $exe: build first" >&2; exit 1; }
  rm -rf "$CACHE/pack" && mkdir -p "$stage/lib"
  strip --strip-unneeded -o "$stage/llama-bench" "$exe"
  # The shared libraries it needs past glibc, libstdc++ and CUDA's (the device has those): the build's own (none when
  # static) and e.g. libgomp.
  local lib
  local system='/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart'
  system+='|libcublas(Lt)?)\.so'
  for lib in $(LD_LIBRARY_PATH="$CACHE/build/bin" ldd "$exe" | awk '$3 ~ /^\// {print $3}' | grep -Ev "$system"); do
    strip --strip-unneeded -o "$stage/lib/$(basename "$lib")" "$lib"
  done
  mkdir -p "$stage/gguf-py"
  cp -r "$CACHE/src/gguf-py/gguf" "$CACHE/src/LICENSE" "$stage/gguf-py/"
  find "$stage/gguf-py" -name __pycache__ -prune -exec rm -rf {} +
  echo "llama.cpp $(llama_cpp_release), CUDA $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_90," \
    "static, FA f16-f16, no MMQ; packed $(date -u +%FT%TZ)" > "$stage/VERSION"
  mkdir -p "$ROOT/.dev"
  tar -C "$CACHE/pack" -cf - llama_cuda | xz -T2 -6 > "$TAR.tmp"
  mv "$TAR.tmp" "$TAR"
  cat "$stage/VERSION"
  ls -la "$stage" "$stage/lib"
  echo "CUDA libraries it needs (the device has them under /usr/local/cuda/lib64):"
  ldd "$stage/llama-bench" | grep -Ei 'cuda|cublas' || true
  echo "$TAR: $(du -b "$TAR" | cut -f1) bytes ($(du -m "$TAR" | cut -f1) MiB)"
}

case ${1:-all} in
  all) [ -x "$CACHE/build/bin/llama-bench" ] || build; pack ;;
  build) build ;;
  pack) pack ;;
  *) echo "usage: $0 [all|build|pack]" >&2; exit 2 ;;
esac
