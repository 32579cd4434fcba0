// Batch-invariant GEMM (issue 13): y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias) whose every output element is reduced in
// one canonical order for every M, so that a row's result is bitwise the same whatever the number of rows it is
// computed with. One kernel template, tile configurations per M class (skinny ones stream the weights once,
// bandwidth-bound; the large one is compute-bound): the tiling changes which block computes an element, never the
// order of its sums.
//
// The canonical order: K is cut into 32-wide steps; each output element is one chain of m16n8k16 MMAs over the
// steps in increasing k, started from +0 (per step the 16-byte k-permuted fragments of gemv.cu: lane (r, q) holds
// k0 + 8q .. k0 + 8q + 7, used as the low half's, then the high half's k-slots); then + bias; then one rounding to
// the output dtype. No split-K anywhere, so no M-dependent reduction.
// A block computes a BW × BX tile (weight rows × x rows). Tiles come in through an ST-deep cp.async pipeline of SPS
// 32-k steps per stage, stored step-major as dense 64-byte rows; fragments are read with 16-byte LDS,
// conflict-free (the 8 lanes of a phase read two whole rows).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
#include "core/check.h"

namespace rl::cuda {
namespace {

// Not volatile: a pure function of its registers, so the compiler may interleave it with the (volatile) loads.
__device__ __forceinline__ void mma_bf16_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One tile configuration: BW weight rows × BX x rows per block, WW × WX warps, SPS 32-k steps per pipeline stage,
// ST stages, MINB blocks per SM for the register budget. Every configuration computes the canonical order.
template <int kBW, int kBX, int kWW, int kWX, int kSPS, int kST, int kMINB>
struct InvTile {
  static constexpr int BW = kBW, BX = kBX, WW = kWW, WX = kWX, SPS = kSPS, ST = kST, MINB = kMINB;
  static constexpr int kThreads = WW * WX * 32;
  static constexpr int kMT = BW / WW / 16;                       // m16 tiles (weight rows) per warp
  static constexpr int kNT = BX / WX / 8;                        // n8 tiles (x rows) per warp
  static constexpr uint32_t kRowBytes = 64;                      // one 32-k step of one row
  static constexpr uint32_t kStepBytes = (BW + BX) * kRowBytes;  // one step of every row of the tile
  static constexpr uint32_t kStageBytes = SPS * kStepBytes;
  static constexpr int kSmem = ST * kStageBytes;
  static_assert(kMT >= 1 && kNT >= 1 && BW % (WW * 16) == 0 && BX % (WX * 8) == 0, "tile");
};

constexpr int kSwizzleN = 8;

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::MINB)
    gemm_invariant_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const void* bias,
                          bool bias_f32, void* y, bool y_f32, int64_t m, int64_t n, int64_t k) {
  constexpr int kMT = T::kMT, kNT = T::kNT, kThreads = T::kThreads;
  constexpr int BW = T::BW, BX = T::BX, WW = T::WW, SPS = T::SPS, ST = T::ST;
  constexpr uint32_t kRowBytes = T::kRowBytes;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, r = lane / 4, q = lane % 4;
  // Block b → (n tile, m tile) in groups of kSwizzleN n tiles walked down m: the blocks running at once share a few
  // weight tiles (the whole weight matrix does not fit in L2) and reuse x tiles across the group.
  const int num_m_tiles = static_cast<int>((m + BX - 1) / BX);
  const int group_size = kSwizzleN * num_m_tiles, group = static_cast<int>(blockIdx.x) / group_size;
  const int in_group = static_cast<int>(blockIdx.x) % group_size;
  const int num_n_tiles = static_cast<int>((n + BW - 1) / BW);
  const int group_n = min(kSwizzleN, num_n_tiles - group * kSwizzleN);
  const int64_t n0 = static_cast<int64_t>(group * kSwizzleN + in_group % group_n) * BW;
  const int64_t m0 = static_cast<int64_t>(in_group / group_n) * BX;
  const int wrow = (warp % WW) * kMT * 16, xrow = (warp / WW) * kNT * 8;
  const int num_steps = static_cast<int>((k + 31) / 32);
  const int num_stages = (num_steps + SPS - 1) / SPS;

  // Stage layout: step-major ([step][row][64 B]) so each step's rows are dense 64-byte rows (conflict-free LDS);
  // consecutive threads copy consecutive 16-byte chunks of one row (SPS × 64 contiguous bytes per row).
  auto load_stage = [&](int g, int stage) {
    const uint32_t base = s0 + stage * T::kStageBytes;
#pragma unroll
    for (int i = tid; i < (BW + BX) * SPS * 4; i += kThreads) {
      const int row = i / (SPS * 4), sc = i % (SPS * 4), st = sc / 4, c = sc % 4;
      const int64_t kc = (static_cast<int64_t>(g) * SPS + st) * 32 + 8 * c;
      const bool is_w = row < BW;
      const int64_t gr = is_w ? n0 + row : m0 + (row - BW);
      const bool valid = gr < (is_w ? n : m) && kc < k;
      const uint16_t* src = is_w ? w + (valid ? gr * k + kc : 0) : x + (valid ? gr * k + kc : 0);
      cp_async16(base + st * T::kStepBytes + row * kRowBytes + c * 16, src, valid);
    }
  };

#pragma unroll
  for (int g = 0; g < ST - 1; ++g) {
    if (g < num_stages) load_stage(g, g);
    cp_async_commit();
  }

  float acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int g = 0; g < num_stages; ++g) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // stage g % ST is complete for everyone; stage (g - 1) % ST is free
    if (g + ST - 1 < num_stages) load_stage(g + ST - 1, (g + ST - 1) % ST);
    cp_async_commit();
#pragma unroll
    for (int st = 0; st < SPS; ++st) {
      if (g * SPS + st >= num_steps) break;  // block-uniform: the chain has exactly num_steps links
      const uint32_t base = s0 + (g % ST) * T::kStageBytes + st * T::kStepBytes;
      uint32_t a_lo[kMT][4], a_hi[kMT][4];
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        const uint4 wa = lds128(base + (wrow + i * 16 + r) * kRowBytes + q * 16);
        const uint4 wb = lds128(base + (wrow + i * 16 + r + 8) * kRowBytes + q * 16);
        a_lo[i][0] = wa.x, a_lo[i][1] = wb.x, a_lo[i][2] = wa.y, a_lo[i][3] = wb.y;
        a_hi[i][0] = wa.z, a_hi[i][1] = wb.z, a_hi[i][2] = wa.w, a_hi[i][3] = wb.w;
      }
      uint4 xv[kNT];
#pragma unroll
      for (int j = 0; j < kNT; ++j) xv[j] = lds128(base + (BW + xrow + j * 8 + r) * kRowBytes + q * 16);
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
#pragma unroll
        for (int i = 0; i < kMT; ++i) {
          mma_bf16_16816(acc[i][j], a_lo[i], xv[j].x, xv[j].y);
          mma_bf16_16816(acc[i][j], a_hi[i], xv[j].z, xv[j].w);
        }
      }
    }
  }
  cp_async_wait<0>();

  // acc[i][j][e]: weight row wrow + 16i + r + 8(e / 2), x row xrow + 8j + 2q + e % 2.
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = n0 + wrow + i * 16 + r + 8 * (e / 2);
        const int64_t row = m0 + xrow + j * 8 + 2 * q + e % 2;
        if (col >= n || row >= m) continue;
        const float v = acc[i][j][e] + (bias ? load_param(bias, bias_f32, col) : 0.0f);
        if (y_f32) {
          static_cast<float*>(y)[row * n + col] = v;
        } else {
          static_cast<uint16_t*>(y)[row * n + col] = f32_to_bf16_bits(v);
        }
      }
}

template <int BW, int BX, int WW, int WX, int SPS, int ST, int MINB>
void launch_tile(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y, bool y_f32,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  using T = InvTile<BW, BX, WW, WX, SPS, ST, MINB>;
  auto kernel = gemm_invariant_kernel<T>;
  static bool configured = false;  // the attribute is per function; setting it once is enough
  if (!configured) {
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmem));
    configured = true;
  }
  const int64_t blocks = static_cast<int64_t>(ceil_div(n, BW)) * ceil_div(m, BX);
  RL_CHECK(blocks < (int64_t(1) << 31));
  kernel<<<static_cast<unsigned int>(blocks), T::kThreads, T::kSmem, stream>>>(x, w, bias, bias_f32, y, y_f32, m, n,
                                                                               k);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_gemm_invariant(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                           DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  launch_gemm_invariant_lab(x, w, bias, bias_dt, y, y_dt, m, n, k, stream, 0);
}

void launch_gemm_invariant_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                               DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream, int config) {
  RL_CHECK(k % 8 == 0 && aligned16(x) && aligned16(w));
  const bool bf = bias_dt == DType::kF32, yf = y_dt == DType::kF32;
  if (config == 0) config = m <= 8 ? 1 : m <= 16 ? 6 : m <= 32 ? 3 : m <= kSkinnyMaxM ? 4 : 5;
  // Configurations and their reasons: kernel_config.h ("Batch-invariant mode").
  switch (config) {
    case 1:
      launch_tile<32, 8, 2, 1, 4, 5, 4>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 2:
      launch_tile<32, 16, 2, 1, 4, 4, 4>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 3:
      launch_tile<64, 32, 4, 1, 4, 4, 2>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 4:
      launch_tile<64, 64, 4, 2, 2, 4, 3>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 6:
      launch_tile<64, 16, 4, 1, 4, 4, 2>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 7:
      launch_tile<16, 16, 1, 1, 4, 4, 8>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 8:
      launch_tile<256, 128, 4, 2, 2, 3, 1>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    case 9:
      launch_tile<128, 128, 2, 2, 2, 3, 2>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
    default:
      launch_tile<256, 128, 4, 2, 1, 4, 1>(x, w, bias, bf, y, yf, m, n, k, stream);
      break;
  }
}

}  // namespace rl::cuda
