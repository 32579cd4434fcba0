// Multi-head latent attention over the paged latent cache (FlashMLA-style): absorbed queries q_lat (576 wide per
// head: 512 latent + 64 RoPE) against cache rows of the same width, output the attended latent (512 wide).
// All query heads of a token share one cache row, so a block packs (token, head) rows of one sequence, loads each
// latent tile once for all of them and runs S = Q·Kᵀ and O += P·V as tensor-core GEMMs (mma.sync m16n8k16, bf16 →
// f32), the softmax online per row in the log2 domain. Tiles come in through a cp.async pipeline into XOR-swizzled
// shared memory. Layout, warp roles and tile sizes: kernel_config.h ("Multi-head latent attention").
//
// Key splits (flash decoding): blockIdx.y is a split; a sequence spreads its tiles over as many splits as it fills
// (from its own length, read on the device), so a grid sized for max_model_len serves any shorter context. With
// more than one split, every block stores per row its unnormalized o and (m, l) and mla_combine_kernel merges the
// splits in increasing order; with one split the block writes the output. Deterministic mode fixes the split to
// kMlaDetChunkTiles tiles at absolute key positions (parallel), or walks the chunks in one block merging them in
// registers (CHUNKSEQ) with the same merge functions, so both schedules and every batch give the same bits.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mla_kernels.h"
#include "backend/cuda/mma_sm80.cuh"

namespace rl::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kR = 512, kD = 576;       // kv_lora_rank, latent (kv_lora_rank + rope 64)
constexpr int kChunks = kD / 8;         // 16-byte chunks per latent row
constexpr uint32_t kRowBytes = kD * 2;  // 1152
constexpr int kBN = kMlaBlockN;
constexpr int kWarps = kMlaThreads / 32;
constexpr int kColsPerWarp = kR / kWarps;       // 64 output columns per warp in O += P·V
constexpr int kSStride = kBN + 4;               // f32 scores per row in shared memory (16-byte aligned rows)
constexpr uint32_t kPRowBytes = (kBN + 8) * 2;  // bf16 probabilities, 80 B rows: ldmatrix rows hit distinct banks

// Byte offset of 16-byte chunk `chunk` of latent row `row` (72 chunks; the XOR stays inside an 8-chunk group).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row) * kRowBytes + static_cast<uint32_t>((chunk ^ (row & 7)) << 4);
}

// Split / chunk states are merged in increasing order with explicitly rounded products and sums (no contraction
// can differ between the in-register and the combine-kernel merge). A state with m = -inf (no visible key) is
// skipped by the callers.
struct Merge {
  float ct, cc;  // factors of the running total and of the merged state
};
__device__ __forceinline__ Merge merge_state(float& m_t, float& l_t, float m_c, float l_c) {
  const float m_new = fmaxf(m_t, m_c);
  Merge f;
  f.ct = fast_exp2(m_t - m_new);
  f.cc = fast_exp2(m_c - m_new);
  l_t = __fadd_rn(__fmul_rn(l_t, f.ct), __fmul_rn(l_c, f.cc));
  m_t = m_new;
  return f;
}
__device__ __forceinline__ float merge_o(float o_t, float o_c, Merge f) {
  return __fadd_rn(__fmul_rn(o_t, f.ct), __fmul_rn(o_c, f.cc));
}

struct MlaParams {
  MlaAttentionArgs a;
  float* partial_o;     // [num_tokens * num_heads * num_splits, 512]
  float* partial_ml;    // [num_tokens * num_heads * num_splits, 2]
  int num_splits;       // gridDim.y
  int tiles_per_split;  // > 0: fixed (deterministic chunks); 0: from each sequence's length
  int log2_bs;
};

template <int BM>
struct MlaSmem {
  static constexpr uint32_t kQ = BM * kRowBytes;
  static constexpr uint32_t kTile = kBN * kRowBytes;
  static constexpr uint32_t kS = BM * kSStride * 4;
  static constexpr uint32_t kP = BM * kPRowBytes;
  static constexpr uint32_t kStats = 8 * BM * 4;
  static constexpr uint32_t bytes(int stages) { return kQ + stages * kTile + kS + kP + kStats; }
};

// BM query rows per block (16, 32, 64), STAGES latent tiles in flight, CHUNKSEQ: deterministic chunks walked and
// merged in registers (BM = 16, one split).
template <int BM, int STAGES, bool CHUNKSEQ>
__global__ void __launch_bounds__(kMlaThreads, BM >= 32 ? 1 : 2) mla_attention_kernel(MlaParams p) {
  static_assert(!CHUNKSEQ || BM == 16, "in-register chunk totals: one m-tile");
  constexpr int MT = BM / 16;
  using Smem = MlaSmem<BM>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t skv0 = sq + Smem::kQ;
  float* s_scores = reinterpret_cast<float*>(smem + Smem::kQ + STAGES * Smem::kTile);
  unsigned char* s_p = smem + Smem::kQ + STAGES * Smem::kTile + Smem::kS;
  const uint32_t sp = sq + Smem::kQ + STAGES * Smem::kTile + Smem::kS;
  float* row_m = reinterpret_cast<float*>(s_p + Smem::kP);
  float* row_l = row_m + BM;
  float* row_corr = row_l + BM;
  // CHUNKSEQ: the merged chunks so far per row, and the factors of the last merge.
  float* tot_m = row_corr + BM;
  float* tot_l = tot_m + BM;

  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const MlaAttentionArgs& a = p.a;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const int nh = static_cast<int>(a.num_heads);
  const int split = blockIdx.y, s = blockIdx.z;
  const int q_start = a.cu_seqlens_q[s], q_len = a.cu_seqlens_q[s + 1] - q_start;
  const int num_rows = q_len * nh;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;  // longest causal rows first (prefill)
  if (m0 >= num_rows) return;  // block-uniform; such rows do not exist, nothing reads their states
  const int seq_len = a.seq_lens_k[s];
  const int offset = seq_len - q_len;  // position of the sequence's first query token
  const int last_row = min(m0 + BM, num_rows) - 1;
  const int k_end = min(seq_len, offset + last_row / nh + 1);  // keys visible to some row of the block
  const int n_tiles = (k_end + kBN - 1) / kBN;
  int t_begin = 0, t_end = n_tiles;
  if (!CHUNKSEQ) {
    const int seq_tiles = (seq_len + kBN - 1) / kBN;
    const int tps = p.tiles_per_split > 0
                        ? p.tiles_per_split
                        : max(static_cast<int>(kMlaMinTilesPerSplit), (seq_tiles + p.num_splits - 1) / p.num_splits);
    t_begin = split * tps;
    t_end = min(n_tiles, t_begin + tps);
  }
  const bool partial = !CHUNKSEQ && p.num_splits > 1;
  if (t_begin >= t_end) {
    // No key of this split is visible to the block: its rows' states are empty (the combine skips them).
    if (partial) {
      for (int r = tid; r < BM && m0 + r < num_rows; r += blockDim.x) {
        const int row = m0 + r;
        const int64_t slot = ((static_cast<int64_t>(q_start) + row / nh) * nh + row % nh) * p.num_splits + split;
        p.partial_ml[2 * slot] = -INFINITY;
        p.partial_ml[2 * slot + 1] = 0.0f;
      }
    }
    return;
  }

  // Q rows (token m0/nh.., head-fastest); rows past the sequence are zero.
  for (int i = tid; i < BM * kChunks; i += kMlaThreads) {
    const int r = i / kChunks, c = i % kChunks, row = m0 + r;
    const bool valid = row < num_rows;
    const uint16_t* src =
        a.q_lat + (valid ? ((static_cast<int64_t>(q_start) + row / nh) * nh + row % nh) * kD + c * 8 : 0);
    cp_async16(sq + swz(r, c), src, valid);
  }
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks;
  const int bs_mask = (1 << p.log2_bs) - 1;
  // Latent tile nb → stage: 32 rows × 72 chunks = 9 chunks per thread; keys past k_end are zero-filled (never NaN).
  auto load_tile = [&](int nb, int stage) {
    const uint32_t base = skv0 + stage * Smem::kTile;
#pragma unroll
    for (int j = 0; j < kBN * kChunks / kMlaThreads; ++j) {
      const int i = tid + j * kMlaThreads;
      const int r = i / kChunks, c = i % kChunks, key = nb * kBN + r;
      const bool valid = key < k_end;
      int64_t off = 0;
      if (valid) {
        const int64_t slot = (static_cast<int64_t>(table[key >> p.log2_bs]) << p.log2_bs) + (key & bs_mask);
        off = slot * kD + c * 8;
      }
      cp_async16(base + swz(r, c), a.cache + off, valid);
    }
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (t_begin + st < t_end) load_tile(t_begin + st, st);
    cp_async_commit();
  }
  for (int r = tid; r < BM; r += kMlaThreads) {
    row_m[r] = -INFINITY;
    row_l[r] = 0.0f;
    tot_m[r] = -INFINITY;
    tot_l[r] = 0.0f;
  }

  float o[MT][kColsPerWarp / 8][4];
  float tot_o[CHUNKSEQ ? kColsPerWarp / 8 : 1][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < kColsPerWarp / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
#pragma unroll
  for (int i = 0; i < (CHUNKSEQ ? kColsPerWarp / 8 : 1); ++i)
    tot_o[i][0] = tot_o[i][1] = tot_o[i][2] = tot_o[i][3] = 0.0f;
  const float scale_log2 = a.scale * kLog2e;

  for (int nb = t_begin; nb < t_end; ++nb) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile nb has landed for every thread; the stage loaded next was consumed last iteration
    {
      const int nx = nb + STAGES - 1;
      if (nx < t_end) load_tile(nx, (nx - t_begin) % STAGES);
      cp_async_commit();
    }
    const uint32_t skv = skv0 + ((nb - t_begin) % STAGES) * Smem::kTile;
    // S = Q Kᵀ: m16n8 score tiles (MT × 4), one MMA chain over the 36 k-steps each. 64 rows: a warp takes an
    // n-tile pair of one m-tile (ldmatrix x4); fewer rows: one n-tile per warp (x2), so more warps work.
    if constexpr (MT == 4) {
      const int mt = warp >> 1, nt0 = (warp & 1) * 2;
      float sc[2][4] = {};
#pragma unroll 4
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t qf[4], b[4];
        ldmatrix_x4(qf, sq + swz(mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
        ldmatrix_x4(b, skv + swz(nt0 * 8 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)));
        mma_bf16(sc[0], qf, b[0], b[1]);
        mma_bf16(sc[1], qf, b[2], b[3]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float* dst = s_scores + (mt * 16 + lane / 4) * kSStride + (nt0 + j) * 8 + 2 * (lane & 3);
        *reinterpret_cast<float2*>(dst) = make_float2(sc[j][0], sc[j][1]);
        *reinterpret_cast<float2*>(dst + 8 * kSStride) = make_float2(sc[j][2], sc[j][3]);
      }
    } else {
      if (warp < MT * 4) {
        const int mt = warp >> 2, nt = warp & 3;
        float sc[4] = {};
#pragma unroll 4
        for (int kk = 0; kk < kD / 16; ++kk) {
          uint32_t qf[4], b[2];
          ldmatrix_x4(qf, sq + swz(mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
          ldmatrix_x2(b, skv + swz(nt * 8 + (lane & 7), kk * 2 + ((lane >> 3) & 1)));
          mma_bf16(sc, qf, b[0], b[1]);
        }
        float* dst = s_scores + (mt * 16 + lane / 4) * kSStride + nt * 8 + 2 * (lane & 3);
        *reinterpret_cast<float2*>(dst) = make_float2(sc[0], sc[1]);
        *reinterpret_cast<float2*>(dst + 8 * kSStride) = make_float2(sc[2], sc[3]);
      }
    }
    __syncthreads();
    // Online softmax: 4 threads per row, 8 keys each (the same thread layout for every BM, so a row's sums are
    // formed in one order). Masked keys (past the row's position) give p = 0 exactly.
    for (int r = tid >> 2; r < BM; r += kMlaThreads / 4) {
      const int qd = tid & 3, row = m0 + r;
      const int pos = row < num_rows ? offset + row / nh : -1;
      const float4 v0 = *reinterpret_cast<const float4*>(s_scores + r * kSStride + qd * 8);
      const float4 v1 = *reinterpret_cast<const float4*>(s_scores + r * kSStride + qd * 8 + 4);
      float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
      const int key0 = nb * kBN + qd * 8;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (key0 + j > pos) v[j] = -INFINITY;
        mx = fmaxf(mx, v[j]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx * scale_log2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float corr = fast_exp2(m_old - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[j] = fast_exp2(fmaf(v[j], scale_log2, -m_use));
        sum += v[j];
      }
      *reinterpret_cast<uint4*>(s_p + r * kPRowBytes + qd * 16) = make_uint4(
          pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (qd == 0) {
        row_m[r] = m_new;
        row_l[r] = __fmaf_rn(row_l[r], corr, sum);
        row_corr[r] = corr;
      }
    }
    __syncthreads();
    // O = O · corr + P V over this warp's 64 columns (the first 512 of the latent rows are V).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const float c0 = row_corr[mt * 16 + lane / 4], c1 = row_corr[mt * 16 + lane / 4 + 8];
#pragma unroll
      for (int dt = 0; dt < kColsPerWarp / 8; ++dt) {
        o[mt][dt][0] *= c0;
        o[mt][dt][1] *= c0;
        o[mt][dt][2] *= c1;
        o[mt][dt][3] *= c1;
      }
    }
#pragma unroll
    for (int t = 0; t < kBN / 16; ++t) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        ldmatrix_x4(pa[mt], sp + (mt * 16 + (lane & 15)) * kPRowBytes + (t * 2 + (lane >> 4)) * 16);
      }
#pragma unroll
      for (int dt = 0; dt < kColsPerWarp / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(
            b, skv + swz(t * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), warp * (kColsPerWarp / 8) + dt + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(o[mt][dt], pa[mt], b[0], b[1]);
          mma_bf16(o[mt][dt + 1], pa[mt], b[2], b[3]);
        }
      }
    }
    if constexpr (CHUNKSEQ) {
      if ((nb + 1) % kMlaDetChunkTiles == 0 || nb + 1 == t_end) {
        // End of a chunk: fold its state into the totals, restart from a fresh state.
        float* f_ct = tot_l + BM;
        float* f_cc = f_ct + BM;
        int* f_skip = reinterpret_cast<int*>(f_cc + BM);
        __syncthreads();
        for (int r = tid; r < BM; r += kMlaThreads) {
          const float m_c = row_m[r], l_c = row_l[r];
          f_skip[r] = m_c == -INFINITY;
          if (m_c != -INFINITY) {
            const Merge f = merge_state(tot_m[r], tot_l[r], m_c, l_c);
            f_ct[r] = f.ct;
            f_cc[r] = f.cc;
          }
          row_m[r] = -INFINITY;
          row_l[r] = 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = lane / 4 + 8 * h;
          if (!f_skip[r]) {
            const Merge f{f_ct[r], f_cc[r]};
#pragma unroll
            for (int dt = 0; dt < kColsPerWarp / 8; ++dt) {
              tot_o[dt][2 * h] = merge_o(tot_o[dt][2 * h], o[0][dt][2 * h], f);
              tot_o[dt][2 * h + 1] = merge_o(tot_o[dt][2 * h + 1], o[0][dt][2 * h + 1], f);
            }
          }
#pragma unroll
          for (int dt = 0; dt < kColsPerWarp / 8; ++dt) o[0][dt][2 * h] = o[0][dt][2 * h + 1] = 0.0f;
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // final row states visible

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = mt * 16 + lane / 4 + 8 * h, row = m0 + r;
      if (row >= num_rows) continue;
      const int64_t qrow = (static_cast<int64_t>(q_start) + row / nh) * nh + row % nh;  // token * nh + head
      const int col = warp * kColsPerWarp + 2 * (lane & 3);
      if (partial) {
        const int64_t slot = qrow * p.num_splits + split;
        float* po = p.partial_o + slot * kR + col;
#pragma unroll
        for (int dt = 0; dt < kColsPerWarp / 8; ++dt) {
          *reinterpret_cast<float2*>(po + dt * 8) = make_float2(o[mt][dt][2 * h], o[mt][dt][2 * h + 1]);
        }
        if (warp == 0 && (lane & 3) == 0) {
          p.partial_ml[2 * slot] = row_m[r];
          p.partial_ml[2 * slot + 1] = row_l[r];
        }
      } else {
        uint16_t* dst = a.out + qrow * kR + col;
        if constexpr (CHUNKSEQ) {
          const float inv = tot_l[r] > 0.0f ? 1.0f / tot_l[r] : 0.0f;
#pragma unroll
          for (int dt = 0; dt < kColsPerWarp / 8; ++dt) {
            *reinterpret_cast<uint32_t*>(dst + dt * 8) =
                pack_bf16x2(tot_o[dt][2 * h] * inv, tot_o[dt][2 * h + 1] * inv);
          }
        } else {
          const float inv = row_l[r] > 0.0f ? 1.0f / row_l[r] : 0.0f;
#pragma unroll
          for (int dt = 0; dt < kColsPerWarp / 8; ++dt) {
            *reinterpret_cast<uint32_t*>(dst + dt * 8) =
                pack_bf16x2(o[mt][dt][2 * h] * inv, o[mt][dt][2 * h + 1] * inv);
          }
        }
      }
    }
  }
}

// Merges the splits of one (token, head) row in increasing order (merge_state), normalizes, writes bf16. One block
// of 128 threads per row, 4 columns each.
__global__ void __launch_bounds__(128) mla_combine_kernel(MlaParams p) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const int c = threadIdx.x * 4;
  float4 tot = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float m_t = -INFINITY, l_t = 0.0f;
  for (int sp = 0; sp < p.num_splits; ++sp) {
    const int64_t slot = row * p.num_splits + sp;
    const float m_c = p.partial_ml[2 * slot], l_c = p.partial_ml[2 * slot + 1];
    if (m_c == -INFINITY) continue;
    const Merge f = merge_state(m_t, l_t, m_c, l_c);
    const float4 v = *reinterpret_cast<const float4*>(p.partial_o + slot * kR + c);
    tot.x = merge_o(tot.x, v.x, f);
    tot.y = merge_o(tot.y, v.y, f);
    tot.z = merge_o(tot.z, v.z, f);
    tot.w = merge_o(tot.w, v.w, f);
  }
  const float inv = l_t > 0.0f ? 1.0f / l_t : 0.0f;
  *reinterpret_cast<uint2*>(p.a.out + row * kR + c) =
      make_uint2(pack_bf16x2(tot.x * inv, tot.y * inv), pack_bf16x2(tot.z * inv, tot.w * inv));
}

// Any shape (latent ≤ 576, kv_lora_rank ≤ 512, any block size): one warp per (token, head), exact online softmax
// in f32 over the keys in order. Slow; serves the small test widths and is the kernel lab's first version.
constexpr int kNaiveMaxLat = 576 / 32;
constexpr int kNaiveMaxR = 512 / 32;
__global__ void mla_attention_naive_kernel(MlaAttentionArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= a.num_tokens * a.num_heads) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = row / a.num_heads;
  int lo = 0, hi = static_cast<int>(a.num_seqs) - 1;  // the sequence holding token t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.cu_seqlens_q[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int s = lo;
  const int q_len = a.cu_seqlens_q[s + 1] - a.cu_seqlens_q[s];
  const int64_t nk = a.seq_lens_k[s] - q_len + (t - a.cu_seqlens_q[s]) + 1;
  const int lat = static_cast<int>(a.kv_lora_rank + a.rope_dim), r = static_cast<int>(a.kv_lora_rank);
  float q[kNaiveMaxLat], acc[kNaiveMaxR];
#pragma unroll
  for (int i = 0; i < kNaiveMaxLat; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < lat ? bf16_bits_to_f32(a.q_lat[row * lat + d]) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kNaiveMaxR; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int32_t* table = a.block_tables + s * a.max_blocks;
  for (int64_t j = 0; j < nk; ++j) {
    const uint16_t* kr =
        a.cache + (static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size) * lat;
    float k[kNaiveMaxLat];
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kNaiveMaxLat; ++i) {
      const int d = lane + 32 * i;
      k[i] = d < lat ? bf16_bits_to_f32(kr[d]) : 0.0f;
      dot = fmaf(q[i], k[i], dot);
    }
    const float sc = warp_sum(dot) * a.scale;
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new), pj = expf(sc - m_new);
    l = l * corr + pj;
    m = m_new;
#pragma unroll
    for (int i = 0; i < kNaiveMaxR; ++i) acc[i] = acc[i] * corr + (lane + 32 * i < r ? pj * k[i] : 0.0f);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int i = 0; i < kNaiveMaxR; ++i) {
    const int d = lane + 32 * i;
    if (d < r) a.out[row * r + d] = f32_to_bf16_bits(acc[i] * inv);
  }
}

// The kernel instance with its dynamic shared memory limit raised (once per instance: the attribute is per
// function; before it is set the occupancy query would see the default 48 KB limit).
template <int BM, int STAGES, bool CHUNKSEQ>
auto configured_kernel() {
  auto kernel = mla_attention_kernel<BM, STAGES, CHUNKSEQ>;
  static bool configured = false;
  if (!configured) {
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(MlaSmem<BM>::bytes(STAGES))));
    configured = true;
  }
  return kernel;
}

template <int BM, int STAGES, bool CHUNKSEQ>
void launch_bm(const MlaParams& p, cudaStream_t stream) {
  const uint32_t smem = MlaSmem<BM>::bytes(STAGES);
  auto kernel = configured_kernel<BM, STAGES, CHUNKSEQ>();
  const dim3 grid(ceil_div(p.a.max_seqlen_q * p.a.num_heads, BM), static_cast<unsigned int>(p.num_splits),
                  static_cast<unsigned int>(p.a.num_seqs));
  launch_pdl(kernel, grid, dim3(kMlaThreads), smem, stream, p);
  RL_CUDA_CHECK_LAUNCH();
  if (!CHUNKSEQ && p.num_splits > 1) {
    launch_pdl(mla_combine_kernel, dim3(static_cast<unsigned int>(p.a.num_tokens * p.a.num_heads)), dim3(kR / 4), 0,
               stream, p);
    RL_CUDA_CHECK_LAUNCH();
  }
}

// Rows per block for a step whose longest sequence has max_rows (token, head) rows.
int rows_per_block(int64_t max_rows) { return max_rows >= 64 ? 64 : max_rows >= 32 ? 32 : 16; }

void launch_rows(int bm, const MlaParams& p, cudaStream_t stream) {
  if (bm == 64) {
    launch_bm<64, kMlaStages, false>(p, stream);
  } else if (bm == 32) {
    launch_bm<32, kMlaStages, false>(p, stream);
  } else {
    launch_bm<16, kMlaStages16, false>(p, stream);
  }
}

// Resident blocks per SM of the instance serving bm rows (shared memory and registers bound it), queried once.
int blocks_per_sm(int bm) {
  static int cached[3] = {};
  const int i = bm == 64 ? 0 : bm == 32 ? 1 : 2;
  if (cached[i] == 0) {
    int n = 0;
    if (bm == 64) {
      RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, configured_kernel<64, kMlaStages, false>(),
                                                                  kMlaThreads, MlaSmem<64>::bytes(kMlaStages)));
    } else if (bm == 32) {
      RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, configured_kernel<32, kMlaStages, false>(),
                                                                  kMlaThreads, MlaSmem<32>::bytes(kMlaStages)));
    } else {
      RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, configured_kernel<16, kMlaStages16, false>(),
                                                                  kMlaThreads, MlaSmem<16>::bytes(kMlaStages16)));
    }
    cached[i] = std::max(n, 1);
  }
  return cached[i];
}

}  // namespace

bool mla_attention_fast_supported(const MlaAttentionArgs& a) {
  return a.kv_lora_rank == kR && a.rope_dim == kD - kR && a.block_size > 0 && (a.block_size & (a.block_size - 1)) == 0;
}

bool mla_attention_naive_supported(const MlaAttentionArgs& a) {
  return a.latent() <= 32 * kNaiveMaxLat && a.kv_lora_rank <= 32 * kNaiveMaxR && a.block_size > 0;
}

void launch_mla_attention(const MlaAttentionArgs& a, const MlaWorkspace& ws, bool deterministic, int num_sms,
                          cudaStream_t stream, int64_t splits_override, bool force_naive) {
  if (a.num_tokens == 0 || a.num_seqs == 0) return;
  if (force_naive || !mla_attention_fast_supported(a)) {
    constexpr int kWarpsPerBlock = 4;
    launch_pdl(mla_attention_naive_kernel, dim3(ceil_div(a.num_tokens * a.num_heads, kWarpsPerBlock)),
               dim3(kWarpsPerBlock * 32), 0, stream, a);
    RL_CUDA_CHECK_LAUNCH();
    return;
  }
  MlaParams p{a, nullptr, nullptr, 1, 0, 0};
  while ((int64_t(1) << p.log2_bs) < a.block_size) ++p.log2_bs;
  const int64_t rows = a.num_tokens * a.num_heads;
  const int bm = rows_per_block(a.max_seqlen_q * a.num_heads);
  const int64_t max_tiles = (a.max_seqlen_k + kBN - 1) / kBN;
  int64_t splits = 1;
  if (deterministic) {
    // Fixed chunks: in parallel when their states fit the workspace, else walked in registers (same bits).
    const int64_t chunks = (max_tiles + kMlaDetChunkTiles - 1) / kMlaDetChunkTiles;
    if (chunks > 1 && chunks <= 65535 && rows * chunks * kMlaPartialFloats <= ws.capacity_floats) {
      splits = chunks;
      p.tiles_per_split = kMlaDetChunkTiles;
    } else if (chunks > 1) {
      launch_bm<16, kMlaStages16, true>(p, stream);
      return;
    }
  } else if (splits_override > 0) {
    splits = std::min<int64_t>(splits_override, ws.capacity_floats / (rows * kMlaPartialFloats));
  } else {
    const int64_t base = a.num_seqs * ((a.max_seqlen_q * a.num_heads + bm - 1) / bm);
    splits = mla_num_splits(base, a.max_seqlen_k, rows, ws.capacity_floats,
                            static_cast<int64_t>(blocks_per_sm(bm)) * num_sms);
  }
  p.num_splits = static_cast<int>(std::max<int64_t>(1, splits));
  const int64_t o_floats = rows * p.num_splits * kR;
  p.partial_o = ws.data;
  p.partial_ml = ws.data + o_floats;
  launch_rows(bm, p, stream);
}

}  // namespace rl::cuda
