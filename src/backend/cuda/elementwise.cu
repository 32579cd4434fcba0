// Memory-bound element-wise and per-row kernels: embedding, RMSNorm (+ fused residual add), per-head QK-norm +
// neox RoPE, KV-cache writes, SiLU·mul, row gathers, casts and the counter-based uniform fill. Each moves its
// bytes once with 16-byte accesses where the row length allows (rows of a multiple of 8 bf16: vec paths).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/rope.cuh"

namespace rl::cuda {
namespace {

__global__ void embedding_kernel(const int32_t* ids, const void* table, bool table_f32, int64_t vocab,
                                 int64_t hidden, uint16_t* out) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  if (id < 0 || id >= vocab) __trap();  // the runtime validates ids; an invalid one here is a bug
  uint16_t* o = out + r * hidden;
  if (!table_f32 && hidden % 8 == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(table) + id * hidden);
    for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x) reinterpret_cast<uint4*>(o)[c] = src[c];
    return;
  }
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    o[i] = f32_to_bf16_bits(load_param(table, table_f32, id * hidden + i));
  }
}

// 16-byte chunks of a row each thread of rms_norm_kernel's register path holds (hidden ≤ 8 · 2 · kRowThreads).
constexpr int kNormChunks = 2;

// One block per row. With residual: residual = bf16(residual + x), then the norm of that stored value.
// Rows of up to 8 · kNormChunks · blockDim elements stay in registers, and the weights are loaded before pdl_wait()
// (model constants), so at batch 1 the kernel's chain is one read of the row, the block sum and one write.
__global__ void rms_norm_kernel(uint16_t* residual, const uint16_t* x, const void* w, bool w_f32, uint16_t* out,
                                int64_t hidden, float eps) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  const uint16_t* src = residual ? residual + base : x + base;
  float ss = 0.0f;
  const bool vec = hidden % 8 == 0;
  if (vec && hidden / 8 <= kNormChunks * static_cast<int64_t>(blockDim.x)) {
    float wv[kNormChunks][8], v[kNormChunks][8];
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int64_t c = threadIdx.x + j * static_cast<int64_t>(blockDim.x);
#pragma unroll
      for (int i = 0; i < 8; ++i) wv[j][i] = c < hidden / 8 ? load_param(w, w_f32, c * 8 + i) : 0.0f;
    }
    pdl_wait();  // launched with PDL (cuda_launch.cuh)
    pdl_launch_dependents();
    // Every chunk's loads first: src is the residual row that the first chunk's store writes, so loads after that
    // store could not be moved above it (a second round trip to memory).
    uint4 raw[kNormChunks], xraw[kNormChunks];
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int64_t c = threadIdx.x + j * static_cast<int64_t>(blockDim.x);
      if (c >= hidden / 8) continue;
      raw[j] = reinterpret_cast<const uint4*>(src)[c];
      if (residual) xraw[j] = reinterpret_cast<const uint4*>(x + base)[c];
    }
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int64_t c = threadIdx.x + j * static_cast<int64_t>(blockDim.x);
      if (c >= hidden / 8) continue;
      unpack8(raw[j], v[j]);
      if (residual) {
        float a[8];
        unpack8(xraw[j], a);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[j][i] = bf16_bits_to_f32(f32_to_bf16_bits(v[j][i] + a[i]));
        reinterpret_cast<uint4*>(residual + base)[c] = pack8(v[j]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += v[j][i] * v[j][i];
    }
    const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int64_t c = threadIdx.x + j * static_cast<int64_t>(blockDim.x);
      if (c >= hidden / 8) continue;
#pragma unroll
      for (int i = 0; i < 8; ++i) v[j][i] = wv[j][i] * (v[j][i] * inv);
      reinterpret_cast<uint4*>(out + base)[c] = pack8(v[j]);
    }
    return;
  }
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  if (vec) {
    for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x) {
      float v[8];
      unpack8(reinterpret_cast<const uint4*>(src)[c], v);
      if (residual) {
        float a[8];
        unpack8(reinterpret_cast<const uint4*>(x + base)[c], a);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = bf16_bits_to_f32(f32_to_bf16_bits(v[i] + a[i]));
        reinterpret_cast<uint4*>(residual + base)[c] = pack8(v);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
    }
  } else {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      float v = bf16_bits_to_f32(src[i]);
      if (residual) {
        v = bf16_bits_to_f32(f32_to_bf16_bits(v + bf16_bits_to_f32(x[base + i])));
        residual[base + i] = f32_to_bf16_bits(v);
      }
      ss += v * v;
    }
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  // Each thread re-reads only the elements it wrote above, so no barrier is needed.
  if (vec) {
    for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x) {
      float v[8];
      unpack8(reinterpret_cast<const uint4*>(src)[c], v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = load_param(w, w_f32, c * 8 + i) * (v[i] * inv);
      reinterpret_cast<uint4*>(out + base)[c] = pack8(v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      out[base + i] = f32_to_bf16_bits(load_param(w, w_f32, i) * (bf16_bits_to_f32(src[i]) * inv));
    }
  }
}

// One warp per (token, head) over the q and k heads (and, with the KV write fused in, the v heads): norm_rope_head
// (rope.cuh). A k head's rotated values also go to the k cache, a v head is copied to the v cache: the same bits
// kv_write_kernel would copy from qkv afterwards (an FP8 cache: the same bytes kv_write_kernel<uint8_t> would write,
// each from the bf16 value in qkv). The norm weights and inverse frequencies (model constants) are loaded before
// pdl_wait().
__global__ void qk_norm_rope_kernel(QkNormRopeArgs a) {
  const int64_t num_rot = a.num_heads + a.num_kv_heads;
  const int64_t per_tok = num_rot + (a.k_cache ? a.num_kv_heads : 0);
  const int64_t task = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (task >= a.num_tokens * per_tok) return;
  const int lane = threadIdx.x & 31;
  const int64_t tok = task / per_tok, h = task % per_tok;
  const int64_t d = a.head_dim, row = (a.num_heads + 2 * a.num_kv_heads) * d;
  const int64_t kv_row = a.num_kv_heads * d;
  uint16_t* v = a.qkv + tok * row + h * d;  // k heads follow the q heads directly, v heads the k heads
  if (h >= num_rot) {
    pdl_wait();  // launched with PDL (cuda_launch.cuh)
    pdl_launch_dependents();
    const int32_t slot = a.slots[tok];
    if (slot < 0) return;
    if (slot >= a.num_slots) __trap();  // the KV manager hands out slots inside the cache
    const int64_t at = static_cast<int64_t>(slot) * kv_row + (h - num_rot) * d;
    if (a.kv_fp8) {
      uint8_t* dst = reinterpret_cast<uint8_t*>(a.v_cache) + at;
      for (int64_t i = lane; i < d; i += 32) dst[i] = f32_to_fp8_bits(bf16_bits_to_f32(v[i]));
    } else {
      uint16_t* dst = a.v_cache + at;
      for (int64_t i = lane; i < d; i += 32) dst[i] = v[i];
    }
    return;
  }
  const void* nw = h < a.num_heads ? a.q_norm : a.k_norm;
  const RopeLane c = rope_lane(nw, a.norm_dt == DType::kF32, a.inv_freq, d / 2);
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  // The k cache row of this head, when the KV write is fused in and the token has a slot.
  uint16_t* kd = nullptr;
  if (a.k_cache && h >= a.num_heads) {
    const int32_t slot = a.slots[tok];
    if (slot >= a.num_slots) __trap();
    if (slot >= 0) kd = a.k_cache + static_cast<int64_t>(slot) * kv_row + (h - a.num_heads) * d;
  }
  norm_rope_head(c, v, d, nw != nullptr, a.eps, static_cast<float>(a.positions[tok]), v, a.kv_fp8 ? nullptr : kd);
  if (a.kv_fp8 && kd) {
    // The rotated bf16 row back from qkv (other lanes wrote some of it: the warp's writes ordered first), rounded.
    __syncwarp();
    uint8_t* kd8 = reinterpret_cast<uint8_t*>(a.k_cache) + (kd - a.k_cache);
    for (int64_t i = lane; i < d; i += 32) kd8[i] = f32_to_fp8_bits(bf16_bits_to_f32(v[i]));
  }
}

// Prefill-sized launches (kQkNormRopeRowsMinTokens tokens and more, where qk_norm_rope_rows_smem takes the shape): one
// block a token. The token's q and k
// heads (and v, with the KV write) come into shared memory with 16-byte loads, its cos / sin table is computed once
// instead of once a head, and warp w runs norm_rope_head on heads w, w + warps, ... in shared memory: each lane's
// arithmetic is qk_norm_rope_kernel's, so the bits are too. The rotated heads go back to qkv, and with the KV write the
// k and v heads to the caches, with 16-byte stores (8-byte for FP8 codes, pack8_fp8 rounding as f32_to_fp8_bits).
// kThreads (256 or 128) threads a block, at least 1,024 threads an SM: 64 registers a thread (76 unbounded: 3 blocks
// of 256), no spills.
template <int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads) qk_norm_rope_rows_kernel(QkNormRopeArgs a) {
  extern __shared__ uint4 staged4[];
  const int64_t d = a.head_dim, half = d / 2, num_rot = a.num_heads + a.num_kv_heads;
  const int64_t row = (a.num_heads + 2 * a.num_kv_heads) * d, kv_row = a.num_kv_heads * d;
  const int64_t staged = a.k_cache ? row : num_rot * d;  // elements staged (a multiple of 8)
  uint16_t* s = reinterpret_cast<uint16_t*>(staged4);
  float* trig = reinterpret_cast<float*>(s + staged);
  const bool norm_f32 = a.norm_dt == DType::kF32;
  // The norm weights only: the angles come from the token's table (trig), not from a lane's frequencies.
  const RopeLane cq = rope_lane(a.q_norm, norm_f32, nullptr, half);
  const RopeLane ck = rope_lane(a.k_norm, norm_f32, nullptr, half);
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t tok = blockIdx.x;
  uint4* qkv4 = reinterpret_cast<uint4*>(a.qkv + tok * row);
  // kQkNormRopeStageLoads chunks a thread loaded before any is stored: a generic load is not moved above a shared
  // store (it might alias it), so a load-store loop waits on memory once a chunk.
  for (int64_t c0 = threadIdx.x; c0 < staged / 8; c0 += kQkNormRopeStageLoads * blockDim.x) {
    uint4 r[kQkNormRopeStageLoads];
#pragma unroll
    for (int k = 0; k < kQkNormRopeStageLoads; ++k) {
      const int64_t c = c0 + k * static_cast<int64_t>(blockDim.x);
      if (c < staged / 8) r[k] = qkv4[c];
    }
#pragma unroll
    for (int k = 0; k < kQkNormRopeStageLoads; ++k) {
      const int64_t c = c0 + k * static_cast<int64_t>(blockDim.x);
      if (c < staged / 8) staged4[c] = r[k];
    }
  }
  const float pos = static_cast<float>(a.positions[tok]);
  rope_trig_table(a.inv_freq, half, pos, trig);
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int64_t h = threadIdx.x / 32; h < num_rot; h += warps) {
    const bool is_q = h < a.num_heads;
    RopeLane c;  // element by element, so the two stay in registers (a select of the struct went to local memory)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c.w_lo[j] = is_q ? cq.w_lo[j] : ck.w_lo[j];
      c.w_hi[j] = is_q ? cq.w_hi[j] : ck.w_hi[j];
      c.freq[j] = cq.freq[j];
    }
    uint16_t* v = s + h * d;
    norm_rope_head(c, v, d, (is_q ? a.q_norm : a.k_norm) != nullptr, a.eps, pos, v, nullptr, trig);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < num_rot * d / 8; c += blockDim.x) qkv4[c] = staged4[c];
  if (!a.k_cache) return;
  const int32_t slot = a.slots[tok];
  if (slot >= a.num_slots) __trap();  // the KV manager hands out slots inside the cache
  if (slot < 0) return;
  const uint4* k4 = staged4 + a.num_heads * d / 8;
  const uint4* v4 = k4 + kv_row / 8;
  const int64_t at = static_cast<int64_t>(slot) * kv_row;
  for (int64_t c = threadIdx.x; c < kv_row / 8; c += blockDim.x) {
    if (a.kv_fp8) {
      float f[8];
      unpack8(k4[c], f);
      reinterpret_cast<uint2*>(reinterpret_cast<uint8_t*>(a.k_cache) + at)[c] = pack8_fp8(f);
      unpack8(v4[c], f);
      reinterpret_cast<uint2*>(reinterpret_cast<uint8_t*>(a.v_cache) + at)[c] = pack8_fp8(f);
    } else {
      reinterpret_cast<uint4*>(a.k_cache + at)[c] = k4[c];
      reinterpret_cast<uint4*>(a.v_cache + at)[c] = v4[c];
    }
  }
}

__global__ void add_kernel(uint16_t* residual, const uint16_t* x, int64_t n, bool vec) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    for (int64_t c = start; c < n / 8; c += stride) {
      float r[8], a[8];
      unpack8(reinterpret_cast<const uint4*>(residual)[c], r);
      unpack8(reinterpret_cast<const uint4*>(x)[c], a);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] += a[i];
      reinterpret_cast<uint4*>(residual)[c] = pack8(r);
    }
    return;
  }
  for (int64_t i = start; i < n; i += stride) {
    residual[i] = f32_to_bf16_bits(bf16_bits_to_f32(residual[i]) + bf16_bits_to_f32(x[i]));
  }
}

// The k and v parts of token blockIdx.x's qkv row into the caches at its slot. Elem: uint16_t, a bf16 cache (a copy);
// uint8_t, an FP8 (e4m3) cache (each bf16 element rounded to nearest even with saturation at ±448: f32_to_fp8_bits,
// as rl::f32_to_fp8_e4m3 on the host). 8 elements a thread where the row allows it.
template <typename Elem>
__global__ void kv_write_kernel(const uint16_t* qkv, int64_t row, int64_t k_offset, int64_t v_offset,
                                int64_t kv_row, const int32_t* slots, int64_t num_slots, Elem* k_cache,
                                Elem* v_cache) {
  constexpr bool kFp8 = sizeof(Elem) == 1;
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0) return;
  if (slot >= num_slots) __trap();  // the KV manager hands out slots inside the cache
  const uint16_t* k = qkv + t * row + k_offset;
  const uint16_t* v = qkv + t * row + v_offset;
  Elem* kd = k_cache + static_cast<int64_t>(slot) * kv_row;
  Elem* vd = v_cache + static_cast<int64_t>(slot) * kv_row;
  if (row % 8 == 0 && k_offset % 8 == 0 && v_offset % 8 == 0 && kv_row % 8 == 0) {
    for (int64_t c = threadIdx.x; c < kv_row / 8; c += blockDim.x) {
      if constexpr (kFp8) {
        float f[8];
        unpack8(reinterpret_cast<const uint4*>(k)[c], f);
        reinterpret_cast<uint2*>(kd)[c] = pack8_fp8(f);
        unpack8(reinterpret_cast<const uint4*>(v)[c], f);
        reinterpret_cast<uint2*>(vd)[c] = pack8_fp8(f);
      } else {
        reinterpret_cast<uint4*>(kd)[c] = reinterpret_cast<const uint4*>(k)[c];
        reinterpret_cast<uint4*>(vd)[c] = reinterpret_cast<const uint4*>(v)[c];
      }
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < kv_row; i += blockDim.x) {
    if constexpr (kFp8) {
      kd[i] = f32_to_fp8_bits(bf16_bits_to_f32(k[i]));
      vd[i] = f32_to_fp8_bits(bf16_bits_to_f32(v[i]));
    } else {
      kd[i] = k[i];
      vd[i] = v[i];
    }
  }
}

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// Rows of inter % 8 == 0: row blockIdx.x, its 8-element chunks kSiluMulChunks a thread across blockIdx.y, all loads
// issued before any arithmetic, and no division an element (the grid-stride form divided a 64-bit index by the row
// length for every chunk).
__global__ void silu_mul_rows_kernel(const uint16_t* gate_up, uint16_t* out, int64_t inter) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t per_row = inter / 8, r = blockIdx.x;
  const uint4* g4 = reinterpret_cast<const uint4*>(gate_up + r * 2 * inter);
  const uint4* u4 = g4 + per_row;
  uint4* o4 = reinterpret_cast<uint4*>(out + r * inter);
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kSiluMulChunks * blockDim.x + threadIdx.x;
  uint4 gv[kSiluMulChunks], uv[kSiluMulChunks];
#pragma unroll
  for (int k = 0; k < kSiluMulChunks; ++k) {
    const int64_t j = j0 + k * static_cast<int64_t>(blockDim.x);
    if (j < per_row) {
      gv[k] = g4[j];
      uv[k] = u4[j];
    }
  }
#pragma unroll
  for (int k = 0; k < kSiluMulChunks; ++k) {
    const int64_t j = j0 + k * static_cast<int64_t>(blockDim.x);
    if (j >= per_row) break;
    float g[8], u[8];
    unpack8(gv[k], g);
    unpack8(uv[k], u);
#pragma unroll
    for (int i = 0; i < 8; ++i) g[i] = silu(g[i]) * u[i];
    o4[j] = pack8(g);
  }
}

// Rows of any length (inter % 8 != 0): one element a thread, grid-stride.
__global__ void silu_mul_kernel(const uint16_t* gate_up, uint16_t* out, int64_t rows, int64_t inter) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t e = start; e < rows * inter; e += stride) {
    const int64_t r = e / inter, i = e % inter;
    const float g = bf16_bits_to_f32(gate_up[r * 2 * inter + i]);
    out[e] = f32_to_bf16_bits(silu(g) * bf16_bits_to_f32(gate_up[r * 2 * inter + inter + i]));
  }
}

__global__ void gather_rows_kernel(const char* x, int64_t num_rows_x, const int32_t* indices, int64_t row_bytes,
                                   char* out) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t i = blockIdx.x;
  const int32_t r = indices[i];
  if (r < 0 || r >= num_rows_x) __trap();
  const char* src = x + r * row_bytes;
  char* dst = out + i * row_bytes;
  if (row_bytes % 16 == 0) {
    for (int64_t c = threadIdx.x; c < row_bytes / 16; c += blockDim.x) {
      reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
    }
    return;
  }
  for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = src[b];
}

__device__ __forceinline__ float load_any(const void* p, DType dt, int64_t i) {
  if (dt == DType::kF32) return static_cast<const float*>(p)[i];
  if (dt == DType::kF16) return __half2float(__ushort_as_half(static_cast<const uint16_t*>(p)[i]));
  return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
}
__device__ __forceinline__ void store_any(void* p, DType dt, int64_t i, float v) {
  if (dt == DType::kF32) {
    static_cast<float*>(p)[i] = v;
  } else if (dt == DType::kF16) {
    static_cast<uint16_t*>(p)[i] = __half_as_ushort(__float2half_rn(v));
  } else {
    static_cast<uint16_t*>(p)[i] = f32_to_bf16_bits(v);
  }
}

__global__ void cast_kernel(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    store_any(dst, dst_dt, i, load_any(src, src_dt, i));
  }
}

// launch_copy_segments (and launch_copy_bytes, one copy): copy blockIdx.y, 16 bytes at a time where both sides allow
// it, then 4 at a time where they allow that (the copies that hold pending ids always do), else bytes; a word the
// pending ids cover is resolved on its way (resolve_pending_id). Either side may be pinned host memory, which the
// device reads and writes in place (unified addressing maps it): CudaBackend::upload_async / download_async run
// small copies through here instead of the copy engine. The copies run side by side, so their reads over the bus are
// in flight together.
__device__ __forceinline__ uint32_t resolve_word(uint32_t w, uintptr_t at, const CopySegments& c) {
  const auto lo = reinterpret_cast<uintptr_t>(c.ids);
  const int32_t v = static_cast<int32_t>(w);
  if (at < lo || at >= lo + static_cast<uintptr_t>(c.num_ids) * 4 || v >= 0) return w;
  return static_cast<uint32_t>(resolve_pending_id(v, c.sampled));
}

__global__ void copy_segments_kernel(const CopySegments c) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh): the previous kernel may read a dst or write sampled
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  char* dst = c.dst[blockIdx.y];
  const char* src = c.src[blockIdx.y];
  const int64_t n = c.bytes[blockIdx.y];
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const uintptr_t align = d | reinterpret_cast<uintptr_t>(src);
  // Units: the 16-byte chunks, then the words or bytes past them; thread t takes unit t (one load each where the
  // grid covers the copy).
  const int64_t chunks = (align & 15) == 0 ? n / 16 : 0;
  const bool words = (align & 3) == 0 && n % 4 == 0;
  const int64_t unit = words ? 4 : 1, units = chunks + (n - chunks * 16) / unit;
  for (int64_t u = first; u < units; u += stride) {
    if (u < chunks) {
      uint4 v = reinterpret_cast<const uint4*>(src)[u];
      if (c.num_ids > 0) {
        const uintptr_t at = d + static_cast<uintptr_t>(u) * 16;
        v.x = resolve_word(v.x, at, c);
        v.y = resolve_word(v.y, at + 4, c);
        v.z = resolve_word(v.z, at + 8, c);
        v.w = resolve_word(v.w, at + 12, c);
      }
      reinterpret_cast<uint4*>(dst)[u] = v;
    } else if (words) {
      const int64_t i = chunks * 4 + (u - chunks);
      const uint32_t w = reinterpret_cast<const uint32_t*>(src)[i];
      reinterpret_cast<uint32_t*>(dst)[i] = c.num_ids > 0 ? resolve_word(w, d + static_cast<uintptr_t>(i) * 4, c) : w;
    } else {
      const int64_t i = chunks * 16 + (u - chunks);
      dst[i] = src[i];
    }
  }
}

// The exact math of rl::mix64 / rl::uniform_from_counter (core/random.h), duplicated for the device.
__device__ __forceinline__ uint64_t mix64_dev(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(void* t, DType dt, int64_t n, uint64_t seed, float lo, float hi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t r = mix64_dev(seed ^ mix64_dev(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    // The CPU build contracts lo + (hi - lo) * u into one fma (GCC with FMA in -march): do the same.
    store_any(t, dt, i, fmaf(hi - lo, u, lo));
  }
}

// Shared memory of qk_norm_rope_rows_kernel for these arguments, or 0 where that form does not take them: 16-byte
// rows and pointers (8-byte FP8 cache rows), and the staged row within kQkNormRopeRowsMaxSmem.
int64_t qk_norm_rope_rows_smem(const QkNormRopeArgs& a) {
  const int64_t d = a.head_dim, row = (a.num_heads + 2 * a.num_kv_heads) * d;
  const auto aligned = [](const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  if (d % 8 != 0 || d > 256 || !aligned(a.qkv, 16)) return 0;
  if (a.k_cache && !(aligned(a.k_cache, a.kv_fp8 ? 8 : 16) && aligned(a.v_cache, a.kv_fp8 ? 8 : 16))) return 0;
  const int64_t staged = a.k_cache ? row : (a.num_heads + a.num_kv_heads) * d;
  const int64_t bytes = staged * 2 + d * static_cast<int64_t>(sizeof(float));
  return bytes <= kQkNormRopeRowsMaxSmem ? bytes : 0;
}

unsigned int grid_for(int64_t n) {
  return static_cast<unsigned int>(std::min<int64_t>((n + kElementwiseThreads - 1) / kElementwiseThreads,
                                                     kElementwiseMaxBlocks));
}

}  // namespace

void launch_embedding(const int32_t* ids, int64_t n, const void* table, DType table_dt, int64_t vocab,
                      int64_t hidden, uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(embedding_kernel, dim3(static_cast<unsigned int>(n)), dim3(kRowThreads), 0, stream, ids, table,
             table_dt == DType::kF32, vocab, hidden, out);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_rms_norm(uint16_t* residual, const uint16_t* x, const void* w, DType w_dt, uint16_t* out,
                     int64_t rows, int64_t hidden, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  launch_pdl(rms_norm_kernel, dim3(static_cast<unsigned int>(rows)), dim3(kRowThreads), 0, stream, residual, x, w,
             w_dt == DType::kF32, out, hidden, eps);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_qk_norm_rope_lab(const QkNormRopeArgs& a, QkNormRopeForm form, cudaStream_t stream) {
  const int64_t tasks = a.num_tokens * (a.num_heads + a.num_kv_heads + (a.k_cache ? a.num_kv_heads : 0));
  if (tasks == 0) return;
  const int64_t smem = qk_norm_rope_rows_smem(a);
  if (form == QkNormRopeForm::kAuto && (a.num_tokens < kQkNormRopeRowsMinTokens || smem == 0)) {
    form = QkNormRopeForm::kWarpPerHead;
  } else if (form == QkNormRopeForm::kAuto) {
    form = a.num_tokens < kQkNormRopeRowsSmallBlockMinTokens ? QkNormRopeForm::kBlock256 : QkNormRopeForm::kBlock128;
  }
  if (form != QkNormRopeForm::kWarpPerHead) {
    RL_CHECK_MSG(smem > 0, "qk_norm_rope: the block-per-token form does not take this shape or alignment");
    const dim3 grid(static_cast<unsigned int>(a.num_tokens));
    if (form == QkNormRopeForm::kBlock256) {
      launch_pdl(qk_norm_rope_rows_kernel<256>, grid, dim3(256), static_cast<size_t>(smem), stream, a);
    } else {
      launch_pdl(qk_norm_rope_rows_kernel<128>, grid, dim3(128), static_cast<size_t>(smem), stream, a);
    }
  } else {
    constexpr int kWarps = 4;
    launch_pdl(qk_norm_rope_kernel, dim3(ceil_div(tasks, kWarps)), dim3(kWarps * 32), 0, stream, a);
  }
  RL_CUDA_CHECK_LAUNCH();
}

void launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream) {
  launch_qk_norm_rope_lab(a, QkNormRopeForm::kAuto, stream);
}

void launch_add(uint16_t* residual, const uint16_t* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool vec = n % 8 == 0 && aligned16(residual) && aligned16(x);
  launch_pdl(add_kernel, dim3(grid_for(vec ? n / 8 : n)), dim3(kElementwiseThreads), 0, stream, residual, x, n, vec);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_kv_write(const uint16_t* qkv, int64_t num_tokens, int64_t row, int64_t k_offset, int64_t v_offset,
                     int64_t kv_row, const int32_t* slots, int64_t num_slots, void* k_cache, void* v_cache, bool fp8,
                     cudaStream_t stream) {
  if (num_tokens == 0) return;
  const dim3 grid(static_cast<unsigned int>(num_tokens)), block(128);
  if (fp8) {
    launch_pdl(kv_write_kernel<uint8_t>, grid, block, 0, stream, qkv, row, k_offset, v_offset, kv_row, slots,
               num_slots, static_cast<uint8_t*>(k_cache), static_cast<uint8_t*>(v_cache));
  } else {
    launch_pdl(kv_write_kernel<uint16_t>, grid, block, 0, stream, qkv, row, k_offset, v_offset, kv_row, slots,
               num_slots, static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache));
  }
  RL_CUDA_CHECK_LAUNCH();
}

void launch_silu_mul(const uint16_t* gate_up, uint16_t* out, int64_t rows, int64_t inter, cudaStream_t stream) {
  if (rows * inter == 0) return;
  const bool vec = inter % 8 == 0 && aligned16(gate_up) && aligned16(out);
  if (vec) {
    const int64_t per_block = int64_t(kSiluMulChunks) * kElementwiseThreads;
    RL_CHECK_MSG(rows < (int64_t(1) << 31) && inter / 8 <= 65535 * per_block,
                 "silu_mul: %lld rows of %lld exceed one launch", static_cast<long long>(rows),
                 static_cast<long long>(inter));
    const dim3 grid(static_cast<unsigned int>(rows), ceil_div(inter / 8, per_block));
    launch_pdl(silu_mul_rows_kernel, grid, dim3(kElementwiseThreads), 0, stream, gate_up, out, inter);
  } else {
    launch_pdl(silu_mul_kernel, dim3(grid_for(rows * inter)), dim3(kElementwiseThreads), 0, stream, gate_up, out,
               rows, inter);
  }
  RL_CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const void* x, int64_t num_rows_x, const int32_t* indices, int64_t n, int64_t row_bytes,
                        void* out, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(gather_rows_kernel, dim3(static_cast<unsigned int>(n)), dim3(kRowThreads), 0, stream,
             static_cast<const char*>(x), num_rows_x, indices, row_bytes, static_cast<char*>(out));
  RL_CUDA_CHECK_LAUNCH();
}

void launch_cast(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(cast_kernel, dim3(grid_for(n)), dim3(kElementwiseThreads), 0, stream, src, src_dt, dst, dst_dt, n);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_copy_bytes(void* dst, const void* src, int64_t n, cudaStream_t stream) {
  CopySegments c;
  c.dst[0] = static_cast<char*>(dst);
  c.src[0] = static_cast<const char*>(src);
  c.bytes[0] = n;
  c.num = 1;
  launch_copy_segments(c, stream);
}

void launch_copy_segments(const CopySegments& c, cudaStream_t stream) {
  RL_CHECK(c.num >= 0 && c.num <= kCopyMaxSegments);
  int64_t chunks = 0;  // the longest copy's 16-byte chunks set the grid
  for (int s = 0; s < c.num; ++s) chunks = std::max(chunks, (c.bytes[s] + 15) / 16);
  if (chunks == 0) return;
  launch_pdl(copy_segments_kernel,
             dim3(std::min<unsigned int>(grid_for(chunks), kCopyKernelMaxBlocks), static_cast<unsigned int>(c.num)),
             dim3(kElementwiseThreads), 0, stream, c);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_fill_uniform(void* t, DType dt, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  fill_uniform_kernel<<<grid_for(n), kElementwiseThreads, 0, stream>>>(t, dt, n, seed, lo, hi);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
