// Batch-invariant GEMM for linear at M > kSkinnyMaxM (issue 13): y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias) whose
// every output element is reduced in exactly the order of the skinny GEMV family (gemv.cu), so that a row's
// result is bitwise the same whatever the number of rows it is computed with.
//
// The canonical order (gemv_mma_kernel with kInvariantSplitK warps): K is cut into 32-wide steps; step s belongs
// to class s % kInvariantSplitK; each class is one chain of m16n8k16 MMAs (the 16-byte k-permuted fragments
// described in gemv.cu: low half, then high half of each step) in increasing s, started from +0; the class
// partials are added in class order onto +0; then the bias; then one rounding to the output dtype.
// Here a block computes a BW × BX tile (weight rows × x rows) and walks the steps class by class (not in k
// order), folding its chain accumulator into the running total at each class boundary: two accumulator sets
// instead of kInvariantSplitK, and the same sums.
// Tiles come in through a kStages-deep cp.async pipeline into dense 64-byte shared-memory rows (one 32-k step
// each); fragments are read with 16-byte LDS, conflict-free (8 lanes of a phase read two whole rows).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_config.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void mma_bf16_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int kBW = kInvGemmBlockW, kBX = kInvGemmBlockX, kWarpsW = kInvGemmWarpsW, kWarpsX = kInvGemmWarpsX;
constexpr int kThreads = kWarpsW * kWarpsX * 32;
constexpr int kMT = kBW / kWarpsW / 16;  // m16 tiles (weight rows) per warp
constexpr int kNT = kBX / kWarpsX / 8;   // n8 tiles (x rows) per warp
constexpr int kStages = kInvGemmStages;
constexpr uint32_t kRowBytes = 64;  // one 32-k step of one row
constexpr uint32_t kStageBytes = (kBW + kBX) * kRowBytes;

__global__ void __launch_bounds__(kThreads, 1)
    gemm_invariant_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const void* bias,
                          bool bias_f32, void* y, bool y_f32, int64_t m, int64_t n, int64_t k) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, r = lane / 4, q = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBW, m0 = static_cast<int64_t>(blockIdx.y) * kBX;
  const int wrow = (warp % kWarpsW) * kMT * 16, xrow = (warp / kWarpsW) * kNT * 8;

  const int num_steps = static_cast<int>((k + 31) / 32);
  // Steps of class j: j, j + S, j + 2S, ...; the walk visits class 0's, then class 1's, ... cls_begin(j) is the
  // walk index of class j's first step (a function, not an array: a run-time index would put it in local memory).
  auto cls_begin = [&](int j) {
    int b = 0;
#pragma unroll
    for (int c = 0; c < kInvariantSplitK; ++c) b += c < j ? (num_steps - c + kInvariantSplitK - 1) / kInvariantSplitK : 0;
    return b;
  };
  auto step_of = [&](int t) {
    int j = 0, base = 0;
#pragma unroll
    for (int c = 1; c < kInvariantSplitK; ++c) {
      const int b = cls_begin(c);
      if (t >= b) {
        j = c;
        base = b;
      }
    }
    return j + kInvariantSplitK * (t - base);
  };

  // Each thread copies 16-byte chunks (row = i / 4, chunk = i % 4) of the W rows, then of the X rows.
  auto load_stage = [&](int t, int stage) {
    const int64_t kk = static_cast<int64_t>(step_of(t)) * 32;
    const uint32_t base = s0 + stage * kStageBytes;
#pragma unroll
    for (int i = tid; i < (kBW + kBX) * 4; i += kThreads) {
      const int row = i / 4, c = i % 4;
      const int64_t kc = kk + 8 * c;
      const bool is_w = row < kBW;
      const int64_t g = is_w ? n0 + row : m0 + (row - kBW);
      const bool valid = g < (is_w ? n : m) && kc < k;
      const uint16_t* src = is_w ? w + (valid ? g * k + kc : 0) : x + (valid ? g * k + kc : 0);
      cp_async16(base + row * kRowBytes + c * 16, src, valid);
    }
  };

  const int total_steps = num_steps;
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < total_steps) load_stage(t, t);
    cp_async_commit();
  }

  float acc[kMT][kNT][4], tot[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = tot[i][j][e] = 0.0f;
  auto fold = [&]() {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          tot[i][j][e] += acc[i][j][e];
          acc[i][j][e] = 0.0f;
        }
  };

  int next_cls = 1;  // the class whose first step triggers the next fold
  int next_fold = cls_begin(1);
  for (int t = 0; t < total_steps; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage t % kStages is complete for everyone; stage (t - 1) % kStages is free
    if (t + kStages - 1 < total_steps) load_stage(t + kStages - 1, (t + kStages - 1) % kStages);
    cp_async_commit();
    while (next_cls < kInvariantSplitK && t == next_fold) {
      fold();
      ++next_cls;
      next_fold = cls_begin(next_cls);
    }
    const uint32_t base = s0 + (t % kStages) * kStageBytes;
    uint4 wa[kMT], wb[kMT], xv[kNT];
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      wa[i] = lds128(base + (wrow + i * 16 + r) * kRowBytes + q * 16);
      wb[i] = lds128(base + (wrow + i * 16 + r + 8) * kRowBytes + q * 16);
    }
#pragma unroll
    for (int j = 0; j < kNT; ++j) xv[j] = lds128(base + (kBW + xrow + j * 8 + r) * kRowBytes + q * 16);
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      const uint32_t a_lo[4] = {wa[i].x, wb[i].x, wa[i].y, wb[i].y};
      const uint32_t a_hi[4] = {wa[i].z, wb[i].z, wa[i].w, wb[i].w};
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        mma_bf16_16816(acc[i][j], a_lo, xv[j].x, xv[j].y);
        mma_bf16_16816(acc[i][j], a_hi, xv[j].z, xv[j].w);
      }
    }
  }
  cp_async_wait<0>();
  // Remaining folds: the class in progress and any empty classes after it (adding +0 like the GEMV's idle warps).
  for (; next_cls <= kInvariantSplitK; ++next_cls) fold();

  // tot[i][j][e]: weight row wrow + 16i + r + 8(e / 2), x row xrow + 8j + 2q + e % 2.
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = n0 + wrow + i * 16 + r + 8 * (e / 2);
        const int64_t row = m0 + xrow + j * 8 + 2 * q + e % 2;
        if (col >= n || row >= m) continue;
        const float v = tot[i][j][e] + (bias ? load_param(bias, bias_f32, col) : 0.0f);
        if (y_f32) {
          static_cast<float*>(y)[row * n + col] = v;
        } else {
          static_cast<uint16_t*>(y)[row * n + col] = f32_to_bf16_bits(v);
        }
      }
}

}  // namespace

void launch_gemm_invariant(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                           DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  RL_CHECK(k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  constexpr int smem = kStages * kStageBytes;
  static bool configured = false;  // the attribute is per function; setting it once is enough
  if (!configured) {
    RL_CUDA_CHECK(cudaFuncSetAttribute(gemm_invariant_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  const dim3 grid(ceil_div(n, kBW), ceil_div(m, kBX));
  RL_CHECK(grid.y <= 65535u);
  gemm_invariant_kernel<<<grid, kThreads, smem, stream>>>(x, w, bias, bias_dt == DType::kF32, y, y_dt == DType::kF32,
                                                          m, n, k);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
