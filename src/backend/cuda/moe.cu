// The MoE expert computation on the device, without a per-expert loop of launches:
//   1. plan (one block): count rows per expert, offsets, M-tile starts, each (token, slot)'s permuted row;
//   2. gather x rows into expert order;
//   3. grouped GEMM gate_up: every block takes one (row tile, column tile) of one expert, found from the tile
//      starts — one launch covers all active experts, an expert with no tokens costs no tile;
//   4. activation; 5. grouped GEMM down; 6. combine each token's k rows with its routing weights in slot order.
// The GEMM is a WMMA (bf16 tensor cores, f32 accumulate) 64x64x32 tile kernel with bias in the epilogue. A row's
// result never depends on the other rows (fixed K order), so batch composition does not change a token's output.
#include <mma.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/layer_kernels.h"

namespace rl::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32, kPad = 8;

struct Plan {
  int32_t* offsets;     // [E + 1] first permuted row of each expert
  int32_t* tile_start;  // [E + 1] first M tile of each expert
  int32_t* counts;      // [E]
  int32_t* pos;         // [R] permuted row of (token, slot) r
  int32_t* src;         // [R] (token, slot) of permuted row
};

__global__ void plan_kernel(const int32_t* ids, int rows, int num_experts, Plan p) {
  extern __shared__ int32_t cnt[];  // [E]
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) atomicAdd(&cnt[ids[r]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int off = 0, tiles = 0;
    for (int e = 0; e < num_experts; ++e) {
      p.offsets[e] = off;
      p.tile_start[e] = tiles;
      off += cnt[e];
      tiles += (cnt[e] + kBM - 1) / kBM;
      cnt[e] = p.offsets[e];  // becomes the next free row of e
    }
    p.offsets[num_experts] = off;
    p.tile_start[num_experts] = tiles;
  }
  __syncthreads();
  // Rows in (token, slot) order within each expert: one thread walks them (deterministic layout).
  if (threadIdx.x == 0) {
    for (int r = 0; r < rows; ++r) {
      const int at = cnt[ids[r]]++;
      p.pos[r] = at;
      p.src[at] = r;
    }
  }
}

__global__ void gather_kernel(const uint16_t* x, const int32_t* src, int k, int64_t hidden, uint16_t* xp) {
  const int64_t row = blockIdx.x;
  const int64_t tok = src[row] / k;
  const uint4* s = reinterpret_cast<const uint4*>(x + tok * hidden);
  uint4* d = reinterpret_cast<uint4*>(xp + row * hidden);
  for (int64_t i = threadIdx.x; i < hidden / 8; i += blockDim.x) d[i] = s[i];
}

// Y[rows of e, N] = X[rows of e, K] · W[e]ᵀ (+ bias[e]). W: [E, N, K]. K % 8 == 0.
__global__ void __launch_bounds__(128)
    grouped_gemm_kernel(const uint16_t* x, const uint16_t* w, const void* bias, bool bias_f32, uint16_t* y,
                        const int32_t* offsets, const int32_t* tile_start, int num_experts, int64_t n, int64_t k) {
  using namespace nvcuda;
  const int tile = blockIdx.y;
  if (tile >= tile_start[num_experts]) return;
  int lo = 0, hi = num_experts - 1;  // expert whose tiles contain `tile`
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int e = lo;
  const int64_t row0 = offsets[e] + static_cast<int64_t>(tile - tile_start[e]) * kBM;
  const int64_t row_end = offsets[e + 1];
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const uint16_t* we = w + static_cast<int64_t>(e) * n * k;

  __shared__ __align__(32) uint16_t as[kBM][kBK + kPad];
  __shared__ __align__(32) uint16_t bs[kBN][kBK + kPad];
  __shared__ __align__(32) float cs[kBM][kBN + 4];
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int64_t k0 = 0; k0 < k; k0 += kBK) {
    // 64 rows x 32 cols = 256 vectors of 8 per operand: 2 per thread.
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int idx = threadIdx.x + v * 128, r = idx / 4, c = (idx % 4) * 8;
      const int64_t gr = row0 + r, gc = k0 + c;
      uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
      if (gr < row_end && gc < k) a = *reinterpret_cast<const uint4*>(x + gr * k + gc);
      if (col0 + r < n && gc < k) b = load_stream(we + (col0 + r) * k + gc);
      *reinterpret_cast<uint4*>(&as[r][c]) = a;
      *reinterpret_cast<uint4*>(&bs[r][c]) = b;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(fa[i], reinterpret_cast<const __nv_bfloat16*>(&as[wm * 32 + i * 16][kk]), kBK + kPad);
        wmma::load_matrix_sync(fb[i], reinterpret_cast<const __nv_bfloat16*>(&bs[wn * 32 + i * 16][kk]), kBK + kPad);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], kBN + 4, wmma::mem_row_major);
  __syncthreads();
  for (int idx = threadIdx.x; idx < kBM * kBN; idx += 128) {
    const int r = idx / kBN, c = idx % kBN;
    const int64_t gr = row0 + r, gc = col0 + c;
    if (gr >= row_end || gc >= n) continue;
    float v = cs[r][c];
    if (bias) v += load_param(bias, bias_f32, static_cast<int64_t>(e) * n + gc);
    y[gr * n + gc] = f32_to_bf16_bits(v);
  }
}

__global__ void combine_kernel(const uint16_t* yp, const int32_t* pos, const float* weights, int k, int64_t hidden,
                               uint16_t* out) {
  const int64_t t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < k; ++j) acc += weights[t * k + j] * bf16_bits_to_f32(yp[pos[t * k + j] * hidden + i]);
    out[t * hidden + i] = f32_to_bf16_bits(acc);
  }
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void launch_moe(const MoeArgs& a, cudaStream_t stream) {
  const int64_t t = a.num_tokens, k = a.p.top_k, h = a.p.hidden, inter = a.p.intermediate;
  const int64_t e = a.p.num_experts, rows = t * k, g = (a.p.act.gated() ? 2 : 1) * inter;
  if (t == 0) return;
  RL_CHECK_MSG(h % 8 == 0 && inter % 8 == 0, "MoE on CUDA needs hidden and intermediate sizes divisible by 8");
  // Scratch layout within moe_scratch_bytes: ints, then permuted x [R, H], gate_up out [R, G], act [R, I],
  // expert out [R, H].
  char* s = static_cast<char*>(a.scratch);
  Plan p;
  p.offsets = reinterpret_cast<int32_t*>(s);
  p.tile_start = p.offsets + (e + 1);
  p.counts = p.tile_start + (e + 1);
  p.pos = p.counts + e;
  p.src = p.pos + rows;
  s += align256(static_cast<size_t>(4 * (3 * e + 2 + 2 * rows)));
  uint16_t* xp = reinterpret_cast<uint16_t*>(s);
  uint16_t* h1 = xp + rows * h;
  uint16_t* act = h1 + rows * g;
  uint16_t* yp = act + rows * inter;

  plan_kernel<<<1, 1024, static_cast<size_t>(e) * 4, stream>>>(a.ids, static_cast<int>(rows), static_cast<int>(e), p);
  RL_CUDA_CHECK_LAUNCH();
  gather_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(a.x, p.src, static_cast<int>(k), h, xp);
  RL_CUDA_CHECK_LAUNCH();
  // Upper bound of M tiles over all experts: ceil(R / BM) + E (each expert wastes at most one partial tile).
  const unsigned max_tiles = ceil_div(rows, kBM) + static_cast<unsigned>(std::min<int64_t>(e, rows));
  const bool bf32 = a.bias_dt == DType::kF32;
  grouped_gemm_kernel<<<dim3(ceil_div(g, kBN), max_tiles), 128, 0, stream>>>(
      xp, a.gate_up, a.gate_up_bias, bf32, h1, p.offsets, p.tile_start, static_cast<int>(e), g, h);
  RL_CUDA_CHECK_LAUNCH();
  launch_activation(h1, act, rows, inter, a.p.act, stream);
  grouped_gemm_kernel<<<dim3(ceil_div(h, kBN), max_tiles), 128, 0, stream>>>(
      act, a.down, a.down_bias, bf32, yp, p.offsets, p.tile_start, static_cast<int>(e), h, inter);
  RL_CUDA_CHECK_LAUNCH();
  combine_kernel<<<static_cast<unsigned>(t), 256, 0, stream>>>(yp, p.pos, a.weights, static_cast<int>(k), h, a.out);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
