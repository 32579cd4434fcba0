// Small-M linear (decode): y[M, N] = x[M, K] · w[N, K]ᵀ, bandwidth-bound: every weight byte is streamed once
// with 16-byte loads and multiplied on tensor cores (kernel lab v2; v1 was a CUDA-core GEMV that became
// FMA-bound at M = 16: 0.75 TB/s, 3.36 TB/s at M = 1), f32 accumulation.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/gemv_stream.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
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

// yᵀ[N, M] = W[N, K] · xᵀ[K, M] on tensor cores (m16n8k16): a block owns 16 weight rows, its warps split K.
// Per 32-k step, lane (r = lane / 4, q = lane % 4) loads 16 B of weight rows r and r + 8 and 16 B of x row r,
// all at k0 + 8q. The 8 values are used as the fragment k-slots {2q, 2q+1, 2q+8, 2q+9} of two MMAs: a
// permutation of k that A and B share, so the dot products are unchanged while every load stays 16 B wide.
// kNT n-tiles of 8 cover M ≤ 8·kNT; x rows ≥ M load as zeros. Serves GPUs before sm_90 (sm_90 runs v3,
// gemv_stream.cu).
template <int kNT, int kWarps, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_mma_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const void* bias, bool bias_f32,
                    void* y, bool y_f32, int m, int64_t n, int64_t k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r = lane / 4, q = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16;
  const uint16_t* w0 = w + min(n0 + r, n - 1) * k + 8 * q;
  const uint16_t* w1 = w + min(n0 + r + 8, n - 1) * k + 8 * q;
  const uint16_t* xr[kNT];
  bool x_valid[kNT];
#pragma unroll
  for (int t = 0; t < kNT; ++t) {
    x_valid[t] = t * 8 + r < m;
    xr[t] = x + (x_valid[t] ? (t * 8 + r) * k : 0) + 8 * q;
  }
  float c[kNT][4] = {};
  const int64_t num_steps = (k + 31) / 32;
  for (int64_t s0 = warp; s0 < num_steps; s0 += kWarps * kUnroll) {
    uint4 wa[kUnroll], wb[kUnroll], xv[kUnroll][kNT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t kk = (s0 + u * kWarps) * 32;
      const bool in = s0 + u * kWarps < num_steps && kk + 8 * q < k;
      wa[u] = in ? load_stream(w0 + kk) : make_uint4(0, 0, 0, 0);
      wb[u] = in ? load_stream(w1 + kk) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        xv[u][t] = in && x_valid[t] ? __ldg(reinterpret_cast<const uint4*>(xr[t] + kk)) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t a_lo[4] = {wa[u].x, wb[u].x, wa[u].y, wb[u].y};
      const uint32_t a_hi[4] = {wa[u].z, wb[u].z, wa[u].w, wb[u].w};
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        mma_bf16(c[t], a_lo, xv[u][t].x, xv[u][t].y);
        mma_bf16(c[t], a_hi, xv[u][t].z, xv[u][t].w);
      }
    }
  }
  // Sum the warps' partial tiles; warp 0 writes. c[t][e]: weight row r + 8 (e / 2), x row t·8 + 2q + e % 2.
  __shared__ float partial[kWarps][kNT][4][32];
#pragma unroll
  for (int t = 0; t < kNT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][t][e][lane] = c[t][e];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int t = 0; t < kNT; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) v += partial[wi][t][e][lane];
      const int64_t col = n0 + r + 8 * (e / 2);
      const int row = t * 8 + 2 * q + e % 2;
      if (col < n && row < m) store_out(y, y_f32, row * n + col, v + (bias ? load_param(bias, bias_f32, col) : 0.0f));
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

template <int kNT, int kWarps, int kUnroll>
void launch_mma(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y, bool y_f32, int m,
                int64_t n, int64_t k, cudaStream_t stream) {
  gemv_mma_kernel<kNT, kWarps, kUnroll><<<ceil_div(n, 16), kWarps * 32, 0, stream>>>(x, w, bias, bias_f32, y, y_f32,
                                                                                      m, n, k);
}

template <int kNT>
void launch_mma_wide(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y, bool y_f32, int m,
                     int64_t n, int64_t k, cudaStream_t stream) {
  launch_mma<kNT, kGemvWarps, kGemvUnrollWide>(x, w, bias, bias_f32, y, y_f32, m, n, k, stream);
}

template <int kNT>
void launch_mma_variant(int variant, const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, void* y,
                        bool y_f32, int m, int64_t n, int64_t k, cudaStream_t stream) {
  switch (variant) {
    case 2: launch_mma<kNT, 4, 8>(x, w, bias, bias_f32, y, y_f32, m, n, k, stream); break;
    case 3: launch_mma<kNT, 8, 8>(x, w, bias, bias_f32, y, y_f32, m, n, k, stream); break;
    default: launch_mma<kNT, kGemvWarps, kGemvUnroll>(x, w, bias, bias_f32, y, y_f32, m, n, k, stream); break;
  }
}

// The streaming GEMV's parameters for y = x · wᵀ (+ bias), as launch_gemv takes them.
GemvStreamParams stream_params(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                               DType y_dt, int64_t m, int64_t n, int64_t k) {
  GemvStreamParams p;
  p.x = x;
  p.w = w;
  p.bias = bias;
  p.bias_f32 = bias_dt == DType::kF32;
  p.y = y;
  p.y_f32 = y_dt == DType::kF32;
  p.m = static_cast<int>(m);
  p.n = n;
  p.k = k;
  return p;
}

}  // namespace

bool gemv_aligned(const uint16_t* x, const uint16_t* w, int64_t k) {
  return k % 8 == 0 && aligned16(x) && aligned16(w);
}

void launch_gemv(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  launch_gemv_lab(x, w, bias, bias_dt, y, y_dt, m, n, k, stream, 0);
}

void launch_gemv_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                     int64_t m, int64_t n, int64_t k, cudaStream_t stream, int variant) {
  const bool bias_f32 = bias_dt == DType::kF32, y_f32 = y_dt == DType::kF32;
  const int mi = static_cast<int>(m);
  const bool aligned = gemv_aligned(x, w, k);
  RL_CHECK(m >= 1 && (m <= kSkinnyMaxM || !aligned) && m <= INT32_MAX);
  if (aligned && (variant == 0 || variant >= 10) && gemv_stream_supported(m)) {
    launch_gemv_stream_lab(stream_params(x, w, bias, bias_dt, y, y_dt, m, n, k), stream,
                           variant >= 10 ? variant - 10 : 0);
    return;
  }
  if (!aligned) {
    gemv_scalar_kernel<<<ceil_div(n, 8), 256, 0, stream>>>(x, w, bias, bias_f32, y, y_f32, mi, n, k);
  } else if (m <= 8) {
    launch_mma_variant<1>(variant, x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else if (m <= 16) {
    launch_mma_variant<2>(variant, x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else if (m <= 32) {
    launch_mma_wide<4>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  } else {
    launch_mma_wide<8>(x, w, bias, bias_f32, y, y_f32, mi, n, k, stream);
  }
  RL_CUDA_CHECK_LAUNCH();
}

bool launch_gemv_widened(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                         cudaStream_t stream) {
  if (!gemv_aligned(x, w, k) || m > kGemvMaxM || !gemv_stream_supported(m)) return false;
  // launch_gemv's streaming path, with the rounding moved into the store.
  GemvStreamParams p = stream_params(x, w, nullptr, DType::kBF16, y, DType::kF32, m, n, k);
  p.y_rounded = true;
  launch_gemv_stream(p, stream);
  return true;
}

bool launch_gemv_silu_mul(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                          int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  if (!gemv_aligned(x, w, k) || m > kGemvMaxM || !gemv_stream_supported(m)) return false;
  GemvStreamParams p = stream_params(x, w, bias, bias_dt, y, y_dt, m, n, k);
  p.gated = true;
  launch_gemv_stream(p, stream);
  return true;
}

void launch_gemv_invariant(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                           int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  if (gemv_aligned(x, w, k)) {
    launch_gemm_invariant(x, w, bias, bias_dt, y, y_dt, m, n, k, stream);
    return;
  }
  // The scalar kernel's order does not depend on M either (any M).
  gemv_scalar_kernel<<<ceil_div(n, 8), 256, 0, stream>>>(x, w, bias, bias_dt == DType::kF32, y, y_dt == DType::kF32,
                                                       static_cast<int>(m), n, k);
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
