// Split-KV decode attention (FlashDecoding) over the paged cache (block size 16), head_dim 64, 128 or 256. One block
// per (sequence, kv head, group chunk, split); its 4 warps walk whole pages, and one load of each K/V row serves
// every query head of the GQA chunk. Two kernels share the split / merge scaffolding:
// - decode_attention_mma_kernel (head_dim 64 and 128, chunks of up to 8 query heads): a page is two tensor-core
//   products per warp, Sᵀ = K·Qᵀ (the page's 16 keys on the MMA's M side, the chunk's heads on N) and
//   Oᵀ += Vᵀ·Pᵀ (head dims on M, keys on K). Every operand goes from 16-byte global loads straight into MMA
//   fragments: the dot product's k index is a permutation of the head dims that puts 8 consecutive dims of one
//   key in one lane (the same permutation on Q), V's two keys per register come from byte permutes, and Pᵀ's
//   fragment is the transposed score fragment (movmatrix). About 140 instructions a page per warp, against ~1,000
//   for the CUDA-core loop, which bound batch-64 decode at short contexts (docs/cuda.md).
// - decode_attention_kernel (head_dim 256, and GQA groups of more than 8 that 8 does not divide): CUDA cores,
//   chunks of up to 4 heads; lanes of a row: D/8 (16 B each); a warp covers 32/(D/8) tokens per step.
// Softmax in the log2 domain. The grid has num_splits split slots (sized on the
// host for the longest context the launch may see, so a CUDA graph captured once serves any length); each
// sequence spreads its pages over as many of them as it can fill (from its seq_len in device memory), and the
// rest exit at once. With several active splits, each writes a partial (normalized o + lse) and the last block
// to finish merges them; with one the block writes the output.
// FP8 (e4m3) cache (AttentionArgs::kv_fp8, the kFp8 instances): the same walks over 8-byte loads of 8 codes. The
// tensor-core kernel widens them to f16 in the registers the bf16 loads fill (one cvt per pair on sm_89+, and every
// e4m3 value is exact in f16) and runs f16 MMAs, so every fragment layout stays as is; q goes to f16 too, clamped to
// ±65504 so that a large q cannot become inf, and Pᵀ is packed as f16. The CUDA-core kernel widens the codes to f32.
// At head_dim 128 a lane loads 16 codes (16 bytes) at a time, where bf16 and head_dim 64 load 8 elements: with half
// the bytes a load, 8-code loads left a warp half the bytes in flight of its bf16 walk (k_group_dim).
// Only the plain walk reads fp8: the lab modes (kMmaPrefetchNext, kMmaEarlyFirst) are bf16-only and fall back to it,
// and the fused RoPE + KV write (kMmaRope) refuses an fp8 cache.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cluster.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/sm90.cuh"
#include "backend/cuda/tma_map.h"

namespace rl::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

struct DecodeParams {
  AttentionArgs a;
  float* partial_o;
  float* partial_lse;
  int* counters;
  int num_splits;  // split slots in the grid (gridDim.x); partial rows are strided by it
  int num_chunks;  // group / heads per chunk
  int min_pages;   // pages per split at least (kDecodeWarps: one per warp)
};

// The pages of one sequence's K/V that one split walks: [begin, end) of the num_active splits that have work.
// At least min_pages per split. The host caps the split count at kDecodeMinPagesPerSplit pages each for the
// longest context of the launch, so a shorter one (a graph captured for max_model_len) spreads over more splits
// with fewer pages per warp: one page round trip per warp instead of two.
struct SplitPages {
  int num_active, begin, end;
};
__device__ __forceinline__ SplitPages split_pages(const DecodeParams& p, int seq_len, int split) {
  const int num_pages = (seq_len + kDecodePageSize - 1) / kDecodePageSize;
  const int per_split = max(p.min_pages, (num_pages + p.num_splits - 1) / p.num_splits);
  const int begin = split * per_split;
  return {(num_pages + per_split - 1) / per_split, begin, min(begin + per_split, num_pages)};
}

// Shared memory of the block merge: each of the W warps' (m, l, o) per head of the chunk, then the split weights.
template <int D, int GM, int W = kDecodeWarps>
struct MergeSmem {
  float m[W][GM], l[W][GM];
  float acc[W][GM][D];
  float weight[GM][kDecodeMaxSplits];
  bool is_last;
};

// The block's warps merged for head g, column c of the chunk: the normalized output, and in *lse its log-sum-exp
// (-inf where no warp saw a key; the output is then 0).
template <int D, int GM, int W>
__device__ __forceinline__ float merge_warps(const MergeSmem<D, GM, W>& sm, int g, int c, float* lse) {
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < W; ++w) mx = fmaxf(mx, sm.m[w][g]);
  float sum_l = 0.0f, o = 0.0f;
  if (mx != -INFINITY) {
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float f = exp2f(sm.m[w][g] - mx);
      sum_l += sm.l[w][g] * f;
      o += sm.acc[w][g][c] * f;
    }
    o /= sum_l;
  }
  *lse = mx == -INFINITY ? -INFINITY : mx + log2f(sum_l);
  return o;
}

// The split weights of head g of a block's chunk (one warp): the softmax over the active splits of their log-sum-exps
// (lse_at(i) for split i) into sm.weight[g]. Every active split holds at least one valid key, so each lse is finite.
template <typename Sm, typename LseAt>
__device__ __forceinline__ void split_weights(Sm& sm, int g, int num_active, LseAt lse_at) {
  const int lane = threadIdx.x & 31;
  float mx = -INFINITY;
  for (int i = lane; i < num_active; i += 32) {
    sm.weight[g][i] = lse_at(i);
    mx = fmaxf(mx, sm.weight[g][i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int i = lane; i < num_active; i += 32) {
    sm.weight[g][i] = exp2f(sm.weight[g][i] - mx);
    sum += sm.weight[g][i];
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int i = lane; i < num_active; i += 32) sm.weight[g][i] *= inv;
}

// Output columns 4 c4 .. 4 c4 + 3 of head h of token tok, rounded to bf16.
template <int D>
__device__ __forceinline__ void store_out4(const AttentionArgs& a, int64_t tok, int64_t h, int c4, const float4& o) {
  uint16_t* dst = a.out + tok * a.num_heads * D + h * D + c4 * 4;
  *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16x2(o.x, o.y), pack_bf16x2(o.z, o.w));
}

// Where a block of a (sequence, head chunk, split) goes once its warps have stored their (m, l, o) of the chunk's
// gh heads in sm: merges the warps, writes the output (one active split) or its partial, and the last active
// split to finish merges every split's partial (log-sum-exp) into the output, so no second kernel is launched.
template <int D, int GM, int W = kDecodeWarps>
__device__ __forceinline__ void merge_block(const DecodeParams& p, MergeSmem<D, GM, W>& sm, int s, int64_t tok,
                                            int64_t h0, int gh, int split, int num_active) {
  const AttentionArgs& a = p.a;
  const int warp = threadIdx.x / 32;
  __syncthreads();
  for (int i = threadIdx.x; i < gh * D; i += blockDim.x) {
    const int g = i / D, c = i % D;
    float lse;
    const float o = merge_warps(sm, g, c, &lse);
    const int64_t h = h0 + g;
    if (num_active == 1) {
      a.out[tok * a.num_heads * D + h * D + c] = f32_to_bf16_bits(o);
    } else {
      const int64_t r = (static_cast<int64_t>(s) * a.num_heads + h) * p.num_splits + split;
      p.partial_o[r * D + c] = o;
      if (c == 0) p.partial_lse[r] = lse;
    }
  }
  if (num_active == 1) return;

  // One thread counts the block in with an acquire-release add at GPU scope: after the barrier, the release carries
  // every thread's partial stores (cumulativity), and the last block's acquire, passed on by the next barrier, orders
  // its threads' partial loads after all of them (the loads go to L2: __ldcg). No sequentially consistent fence in
  // each warp (the __threadfence() pattern), which sat on every block's exit path. The counter goes back to 0 for the
  // next launch.
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = p.counters + static_cast<int64_t>(s) * gridDim.y + blockIdx.y;
    int old;
    asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
    sm.is_last = old == num_active - 1;
    if (sm.is_last) *counter = 0;
  }
  __syncthreads();
  if (!sm.is_last) return;
  // Each thread merges 4 consecutive output columns (item i: head i / (D / 4)) with 16-byte loads, kMergeBatch
  // splits in flight at once; its first item's first batch is requested before the split weights are read, so
  // those two round trips overlap. The sum runs over the splits in order whatever the batching (the same bits).
  constexpr int kMergeBatch = 16;
  const int64_t r0 = (static_cast<int64_t>(s) * a.num_heads + h0) * p.num_splits;
  const int items = gh * D / 4;
  const auto partials = [&](int i) {
    return reinterpret_cast<const float4*>(p.partial_o + (r0 + static_cast<int64_t>(i / (D / 4)) * p.num_splits) * D) +
           i % (D / 4);
  };
  float4 batch[kMergeBatch];
  if (static_cast<int>(threadIdx.x) < items) {
    const float4* po = partials(threadIdx.x);
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      if (j < num_active) batch[j] = __ldcg(po + j * (D / 4));
    }
  }
  // Split weights: warp w normalizes heads w, w + W, ...
  for (int g = warp; g < gh; g += W) {
    const float* lse = p.partial_lse + r0 + static_cast<int64_t>(g) * p.num_splits;
    split_weights(sm, g, num_active, [&](int i) { return __ldcg(lse + i); });
  }
  __syncthreads();
  for (int i = threadIdx.x; i < items; i += blockDim.x) {
    const int g = i / (D / 4), c4 = i % (D / 4);
    const float4* po = partials(i);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sp0 = 0; sp0 < num_active; sp0 += kMergeBatch) {
      if (sp0 > 0 || i != static_cast<int>(threadIdx.x)) {  // else the batch requested before the weights
#pragma unroll
        for (int j = 0; j < kMergeBatch; ++j) {
          if (sp0 + j < num_active) batch[j] = __ldcg(po + (sp0 + j) * (D / 4));
        }
      }
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) {
        if (sp0 + j < num_active) {
          const float w = sm.weight[g][sp0 + j];
          o.x = fmaf(w, batch[j].x, o.x);
          o.y = fmaf(w, batch[j].y, o.y);
          o.z = fmaf(w, batch[j].z, o.z);
          o.w = fmaf(w, batch[j].w, o.w);
        }
      }
    }
    store_out4<D>(a, tok, h0 + g, c4, o);
  }
}

// The 8 elements of a K/V row at element offset off that a lane of the CUDA-core kernel reads: 16 bytes of bf16, or
// (kFp8) 8 bytes of e4m3 codes at byte offset off; widen8 turns either into 8 floats.
template <bool kFp8>
__device__ __forceinline__ auto load_row8(const uint16_t* cache, int64_t off) {
  if constexpr (kFp8) {
    return load_stream8(reinterpret_cast<const uint8_t*>(cache) + off);
  } else {
    return load_stream(cache + off);
  }
}
__device__ __forceinline__ void widen8(const uint4& v, float* f) { unpack8(v, f); }
__device__ __forceinline__ void widen8(uint2 v, float* f) { unpack8_fp8(v, f); }

template <int D, int G, bool kFp8>
__global__ void __launch_bounds__(kDecodeWarps * 32) decode_attention_kernel(DecodeParams p) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  constexpr int kLanesPerRow = D / 8;
  constexpr int kTokPerStep = 32 / kLanesPerRow;
  constexpr int kSteps = kDecodePageSize / kTokPerStep;
  constexpr int kPass = kSteps < 8 ? kSteps : 8;  // token steps loaded at once (registers: 2 · kPass Row)
  const AttentionArgs& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int col = lane % kLanesPerRow, sub = lane / kLanesPerRow;
  const int split = blockIdx.x, s = blockIdx.z;
  const int kvh = blockIdx.y / p.num_chunks;
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t h0 = kvh * group + (blockIdx.y % p.num_chunks) * G;
  const int64_t tok = a.cu_seqlens_q[s];
  const int seq_len = a.seq_lens_k[s];
  const SplitPages sp = split_pages(p, seq_len, split);
  const int num_active = sp.num_active, page_begin = sp.begin, page_end = sp.end;
  if (split >= num_active) return;  // block-uniform, before any barrier; never counted by the merge

  float q[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    unpack8(*reinterpret_cast<const uint4*>(a.qkv + tok * a.row + (h0 + g) * D + col * 8), q[g]);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[g][e] *= a.scale * kLog2e;
      acc[g][e] = 0.0f;
    }
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const int64_t token_stride = a.num_kv_heads * D;  // elements between consecutive slots of one head

  for (int page = page_begin + warp; page < page_end; page += kDecodeWarps) {
    const int64_t base = (static_cast<int64_t>(table[page]) * kDecodePageSize * a.num_kv_heads + kvh) * D + col * 8;
    // A page in passes of kPass token steps (two passes at head_dim 256, whose rows take a whole warp), each
    // loading its K/V rows at once and folding them into the online softmax. The first pass of a page always
    // holds its first, valid token, so m stays finite.
#pragma unroll 1
    for (int pass = 0; pass < kSteps / kPass; ++pass) {
      using Row = decltype(load_row8<kFp8>(a.k_cache, 0));  // uint4 (bf16) or uint2 (fp8)
      Row kv[kPass], vv[kPass];
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        const int64_t off = base + ((pass * kPass + it) * kTokPerStep + sub) * token_stride;
        kv[it] = load_row8<kFp8>(a.k_cache, off);
        vv[it] = load_row8<kFp8>(a.v_cache, off);
      }
      float sc[G][kPass];
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        float kf[8];
        widen8(kv[it], kf);
        const bool valid = page * kDecodePageSize + (pass * kPass + it) * kTokPerStep + sub < seq_len;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(q[g][e], kf[e], dot);
#pragma unroll
          for (int o = kLanesPerRow / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
          sc[g][it] = valid ? dot : -INFINITY;
        }
        // Slots past the sequence end may hold anything (even NaN bit patterns): never let them reach acc.
        if (!valid) vv[it] = Row{};
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float mx = sc[g][0];
#pragma unroll
        for (int it = 1; it < kPass; ++it) mx = fmaxf(mx, sc[g][it]);
#pragma unroll
        for (int o = kLanesPerRow; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float m_new = fmaxf(m[g], mx);  // finite: every page in range holds a valid token
        const float corr = exp2f(m[g] - m_new);
        m[g] = m_new;
        l[g] *= corr;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] *= corr;
#pragma unroll
        for (int it = 0; it < kPass; ++it) sc[g][it] = exp2f(sc[g][it] - m_new);
      }
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        float vf[8];
        widen8(vv[it], vf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          l[g] += sc[g][it];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(sc[g][it], vf[e], acc[g][e]);
        }
      }
    }
  }
  // Merge the token sub-groups of the warp (lanes with equal col), then the warps through shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int o = kLanesPerRow; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
    }
  }
  __shared__ MergeSmem<D, G> sm;
  if (sub == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm.acc[warp][g][col * 8 + e] = acc[g][e];
      if (col == 0) {
        sm.m[warp][g] = m[g];
        sm.l[warp][g] = l[g];
      }
    }
  }
  merge_block<D, G>(p, sm, s, tok, h0, G, split, num_active);
}


// movmatrix: the transposed 8 × 8 tile of 16-bit elements (bf16 or f16) of a warp fragment (each lane holds row
// lane/4, columns 2·(lane%4)+{0,1}).
__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// The head dims of a lane's 8-element group i of a K row (the k-permuted order of Sᵀ's A fragment) and of a V row
// (Vᵀ's m-tiles 4i .. 4i + 3), for loads of 8 elements (bf16; fp8 at head_dim 64) or of 16 codes (kWide: fp8 at
// head_dim 128, where a lane's 16 codes are 16 consecutive dims). A wide K group is half of a 16-code load (dims
// 16·qi + 64·(i / 2) + 8·(i % 2)), a wide V group half of the lane's one load per key (dims 16·gi + 8·i). The MMAs
// read the groups' words in the same order either way: only the dims they stand for, and so Q's load and the
// output's dims, follow the form.
template <bool kWide>
__device__ __forceinline__ int k_group_dim(int i, int qi) {
  return kWide ? 16 * qi + 64 * (i / 2) + 8 * (i % 2) : 8 * qi + 32 * i;
}
template <bool kWide>
__device__ __forceinline__ int v_group_dim(int i, int gi) {
  return kWide ? 16 * gi + 8 * i : 8 * gi + 64 * i;
}
template <int D, bool kFp8>
constexpr bool kWideFp8 = kFp8 && D == 128;

// The K/V rows of one page that a lane feeds into the MMAs (lane = 4·gi + qi), as 8-element loads fill them (an fp8
// cache at head_dim 128: as its 16-code loads do, the dims of k_group_dim / v_group_dim<true>):
// - k[0][t], k[1][t]: dims 8·qi + 32·t .. +8 of keys gi and gi + 8 (rows of Sᵀ's A fragment; k-step 2t + h takes
//   registers 2h, 2h + 1: the dot product's k index is this permutation of the head dims, and Q is loaded with it).
// - v[j][u]: dims 8·gi + 64·u .. +8 of keys 2qi, 2qi + 1, 2qi + 8, 2qi + 9 (Vᵀ's A fragment: m-tile 4u + e holds
//   head dims 8·gi + 64·u + 2e (row gi) and + 1 (row gi + 8), so the output of a lane is 8 consecutive dims).
template <int D>
struct KvPage {
  uint4 k[2][D / 32];
  uint4 v[4][D / 64];
};

// kCoherent: loads that see this kernel's own writes (kMmaRope writes the new K/V row before its block reads the
// page): ld.global.cg, ordered by the compiler after the block barrier. Otherwise the non-coherent streaming load,
// for caches no kernel writes while this one runs. kFp8: e4m3 codes at the same element offsets (byte i is element
// i), widened to f16 in the slots bf16 fill, in the same element order: 8 bytes a load, or 16 at head_dim 128 (each
// widened into two groups).
// 16 e4m3 codes as two groups of 8 f16 values (exact).
__device__ __forceinline__ void widen_fp8x16(uint4 c, uint4& lo, uint4& hi) {
  lo = fp8x8_to_f16x8(make_uint2(c.x, c.y));
  hi = fp8x8_to_f16x8(make_uint2(c.z, c.w));
}

template <int D, bool kCoherent = false, bool kFp8 = false>
__device__ __forceinline__ void load_kv_page(KvPage<D>& pg, const AttentionArgs& a, int64_t base, int gi, int qi) {
  static_assert(!(kCoherent && kFp8), "the fp8 cache is never written by the kernel that reads it");
  const int64_t ts = a.num_kv_heads * D;  // elements between consecutive slots of one head
  if constexpr (kWideFp8<D, kFp8>) {
    const uint8_t* kc = reinterpret_cast<const uint8_t*>(a.k_cache) + base;
    const uint8_t* vc = reinterpret_cast<const uint8_t*>(a.v_cache) + base;
    uint4 kr[2][D / 64], vr[4];  // every load issued before any conversion
#pragma unroll
    for (int t = 0; t < D / 64; ++t) {
      kr[0][t] = load_stream(kc + gi * ts + k_group_dim<true>(2 * t, qi));
      kr[1][t] = load_stream(kc + (gi + 8) * ts + k_group_dim<true>(2 * t, qi));
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = 2 * qi + (j & 1) + 8 * (j >> 1);
      vr[j] = load_stream(vc + key * ts + v_group_dim<true>(0, gi));
    }
#pragma unroll
    for (int t = 0; t < D / 64; ++t) {
      widen_fp8x16(kr[0][t], pg.k[0][2 * t], pg.k[0][2 * t + 1]);
      widen_fp8x16(kr[1][t], pg.k[1][2 * t], pg.k[1][2 * t + 1]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) widen_fp8x16(vr[j], pg.v[j][0], pg.v[j][1]);
    return;
  }
  const auto load = [](const uint16_t* cache, int64_t off) {
    if constexpr (kFp8) {
      return fp8x8_to_f16x8(load_stream8(reinterpret_cast<const uint8_t*>(cache) + off));
    } else {
      return kCoherent ? __ldcg(reinterpret_cast<const uint4*>(cache + off)) : load_stream(cache + off);
    }
  };
#pragma unroll
  for (int t = 0; t < D / 32; ++t) {
    pg.k[0][t] = load(a.k_cache, base + gi * ts + 8 * qi + 32 * t);
    pg.k[1][t] = load(a.k_cache, base + (gi + 8) * ts + 8 * qi + 32 * t);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int key = 2 * qi + (j & 1) + 8 * (j >> 1);
#pragma unroll
    for (int u = 0; u < D / 64; ++u) pg.v[j][u] = load(a.v_cache, base + key * ts + 8 * gi + 64 * u);
  }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The m16n8k16 MMA and the Pᵀ pack of the tensor-core kernel: bf16 operands, or (kFp8) f16 ones, which the e4m3
// codes widen to exactly with one instruction per pair.
template <bool kFp8>
__device__ __forceinline__ void mma_k16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (kFp8) {
    mma_f16(c, a, b0, b1);
  } else {
    mma_bf16(c, a, b0, b1);
  }
}
template <bool kFp8>
__device__ __forceinline__ uint32_t pack_x2(float lo, float hi) {
  if constexpr (kFp8) {
    return pack_f16x2(lo, hi);  // P ∈ [0, 1]: in range
  } else {
    return pack_bf16x2(lo, hi);
  }
}

// One page folded into a warp's online softmax. m[c], l[c]: heads 2qi + c (l partial over this lane's keys);
// acc: Oᵀ's C fragments (m-tile 4u + e: dims v_group_dim(u, gi) + 2e (+1), heads 2qi, 2qi + 1). kFp8: pg and qf
// hold f16.
template <int D, bool kFp8 = false>
__device__ __forceinline__ void fold_kv_page(KvPage<D>& pg, const uint32_t (&qf)[D / 16][2], float (&acc)[D / 16][4],
                                             float (&m)[2], float (&l)[2], int key0, int seq_len, float scale_log2,
                                             int gi, int qi) {
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int st = 0; st < D / 16; ++st) {
    const int t = st / 2, h = st % 2;
    const uint32_t af[4] = {word(pg.k[0][t], 2 * h), word(pg.k[1][t], 2 * h), word(pg.k[0][t], 2 * h + 1),
                            word(pg.k[1][t], 2 * h + 1)};
    mma_k16<kFp8>(c, af, qf[st][0], qf[st][1]);
  }
  // Keys past the sequence end score -inf, and their V rows (any bits, even NaN) become zeros.
  const bool lo_ok = key0 + gi < seq_len, hi_ok = key0 + gi + 8 < seq_len;
  const float s00 = lo_ok ? c[0] * scale_log2 : -INFINITY, s01 = lo_ok ? c[1] * scale_log2 : -INFINITY;
  const float s10 = hi_ok ? c[2] * scale_log2 : -INFINITY, s11 = hi_ok ? c[3] * scale_log2 : -INFINITY;
  if (key0 + kDecodePageSize > seq_len) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (key0 + 2 * qi + (j & 1) + 8 * (j >> 1) >= seq_len) {
#pragma unroll
        for (int u = 0; u < D / 64; ++u) pg.v[j][u] = make_uint4(0, 0, 0, 0);
      }
    }
  }
  float mx0 = fmaxf(s00, s10), mx1 = fmaxf(s01, s11);
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
  }
  // Finite: the page's first key is in range.
  const float mn0 = fmaxf(m[0], mx0), mn1 = fmaxf(m[1], mx1);
  const float corr0 = exp2f(m[0] - mn0), corr1 = exp2f(m[1] - mn1);
  m[0] = mn0;
  m[1] = mn1;
  const float p00 = exp2f(s00 - mn0), p01 = exp2f(s01 - mn1), p10 = exp2f(s10 - mn0), p11 = exp2f(s11 - mn1);
  l[0] = l[0] * corr0 + p00 + p10;
  l[1] = l[1] * corr1 + p01 + p11;
  // Pᵀ as the B fragment of Oᵀ += Vᵀ·Pᵀ (keys on k, heads on n): the transposed 8 × 8 tiles of the scores.
  const uint32_t b0 = transpose8x8(pack_x2<kFp8>(p00, p01)), b1 = transpose8x8(pack_x2<kFp8>(p10, p11));
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) {
    const int u = mt / 4, e = mt % 4;
    acc[mt][0] *= corr0;
    acc[mt][1] *= corr1;
    acc[mt][2] *= corr0;
    acc[mt][3] *= corr1;
    const uint32_t x0 = word(pg.v[0][u], e), x1 = word(pg.v[1][u], e);
    const uint32_t x2 = word(pg.v[2][u], e), x3 = word(pg.v[3][u], e);
    const uint32_t af[4] = {__byte_perm(x0, x1, 0x5410), __byte_perm(x0, x1, 0x7632), __byte_perm(x2, x3, 0x5410),
                            __byte_perm(x2, x3, 0x7632)};
    mma_k16<kFp8>(acc[mt], af, b0, b1);
  }
}

// A bf16 pair of q as an f16 pair (the fp8 cache's f16 MMAs), each clamped to ±65504: a q past f16's range would
// become inf, and inf · 0 NaN. NaN stays NaN, as in the bf16 kernel.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t x) {
  const auto clamp = [](float f) { return fabsf(f) > 65504.0f ? copysignf(65504.0f, f) : f; };
  return pack_f16x2(clamp(__uint_as_float(x << 16)), clamp(__uint_as_float(x & 0xffff0000u)));
}

// Qᵀ's B fragments of the tensor-core kernels from a lane's query head at q (valid: head gi is in the chunk; zero
// columns past it), in the permuted k order of the K loads; f16 for kFp8.
template <int D, bool kFp8>
__device__ __forceinline__ void load_q_fragments(const uint16_t* q, bool valid, int qi, uint32_t (&qf)[D / 16][2]) {
  constexpr bool kWide = kWideFp8<D, kFp8>;
#pragma unroll
  for (int t = 0; t < D / 32; ++t) {
    uint4 v = valid ? *reinterpret_cast<const uint4*>(q + k_group_dim<kWide>(t, qi)) : make_uint4(0, 0, 0, 0);
    if constexpr (kFp8) {
      v = make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z), bf16x2_to_f16x2(v.w));
    }
    qf[2 * t][0] = v.x;
    qf[2 * t][1] = v.y;
    qf[2 * t + 1][0] = v.z;
    qf[2 * t + 1][1] = v.w;
  }
}

// Each warp of a tensor-core kernel's block: its (m, l, Oᵀ) of the chunk's gh heads into sm (l summed over the
// warp's lanes first).
template <int D, bool kWide, int W>
__device__ __forceinline__ void store_mma_warp(MergeSmem<D, kDecodeMaxGroup, W>& sm, const float (&acc)[D / 16][4],
                                               const float (&m)[2], float (&l)[2], int gh) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int gi = lane / 4, qi = lane % 4;
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    l[0] += __shfl_xor_sync(0xffffffffu, l[0], o);
    l[1] += __shfl_xor_sync(0xffffffffu, l[1], o);
  }
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int h = 2 * qi + c;
    if (h < gh) {
#pragma unroll
      for (int mt = 0; mt < D / 16; ++mt) {
        const int d = v_group_dim<kWide>(mt / 4, gi) + 2 * (mt % 4);
        sm.acc[warp][h][d] = acc[mt][c];
        sm.acc[warp][h][d + 1] = acc[mt][2 + c];
      }
      if (gi == 0) {
        sm.m[warp][h] = m[c];
        sm.l[warp][h] = l[c];
      }
    }
  }
}

// The end of a tensor-core kernel's block: store_mma_warp, then merge_block.
template <int D, bool kWide, int W = kDecodeWarps>
__device__ __forceinline__ void finish_mma_warp(const DecodeParams& p, MergeSmem<D, kDecodeMaxGroup, W>& sm,
                                                const float (&acc)[D / 16][4], const float (&m)[2], float (&l)[2],
                                                int s, int64_t tok, int64_t h0, int gh, int split, int num_active) {
  store_mma_warp<D, kWide, W>(sm, acc, m, l, gh);
  merge_block<D, kDecodeMaxGroup, W>(p, sm, s, tok, h0, gh, split, num_active);
}

// Where a thread of a tensor-core kernel's block stands: its warp and lane (MMA group gi, quad index qi), the block's
// split, sequence s and kv head, and its head chunk (gh query heads from h0; ≤ 8).
struct MmaBlock {
  int warp, lane, gi, qi, split, s, kvh, gh;
  int64_t h0;
  __device__ explicit MmaBlock(const DecodeParams& p)
      : warp(threadIdx.x / 32), lane(threadIdx.x & 31), gi(lane / 4), qi(lane % 4), split(blockIdx.x), s(blockIdx.z),
        kvh(blockIdx.y / p.num_chunks) {
    const int group = static_cast<int>(p.a.num_heads / p.a.num_kv_heads);
    gh = group / p.num_chunks;
    h0 = static_cast<int64_t>(kvh) * group + (blockIdx.y % p.num_chunks) * gh;
  }
};

// How a warp of the tensor-core kernel walks its pages.
enum MmaMode : int {
  kMmaPlain = 0,     // load a page, fold it, load the next
  kMmaPrefetchNext,  // load the next page before folding the current one (registers for two pages)
  kMmaEarlyFirst,    // as kMmaPlain, but the first page is requested before pdl_wait() where it may be
  kMmaRope,          // as kMmaPlain, after the step's q/k norm + RoPE and KV write (DecodeRope)
};

// Head dims 64 / 128, chunks of up to 8 query heads of a KV head (MMA columns past the chunk are zero queries).
// kMmaEarlyFirst: the sequence's length, its block table and the warp's first page are read before pdl_wait(),
// while the previous kernel (the step's RoPE + KV write) still runs. None of them is written by a kernel of the
// step: the lengths and tables come from the step's upload, and every page but the one holding the key this step
// writes (position seq_len - 1) was written by earlier steps; that page is loaded after the wait.
// kFp8: the FP8 cache, kMmaPlain only.
template <int D, int kMode, bool kFp8>
__device__ __forceinline__ void decode_attention_mma(const DecodeParams& p, const DecodeRope& rope) {
  if constexpr (kMode != kMmaEarlyFirst) {
    pdl_wait();  // launched with PDL (cuda_launch.cuh)
    pdl_launch_dependents();
  }
  static_assert(D == 64 || D == 128, "the MMA decode kernel serves head_dim 64 and 128");
  static_assert(!kFp8 || kMode == kMmaPlain, "the fp8 cache is read by the plain walk only");
  const AttentionArgs& a = p.a;
  const MmaBlock blk(p);
  const int warp = blk.warp, lane = blk.lane, gi = blk.gi, qi = blk.qi, split = blk.split, s = blk.s, kvh = blk.kvh;
  const int gh = blk.gh;
  const int64_t h0 = blk.h0;
  const int64_t tok = a.cu_seqlens_q[s];
  const int seq_len = a.seq_lens_k[s];
  const SplitPages sp = split_pages(p, seq_len, split);
  const int num_active = sp.num_active, page_begin = sp.begin, page_end = sp.end;
  if (split >= num_active) return;  // block-uniform, before any barrier; never counted by the merge
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const auto page_base = [&](int page) {
    return (static_cast<int64_t>(table[page]) * kDecodePageSize * a.num_kv_heads + kvh) * D;
  };
  KvPage<D> first;  // kMmaEarlyFirst: the warp's first page, requested before the wait where it may be
  const int first_page = page_begin + warp;
  const bool early = kMode == kMmaEarlyFirst && first_page < page_end && first_page < (seq_len - 1) / kDecodePageSize;
  if constexpr (kMode == kMmaEarlyFirst) {
    if (early) load_kv_page(first, a, page_base(first_page), gi, qi);
    pdl_wait();  // q, and the page holding this step's key, are written by the previous kernel
    pdl_launch_dependents();
  }

  // kMmaRope: the chunk's q heads normed and rotated into shared memory (warp w: heads w, w + 4), and, in the split
  // that holds the new key (position seq_len - 1), that key normed, rotated and written to the cache with its value
  // (warps 0 and 1), before any warp of this block loads the page. Every block of a KV head in that split writes the
  // same bits (several head chunks: the same row twice).
  __shared__ __align__(16) uint16_t q_rot[kMode == kMmaRope ? kDecodeMaxGroup : 1][D];
  if constexpr (kMode == kMmaRope) {
    const float pos = static_cast<float>(rope.positions[tok]);
    const bool norm_f32 = rope.norm_f32;
    const RopeLane cq = rope_lane(rope.q_norm, norm_f32, rope.inv_freq, D / 2);
    for (int g = warp; g < gh; g += kDecodeWarps) {
      norm_rope_head(cq, a.qkv + tok * a.row + (h0 + g) * D, D, rope.q_norm != nullptr, rope.eps, pos, q_rot[g],
                     nullptr);
    }
    const int last_page = (seq_len - 1) / kDecodePageSize;
    const int32_t slot = rope.slots[tok];
    if (last_page >= page_begin && last_page < page_end && slot >= 0 && warp < 2) {
      if (slot >= rope.num_slots) __trap();  // the KV manager hands out slots inside the cache
      const int64_t dst = static_cast<int64_t>(slot) * a.num_kv_heads * D + static_cast<int64_t>(kvh) * D;
      const uint16_t* k_src = a.qkv + tok * a.row + (a.num_heads + kvh) * D;  // k heads follow the q heads
      if (warp == 0) {
        const RopeLane ck = rope_lane(rope.k_norm, norm_f32, rope.inv_freq, D / 2);
        norm_rope_head(ck, k_src, D, rope.k_norm != nullptr, rope.eps, pos, rope.k_cache + dst, nullptr);
      } else {
        const uint16_t* v_src = k_src + a.num_kv_heads * D;  // v heads follow the k heads
        for (int i = lane; i < D / 8; i += 32) {
          reinterpret_cast<uint4*>(rope.v_cache + dst)[i] = reinterpret_cast<const uint4*>(v_src)[i];
        }
      }
    }
    __syncthreads();  // q_rot, and the new K/V row in global memory, visible to every warp of the block
  }

  constexpr bool kWide = kWideFp8<D, kFp8>;
  uint32_t qf[D / 16][2];
  load_q_fragments<D, kFp8>(kMode == kMmaRope ? &q_rot[gi < gh ? gi : 0][0] : a.qkv + tok * a.row + (h0 + gi) * D,
                            gi < gh, qi, qf);
  float acc[D / 16][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;
  const float scale_log2 = a.scale * kLog2e;
  if constexpr (kMode == kMmaPrefetchNext) {
    KvPage<D> pg[2];
    int page = page_begin + warp;
    if (page < page_end) load_kv_page(pg[0], a, page_base(page), gi, qi);
    // Two pages a trip, so that each buffer stays in registers.
    while (page < page_end) {
      const int next = page + kDecodeWarps;
      if (next < page_end) load_kv_page(pg[1], a, page_base(next), gi, qi);
      fold_kv_page(pg[0], qf, acc, m, l, page * kDecodePageSize, seq_len, scale_log2, gi, qi);
      if (next >= page_end) break;
      const int next2 = next + kDecodeWarps;
      if (next2 < page_end) load_kv_page(pg[0], a, page_base(next2), gi, qi);
      fold_kv_page(pg[1], qf, acc, m, l, next * kDecodePageSize, seq_len, scale_log2, gi, qi);
      page = next2;
    }
  } else if constexpr (kMode == kMmaEarlyFirst) {
    if (first_page < page_end) {
      if (!early) load_kv_page(first, a, page_base(first_page), gi, qi);
      fold_kv_page(first, qf, acc, m, l, first_page * kDecodePageSize, seq_len, scale_log2, gi, qi);
      for (int page = first_page + kDecodeWarps; page < page_end; page += kDecodeWarps) {
        KvPage<D> pg;
        load_kv_page(pg, a, page_base(page), gi, qi);
        fold_kv_page(pg, qf, acc, m, l, page * kDecodePageSize, seq_len, scale_log2, gi, qi);
      }
    }
  } else {
    for (int page = page_begin + warp; page < page_end; page += kDecodeWarps) {
      KvPage<D> pg;
      load_kv_page<D, kMode == kMmaRope, kFp8>(pg, a, page_base(page), gi, qi);
      fold_kv_page<D, kFp8>(pg, qf, acc, m, l, page * kDecodePageSize, seq_len, scale_log2, gi, qi);
    }
  }
  __shared__ MergeSmem<D, kDecodeMaxGroup> sm;
  finish_mma_warp<D, kWide>(p, sm, acc, m, l, s, tok, h0, gh, split, num_active);
}

template <int D, int kMode, bool kFp8>
__global__ void __launch_bounds__(kDecodeWarps * 32) decode_attention_mma_kernel(DecodeParams p) {
  decode_attention_mma<D, kMode, kFp8>(p, DecodeRope{});
}
template <int D>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    decode_attention_mma_rope_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ DecodeRope r) {
  decode_attention_mma<D, kMmaRope, false>(p, r);
}
// Held to the resident blocks a SM of kMmaPlain (head_dim 128: 4, head_dim 64: 6): unbounded, the first page live
// across the wait asked 134 and 96 registers.
template <int D>
__global__ void __launch_bounds__(kDecodeWarps * 32, D == 64 ? 6 : 4) decode_attention_mma_early_kernel(DecodeParams p) {
  decode_attention_mma<D, kMmaEarlyFirst, false>(p, DecodeRope{});
}

// The staged tensor-core kernel (DecodeKernel::kStaged, compute capability 9.0; head_dim 64 / 128 over a bf16 cache,
// 128 over fp8): the same split, fold and merge as decode_attention_mma, but a page reaches the warp through shared
// memory. Each of the block's kDecodeStagedWarps warps owns kDecodeStagePages / kDecodeStagedWarps page buffers and
// keeps all of them loading: one TMA box per 128 bytes of a row of K and of V (16 keys × 128 bytes, 128-byte
// swizzle) completing on the buffer's full barrier, the warp's next page requested into a buffer as soon as every
// lane has read it into registers (an empty barrier of 32 arrivals: the reads are ordered before the copy that
// overwrites them). So every page of a split (up to kDecodeStagePages) is in flight at once where the register walk
// (decode_attention_mma) has one page per warp: at batch 1 the block-table read, the page loads and the folds of a
// warp's pages no longer run one after another. The warp's block-table entries come from one load per lane (32 pages
// at a time). The pages that no kernel of the step writes (all but the one holding the new key, as kMmaEarlyFirst)
// are requested before pdl_wait(), while the step's RoPE + KV-write kernel runs.
// Lanes read a page into the fragments load_kv_page fills; with the swizzle a K read meets two rows in a bank group
// (a 2-way conflict) and a V read none. kFp8 (head_dim 128): a row's 128 codes are one box, read 16 codes a lane as
// load_kv_page's wide fp8 walk does and widened to f16.
template <int D, bool kFp8>
struct StagedPage {
  static_assert(!kFp8 || D == 128, "the staged kernel reads an fp8 cache at head_dim 128");
  static constexpr int kBoxes = kFp8 ? 1 : D / 64;         // TMA boxes of 128 bytes per row (64 bf16, 128 codes)
  static constexpr int kBoxBytes = kDecodePageSize * 128;  // 16 keys × 128 bytes
  static constexpr int kBoxCols = kFp8 ? 128 : 64;         // elements a box row holds
  static constexpr int kBytes = 2 * kBoxes * kBoxBytes;    // K boxes, then V boxes
  static constexpr int kSmemBytes = kDecodeStagePages * kBytes + 1024;  // + the swizzle's 1024-byte alignment
};

#if RL_SM90_ENABLED
// The 16 bytes of row `row`, 16-byte chunk `chunk` of a 128-byte-swizzled TMA box at box (1024-byte aligned).
__device__ __forceinline__ uint4 lds_box(const uint8_t* box, int row, int chunk) {
  return *reinterpret_cast<const uint4*>(box + row * 128 + ((chunk ^ (row & 7)) << 4));
}
#endif

// Shared memory of the cluster merge (kStagedCluster), used in the cluster's first block: each split's partial of the
// chunk's heads (merge_block's normalized o and log-sum-exp), after the page buffers in the dynamic shared memory.
// o holds split j's head g, column c at (j gh + g) D + c.
template <int D>
struct ClusterMergeSmem {
  float o[kDecodeClusterMaxSplits * kDecodeMaxGroup * D];
  float lse[kDecodeClusterMaxSplits][kDecodeMaxGroup];
};

#if RL_SM90_ENABLED
// merge_block for a launch in clusters of its split slots (rank = split), in two phases of the cluster barrier. The
// first: every block arrived (relaxed) at the kernel's start, and each active block waits here before its stores, so
// no store reaches a block that has not started (compute-sanitizer racecheck's "block that might not have entered
// yet"). The second: each active split stores its partial into the first block's cm through distributed shared
// memory and arrives (release), which orders those stores before it; the first block stores its own, arrives and
// waits (acquire: every other block's stores are then visible) and merges in split order with merge_block's
// arithmetic, so the output has its bits. Splits past a sequence's pages arrive at the start and exit, and an exited
// thread is not waited for; the first block exits only after its second wait, so no store meets an exited block.
template <int D, int W>
__device__ __forceinline__ void merge_cluster(const DecodeParams& p, MergeSmem<D, kDecodeMaxGroup, W>& sm,
                                              ClusterMergeSmem<D>& cm, int s, int64_t tok, int64_t h0, int gh,
                                              int split, int num_active) {
  if (num_active == 1) {
    merge_block<D, kDecodeMaxGroup, W>(p, sm, s, tok, h0, gh, split, num_active);  // no partial: the output
    return;
  }
  const int warp = threadIdx.x / 32;
  __syncthreads();
  sm90::cluster_wait();  // the first phase: every block of the cluster has started
  ClusterMergeSmem<D>& first = *cl_map(&cm, 0);  // the first block's copy (distributed shared memory)
  for (int i = threadIdx.x; i < gh * D; i += blockDim.x) {
    const int g = i / D, c = i % D;
    float lse;
    const float o = merge_warps(sm, g, c, &lse);
    first.o[split * gh * D + i] = o;
    if (c == 0) first.lse[split][g] = lse;
  }
  sm90::cluster_arrive();
  if (split > 0) return;
  sm90::cluster_wait();
  for (int g = warp; g < gh; g += W) split_weights(sm, g, num_active, [&](int i) { return cm.lse[i][g]; });
  __syncthreads();
  for (int i = threadIdx.x; i < gh * D / 4; i += blockDim.x) {
    const int g = i / (D / 4), c4 = i % (D / 4);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int j = 0; j < num_active; ++j) {
      const float w = sm.weight[g][j];
      const float4 v = *reinterpret_cast<const float4*>(&cm.o[(j * gh + g) * D + 4 * c4]);
      o.x = fmaf(w, v.x, o.x);
      o.y = fmaf(w, v.y, o.y);
      o.z = fmaf(w, v.z, o.z);
      o.w = fmaf(w, v.w, o.w);
    }
    store_out4<D>(p.a, tok, h0 + g, c4, o);
  }
}
#endif

// kCluster (kStagedCluster): launched in clusters of the grid's split slots, merged by merge_cluster.
template <int D, bool kFp8, bool kCluster>
__global__ void __launch_bounds__(kDecodeStagedWarps * 32, 1)
    decode_attention_staged_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ CUtensorMap tm_k,
                                   const __grid_constant__ CUtensorMap tm_v) {
#if RL_SM90_ENABLED
  using namespace sm90;
  using Layout = StagedPage<D, kFp8>;
  constexpr bool kWide = kWideFp8<D, kFp8>;
  constexpr int W = kDecodeStagedWarps;
  constexpr int kPerWarp = kDecodeStagePages / W;  // buffers a warp keeps loading
  static_assert(kPerWarp * W == kDecodeStagePages && (kPerWarp & (kPerWarp - 1)) == 0, "page buffers");
  extern __shared__ uint8_t staged_raw[];
  uint8_t* stage = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(staged_raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t full[kDecodeStagePages], empty[kDecodeStagePages];
  __shared__ MergeSmem<D, kDecodeMaxGroup, W> sm;
  const AttentionArgs& a = p.a;
  const MmaBlock blk(p);
  const int warp = blk.warp, lane = blk.lane, gi = blk.gi, qi = blk.qi, split = blk.split, s = blk.s, kvh = blk.kvh;
  const int gh = blk.gh;
  const int64_t h0 = blk.h0;
  const int seq_len = a.seq_lens_k[s];  // (the step's upload: no kernel of the step writes it)
  const int64_t tok = a.cu_seqlens_q[s];
  const SplitPages sp = split_pages(p, seq_len, split);
  const int num_active = sp.num_active;
  [[maybe_unused]] ClusterMergeSmem<D>& cm =
      *reinterpret_cast<ClusterMergeSmem<D>*>(stage + kDecodeStagePages * Layout::kBytes);
  if constexpr (kCluster) cluster_arrive_relaxed();  // merge_cluster's first phase: this block has started
  if (split >= num_active) return;  // block-uniform; an exiting block counts as having triggered its dependents
  if (lane == 0) {
    for (int i = 0; i < kPerWarp; ++i) {
      mbar_init(smem_addr(&full[warp * kPerWarp + i]), 1);
      mbar_init(smem_addr(&empty[warp * kPerWarp + i]), 32);
    }
    mbar_init_fence();
  }
  __syncwarp();
  // The warp's pages: sp.begin + warp + W · k for k < n; page k goes to buffer k % kPerWarp.
  const int n = max(0, (sp.end - sp.begin - warp + W - 1) / W);
  const int new_key_page = (seq_len - 1) / kDecodePageSize;
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks;
  const auto warp_page = [&](int k) { return sp.begin + warp + W * k; };
  int32_t entries = lane < n ? table[warp_page(lane)] : 0;  // pages 32c .. 32c + 31 of the warp
  int entries_chunk = 0;
  const auto buffer = [&](int k) { return warp * kPerWarp + (k & (kPerWarp - 1)); };
  // Requests page k of the warp (warp-uniform call; lane 0 issues).
  const auto request = [&](int k) {
    if (k / 32 != entries_chunk) {
      entries_chunk = k / 32;
      const int kk = 32 * entries_chunk + lane;
      entries = kk < n ? table[warp_page(kk)] : 0;
    }
    const int32_t blk = __shfl_sync(0xffffffffu, entries, k & 31);
    if (lane == 0) {
      const int b = buffer(k);
      const uint32_t dst = smem_addr(stage + b * Layout::kBytes), bar = smem_addr(&full[b]);
      const int slot = blk * kDecodePageSize;
      mbar_arrive_expect_tx(bar, Layout::kBytes);
#pragma unroll
      for (int h = 0; h < Layout::kBoxes; ++h) {
        tma_load_3d(dst + h * Layout::kBoxBytes, &tm_k, Layout::kBoxCols * h, kvh, slot, bar);
        tma_load_3d(dst + (Layout::kBoxes + h) * Layout::kBoxBytes, &tm_v, Layout::kBoxCols * h, kvh, slot, bar);
      }
    }
  };
  const int first = min(n, kPerWarp);
  for (int k = 0; k < first; ++k) {
    if (warp_page(k) != new_key_page) request(k);
  }
  pdl_wait();  // q and the new key's page are written by the previous kernel
  pdl_launch_dependents();
  for (int k = 0; k < first; ++k) {
    if (warp_page(k) == new_key_page) request(k);
  }

  uint32_t qf[D / 16][2];
  load_q_fragments<D, kFp8>(a.qkv + tok * a.row + (h0 + gi) * D, gi < gh, qi, qf);
  float acc[D / 16][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;
  const float scale_log2 = a.scale * kLog2e;
  for (int k = 0; k < n; ++k) {
    const int b = buffer(k);
    const uint32_t phase = static_cast<uint32_t>(k / kPerWarp) & 1u;
    mbar_wait(smem_addr(&full[b]), phase);
    const uint8_t* buf = stage + b * Layout::kBytes;
    KvPage<D> pg;
    if constexpr (kFp8) {
      // Row r's codes 16c .. 16c + 15 are chunk c: K groups 2t, 2t + 1 of a lane are chunk qi + 4t (dims
      // 16·qi + 64·t, k_group_dim<true>), V's are chunk gi (v_group_dim<true>).
      uint4 kr[2][2], vr[4];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        kr[0][t] = lds_box(buf, gi, qi + 4 * t);
        kr[1][t] = lds_box(buf, gi + 8, qi + 4 * t);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) vr[j] = lds_box(buf + Layout::kBoxBytes, 2 * qi + (j & 1) + 8 * (j >> 1), gi);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        widen_fp8x16(kr[0][t], pg.k[0][2 * t], pg.k[0][2 * t + 1]);
        widen_fp8x16(kr[1][t], pg.k[1][2 * t], pg.k[1][2 * t + 1]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) widen_fp8x16(vr[j], pg.v[j][0], pg.v[j][1]);
    } else {
#pragma unroll
      for (int t = 0; t < D / 32; ++t) {
        const uint8_t* box = buf + (t / 2) * Layout::kBoxBytes;
        pg.k[0][t] = lds_box(box, gi, qi + 4 * (t & 1));
        pg.k[1][t] = lds_box(box, gi + 8, qi + 4 * (t & 1));
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = 2 * qi + (j & 1) + 8 * (j >> 1);
#pragma unroll
        for (int u = 0; u < D / 64; ++u) pg.v[j][u] = lds_box(buf + (Layout::kBoxes + u) * Layout::kBoxBytes, key, gi);
      }
    }
    mbar_arrive(smem_addr(&empty[b]));  // release: this lane's reads of the buffer come before it
    if (k + kPerWarp < n) {
      if (lane == 0) mbar_wait(smem_addr(&empty[b]), phase);
      __syncwarp();
      request(k + kPerWarp);
    }
    fold_kv_page<D, kFp8>(pg, qf, acc, m, l, warp_page(k) * kDecodePageSize, seq_len, scale_log2, gi, qi);
  }
  if constexpr (kCluster) {
    store_mma_warp<D, kWide, W>(sm, acc, m, l, gh);
    merge_cluster<D, W>(p, sm, cm, s, tok, h0, gh, split, num_active);
  } else {
    finish_mma_warp<D, kWide, W>(p, sm, acc, m, l, s, tok, h0, gh, split, num_active);
  }
#endif
}

template <int D, int G>
void launch_dg(const DecodeParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_splits, static_cast<unsigned int>(p.a.num_kv_heads * p.num_chunks),
                  static_cast<unsigned int>(p.a.num_seqs));
  launch_pdl(p.a.kv_fp8 ? decode_attention_kernel<D, G, true> : decode_attention_kernel<D, G, false>, grid,
             dim3(kDecodeWarps * 32), 0, stream, p);
}

template <int D>
void launch_d(const DecodeParams& p, int g, cudaStream_t stream) {
  if (g == 4) {
    launch_dg<D, 4>(p, stream);
  } else if (g == 2) {
    launch_dg<D, 2>(p, stream);
  } else {
    launch_dg<D, 1>(p, stream);
  }
}

// The staged kernel's dynamic shared memory: the page buffers, and with kCluster the cluster merge's.
template <int D, bool kFp8, bool kCluster>
constexpr size_t staged_smem_bytes() {
  return StagedPage<D, kFp8>::kSmemBytes + (kCluster ? sizeof(ClusterMergeSmem<D>) : 0);
}

// The staged kernel's instance at head_dim D over a bf16 or (kFp8) fp8 cache, set up for its shared memory on first
// use.
template <int D, bool kFp8, bool kCluster>
void (*staged_instance())(DecodeParams, CUtensorMap, CUtensorMap) {
  static const auto fn = [] {
    const auto f = decode_attention_staged_kernel<D, kFp8, kCluster>;
    RL_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(f), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       staged_smem_bytes<D, kFp8, kCluster>()));
    return f;
  }();
  return fn;
}

// Whether a cluster of n (≤ 8) blocks of the cluster-merged instance can be launched (queried once per n).
template <int D, bool kFp8>
bool staged_cluster_fits(int n) {
  static int cached[kDecodeClusterMaxSplits + 1] = {};  // 0 unknown, 1 no, 2 yes
  int& c = cached[n];
  if (c == 0) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(n);
    cfg.blockDim = dim3(kDecodeStagedWarps * 32);
    cfg.dynamicSmemBytes = staged_smem_bytes<D, kFp8, true>();
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = n;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    const bool ok = cudaOccupancyMaxActiveClusters(&clusters, staged_instance<D, kFp8, true>(), &cfg) == cudaSuccess;
    (void)cudaGetLastError();
    c = ok && clusters > 0 ? 2 : 1;
  }
  return c == 2;
}

// cluster: kStagedCluster, which takes clusters where the launch has 2 to kDecodeClusterMaxSplits split slots (and
// such a cluster can be launched); elsewhere the staged kernel's global merge.
template <int D, bool kFp8>
void launch_staged(const DecodeParams& p, bool cluster, cudaStream_t stream) {
  // K and V as (head dim, kv head, slot) of 2-byte or 1-byte elements; a box is 128 bytes of one head's row over
  // one page's 16 slots.
  using Layout = StagedPage<D, kFp8>;
  const AttentionArgs& a = p.a;
  const uint64_t elem = kFp8 ? 1 : 2;
  const uint64_t dims[3] = {static_cast<uint64_t>(D), static_cast<uint64_t>(a.num_kv_heads),
                            static_cast<uint64_t>(a.kv_slots)};
  const uint64_t strides[2] = {D * elem, static_cast<uint64_t>(a.num_kv_heads) * D * elem};
  const uint32_t box[3] = {Layout::kBoxCols, 1, kDecodePageSize};
  const auto map = kFp8 ? make_u8_tensor_map : make_bf16_tensor_map;
  const CUtensorMap tk = map(a.k_cache, 3, dims, strides, box), tv = map(a.v_cache, 3, dims, strides, box);
  const dim3 grid(p.num_splits, static_cast<unsigned int>(a.num_kv_heads * p.num_chunks),
                  static_cast<unsigned int>(a.num_seqs));
  if (cluster && p.num_splits > 1 && p.num_splits <= kDecodeClusterMaxSplits &&
      staged_cluster_fits<D, kFp8>(p.num_splits)) {
    launch_ex(staged_instance<D, kFp8, true>(), grid, dim3(kDecodeStagedWarps * 32),
              staged_smem_bytes<D, kFp8, true>(), stream, static_cast<unsigned>(p.num_splits), p, tk, tv);
    return;
  }
  launch_pdl(staged_instance<D, kFp8, false>(), grid, dim3(kDecodeStagedWarps * 32),
             staged_smem_bytes<D, kFp8, false>(), stream, p, tk, tv);
}

int mma_mode(DecodeKernel k) {
  return k == DecodeKernel::kMmaPrefetch ? kMmaPrefetchNext
         : k == DecodeKernel::kMmaEarly  ? kMmaEarlyFirst
                                         : kMmaPlain;
}

// rope: kMmaRope's inputs (null for the other modes). An fp8 cache (never with kMmaRope: launch_decode checks) takes
// the plain walk whatever the mode: the lab modes are bf16-only.
template <int D>
void launch_mma(const DecodeParams& p, int mode, const DecodeRope* rope, cudaStream_t stream) {
  const dim3 grid(p.num_splits, static_cast<unsigned int>(p.a.num_kv_heads * p.num_chunks),
                  static_cast<unsigned int>(p.a.num_seqs));
  if (mode == kMmaRope) {
    launch_pdl(decode_attention_mma_rope_kernel<D>, grid, dim3(kDecodeWarps * 32), 0, stream, p, *rope);
    return;
  }
  if (p.a.kv_fp8) {
    launch_pdl(decode_attention_mma_kernel<D, kMmaPlain, true>, grid, dim3(kDecodeWarps * 32), 0, stream, p);
    return;
  }
  launch_pdl(mode == kMmaPrefetchNext ? decode_attention_mma_kernel<D, kMmaPrefetchNext, false>
             : mode == kMmaEarlyFirst ? decode_attention_mma_early_kernel<D>
                                      : decode_attention_mma_kernel<D, kMmaPlain, false>,
             grid, dim3(kDecodeWarps * 32), 0, stream, p);
}

// The instance launch_mma launches.
template <int D>
const void* mma_kernel_for(int mode, bool fp8) {
  if (fp8 && mode != kMmaRope) return reinterpret_cast<const void*>(decode_attention_mma_kernel<D, kMmaPlain, true>);
  return mode == kMmaPrefetchNext
             ? reinterpret_cast<const void*>(decode_attention_mma_kernel<D, kMmaPrefetchNext, false>)
         : mode == kMmaEarlyFirst ? reinterpret_cast<const void*>(decode_attention_mma_early_kernel<D>)
         : mode == kMmaRope       ? reinterpret_cast<const void*>(decode_attention_mma_rope_kernel<D>)
                                  : reinterpret_cast<const void*>(decode_attention_mma_kernel<D, kMmaPlain, false>);
}

template <int D, bool kFp8>
const void* kernel_for(int g) {
  return g == 4   ? reinterpret_cast<const void*>(decode_attention_kernel<D, 4, kFp8>)
         : g == 2 ? reinterpret_cast<const void*>(decode_attention_kernel<D, 2, kFp8>)
                  : reinterpret_cast<const void*>(decode_attention_kernel<D, 1, kFp8>);
}
template <int D>
const void* kernel_for(int g, bool fp8) {
  return fp8 ? kernel_for<D, true>(g) : kernel_for<D, false>(g);
}

// Which kernel serves a shape (DecodeKernel::kAuto resolved), and its heads per chunk.
struct DecodePlan {
  DecodeKernel kernel;
  int heads_per_chunk;
};
DecodePlan plan_for(const AttentionArgs& a, DecodeKernel want) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const bool mma_ok = (a.head_dim == 64 || a.head_dim == 128) && (group <= kDecodeMaxGroup || group % kDecodeMaxGroup == 0);
  if (want == DecodeKernel::kAuto) want = mma_ok ? kDecodeMmaKernel : DecodeKernel::kSimt;
  // The staged kernel reads pages by TMA (sm_90a), fp8 ones at head_dim 128: elsewhere the plain tensor-core walk.
  const bool staged = want == DecodeKernel::kStaged || want == DecodeKernel::kStagedCluster;
  if (staged && ((a.kv_fp8 && a.head_dim != 128) || a.kv_slots <= 0 || !device_is_sm90())) {
    want = DecodeKernel::kMma;
  }
  if (want != DecodeKernel::kSimt && mma_ok) {
    return {want, static_cast<int>(std::min<int64_t>(group, kDecodeMaxGroup))};
  }
  return {DecodeKernel::kSimt, group % 4 == 0 ? 4 : (group % 2 == 0 ? 2 : 1)};
}

// Resident blocks per SM of the instance a plan launches (registers bound it), queried once per instance. mode: the
// tensor-core kernel's (mma_mode of the plan's kernel, or kMmaRope); fp8: the FP8 cache's instances (their register
// counts differ).
int blocks_per_sm(int64_t d, const DecodePlan& plan, int mode, bool fp8) {
  static int cached[2][3][8] = {};
  const int di = d == 64 ? 0 : d == 128 ? 1 : 2;
  const bool mma = plan.kernel != DecodeKernel::kSimt;
  const int ki = mma ? 3 + mode : plan.heads_per_chunk == 4 ? 2 : plan.heads_per_chunk == 2 ? 1 : 0;
  int& n = cached[fp8 ? 1 : 0][di][ki];
  if (n == 0) {
    const void* fn = nullptr;
    if (mma) {
      fn = d == 64 ? mma_kernel_for<64>(mode, fp8) : mma_kernel_for<128>(mode, fp8);
    } else {
      const int g = plan.heads_per_chunk;
      fn = d == 64 ? kernel_for<64>(g, fp8) : d == 128 ? kernel_for<128>(g, fp8) : kernel_for<256>(g, fp8);
    }
    RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, kDecodeWarps * 32, 0));
    n = std::max(n, 1);
  }
  return n;
}

// The one dispatch of every decode launch: lab forces a kernel or split count (DecodeLab{}: production); rope set:
// the tensor-core kernel with the step's RoPE and KV write (decode_attention_rope_supported shapes).
void launch_decode(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream,
                   const DecodeLab& lab, const DecodeRope* rope) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  DecodePlan plan = plan_for(a, rope ? DecodeKernel::kMma : lab.kernel);
  // Production: the staged kernel where its sequences' (kv head, chunk) blocks fit one wave (kDecodeStagedKernel).
  if (!rope && lab.kernel == DecodeKernel::kAuto && plan.kernel == DecodeKernel::kMma &&
      kDecodeStagedKernel != DecodeKernel::kMma) {
    const DecodePlan staged = plan_for(a, kDecodeStagedKernel);
    if (staged.kernel == kDecodeStagedKernel &&
        a.num_seqs * a.num_kv_heads * (group / staged.heads_per_chunk) <= num_sms) {
      plan = staged;
    }
  }
  RL_CHECK_MSG(!rope || plan.kernel == DecodeKernel::kMma, "decode attention with RoPE: not a tensor-core shape");
  RL_CHECK_MSG(!rope || !a.kv_fp8, "decode attention with RoPE: an fp8 KV cache (the fused KV write stores bf16)");
  DecodeParams p{a, ws.partial_o, ws.partial_lse, ws.counters, 1, static_cast<int>(group / plan.heads_per_chunk),
                 lab.min_pages > 0 ? lab.min_pages : kDecodeWarps};
  const int mode = rope ? kMmaRope : mma_mode(plan.kernel);
  const bool cluster = plan.kernel == DecodeKernel::kStagedCluster;
  const bool staged = plan.kernel == DecodeKernel::kStaged || cluster;
  if (staged && lab.min_pages <= 0) p.min_pages = kDecodeStagedWarps;
  int64_t splits =
      lab.num_splits > 0 ? std::min<int64_t>(lab.num_splits, kDecodeMaxSplits)
      : staged ? decode_staged_num_splits(a.num_seqs, a.num_kv_heads * p.num_chunks, a.max_seqlen_k, num_sms)
               : decode_num_splits(a.num_seqs, a.num_kv_heads * p.num_chunks, a.max_seqlen_k, a.num_heads,
                                   a.head_dim,
                                   static_cast<int64_t>(blocks_per_sm(a.head_dim, plan, mode, a.kv_fp8)) * num_sms);
  // ws.capacity_rows counts partial rows of head_dim 128 (a wider row takes the room of several).
  const int64_t capacity = ws.capacity_rows * 128 / std::max<int64_t>(a.head_dim, 128);
  if (a.num_seqs * a.num_heads * splits > capacity) splits = 1;
  p.num_splits = static_cast<int>(splits);
  if (staged) {
    if (a.head_dim == 64) {
      launch_staged<64, false>(p, cluster, stream);
    } else {
      a.kv_fp8 ? launch_staged<128, true>(p, cluster, stream) : launch_staged<128, false>(p, cluster, stream);
    }
  } else if (plan.kernel != DecodeKernel::kSimt) {
    if (a.head_dim == 64) {
      launch_mma<64>(p, mode, rope, stream);
    } else {
      launch_mma<128>(p, mode, rope, stream);
    }
  } else if (a.head_dim == 64) {
    launch_d<64>(p, plan.heads_per_chunk, stream);
  } else if (a.head_dim == 128) {
    launch_d<128>(p, plan.heads_per_chunk, stream);
  } else {
    launch_d<256>(p, plan.heads_per_chunk, stream);
  }
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool decode_attention_supported(const AttentionArgs& a) {
  return a.block_size == kDecodePageSize && (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256) &&
         a.max_seqlen_q == 1 &&
         a.num_tokens == a.num_seqs;
}

void launch_decode_attention(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream) {
  launch_decode(a, ws, num_sms, stream, DecodeLab{}, nullptr);
}

void launch_decode_attention_lab(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream,
                                 const DecodeLab& lab) {
  launch_decode(a, ws, num_sms, stream, lab, nullptr);
}

// The fused KV write stores bf16 rows: never with an fp8 cache.
bool decode_attention_rope_supported(const AttentionArgs& a) {
  return !a.kv_fp8 && decode_attention_supported(a) && a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
         plan_for(a, DecodeKernel::kMma).kernel == DecodeKernel::kMma;
}

void launch_decode_attention_rope(const AttentionArgs& a, const DecodeRope& rope, const DecodeWorkspace& ws,
                                  int num_sms, cudaStream_t stream) {
  RL_CHECK(rope.positions && rope.slots && rope.inv_freq && rope.k_cache && rope.v_cache && rope.num_slots > 0);
  launch_decode(a, ws, num_sms, stream, DecodeLab{}, &rope);
}

}  // namespace rl::cuda
