// Small-M linear (decode): y[M, N] = x[M, K] · w[N, K]ᵀ, bandwidth-bound. Each warp owns kGemvRowsPerWarp weight
// rows and streams them once with 16-byte loads (two steps unrolled: 2 × rows loads in flight per lane), reusing
// every x vector (L1-resident, all warps read the same x) for all its rows; f32 accumulation, warp reductions.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_config.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

__device__ __forceinline__ void store_out(void* y, bool y_f32, int64_t i, float v) {
  if (y_f32) {
    static_cast<float*>(y)[i] = v;
  } else {
    static_cast<uint16_t*>(y)[i] = f32_to_bf16_bits(v);
  }
}

template <int kM>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const void* bias, bool bias_f32,
                void* y, bool y_f32, int m, int64_t n, int64_t k) {
  constexpr int kR = kGemvRowsPerWarp;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32) * kR;
  if (n0 >= n) return;
  const int64_t kc = k / 8;  // 16-byte chunks per row
  const uint4* wr[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) wr[r] = reinterpret_cast<const uint4*>(w + min(n0 + r, n - 1) * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc[kM][kR];
#pragma unroll
  for (int i = 0; i < kM; ++i)
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[i][r] = 0.0f;

  for (int64_t c = lane; c < kc; c += 64) {
    const bool has2 = c + 32 < kc;
    uint4 wv[2][kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      wv[0][r] = load_stream(wr[r] + c);
      wv[1][r] = has2 ? load_stream(wr[r] + c + 32) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (u == 1 && !has2) break;
      float wf[kR][8];
#pragma unroll
      for (int r = 0; r < kR; ++r) unpack8(wv[u][r], wf[r]);
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        if (i < m) {
          float xf[8];
          unpack8(__ldg(xr + i * kc + c + 32 * u), xf);
#pragma unroll
          for (int r = 0; r < kR; ++r)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[i][r] = fmaf(xf[e], wf[r][e], acc[i][r]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kM; ++i)
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[i][r] = warp_sum(acc[i][r]);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    if (n0 + r >= n) break;
    const float b = bias ? load_param(bias, bias_f32, n0 + r) : 0.0f;
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      if (i < m) store_out(y, y_f32, i * n + n0 + r, acc[i][r] + b);
    }
  }
}

// Any K and alignment: one warp per output column, scalar loads. Only for odd shapes.
__global__ void gemv_scalar_kernel(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y,
                                   bool y_f32, int m, int64_t n, int64_t k) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (col >= n) return;
  const int lane = threadIdx.x & 31;
  for (int i = 0; i < m; ++i) {
    float acc = 0.0f;
    for (int64_t j = lane; j < k; j += 32) acc += bf16_bits_to_f32(x[i * k + j]) * bf16_bits_to_f32(w[col * k + j]);
    acc = warp_sum(acc);
    if (lane == 0) store_out(y, y_f32, i * n + col, acc + (bias ? load_param(bias, bias_f32, col) : 0.0f));
  }
}

__global__ void add_bias_kernel(void* y, bool y_f32, const void* bias, bool bias_f32, int64_t m, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < m * n; e += stride) {
    const float b = load_param(bias, bias_f32, e % n);
    if (y_f32) {
      static_cast<float*>(y)[e] += b;
    } else {
      uint16_t* p = static_cast<uint16_t*>(y) + e;
      *p = f32_to_bf16_bits(bf16_bits_to_f32(*p) + b);
    }
  }
}

template <int kM>
void launch_gemv_m(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y, bool y_f32,
                   int m, int64_t n, int64_t k, cudaStream_t stream) {
  const unsigned int blocks = ceil_div(n, int64_t(kGemvWarps) * kGemvRowsPerWarp);
  gemv_kernel<kM><<<blocks, kGemvWarps * 32, 0, stream>>>(x, w, bias, bias_f32, y, y_f32, m, n, k);
}

}  // namespace

void launch_gemv(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  RL_CHECK(m >= 1 && m <= kGemvMaxM);
  const bool bias_f32 = bias_dt == DType::kF32, y_f32 = y_dt == DType::kF32;
  const int mi = static_cast<int>(m);
  const bool aligned = k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (!aligned) {
    gemv_scalar_kernel<<<ceil_div(n, 8), 256, 0, stream>>>(x, w, bias, bias_f32, y, y_f32, mi, n, k);
  } else if (m == 1) {
    launch_gemv_m<1>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else if (m == 2) {
    launch_gemv_m<2>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else if (m <= 4) {
    launch_gemv_m<4>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else if (m <= 8) {
    launch_gemv_m<8>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else {
    launch_gemv_m<16>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  }
  RL_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(void* y, DType y_dt, const void* bias, DType bias_dt, int64_t m, int64_t n,
                     cudaStream_t stream) {
  if (m * n == 0) return;
  const unsigned int blocks =
      static_cast<unsigned int>(std::min<int64_t>(ceil_div(m * n, kElementwiseThreads), kElementwiseMaxBlocks));
  add_bias_kernel<<<blocks, kElementwiseThreads, 0, stream>>>(y, y_dt == DType::kF32, bias, bias_dt == DType::kF32,
                                                             m, n);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
