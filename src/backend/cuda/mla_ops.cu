// The MLA ops around the attention kernel: the latent cache write with the q RoPE (mla_prepare) and the per-head
// projections (head_linear: W_UK into the query, W_UV out of the attended latent).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/mla_kernels.h"
#include "backend/cuda/mma_sm80.cuh"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kPrepareThreads = 256;
constexpr int kMaxRopeHalf = 128;

// One block per token: RoPE angles once into shared memory, the rotated q rope part of every head (times
// q_rope_scale) into q_lat, then the cache row: RMSNorm(c) · kv_norm and RoPE(k_rope), rounded once to bf16.
// Angle = float(position) · inv_freq in f32 and precise sincosf, as the CPU backend.
__global__ void __launch_bounds__(kPrepareThreads) mla_prepare_kernel(MlaPrepareArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ float cs[kMaxRopeHalf], sn[kMaxRopeHalf];
  const int64_t t = blockIdx.x;
  const int half = static_cast<int>(a.rope_dim / 2);
  const int r = static_cast<int>(a.kv_lora_rank), lat = r + static_cast<int>(a.rope_dim);
  const int q_head = static_cast<int>(a.nope_dim + a.rope_dim);
  const float pos = static_cast<float>(a.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) sincosf(pos * a.inv_freq[i], &sn[i], &cs[i]);
  __syncthreads();
  // Pair i of a rope part: interleaved (x[2i], x[2i+1]) or split halves (x[i], x[i + half]); output rotate-half.
  auto rope_pair = [&](const uint16_t* src, int i, float* x0, float* x1) {
    *x0 = bf16_bits_to_f32(a.interleaved ? src[2 * i] : src[i]);
    *x1 = bf16_bits_to_f32(a.interleaved ? src[2 * i + 1] : src[i + half]);
  };
  for (int64_t idx = threadIdx.x; idx < a.num_heads * half; idx += blockDim.x) {
    const int64_t h = idx / half;
    const int i = static_cast<int>(idx % half);
    float x0, x1;
    rope_pair(a.q + (t * a.num_heads + h) * q_head + a.nope_dim, i, &x0, &x1);
    uint16_t* dst = a.q_lat + (t * a.num_heads + h) * lat + r;
    dst[i] = f32_to_bf16_bits((x0 * cs[i] - x1 * sn[i]) * a.q_rope_scale);
    dst[i + half] = f32_to_bf16_bits((x1 * cs[i] + x0 * sn[i]) * a.q_rope_scale);
  }
  const int32_t slot = a.slots[t];
  if (slot < 0) return;  // block-uniform
  if (slot >= a.num_slots) __trap();
  const uint16_t* c = a.ckv + t * lat;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < r; i += blockDim.x) {
    const float x = bf16_bits_to_f32(c[i]);
    ss += x * x;
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(r) + a.eps);
  uint16_t* dst = a.cache + static_cast<int64_t>(slot) * lat;
  for (int i = threadIdx.x; i < r; i += blockDim.x) {
    dst[i] = f32_to_bf16_bits(load_param(a.kv_norm, a.kv_norm_f32, i) * (bf16_bits_to_f32(c[i]) * inv));
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float x0, x1;
    rope_pair(c + r, i, &x0, &x1);
    dst[r + i] = f32_to_bf16_bits(x0 * cs[i] - x1 * sn[i]);
    dst[r + i + half] = f32_to_bf16_bits(x1 * cs[i] + x0 * sn[i]);
  }
}

// head_linear: a block computes 64 tokens × 64 weight rows of one head; 4 warps, each 16 weight rows (two n8 tiles)
// for every m16 tile of tokens that holds a token. K in 64-wide tiles through a 2-stage cp.async pipeline into
// XOR-swizzled shared memory (8 chunks of 16 B per row). Each output element is one MMA chain over K in order.
constexpr int kHlBM = 64, kHlBN = 64, kHlBK = 64, kHlThreads = 128;
constexpr uint32_t kHlTile = kHlBM * kHlBK * 2;  // bytes of one operand tile (x or w)

__device__ __forceinline__ uint32_t swz64(int row, int chunk) {
  return static_cast<uint32_t>(row * kHlBK * 2 + ((chunk ^ (row & 7)) << 4));
}

struct HeadLinearParams {
  const uint16_t* x;
  const uint16_t* w;
  uint16_t* y;
  int64_t x_ld, x_stride, y_ld, y_stride, num_tokens, n, k;
};

__global__ void __launch_bounds__(kHlThreads) head_linear_kernel(HeadLinearParams p) {
  __shared__ __align__(128) unsigned char smem[2 * 2 * kHlTile];
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kHlBN, m0 = static_cast<int64_t>(blockIdx.y) * kHlBM;
  const int64_t b = blockIdx.z;
  const int64_t tiles_left = (p.num_tokens - m0 + 15) / 16;
  const int num_mt = static_cast<int>(tiles_left < 4 ? tiles_left : 4);  // m16 tiles holding tokens
  const uint16_t* w = p.w + b * p.n * p.k;
  // Stage st: x tile at s0 + st * 2 * kHlTile, w tile right after it.
  auto load = [&](int kt, int st) {
    const uint32_t sx = s0 + st * 2 * kHlTile, sw = sx + kHlTile;
#pragma unroll
    for (int j = 0; j < kHlBM * 8 / kHlThreads; ++j) {
      const int i = tid + j * kHlThreads, row = i / 8, c = i % 8;
      const int64_t kk = static_cast<int64_t>(kt) * kHlBK + c * 8;
      const bool kv = kk < p.k;
      const bool xv = kv && m0 + row < p.num_tokens, wv = kv && n0 + row < p.n;
      cp_async16(sx + swz64(row, c), p.x + (xv ? (m0 + row) * p.x_ld + b * p.x_stride + kk : 0), xv);
      cp_async16(sw + swz64(row, c), w + (wv ? (n0 + row) * p.k + kk : 0), wv);
    }
  };
  pdl_wait();
  pdl_launch_dependents();
  const int num_kt = static_cast<int>((p.k + kHlBK - 1) / kHlBK);
  load(0, 0);
  cp_async_commit();
  float acc[4][2][4] = {};
  for (int kt = 0; kt < num_kt; ++kt) {
    if (kt + 1 < num_kt) load(kt + 1, (kt + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint32_t sx = s0 + (kt & 1) * 2 * kHlTile, sw = sx + kHlTile;
#pragma unroll
    for (int kk = 0; kk < kHlBK / 16; ++kk) {
      uint32_t bf[4];
      ldmatrix_x4(bf, sw + swz64(warp * 16 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        if (mt < num_mt) {
          uint32_t af[4];
          ldmatrix_x4(af, sx + swz64(mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
          mma_bf16(acc[mt][0], af, bf[0], bf[1]);
          mma_bf16(acc[mt][1], af, bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's load overwrites this stage
  }
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t tok = m0 + mt * 16 + lane / 4 + 8 * h;
      if (mt >= num_mt || tok >= p.num_tokens) continue;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t n = n0 + warp * 16 + j * 8 + 2 * (lane & 3);
        if (n >= p.n) continue;
        *reinterpret_cast<uint32_t*>(p.y + tok * p.y_ld + b * p.y_stride + n) =
            uint32_t(f32_to_bf16_bits(acc[mt][j][2 * h])) | (uint32_t(f32_to_bf16_bits(acc[mt][j][2 * h + 1])) << 16);
      }
    }
  }
}

}  // namespace

void launch_mla_prepare(const MlaPrepareArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return;
  RL_CHECK(a.rope_dim / 2 <= kMaxRopeHalf);
  launch_pdl(mla_prepare_kernel, dim3(static_cast<unsigned int>(a.num_tokens)), dim3(kPrepareThreads), 0, stream, a);
  RL_CUDA_CHECK_LAUNCH();
}

bool head_linear_supported(const void* x, const void* w, const void* y, int64_t x_stride, int64_t y_stride, int64_t n,
                           int64_t k) {
  auto aligned = [](const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  return aligned(x, 16) && aligned(w, 16) && aligned(y, 4) && x_stride % 8 == 0 && k % 8 == 0 && y_stride % 2 == 0 &&
         n % 2 == 0;
}

void launch_head_linear(const uint16_t* x, int64_t x_stride, const uint16_t* w, uint16_t* y, int64_t y_stride,
                        int64_t num_tokens, int64_t num_heads, int64_t n, int64_t k, cudaStream_t stream) {
  if (num_tokens == 0 || num_heads == 0) return;
  HeadLinearParams p{x, w, y, num_heads * x_stride, x_stride, num_heads * y_stride, y_stride, num_tokens, n, k};
  const dim3 grid(ceil_div(n, kHlBN), ceil_div(num_tokens, kHlBM), static_cast<unsigned int>(num_heads));
  launch_pdl(head_linear_kernel, grid, dim3(kHlThreads), 0, stream, p);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
