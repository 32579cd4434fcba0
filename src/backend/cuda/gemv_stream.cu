// Streaming GEMV for sm_90 (kernel lab v3): y[M, N] = x[M, K] · w[N, K]ᵀ for M ≤ 64, every weight byte read once.
// v2 (gemv.cu) loaded weights straight into registers: each warp load instruction touched 8 rows × 64 B, and it
// stayed at 74 % of copy bandwidth whatever the bytes in flight (docs/cuda.md). v3 moves the weights with the
// bulk copy engine instead: per stage, one cp.async.bulk per weight row of kChunk elements (512 B–1 KB contiguous)
// into shared memory, issued 4 rows per warp, completing on an mbarrier, kStages stages in flight per block. The
// tensor-core arithmetic (m16n8k16 with the shared k-permutation that keeps every fragment load 16 B wide) is v2's,
// now reading the weight fragments from shared memory (rows padded by kGemvRowPadBytes: conflict-free 16 B reads).
// The first stages are issued before pdl_wait(): with programmatic dependent launch the weight stream starts
// while the previous kernel of the step (a norm, the attention merge) still runs. Split-K (small N) runs as a
// thread-block cluster whose blocks sum their partial tiles through distributed shared memory in rank order:
// a fixed reduction order, no global workspace.
#include <cooperative_groups.h>

#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemv_stream.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kRows = kGemvStreamRows;
constexpr int kWarps = kGemvStreamWarps;

template <int kNT, int kChunk, int kStages>
struct StreamShape {
  static_assert(kChunk % (32 * kWarps) == 0, "every warp takes whole 32-k steps of a chunk");
  static constexpr int kRowBytes = kChunk * 2 + kGemvRowPadBytes;
  static constexpr int kStageBytes = kRows * kRowBytes;
  static constexpr int kRedBytes = kWarps * kNT * 4 * 32 * 4;
  static constexpr int kDataBytes = kStages * kStageBytes > kRedBytes ? kStages* kStageBytes : kRedBytes;
  static constexpr int kSmemBytes = kDataBytes + kStages * 8;
  static constexpr int kStepsPerWarp = kChunk / 32 / kWarps;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
#endif

// Block (blockIdx.x, blockIdx.y): weight rows [16 x, 16 x + 16), k in [y · k_per_split, +k_per_split); its 4 warps
// take interleaved 32-k steps of every chunk. Lane (r = lane / 4, q = lane % 4) reads 16 B of weight rows r and
// r + 8 and of x row t·8 + r at k0 + 8q per step (v2's fragment scheme); x rows ≥ M read as zeros.
// kNorm: the RMSNorm prologue (GemvStreamParams::norm_w). Each row's sum of squares is taken in
// rms_norm_kernel's order (elementwise.cu): kRowThreads virtual threads, thread v summing the 8-element chunks v,
// v + kRowThreads, ... in order, warp_sum per virtual warp, then warp_sum of the virtual warps' partials (block_sum);
// so the normed x, and y, are bitwise those of rms_norm then this GEMV.
template <int kNT, int kChunk, int kStages, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) gemv_stream_kernel(const GemvStreamParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = StreamShape<kNT, kChunk, kStages>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::kDataBytes);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, r = lane / 4, q = lane % 4;
  // Plain: tile rows are weight rows n0 + rr. Gated: output columns j0 + (rr & 7), rows < 8 of the gate half and
  // rows ≥ 8 of the up half of w ([2 n, k]); acc[t][e] and acc[t][e + 2] then hold gate and up of the same element.
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (p.gated ? kRows / 2 : kRows);
  auto w_row = [&](int rr) { return p.gated ? (rr < 8 ? n0 + rr : p.n + n0 + rr - 8) : n0 + rr; };
  auto row_ok = [&](int rr) { return (p.gated ? n0 + (rr & 7) : n0 + rr) < p.n; };
  const int64_t k_begin = static_cast<int64_t>(blockIdx.y) * p.k_per_split;
  const int64_t k_len = min(p.k_per_split, p.k - k_begin);  // > 0: the host sizes gridDim.y so
  const int num_chunks = static_cast<int>((k_len + kChunk - 1) / kChunk);
  const int rows_valid = p.gated ? 2 * static_cast<int>(min(static_cast<int64_t>(kRows / 2), p.n - n0))
                                 : static_cast<int>(min(static_cast<int64_t>(kRows), p.n - n0));
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) mbar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Every warp fills its kIssueRows rows of stage c % kStages with chunk c, one bulk copy per valid row from lanes
  // < kIssueRows; lane 0 of warp 0 announces the stage's bytes (the barrier's phase cannot complete before that
  // arrive, so the other warps' copies may land first). Spread over the 4 warps, a block's copies go out 4 at a time:
  // with warp 0 issuing all 16 the block streamed up to 6 % slower (kernel_config.h).
  constexpr int kIssueRows = kRows / kWarps;
  auto issue = [&](int c) {
    const int s = c % kStages;
    const int64_t kc = static_cast<int64_t>(c) * kChunk;
    const uint32_t bytes = static_cast<uint32_t>(min(static_cast<int64_t>(kChunk), k_len - kc) * 2);
    if (warp == 0 && lane == 0) mbar_expect_tx(&bars[s], bytes * rows_valid);
    const int rr = warp * kIssueRows + lane;
    if (lane < kIssueRows && row_ok(rr)) {
      bulk_load(smem + s * S::kStageBytes + rr * S::kRowBytes, p.w + w_row(rr) * p.k + k_begin + kc, bytes, &bars[s]);
    }
  };
  for (int c = 0; c < min(kStages, num_chunks); ++c) issue(c);
  // Only weights were touched so far; x is the previous kernel's output.
  pdl_wait();

  float inv[kNT] = {};
  if constexpr (kNorm) {
    // A warp per row. Lane l plays virtual thread vw · 32 + l of every virtual warp vw; per pass of kRowThreads
    // chunks it issues all its loads first (one L2 round trip per pass), then sums them in the virtual threads'
    // order (exact zeros past the row's end leave a sum unchanged).
    constexpr int kVirtualWarps = kRowThreads / 32;
    __shared__ float inv_s[kNT * 8];
    const int64_t chunks = p.k / 8;
    for (int row = warp; row < p.m; row += kWarps) {
      const uint4* xrow = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(row) * p.k);
      float part[kVirtualWarps] = {};
      for (int64_t base = 0; base < chunks; base += kRowThreads) {
        uint4 v[kVirtualWarps];
#pragma unroll
        for (int vw = 0; vw < kVirtualWarps; ++vw) {
          const int64_t c = base + vw * 32 + lane;
          v[vw] = c < chunks ? __ldg(xrow + c) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int vw = 0; vw < kVirtualWarps; ++vw) {
          float f[8];
          unpack8(v[vw], f);
#pragma unroll
          for (int i = 0; i < 8; ++i) part[vw] += f[i] * f[i];
        }
      }
      // block_sum: a butterfly per virtual warp, then one over the partials (lanes ≥ kVirtualWarps add zeros).
      float mine = 0.0f;
#pragma unroll
      for (int vw = 0; vw < kVirtualWarps; ++vw) {
        const float sum = warp_sum(part[vw]);
        if (lane == vw) mine = sum;
      }
      const float tot = warp_sum(mine);
      if (lane == 0) inv_s[row] = rsqrtf(tot / static_cast<float>(p.k) + p.eps);
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kNT; ++t) inv[t] = t * 8 + r < p.m ? inv_s[t * 8 + r] : 0.0f;
  }

  const uint16_t* xr[kNT];
  bool x_ok[kNT];
#pragma unroll
  for (int t = 0; t < kNT; ++t) {
    x_ok[t] = t * 8 + r < p.m;
    xr[t] = p.x + (x_ok[t] ? static_cast<int64_t>(t * 8 + r) * p.k : 0) + k_begin + 8 * q;
  }
  uint4 xv[S::kStepsPerWarp][kNT];
  uint4 nwv[kNorm ? S::kStepsPerWarp : 1][2];
  auto load_x = [&](int c) {
#pragma unroll
    for (int j = 0; j < S::kStepsPerWarp; ++j) {
      const int64_t kk = static_cast<int64_t>(c) * kChunk + (warp + j * kWarps) * 32;
      const bool in = kk + 8 * q < k_len;
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        xv[j][t] = in && x_ok[t] ? __ldg(reinterpret_cast<const uint4*>(xr[t] + kk)) : make_uint4(0, 0, 0, 0);
      }
      if constexpr (kNorm) {
        // The norm weights of these 8 k (bf16: one 16 B vector; f32: two).
        const int64_t kw = k_begin + kk + 8 * q;
        if (p.norm_w_f32) {
          const uint4* w4 = reinterpret_cast<const uint4*>(static_cast<const float*>(p.norm_w) + kw);
          nwv[j][0] = in ? __ldg(w4) : make_uint4(0, 0, 0, 0);
          nwv[j][1] = in ? __ldg(w4 + 1) : make_uint4(0, 0, 0, 0);
        } else {
          nwv[j][0] = in ? __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.norm_w) + kw))
                         : make_uint4(0, 0, 0, 0);
        }
      }
    }
  };
  // x row fragment (8 k) as the MMA takes it: with the prologue, bf16(w · (x · inv)) as rms_norm_kernel rounds.
  auto x_frag = [&](int j, int t) {
    if constexpr (!kNorm) {
      return xv[j][t];
    } else {
      float f[8], w[8];
      unpack8(xv[j][t], f);
      if (p.norm_w_f32) {
        const uint4 a = nwv[j][0], b = nwv[j][1];
        const uint32_t u[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = __uint_as_float(u[i]);
      } else {
        unpack8(nwv[j][0], w);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = w[i] * (f[i] * inv[t]);
      return pack8(f);
    }
  };
  float acc[kNT][4] = {};
  load_x(0);
  for (int c = 0; c < num_chunks; ++c) {
    const int s = c % kStages;
    mbar_wait(&bars[s], static_cast<uint32_t>((c / kStages) & 1));
    const unsigned char* sw = smem + s * S::kStageBytes;
#pragma unroll
    for (int j = 0; j < S::kStepsPerWarp; ++j) {
      const int kl = (warp + j * kWarps) * 32 + 8 * q;
      const bool in = static_cast<int64_t>(c) * kChunk + kl < k_len;
      const uint4 wa = in ? *reinterpret_cast<const uint4*>(sw + r * S::kRowBytes + kl * 2) : make_uint4(0, 0, 0, 0);
      const uint4 wb =
          in ? *reinterpret_cast<const uint4*>(sw + (r + 8) * S::kRowBytes + kl * 2) : make_uint4(0, 0, 0, 0);
      const uint32_t a_lo[4] = {wa.x, wb.x, wa.y, wb.y};
      const uint32_t a_hi[4] = {wa.z, wb.z, wa.w, wb.w};
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        const uint4 xf = x_frag(j, t);
        mma_bf16(acc[t], a_lo, xf.x, xf.y);
        mma_bf16(acc[t], a_hi, xf.z, xf.w);
      }
    }
    if (c + 1 < num_chunks) load_x(c + 1);
    __syncthreads();  // every warp is done with stage s
    if (c + kStages < num_chunks) issue(c + kStages);
  }
  pdl_launch_dependents();

  // Sum the warps' tiles in warp order (the stages are free: every issued chunk was waited for). acc[t][e]:
  // weight row r + 8 (e / 2), x row t·8 + 2q + e % 2.
  float* red = reinterpret_cast<float*>(smem);
  auto slot = [&](int wi, int t, int e) { return ((wi * kNT + t) * 4 + e) * 32 + lane; };
#pragma unroll
  for (int t = 0; t < kNT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[slot(warp, t, e)] = acc[t][e];
  __syncthreads();
  const int splits = static_cast<int>(gridDim.y);
  if (warp == 0) {
#pragma unroll
    for (int t = 0; t < kNT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kWarps; ++wi) v += red[slot(wi, t, e)];
        acc[t][e] = v;
        red[slot(0, t, e)] = v;  // this lane's own slot: no other lane reads it before the cluster barrier
      }
  }
  namespace cg = cooperative_groups;
  if (splits > 1) {
    // The cluster is (1, splits): block rank = split. Rank 0 sums the splits' tiles in rank order.
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (cluster.block_rank() == 0 && warp == 0) {
#pragma unroll
      for (int t = 0; t < kNT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = 0.0f;
          for (int rank = 0; rank < splits; ++rank) v += cluster.map_shared_rank(red, rank)[slot(0, t, e)];
          acc[t][e] = v;
        }
    }
    cluster.sync();  // the other blocks' shared memory stays alive until rank 0 has read it
    if (cluster.block_rank() != 0) return;
  }
  if (warp != 0) return;
  if (p.gated) {
#pragma unroll
    for (int t = 0; t < kNT; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t col = n0 + r;
        const int row = t * 8 + 2 * q + e;
        if (col >= p.n || row >= p.m) continue;
        const float g = acc[t][e] + (p.bias ? load_param(p.bias, p.bias_f32, col) : 0.0f);
        const float u = acc[t][e + 2] + (p.bias ? load_param(p.bias, p.bias_f32, p.n + col) : 0.0f);
        const float v = g / (1.0f + __expf(-g)) * u;
        if (p.y_f32) {
          static_cast<float*>(p.y)[row * p.n + col] = v;
        } else {
          static_cast<uint16_t*>(p.y)[row * p.n + col] = f32_to_bf16_bits(v);
        }
      }
    return;
  }
#pragma unroll
  for (int t = 0; t < kNT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t col = n0 + r + 8 * (e / 2);
      const int row = t * 8 + 2 * q + e % 2;
      if (col >= p.n || row >= p.m) continue;
      const float v = acc[t][e] + (p.bias ? load_param(p.bias, p.bias_f32, col) : 0.0f);
      if (p.residual) {
        const float sum = bf16_bits_to_f32(p.residual[row * p.n + col]) + bf16_bits_to_f32(f32_to_bf16_bits(v));
        static_cast<uint16_t*>(p.y)[row * p.n + col] = f32_to_bf16_bits(sum);
      } else if (p.y_f32) {
        static_cast<float*>(p.y)[row * p.n + col] = p.y_rounded ? bf16_bits_to_f32(f32_to_bf16_bits(v)) : v;
      } else {
        static_cast<uint16_t*>(p.y)[row * p.n + col] = f32_to_bf16_bits(v);
      }
    }
#else
  __trap();  // launched only on sm_90 (gemv_stream_supported)
#endif
}

template <int kNT, int kChunk, int kStages, bool kNorm = false>
void launch_config(GemvStreamParams p, int num_sms, int max_splits, cudaStream_t stream) {
  using S = StreamShape<kNT, kChunk, kStages>;
  auto kernel = gemv_stream_kernel<kNT, kChunk, kStages, kNorm>;
  static const bool smem_ok = [&] {
    return S::kSmemBytes <= 48 * 1024 ||
           cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes) == cudaSuccess;
  }();
  RL_CHECK(smem_ok);
  const int64_t tile_cols = p.gated ? kRows / 2 : kRows;
  const int64_t tiles = (p.n + tile_cols - 1) / tile_cols;
  const int splits = gemv_stream_splits(tiles, p.k, kChunk, num_sms, max_splits);
  p.k_per_split = (p.k + splits - 1) / splits;
  p.k_per_split = (p.k_per_split + 31) / 32 * 32;
  const unsigned int grid_y = static_cast<unsigned int>((p.k + p.k_per_split - 1) / p.k_per_split);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned int>(tiles), grid_y, 1);
  cfg.blockDim = dim3(kWarps * 32, 1, 1);
  cfg.dynamicSmemBytes = S::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2];
  int num_attrs = 0;
  attrs[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[num_attrs].val.programmaticStreamSerializationAllowed = 1;
  ++num_attrs;
  if (grid_y > 1) {
    attrs[num_attrs].id = cudaLaunchAttributeClusterDimension;
    attrs[num_attrs].val.clusterDim.x = 1;
    attrs[num_attrs].val.clusterDim.y = grid_y;
    attrs[num_attrs].val.clusterDim.z = 1;
    ++num_attrs;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = num_attrs;
  RL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
}

// Blocks of one instance resident on the whole GPU at once.
template <int kNT, int kChunk, int kStages>
int64_t resident_ctas(int num_sms) {
  static const int per_sm = [] {
    using S = StreamShape<kNT, kChunk, kStages>;
    auto kernel = gemv_stream_kernel<kNT, kChunk, kStages, false>;
    if (S::kSmemBytes > 48 * 1024) {
      RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    }
    int n = 0;
    RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, S::kSmemBytes));
    return n;
  }();
  return static_cast<int64_t>(per_sm) * num_sms;
}

template <int kNT>
void launch_nt(const GemvStreamParams& p, int config, int num_sms, cudaStream_t stream) {
  if (config == 0) {
    const int64_t tile_cols = p.gated ? kRows / 2 : kRows;
    const int64_t tiles = (p.n + tile_cols - 1) / tile_cols;
    const int64_t ctas =
        tiles * gemv_stream_splits(tiles, p.k, kGemvStreamChunk, num_sms, kGemvStreamMaxSplits);
    const int stages = gemv_stream_stages(ctas, resident_ctas<kNT, kGemvStreamChunk, kGemvStreamStages>(num_sms),
                                          resident_ctas<kNT, kGemvStreamChunk, kGemvStreamStagesOneWave>(num_sms));
    // The prologue instances take the plain ones' stage count: the same dynamic shared memory (their few extra bytes
    // are static); with two n8 tiles they hold more registers (kernel_config.h, kFusedNormLinearMaxM).
    if (p.norm_w) {
      if (stages == kGemvStreamStagesOneWave) {
        launch_config<kNT, kGemvStreamChunk, kGemvStreamStagesOneWave, true>(p, num_sms, kGemvStreamMaxSplits, stream);
      } else {
        launch_config<kNT, kGemvStreamChunk, kGemvStreamStages, true>(p, num_sms, kGemvStreamMaxSplits, stream);
      }
    } else if (stages == kGemvStreamStagesOneWave) {
      launch_config<kNT, kGemvStreamChunk, kGemvStreamStagesOneWave>(p, num_sms, kGemvStreamMaxSplits, stream);
    } else {
      launch_config<kNT, kGemvStreamChunk, kGemvStreamStages>(p, num_sms, kGemvStreamMaxSplits, stream);
    }
    return;
  }
  RL_CHECK_MSG(!p.norm_w, "the GEMV's norm prologue runs only in the tuned configuration");
  switch (config) {
    case 1:
      launch_config<kNT, 512, 2>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 2:
      launch_config<kNT, 256, 2>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 3:
      launch_config<kNT, 128, 8>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 4:
      launch_config<kNT, 256, 4>(p, num_sms, 1, stream);
      break;  // no split-K
    case 5:
      launch_config<kNT, 256, 6>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 6:
      launch_config<kNT, 512, 4>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 7:
      launch_config<kNT, 256, 8>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
    case 8:
      launch_config<kNT, 256, 4>(p, num_sms, 2, stream);
      break;  // split-K in pairs at most
    case 9:
      launch_config<kNT, 512, 2>(p, num_sms, 2, stream);
      break;
    default:
      launch_config<kNT, kGemvStreamChunk, kGemvStreamStages>(p, num_sms, kGemvStreamMaxSplits, stream);
      break;
  }
}

struct DeviceInfo {
  int major = 0, num_sms = 0;
};

DeviceInfo device_info() {
  static DeviceInfo cached[16];
  int dev = 0;
  RL_CUDA_CHECK(cudaGetDevice(&dev));
  DeviceInfo& d = cached[dev & 15];
  if (d.num_sms == 0) {
    RL_CUDA_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev));
    RL_CUDA_CHECK(cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, dev));
  }
  return d;
}

// The configuration that config 0 means: kernel_config.h's tuned one, unless RIDGELINE_CUDA_GEMV_CONFIG names a lab
// configuration (1-9) to run in its place (end-to-end A/B of the lab's configurations; read once). The norm
// prologue always runs in the tuned configuration.
int production_config(const GemvStreamParams& p) {
  static const int chosen = [] {
    const char* env = std::getenv("RIDGELINE_CUDA_GEMV_CONFIG");
    const int c = env != nullptr ? std::atoi(env) : 0;
    return c >= 1 && c <= 9 ? c : 0;
  }();
  return p.norm_w ? 0 : chosen;
}

}  // namespace

bool gemv_stream_supported(int64_t m) { return m >= 1 && m <= kSkinnyMaxM && device_info().major == 9; }

void launch_gemv_stream(const GemvStreamParams& p, cudaStream_t stream) { launch_gemv_stream_lab(p, stream, 0); }

void launch_gemv_stream_lab(const GemvStreamParams& p, cudaStream_t stream, int config) {
  if (config == 0) config = production_config(p);
  const int num_sms = device_info().num_sms;
  RL_CHECK(!p.norm_w || p.m <= 16);
  RL_CHECK(!p.residual || (!p.gated && !p.y_f32));
  RL_CHECK(!p.y_rounded || (p.y_f32 && !p.gated && !p.residual));
  if (p.m <= 8) {
    launch_nt<1>(p, config, num_sms, stream);
  } else if (p.m <= 16) {
    launch_nt<2>(p, config, num_sms, stream);
  } else if (p.m <= 32) {
    launch_config<4, 256, 4>(p, num_sms, kGemvStreamMaxSplits, stream);
  } else {
    launch_config<8, 256, 4>(p, num_sms, kGemvStreamMaxSplits, stream);
  }
}

}  // namespace rl::cuda
