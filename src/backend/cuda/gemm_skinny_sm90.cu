// Skinny GEMM for Hopper (sm_90a): y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias) for the decode batches between the GEMV
// and cuBLASLt (kSkinnyGemmMinM ≤ m ≤ 64), where streaming the weights is the whole cost. Swap-AB: 128 weight rows
// are the M side of the tensor-core product (two consumer warpgroups of 64, wgmma m64n64k16) and the batch rows
// its N side (64 columns; TMA fills the rows past m with zeros), so no tile is wasted on the weights.
//
// A block has three warpgroups. One thread of warpgroup 0 is the producer: it streams 64-wide k chunks of the
// block's 128 weight rows and of x through kStages stages of shared memory with TMA (128-byte swizzle, as wgmma
// reads it), each stage completing on its full mbarrier; the consumers release a stage on its empty mbarrier once
// their wgmmas have read it. The first stages' weights are requested before the previous kernel of the stream has
// finished (programmatic dependent launch; the weights never depend on it), x only after it has.
//
// Work: weight tiles of 128 rows × `splits` k ranges. Blocks (split, y) walk tiles y, y + gridDim.y, ... so the
// producer streams on across tiles; with splits > 1 each block writes its tile's partial sums (f32, in a
// thread-major layout) to a workspace and the last of the tile's blocks to finish adds them in split order (a
// fixed order: the bits do not depend on timing) and writes y. The host picks splits so that tiles × splits fill
// the GPU's resident blocks (kernel_config.h, "Skinny GEMM").
#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/sm90.cuh"
#include "backend/cuda/tma_map.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kBK = 64;             // k per stage: one 128-byte swizzle row of bf16
constexpr int kTileRows = 128;      // weight rows per block: two consumer warpgroups of 64
constexpr int kBN = 64;             // batch rows (wgmma N)
static_assert(kBN == kSkinnyGemmMaxM, "the dispatch bound is the batch tile");
constexpr int kThreads = 384;       // producer warpgroup + two consumers
constexpr int kConsumerThreads = 256;
constexpr int kAccRegs = kBN / 2;   // m64n64 f32 accumulator registers per thread
constexpr uint32_t kWBytes = kTileRows * kBK * 2;
constexpr uint32_t kXBytes = kBN * kBK * 2;
constexpr uint32_t kStageBytes = kWBytes + kXBytes;

template <int kStages>
constexpr int smem_bytes() {
  return 1024 + kStages * static_cast<int>(kStageBytes) + 2 * kStages * 8;  // 1 KB of slack for the alignment
}

struct SkinnyParams {
  const void* bias = nullptr;
  bool bias_f32 = false;
  void* y = nullptr;
  bool y_f32 = false;
  int m = 0, n = 0;
  int tiles = 0;   // ceil(n / kTileRows)
  int chunks = 0;  // ceil(k / kBK)
  int splits = 1;  // k ranges per tile (gridDim.x)
  float* partial = nullptr;  // splits > 1: [tiles][splits][kAccRegs][kConsumerThreads]
  int* counters = nullptr;   // splits > 1: [tiles], zero between launches
};

template <int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    skinny_gemm_kernel(const __grid_constant__ CUtensorMap tm_w, const __grid_constant__ CUtensorMap tm_x,
                       const SkinnyParams p) {
#if RL_SM90_ENABLED
  using namespace sm90;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // swizzle atoms are 1024-byte aligned
  auto stage_w = [&](int st) { return base + static_cast<uint32_t>(st) * kStageBytes; };
  auto stage_x = [&](int st) { return base + static_cast<uint32_t>(st) * kStageBytes + kWBytes; };
  const uint32_t bars = base + kStages * kStageBytes;
  auto full = [&](int st) { return bars + 8u * static_cast<uint32_t>(st); };
  auto empty = [&](int st) { return bars + 8u * static_cast<uint32_t>(kStages + st); };
  __shared__ int last_block;

  const int tid = threadIdx.x, warp = (tid / 32) % 4, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform for the compiler (wgmma branches)
  const int split = blockIdx.x;
  const int c_begin = split * p.chunks / p.splits, c_end = (split + 1) * p.chunks / p.splits;
  const int my_chunks = c_end - c_begin;  // ≥ 1: the host keeps splits ≤ chunks
  const int my_tiles = (p.tiles - static_cast<int>(blockIdx.y) + static_cast<int>(gridDim.y) - 1) /
                       static_cast<int>(gridDim.y);
  const int total = my_tiles * my_chunks;

  if (tid == 0) {
    for (int st = 0; st < kStages; ++st) {
      mbar_init(full(st), 1);
      mbar_init(empty(st), 8);  // each consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_launch_dependents();

  if (wg == 0) {
    // ---- producer: one thread ----
    if (tid != 0) return;
    prefetch_tensor_map(&tm_w);
    prefetch_tensor_map(&tm_x);
    auto tile_of = [&](int i) { return static_cast<int>(blockIdx.y) + (i / my_chunks) * static_cast<int>(gridDim.y); };
    auto chunk_of = [&](int i) { return c_begin + i % my_chunks; };
    const int pre = min(total, kStages);
    for (int i = 0; i < pre; ++i) {
      mbar_arrive_expect_tx(full(i), kStageBytes);
      tma_load_2d(stage_w(i), &tm_w, chunk_of(i) * kBK, tile_of(i) * kTileRows, full(i));
    }
    pdl_wait();  // x is the previous kernel's output
    for (int i = 0; i < pre; ++i) tma_load_2d(stage_x(i), &tm_x, chunk_of(i) * kBK, 0, full(i));
    for (int i = pre; i < total; ++i) {
      const int st = i % kStages;
      mbar_wait(empty(st), static_cast<uint32_t>((i / kStages) - 1) & 1u);
      mbar_arrive_expect_tx(full(st), kStageBytes);
      tma_load_2d(stage_w(st), &tm_w, chunk_of(i) * kBK, tile_of(i) * kTileRows, full(st));
      tma_load_2d(stage_x(st), &tm_x, chunk_of(i) * kBK, 0, full(st));
    }
    return;
  }

  // ---- consumers: warpgroup c owns weight rows [64 c, 64 c + 64) of each tile ----
  const int c = wg - 1, ct = tid - 128;  // consumer thread index 0..255
  float acc[kAccRegs];
#pragma unroll
  for (int r = 0; r < kAccRegs; ++r) acc[r] = 0.0f;
  // Accumulator element r of this thread: weight row (warp's 16 rows) and batch column (wgmma's D fragment).
  auto row_of = [&](int r) { return c * 64 + warp * 16 + lane / 4 + 8 * ((r >> 1) & 1); };
  auto col_of = [&](int r) { return 8 * (r >> 2) + 2 * (lane & 3) + (r & 1); };
  auto store = [&](int t, const float (&v)[kAccRegs]) {
#pragma unroll
    for (int r = 0; r < kAccRegs; ++r) {
      const int row = t * kTileRows + row_of(r), col = col_of(r);
      if (row >= p.n || col >= p.m) continue;
      const float out = v[r] + (p.bias ? load_param(p.bias, p.bias_f32, row) : 0.0f);
      const int64_t idx = static_cast<int64_t>(col) * p.n + row;
      if (p.y_f32) {
        static_cast<float*>(p.y)[idx] = out;
      } else {
        static_cast<uint16_t*>(p.y)[idx] = f32_to_bf16_bits(out);
      }
    }
  };

  int i = 0;
  for (int t = blockIdx.y; t < p.tiles; t += gridDim.y) {
    for (int j = 0; j < my_chunks; ++j, ++i) {
      const int st = i % kStages;
      mbar_wait(full(st), static_cast<uint32_t>(i / kStages) & 1u);
      pin(acc);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const uint64_t da = desc_sw128(stage_w(st) + static_cast<uint32_t>(c * 64 * 128 + kk * 32), 16, 1024);
        const uint64_t db = desc_sw128(stage_x(st) + static_cast<uint32_t>(kk * 32), 16, 1024);
        wgmma_m64n64_ss(acc, da, db, (j > 0 || kk > 0) ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      pin(acc);
      __syncwarp();
      if (lane == 0) mbar_arrive(empty(st));
    }
    if (p.splits == 1) {
      store(t, acc);
      continue;
    }
    // Split-K: partials in a thread-major layout (each warp stores 32 consecutive floats per register), then the
    // last block of the tile adds the splits in order 0, 1, ... (this block's own from its registers).
    float* part = p.partial + static_cast<int64_t>(t) * p.splits * kAccRegs * kConsumerThreads;
    float* mine = part + static_cast<int64_t>(split) * kAccRegs * kConsumerThreads + ct;
#pragma unroll
    for (int r = 0; r < kAccRegs; ++r) __stcg(mine + r * kConsumerThreads, acc[r]);
    __threadfence();
    named_sync(1, kConsumerThreads);
    if (ct == 0) {
      const int done = atomicAdd(p.counters + t, 1);
      last_block = done == p.splits - 1;
      if (last_block) p.counters[t] = 0;  // ready for the next launch
    }
    named_sync(1, kConsumerThreads);
    if (!last_block) continue;
    __threadfence();
    float sum[kAccRegs];
#pragma unroll
    for (int r = 0; r < kAccRegs; ++r) sum[r] = 0.0f;
    for (int s = 0; s < p.splits; ++s) {
      const float* src = part + static_cast<int64_t>(s) * kAccRegs * kConsumerThreads + ct;
#pragma unroll
      for (int r = 0; r < kAccRegs; ++r) sum[r] += s == split ? acc[r] : __ldcg(src + r * kConsumerThreads);
    }
    store(t, sum);
  }
#else
  __trap();  // launched only on sm_90a (skinny_gemm_supported)
#endif
}

template <int kStages>
int resident_blocks(int num_sms) {
  static const int per_sm = [] {
    auto kernel = skinny_gemm_kernel<kStages>;
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<kStages>()));
    int n = 0;
    RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem_bytes<kStages>()));
    return std::max(n, 1);
  }();
  return per_sm * num_sms;
}

template <int kStages>
void launch_stages(const uint16_t* x, const uint16_t* w, SkinnyParams p, int64_t k, const SkinnyWorkspace& ws,
                   int num_sms, int splits_override, cudaStream_t stream) {
  const int resident = resident_blocks<kStages>(num_sms);
  int splits = splits_override > 0 ? splits_override : skinny_gemm_splits(p.tiles, p.chunks, resident);
  splits = std::max(1, std::min({splits, p.chunks, kSkinnyMaxSplits}));
  const int64_t partial_floats = static_cast<int64_t>(p.tiles) * splits * kAccRegs * kConsumerThreads;
  if (splits > 1 && (partial_floats > ws.partial_floats || p.tiles > ws.num_counters)) splits = 1;
  p.splits = splits;
  p.partial = ws.partial;
  p.counters = ws.counters;
  const unsigned int grid_y = static_cast<unsigned int>(std::max(1, std::min(p.tiles, resident / splits)));
  const uint64_t w_dims[2] = {static_cast<uint64_t>(k), static_cast<uint64_t>(p.n)};
  const uint64_t x_dims[2] = {static_cast<uint64_t>(k), static_cast<uint64_t>(p.m)};
  const uint64_t strides[1] = {static_cast<uint64_t>(k) * 2};
  const uint32_t w_box[2] = {kBK, kTileRows}, x_box[2] = {kBK, kBN};
  const CUtensorMap tm_w = make_bf16_tensor_map(w, 2, w_dims, strides, w_box);
  const CUtensorMap tm_x = make_bf16_tensor_map(x, 2, x_dims, strides, x_box);
  const dim3 grid(static_cast<unsigned int>(splits), grid_y);
  // RIDGELINE_CUDA_SKINNY_PDL=0 (kernel lab): a plain launch, so neither this kernel nor its successor starts early.
  static const bool pdl = [] {
    const char* e = std::getenv("RIDGELINE_CUDA_SKINNY_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  if (pdl) {
    launch_pdl(skinny_gemm_kernel<kStages>, grid, dim3(kThreads), static_cast<size_t>(smem_bytes<kStages>()), stream,
               tm_w, tm_x, p);
  } else {
    skinny_gemm_kernel<kStages><<<grid, kThreads, smem_bytes<kStages>(), stream>>>(tm_w, tm_x, p);
  }
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool skinny_gemm_supported(const uint16_t* x, const uint16_t* w, int64_t m, int64_t n, int64_t k) {
  // TMA: 16-byte aligned bases and row strides; the box needs k ≥ 64 only for efficiency, not correctness.
  return device_is_sm90() && m >= 1 && m <= kBN && n >= 1 && n <= INT32_MAX && k >= 8 && k % 8 == 0 &&
         k <= INT32_MAX / 2 && aligned16(x) && aligned16(w);
}

void launch_skinny_gemm(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                        int64_t m, int64_t n, int64_t k, const SkinnyWorkspace& ws, int num_sms, cudaStream_t stream) {
  launch_skinny_gemm_lab(x, w, bias, bias_dt, y, y_dt, m, n, k, ws, num_sms, stream, SkinnyLab{});
}

void launch_skinny_gemm_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                            DType y_dt, int64_t m, int64_t n, int64_t k, const SkinnyWorkspace& ws, int num_sms,
                            cudaStream_t stream, const SkinnyLab& lab) {
  const int stages_override = lab.stages, splits_override = lab.splits;
  RL_CHECK(skinny_gemm_supported(x, w, m, n, k));
  SkinnyParams p;
  p.bias = bias;
  p.bias_f32 = bias_dt == DType::kF32;
  p.y = y;
  p.y_f32 = y_dt == DType::kF32;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.tiles = static_cast<int>((n + kTileRows - 1) / kTileRows);
  p.chunks = static_cast<int>((k + kBK - 1) / kBK);
  const int stages = stages_override > 0 ? stages_override : kSkinnyGemmStages;
  if (stages == 4) {
    launch_stages<4>(x, w, p, k, ws, num_sms, splits_override, stream);
  } else {
    launch_stages<8>(x, w, p, k, ws, num_sms, splits_override, stream);
  }
}

}  // namespace rl::cuda
