// Kernel-lab probes: one synchronization pattern of a production kernel alone, so that a tool's report on it
// (compute-sanitizer) can be read without the rest of the kernel.
//
// ring_handoff_probe_kernel: the dense stack's weight ring (decode_stack.cu). A producer warp fills stages of a
// shared-memory ring with bulk copies (async proxy) completing on a stage's full mbarrier; eight consumer warps read
// the stage with ordinary loads (each warp one 2 KB row) and hand it back through its empty mbarrier; the producer
// waits there and issues fence.proxy.async before it copies into the stage again. Until session 19 the stack handed
// a stage back as each warp read, __syncwarp(), then lane 0 arrived (every_thread = false); racecheck reported
// write-after-read hazards there (session 13, docs/benchmarks.md). With every_thread (the stack's form since), each
// consumer thread arrives itself, so its own reads are ordered before the producer's wait by its own release. Each
// consumer warp sums its rows, so the results show the ring delivered every tile intact.
// The stack's launch differs from the probe's in three ways, each an option here (RingProbeOptions), so that a
// tool's failure on the stack (session 20: racecheck stopped at a hardware exception in it, with every lab
// ablation) can be pinned to one: shared memory filled to the block's limit (dynamic), the PDL launch attribute,
// and kernel parameters past the classic 4 KB (the stack's layer table, 6.6 KB for 64 layers).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/sm90.cuh"
#include "backend/cuda/tma_map.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kProbeWarps = 8;        // consumer warps; the producer is warp kProbeWarps
constexpr int kProbeRowBytes = 2048;  // one bulk copy per consumer row and stage

// The source as a plain pointer, or inside a parameter block of 8 KB (RingProbeOptions::large_params): every entry
// holds the same pointer, and the kernel reads the one its tile count picks.
struct ProbeSource {
  const uint16_t* w;
  __device__ const uint16_t* get(int) const { return w; }
};
struct ProbeSourceTable {
  const uint16_t* w[1024];
  __device__ const uint16_t* get(int tiles) const { return w[tiles % 1024]; }
};

template <bool kEveryThread, typename Source>
__global__ void __launch_bounds__((kProbeWarps + 1) * 32, 1)
    ring_handoff_probe_kernel(const Source src_w, int tiles, float* out) {
#if RL_SM90_ENABLED
  using namespace sm90;
  pdl_wait();  // launch_pdl's contract (a no-op without the attribute): out may be the previous kernel's
  const uint16_t* w = src_w.get(tiles);
  constexpr int kProbeStages = 2;  // a short ring, so every stage is refilled many times
  __shared__ __align__(128) uint8_t stages[kProbeStages][kProbeWarps * kProbeRowBytes];
  __shared__ __align__(8) uint64_t bars[2 * kProbeStages];
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kProbeStages]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kProbeStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kEveryThread ? kProbeWarps * 32 : kProbeWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (warp == kProbeWarps) {  // producer
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kProbeStages, n = t / kProbeStages;
      if (n > 0) {
        mbar_wait(empty0 + 8 * s, (n - 1) & 1);
        fence_proxy_async();  // the consumers' generic reads of the stage before this async-proxy write
      }
      if (lane == 0) mbar_arrive_expect_tx(full0 + 8 * s, kProbeWarps * kProbeRowBytes);
      __syncwarp();
      if (lane < kProbeWarps) {
        const uint16_t* src = w + (static_cast<int64_t>(t) * kProbeWarps + lane) * (kProbeRowBytes / 2);
        bulk_load(smem_addr(stages[s] + lane * kProbeRowBytes), src, kProbeRowBytes, full0 + 8 * s);
      }
    }
    return;
  }
  float acc = 0.0f;
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kProbeStages;
    mbar_wait(full0 + 8 * s, (t / kProbeStages) & 1);
    const uint16_t* row = reinterpret_cast<const uint16_t*>(stages[s] + warp * kProbeRowBytes);
    for (int e = lane * 8; e < kProbeRowBytes / 2; e += 256) {
      float f[8];
      unpack8(*reinterpret_cast<const uint4*>(row + e), f);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc += f[i];
    }
    if (kEveryThread) {
      mbar_arrive(empty0 + 8 * s);
    } else {
      __syncwarp();
      if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) out[warp] = acc;
#else
  (void)src_w.get(tiles);  // (the source's accessor is used on every target)
  __trap();                // sm_90a only (launch_ring_handoff_probe checks)
#endif
}

}  // namespace

int ring_handoff_probe_rows() { return kProbeWarps; }
int ring_handoff_probe_row_elems() { return kProbeRowBytes / 2; }

namespace {

template <bool kEveryThread, typename Source>
void launch_probe(const Source& src, int tiles, float* out, const RingProbeOptions& o, cudaStream_t stream) {
  const auto kernel = ring_handoff_probe_kernel<kEveryThread, Source>;
  size_t dynamic = 0;
  if (o.full_shared_memory) {  // the rest of the block's shared memory, dynamic (the stack's ring is)
    int dev = 0, optin = 0;
    RL_CUDA_CHECK(cudaGetDevice(&dev));
    RL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes attr{};
    RL_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    dynamic = static_cast<size_t>(optin) - attr.sharedSizeBytes;
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic)));
  }
  const dim3 block((kProbeWarps + 1) * 32);
  if (o.pdl) {
    launch_pdl(kernel, dim3(1), block, dynamic, stream, src, tiles, out);
  } else {
    kernel<<<1, block, dynamic, stream>>>(src, tiles, out);
    RL_CUDA_CHECK_LAUNCH();
  }
}

template <typename Source>
void launch_probe(const Source& src, int tiles, float* out, const RingProbeOptions& o, cudaStream_t stream) {
  if (o.every_thread) {
    launch_probe<true>(src, tiles, out, o, stream);
  } else {
    launch_probe<false>(src, tiles, out, o, stream);
  }
}

}  // namespace

void launch_ring_handoff_probe(const uint16_t* w, int tiles, float* out, const RingProbeOptions& o,
                               cudaStream_t stream) {
  RL_CHECK_MSG(device_is_sm90(), "the ring hand-off probe needs compute capability 9.0");
  RL_CHECK(tiles > 0 && aligned16(w));
  if (o.large_params) {
    ProbeSourceTable t;
    for (const uint16_t*& p : t.w) p = w;
    launch_probe(t, tiles, out, o, stream);
  } else {
    launch_probe(ProbeSource{w}, tiles, out, o, stream);
  }
}

}  // namespace rl::cuda
