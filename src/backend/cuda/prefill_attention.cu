// FlashAttention-2 style prefill attention on tensor cores (mma.sync m16n8k16 bf16 → f32), head_dim 64, 128 or
// 256, for varlen batches with a causal mask offset by the prefix already in the cache, K/V read through block
// tables, GQA. One block = (query tile of 16 · WARPS · MT rows, query head or, GQA-packed, kv head, sequence);
// each warp owns MT × 16 query rows and keeps their S tiles and O accumulators in registers (online softmax in
// the log2 domain); Q fragments are re-read from shared memory per k-step. K/V tiles of kPrefillBlockN keys are
// gathered page by page with cp.async into XOR-swizzled shared memory (16-byte chunk index ^ row % 8, so ldmatrix
// rows hit distinct banks), double-buffered: the next tile loads during compute.
//
// FP8 (e4m3) KV cache (FP8 = true, plain mode only): the raw bytes are staged by cp.async into plain row-major
// tiles, double-buffered as above; after its wait each thread widens exactly the 16-byte chunks it copied itself
// (so no barrier between the copy and the read) into the one stage of bf16 K/V tiles, which a barrier then hands to
// every warp. The widening is exact, so the MMAs and their numerics are the bf16 kernel's on the widened values;
// one bf16 stage plus two fp8 stages take no more shared memory than two bf16 stages.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile with D/8 chunks per row.
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row * D * 2 + ((chunk ^ (row & 7)) << 4));
}

// Fixed-size KV chunks (deterministic mode, kernel_config.h kDetChunkKeys): a row's keys are cut at absolute key
// positions 0, C, 2C, ...; each chunk runs the usual online softmax from a fresh state, and the chunks' states
// (m in the scaled log2 domain, l the row sum, unnormalized o) are merged in increasing chunk order with
// merge_chunk / merge_o. The same two functions merge in registers (one block walks all chunks) and in
// combine_chunks_kernel (one block per chunk, states through global memory), with explicitly rounded products
// and sums (no contraction), so both give the same bits and the choice between them may depend on the batch.
struct ChunkMerge {
  float ct, cc;  // factors of the running total and of the chunk
};
// Folds chunk state (m_c, l_c) into the running (m_t, l_t); returns the factors for the o columns. A chunk with
// no visible key (m_c = -inf) is skipped by the callers.
__device__ __forceinline__ ChunkMerge merge_chunk(float& m_t, float& l_t, float m_c, float l_c) {
  const float m_new = fmaxf(m_t, m_c);
  ChunkMerge f;
  f.ct = fast_exp2(m_t - m_new);  // 0 when the total is still empty (m_t = -inf)
  f.cc = fast_exp2(m_c - m_new);
  l_t = __fadd_rn(__fmul_rn(l_t, f.ct), __fmul_rn(l_c, f.cc));
  m_t = m_new;
  return f;
}
__device__ __forceinline__ float merge_o(float o_t, float o_c, ChunkMerge f) {
  return __fadd_rn(__fmul_rn(o_t, f.ct), __fmul_rn(o_c, f.cc));
}

// MODE: kPlain (one online softmax over every key tile from key 0), kChunkSeq (fixed-size chunks merged in
// registers; one m-tile per warp so the running totals fit), kChunkPar (this block computes one chunk, blockIdx.z
// = sequence · num_chunks + chunk, and stores its rows' states for combine_chunks_kernel).
enum AttnMode : int { kPlain = 0, kChunkSeq = 1, kChunkPar = 2 };

// WARPS warps × MT m16 tiles of query rows per block. PACK: a block serves one kv head, and its tile rows are
// (token, head of the GQA group) pairs, row i = token i / group, head kvh · group + i % group, so each K/V tile
// is loaded once for the whole group (decode: one block per (sequence, kv head) instead of per query head).
// Without PACK, row i = token i of query head blockIdx.y. Each row's arithmetic is the same in every
// instantiation (the same key tiles from key 0, the same MMA chains and softmax steps; skipped or fully masked
// tiles are exact no-ops), so a row's output bits do not depend on the instantiation or on the other rows.
// FP8: k_cache / v_cache hold e4m3 bytes (top comment); the rows' arithmetic is that of the bf16 kernel on the
// widened values.
template <int D, int BN, int WARPS, int MT, bool PACK, int MODE = kPlain, bool FP8 = false>
__global__ void __launch_bounds__(WARPS * 32, 2)
    prefill_attention_kernel(AttentionArgs a, int log2_bs, ChunkWorkspace ws) {
  static_assert(MODE == kPlain || (MT == 1 && kDetChunkKeys % BN == 0), "chunked modes: one m-tile, whole tiles");
  static_assert(!FP8 || MODE == kPlain, "the FP8 KV cache: plain mode only");
  constexpr int kTilesPerChunk = kDetChunkKeys / BN;
  constexpr int BM = 16 * WARPS * MT, kChunks = D / 8, kThreads = WARPS * 32;
  // FP8 staging: each thread copies one fixed 16-byte (16-code) column chunk of every kRows8-th key row.
  constexpr int kChunks8 = D / 16, kRows8 = kThreads / kChunks8;
  static_assert(!FP8 || (kThreads % kChunks8 == 0 && BN % kRows8 == 0), "FP8: whole rows per pass, whole passes");
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // Stage st of K is at sk0 + st * kTile, of V at sv0 + st * kTile (arithmetic, not an array: a runtime-indexed
  // array of addresses would live in local memory). FP8: one bf16 stage of each, then the raw tiles ([BN][D]
  // bytes, unswizzled), staging stage st of K at sk8 + st * kTile8, of V at sv8 + st * kTile8.
  constexpr uint32_t kTile = BN * D * 2, kTile8 = BN * D;
  constexpr int kStages = FP8 ? 1 : 2;
  const uint32_t sk0 = sq + BM * D * 2, sv0 = sk0 + kStages * kTile;
  const uint32_t sk8 = sv0 + kTile, sv8 = sk8 + 2 * kTile8;  // FP8 only

  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const int s = MODE == kChunkPar ? static_cast<int>(blockIdx.z) / ws.num_chunks : static_cast<int>(blockIdx.z);
  const int chunk = MODE == kChunkPar ? static_cast<int>(blockIdx.z) % ws.num_chunks : 0;
  const int group = static_cast<int>(a.num_heads / a.num_kv_heads);
  const int G = PACK ? group : 1;  // tile rows per query token
  const int kvh = PACK ? static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.y) / group;
  const int m_block = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
  const int q_start = a.cu_seqlens_q[s], q_len = a.cu_seqlens_q[s + 1] - q_start;
  const int num_rows = q_len * G;
  const int m0 = m_block * BM;
  if (m0 >= num_rows) return;
  const int seq_len_k = a.seq_lens_k[s];
  const int offset = seq_len_k - q_len;  // position of query token t is offset + t; tile row i holds token i / G
  // Row i → (token, head).
  auto row_token = [&](int i) { return PACK ? i / G : i; };
  auto row_head = [&](int i) { return PACK ? kvh * G + i % G : static_cast<int>(blockIdx.y); };
  const int k_end = min(seq_len_k, offset + row_token(min(m0 + BM, num_rows) - 1) + 1);  // keys visible to the tile
  int num_n_blocks = (k_end + BN - 1) / BN;
  int nb_begin = 0;
  if (MODE == kChunkPar) {
    nb_begin = chunk * kTilesPerChunk;
    num_n_blocks = min(num_n_blocks, nb_begin + kTilesPerChunk);
    if (nb_begin >= num_n_blocks) return;  // no row of this block sees a key of this chunk
  }
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const int bs_mask = (1 << log2_bs) - 1;
  const int64_t kv_stride = a.num_kv_heads * D;
  const int warp_row0 = warp * 16 * MT;                // first tile row of this warp
  const int warp_last_pos = offset + row_token(m0 + warp_row0 + 16 * MT - 1);  // the warp sees no key past this

  // Q tile: rows past the sequence are zero-filled (their results are never stored).
  for (int i = tid; i < BM * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = m0 + r < num_rows;
    const uint16_t* src =
        a.qkv + (valid ? (q_start + row_token(m0 + r)) * a.row + static_cast<int64_t>(row_head(m0 + r)) * D + c * 8 : 0);
    cp_async16(sq + swz<D>(r, c), src, valid);
  }
  // Each thread copies one fixed 16-byte column chunk of every (kThreads / kChunks)-th key row. FP8: of the raw
  // bytes into staging stage `stage`; keys past the sequence end are zero-filled, which widens to 0.0.
  auto load_kv = [&](int nb, int stage) {
    if constexpr (FP8) {
      const int c = tid % kChunks8;
      const uint8_t* k8 = reinterpret_cast<const uint8_t*>(a.k_cache);
      const uint8_t* v8 = reinterpret_cast<const uint8_t*>(a.v_cache);
#pragma unroll
      for (int i = 0; i < BN / kRows8; ++i) {
        const int r = tid / kChunks8 + i * kRows8;
        const int key = nb * BN + r;
        const bool valid = key < seq_len_k;
        int64_t off = 0;
        if (valid) {
          const int64_t slot = (static_cast<int64_t>(table[key >> log2_bs]) << log2_bs) + (key & bs_mask);
          off = slot * kv_stride + kvh * D + c * 16;
        }
        cp_async16(sk8 + stage * kTile8 + r * D + c * 16, k8 + off, valid);
        cp_async16(sv8 + stage * kTile8 + r * D + c * 16, v8 + off, valid);
      }
    } else {
      const int c = tid % kChunks;
#pragma unroll
      for (int r = tid / kChunks; r < BN; r += kThreads / kChunks) {
        const int key = nb * BN + r;
        const bool valid = key < seq_len_k;
        int64_t off = 0;
        if (valid) {
          const int64_t slot = (static_cast<int64_t>(table[key >> log2_bs]) << log2_bs) + (key & bs_mask);
          off = slot * kv_stride + kvh * D + c * 8;
        }
        cp_async16(sk0 + stage * kTile + swz<D>(r, c), a.k_cache + off, valid);
        cp_async16(sv0 + stage * kTile + swz<D>(r, c), a.v_cache + off, valid);
      }
    }
  };
  // FP8: widens the chunks this thread copied into staging stage `stage` (complete for it after its own
  // cp_async_wait, no barrier) into the bf16 tiles: 16 codes → bf16 chunks 2c and 2c + 1 of the row. Threads with
  // c % 8 ≥ 4 store the high chunk first, so each quarter-warp's first (and second) stores fall in 8 distinct bank
  // groups for D = 128 and 256 (with both chunks in the same order, chunks 2c ^ (r & 7) cover only 4 of the 8).
  auto widen_kv = [&](int stage) {
    const int c = tid % kChunks8;
    const int hi_first = (c >> 2) & 1;
#pragma unroll
    for (int i = 0; i < BN / kRows8; ++i) {
      const int r = tid / kChunks8 + i * kRows8;
      const uint32_t first = swz<D>(r, 2 * c + hi_first), second = swz<D>(r, 2 * c + 1 - hi_first);
      // Both loads first: the asm statements keep program order, so this overlaps their latencies.
      const uint32_t src = stage * kTile8 + r * D + c * 16;
      const uint4 raw[2] = {lds128(sk8 + src), lds128(sv8 + src)};
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint4 lo = fp8x8_to_bf16x8(make_uint2(raw[kv].x, raw[kv].y));
        const uint4 hi = fp8x8_to_bf16x8(make_uint2(raw[kv].z, raw[kv].w));
        const uint32_t dst = kv ? sv0 : sk0;
        sts128(dst + first, hi_first ? hi : lo);
        sts128(dst + second, hi_first ? lo : hi);
      }
    }
  };
  load_kv(nb_begin, 0);
  cp_async_commit();

  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  float row_m[MT][2], row_l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    row_m[mt][0] = row_m[mt][1] = -INFINITY;
    row_l[mt][0] = row_l[mt][1] = 0.0f;
  }
  const float scale_log2 = a.scale * kLog2e;
  // This thread's rows: m-tile mt holds tile rows warp_row0 + mt * 16 + lane / 4 (+ 8).
  const int row0 = m0 + warp_row0 + lane / 4;
  // kChunkSeq: the merged state of the chunks done so far (only the first m-tile; MT == 1 there).
  float tot_o[MODE == kChunkSeq ? D / 8 : 1][4];
  float tot_m[2] = {-INFINITY, -INFINITY}, tot_l[2] = {0.0f, 0.0f};
  if (MODE == kChunkSeq) {
#pragma unroll
    for (int i = 0; i < (MODE == kChunkSeq ? D / 8 : 1); ++i) {
      tot_o[i][0] = tot_o[i][1] = tot_o[i][2] = tot_o[i][3] = 0.0f;
    }
  }

  for (int nb = nb_begin; nb < num_n_blocks; ++nb) {
    const int stage = (nb - nb_begin) & 1;  // FP8: of the staging tiles; the bf16 tiles have one stage
    const uint32_t sk = sk0 + (FP8 ? 0 : stage * kTile), sv = sv0 + (FP8 ? 0 : stage * kTile);
    if (nb + 1 < num_n_blocks) load_kv(nb + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    if constexpr (FP8) widen_kv(stage);
    __syncthreads();
    const int n0 = nb * BN;
    // Causal block skipping per warp: a key tile wholly past the warp's last row contributes nothing.
    if (n0 <= warp_last_pos) {
      // S = Q Kᵀ for this warp's MT × 16 rows × BN keys; each K fragment feeds MT MMAs.
      float sc[MT][BN / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) sc[mt][i][0] = sc[mt][i][1] = sc[mt][i][2] = sc[mt][i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qf[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          ldmatrix_x4(qf[mt], sq + swz<D>(warp_row0 + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
        }
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, sk + swz<D>(nt * 8 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(sc[mt][nt], qf[mt], b[0], b[1]);
            mma_bf16(sc[mt][nt + 1], qf[mt], b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Causal + length mask (on raw scores), only where the tile crosses the diagonal or the sequence end.
        const int first_pos = offset + row_token(m0 + warp_row0 + mt * 16);
        const bool needs_mask = n0 + BN - 1 > first_pos || n0 + BN > seq_len_k;
        if (needs_mask) {
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = n0 + nt * 8 + 2 * (lane & 3) + (e & 1);
              const int pos = offset + row_token(row0 + mt * 16 + (e >> 1) * 8);
              if (key > pos || key >= seq_len_k) sc[mt][nt][e] = -INFINITY;
            }
          }
        }
        // Online softmax per row (r = 0: first row, r = 1: the row 8 below; a quad of lanes shares a row).
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(sc[mt][nt][2 * r], sc[mt][nt][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // row_m is kept in the scaled log2 domain; p = 2^(s·scale·log2e − m) is one FMA and one EX2.
          const float m_new = fmaxf(row_m[mt][r], mx * scale_log2);
          const float m_use = m_new == -INFINITY ? 0.0f : m_new;
          const float corr = fast_exp2(row_m[mt][r] - m_use);
          row_m[mt][r] = m_new;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt) {
            sc[mt][nt][2 * r] = fast_exp2(fmaf(sc[mt][nt][2 * r], scale_log2, -m_use));
            sc[mt][nt][2 * r + 1] = fast_exp2(fmaf(sc[mt][nt][2 * r + 1], scale_log2, -m_use));
            sum += sc[mt][nt][2 * r] + sc[mt][nt][2 * r + 1];
          }
          row_l[mt][r] = row_l[mt][r] * corr + sum;
#pragma unroll
          for (int dt = 0; dt < D / 8; ++dt) {
            o[mt][dt][2 * r] *= corr;
            o[mt][dt][2 * r + 1] *= corr;
          }
        }
      }
      // O += P V: P's accumulator layout is the A-fragment layout of the next MMA (k = keys); each V fragment
      // feeds MT MMAs.
#pragma unroll
      for (int t = 0; t < BN / 16; ++t) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = pack_bf16x2(sc[mt][2 * t][0], sc[mt][2 * t][1]);
          pa[mt][1] = pack_bf16x2(sc[mt][2 * t][2], sc[mt][2 * t][3]);
          pa[mt][2] = pack_bf16x2(sc[mt][2 * t + 1][0], sc[mt][2 * t + 1][1]);
          pa[mt][3] = pack_bf16x2(sc[mt][2 * t + 1][2], sc[mt][2 * t + 1][3]);
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, sv + swz<D>(t * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), dt + (lane >> 4)));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][dt], pa[mt], b[0], b[1]);
            mma_bf16(o[mt][dt + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    }
    if (MODE == kChunkSeq && ((nb + 1) % kTilesPerChunk == 0 || nb + 1 == num_n_blocks)) {
      // End of a chunk: fold its state into the totals and start the next chunk from a fresh state.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float l = row_l[0][r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (row_m[0][r] != -INFINITY) {
          const ChunkMerge f = merge_chunk(tot_m[r], tot_l[r], row_m[0][r], l);
#pragma unroll
          for (int dt = 0; dt < (MODE == kChunkSeq ? D / 8 : 1); ++dt) {
            tot_o[dt][2 * r] = merge_o(tot_o[dt][2 * r], o[0][dt][2 * r], f);
            tot_o[dt][2 * r + 1] = merge_o(tot_o[dt][2 * r + 1], o[0][dt][2 * r + 1], f);
          }
        }
        row_m[0][r] = -INFINITY;
        row_l[0][r] = 0.0f;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) o[0][dt][2 * r] = o[0][dt][2 * r + 1] = 0.0f;
      }
    }
    __syncthreads();  // the next iteration's loads (FP8: its widening) overwrite this stage
  }
  cp_async_wait<0>();

  if constexpr (MODE == kChunkSeq) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + r * 8;
      if (row >= num_rows) continue;
      const float l = tot_l[r];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      uint16_t* dst = a.out + (static_cast<int64_t>(q_start) + row_token(row)) * a.num_heads * D +
                      static_cast<int64_t>(row_head(row)) * D + 2 * (lane & 3);
#pragma unroll
      for (int dt = 0; dt < (MODE == kChunkSeq ? D / 8 : 1); ++dt) {
        *reinterpret_cast<uint32_t*>(dst + dt * 8) = pack_bf16x2(tot_o[dt][2 * r] * inv, tot_o[dt][2 * r + 1] * inv);
      }
    }
  } else if constexpr (MODE == kChunkPar) {
    // This chunk's state per row: o unnormalized (f32 [D]) and (m, l), at slot
    // (token · heads + head) · chunks + chunk.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_l[0][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = row0 + r * 8;
      if (row >= num_rows) continue;
      const int64_t slot = ((static_cast<int64_t>(q_start) + row_token(row)) * a.num_heads + row_head(row)) *
                               ws.num_chunks + chunk;
      float* po = ws.partial_o + slot * D + 2 * (lane & 3);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        po[dt * 8] = o[0][dt][2 * r];
        po[dt * 8 + 1] = o[0][dt][2 * r + 1];
      }
      if ((lane & 3) == 0) {
        ws.partial_ml[2 * slot] = row_m[0][r];
        ws.partial_ml[2 * slot + 1] = l;
      }
    }
  } else {
    const bool wide_stores = (reinterpret_cast<uintptr_t>(a.out) & 15) == 0;  // the rows start 16-byte aligned too
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float l = row_l[mt][r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = row0 + mt * 16 + r * 8;
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        uint16_t* dst = a.out + (static_cast<int64_t>(q_start) + row_token(row)) * a.num_heads * D +
                        static_cast<int64_t>(row_head(row)) * D;
        if (D % 32 == 0 && wide_stores) {
          // 16 bytes a lane: each 8-column group gathered by one lane of the row's quad (quad_transpose; every lane
          // takes part, the rows past the item store nothing).
#pragma unroll
          for (int jg = 0; jg < D / 32; ++jg) {
            uint32_t v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              v[i] = pack_bf16x2(o[mt][4 * jg + i][2 * r] * inv, o[mt][4 * jg + i][2 * r + 1] * inv);
            }
            const uint4 c = quad_transpose(v, lane & 3);
            if (row < num_rows) *reinterpret_cast<uint4*>(dst + 32 * jg + 8 * (lane & 3)) = c;
          }
          continue;
        }
        if (row >= num_rows) continue;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          *reinterpret_cast<uint32_t*>(dst + dt * 8 + 2 * (lane & 3)) =
              pack_bf16x2(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
        }
      }
    }
  }
}

// kChunkPar's second pass, decode-shaped steps (token t is sequence t): one warp per (token, head) merges the
// chunks that hold keys of the row, in increasing order, as kChunkSeq does in registers, then normalizes.
template <int D>
__global__ void combine_chunks_kernel(AttentionArgs a, ChunkWorkspace ws) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= a.num_tokens * a.num_heads) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = row / a.num_heads;
  const int n = (a.seq_lens_k[t] + kDetChunkKeys - 1) / kDetChunkKeys;  // the decode row sees every key
  constexpr int kCols = D / 32;
  float tot[kCols], m_t = -INFINITY, l_t = 0.0f;
#pragma unroll
  for (int j = 0; j < kCols; ++j) tot[j] = 0.0f;
  for (int c = 0; c < n; ++c) {
    const int64_t slot = row * ws.num_chunks + c;
    const float m_c = ws.partial_ml[2 * slot], l_c = ws.partial_ml[2 * slot + 1];
    if (m_c == -INFINITY) continue;
    const ChunkMerge f = merge_chunk(m_t, l_t, m_c, l_c);
#pragma unroll
    for (int j = 0; j < kCols; ++j) tot[j] = merge_o(tot[j], ws.partial_o[slot * D + lane * kCols + j], f);
  }
  const float inv = l_t > 0.0f ? 1.0f / l_t : 0.0f;
  uint16_t* dst = a.out + row * D + lane * kCols;
#pragma unroll
  for (int j = 0; j < kCols; j += 2) {
    *reinterpret_cast<uint32_t*>(dst + j) = pack_bf16x2(tot[j] * inv, tot[j + 1] * inv);
  }
}

template <int D, int BN, int WARPS = kPrefillWarps, int MT = kPrefillMTiles, bool PACK = false, int MODE = kPlain,
          bool FP8 = false>
void launch_d(const AttentionArgs& a, cudaStream_t stream, const ChunkWorkspace& ws = ChunkWorkspace{}) {
  constexpr int BM = 16 * WARPS * MT;
  // Q + 2 stages of bf16 K and V; FP8: Q + 1 bf16 stage + 2 staging stages of fp8 K and V (the same bytes).
  constexpr int smem = FP8 ? (BM + 2 * BN) * D * 2 + 4 * BN * D : (BM + 4 * BN) * D * 2;
  auto kernel = prefill_attention_kernel<D, BN, WARPS, MT, PACK, MODE, FP8>;
  static bool configured = false;  // the attribute is per function; setting it once is enough
  if (!configured) {
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t zs = a.num_seqs * (MODE == kChunkPar ? ws.num_chunks : 1);
  const dim3 grid(ceil_div(a.max_seqlen_q * (PACK ? group : 1), BM),
                  static_cast<unsigned int>(PACK ? a.num_kv_heads : a.num_heads), static_cast<unsigned int>(zs));
  int log2_bs = 0;
  while ((int64_t(1) << log2_bs) < a.block_size) ++log2_bs;
  kernel<<<grid, WARPS * 32, smem, stream>>>(a, log2_bs, ws);
  RL_CUDA_CHECK_LAUNCH();
  if (MODE == kChunkPar) {
    constexpr int kWarps = 4;
    combine_chunks_kernel<D><<<ceil_div(a.num_tokens * a.num_heads, kWarps), kWarps * 32, 0, stream>>>(a, ws);
    RL_CUDA_CHECK_LAUNCH();
  }
}

// The plain (unpacked, unchunked) instance for the cache's dtype.
template <int D, int BN, int WARPS = kPrefillWarps, int MT = kPrefillMTiles>
void launch_plain(const AttentionArgs& a, cudaStream_t stream) {
  if (a.kv_fp8) {
    launch_d<D, BN, WARPS, MT, false, kPlain, true>(a, stream);
  } else {
    launch_d<D, BN, WARPS, MT>(a, stream);
  }
}

}  // namespace

bool prefill_attention_supported(const AttentionArgs& a) {
  // Power-of-two block sizes: page and slot come from a shift and a mask in the K/V gather.
  return (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256) && a.row % 8 == 0 && a.block_size > 0 &&
         (a.block_size & (a.block_size - 1)) == 0;
}

void launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream) {
  launch_prefill_attention_tile_lab(a, stream, 0);
}

void launch_prefill_attention_tile_lab(const AttentionArgs& a, cudaStream_t stream, int block_n_override) {
  const int bn = block_n_override > 0 ? block_n_override : (a.head_dim == 64 ? kPrefillBlockN : kPrefillBlockN128);
  if (a.head_dim == 64) {
    launch_plain<64, kPrefillBlockN>(a, stream);
  } else if (a.head_dim == 256) {
    launch_plain<256, kPrefillBlockN, kPrefillWarps, kPrefillMTiles256>(a, stream);
  } else if (bn == 32) {
    launch_plain<128, 32>(a, stream);
  } else {
    launch_plain<128, 64>(a, stream);
  }
}

void launch_attention_rows(const AttentionArgs& a, bool decode_shaped, const ChunkWorkspace& ws, cudaStream_t stream) {
  RL_CHECK_MSG(!a.kv_fp8, "deterministic attention reads a bf16 KV cache only");
  // Decode-shaped steps: one warp per (sequence, kv head) holding the group's query rows (kernel_config.h).
  const bool small = decode_shaped && a.num_heads / a.num_kv_heads <= 16;
  if (a.head_dim == 256) {  // unchunked (kernel_config.h: the chunk totals would not fit in registers)
    if (small) {
      launch_d<256, kPrefillBlockN, 1, 1, true>(a, stream);
    } else {
      launch_d<256, kPrefillBlockN, kPrefillWarps, kPrefillMTiles256>(a, stream);
    }
    return;
  }
  // Fixed-size KV chunks. A decode-shaped step computes the chunks in parallel (one block each, then a combine)
  // when their states fit the workspace, else in registers; either way the same bits (merge_chunk).
  const int64_t num_chunks = (a.max_seqlen_k + kDetChunkKeys - 1) / kDetChunkKeys;
  ChunkWorkspace par = ws;
  par.num_chunks = static_cast<int>(num_chunks);
  const bool parallel = small && num_chunks > 1 && a.num_tokens == a.num_seqs &&
                        a.num_seqs * num_chunks <= 65535 &&  // grid z
                        a.num_tokens * a.num_heads * num_chunks * (a.head_dim + 2) <= ws.capacity_floats;
  if (a.head_dim == 64) {
    if (parallel) {
      launch_d<64, kPrefillBlockN, 1, 1, true, kChunkPar>(a, stream, par);
    } else if (small) {
      launch_d<64, kPrefillBlockN, 1, 1, true, kChunkSeq>(a, stream);
    } else {
      launch_d<64, kPrefillBlockN, kPrefillWarps, 1, false, kChunkSeq>(a, stream);
    }
  } else {
    if (parallel) {
      launch_d<128, kPrefillBlockN128, 1, 1, true, kChunkPar>(a, stream, par);
    } else if (small) {
      launch_d<128, kPrefillBlockN128, 1, 1, true, kChunkSeq>(a, stream);
    } else {
      launch_d<128, kPrefillBlockN128, kPrefillWarps, 1, false, kChunkSeq>(a, stream);
    }
  }
}

void launch_prefill_attention_lab(const AttentionArgs& a, int variant, cudaStream_t stream) {
  RL_CHECK(a.head_dim == 128);
  RL_CHECK_MSG(!a.kv_fp8, "the prefill attention lab's variants read a bf16 KV cache only");
  switch (variant) {
    case 1: launch_d<128, 64, 4, 2, true>(a, stream); break;  // GQA-packed prefill
    case 2: launch_d<128, 64, 1, 1, true>(a, stream); break;  // the decode-shaped instance
    case 3: launch_d<128, 64, 2, 1, true>(a, stream); break;
    default: launch_d<128, 64>(a, stream); break;
  }
}

}  // namespace rl::cuda
