// Prefill attention for Hopper (sm_90a), head_dim 128, built the FlashAttention-3 way: TMA loads completing on
// mbarriers, wgmma with operands in shared memory, warp specialisation. A block has three warpgroups: warpgroup 0
// is the producer (one warp issues the TMA copies of the Q tile and, stage by stage, of the K and V tiles, page by
// page through the block table), warpgroups 1 and 2 are consumers that own 64 query rows each. Per key tile a
// consumer computes S = Q Kᵀ (m64n128k16 wgmma, both operands in shared memory), masks and runs the online softmax
// on S in registers (log2 domain, as prefill_attention.cu), and accumulates O += P V with P from registers and V
// from shared memory (MN-major, the transposed-B form). The two consumers take turns on the tensor cores
// (ping-pong on named barriers), so one's softmax overlaps the other's GEMMs; with INTRA a consumer's own softmax
// of the next tile also overlaps its P V GEMM.
//
// Shared memory (128-byte swizzle, as TMA writes it and wgmma reads it): every tile is stored as two 64-column halves,
// each [rows][128 B]; Q ×QB [2][128][128 B], then KS stages of K [2][kBN][128 B], VS of V (the same), then the barriers
// (a stage's K and V each have a full and an empty barrier). Varlen batches, a causal mask offset by the prefix already
// in the cache, GQA (optionally packed: a block serves one kv head and its rows are (token, head) pairs, as
// prefill_attention.cu's PACK), K/V through block tables of any power-of-two block size ≥ 8. Key rows past the sequence
// are masked in S; in V they are zeroed by the producer (a reused page can hold anything, and 0 · NaN would poison the
// row).
#include <cuda.h>

#include <algorithm>
#include <type_traits>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mma_sm80.cuh"
#include "backend/cuda/qk_ring.h"
#include "backend/cuda/sm90.cuh"
#include "backend/cuda/tma_map.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kD = 128;        // head_dim
constexpr int kBM = 128;       // query rows per block (two consumer warpgroups of 64)
constexpr int kBN = 128;       // keys per tile
constexpr int kThreads = 384;  // producer + two consumer warpgroups
constexpr int kTraceStamps = kPrefillSm90TraceStamps;  // TRACE: stamps an item (cuda_kernels.h)
constexpr uint32_t kHalfRow = 128;                    // bytes of a 64-column half row
constexpr uint32_t kQBytes = 2 * kBM * kHalfRow;      // 32 KB
constexpr uint32_t kTileBytes = 2 * kBN * kHalfRow;   // one K or V tile, 32 KB
// Q buffers: two (the next item's Q loads while this one runs), or one where three V stages take the room.
constexpr int q_buffers(int vs) {
  return vs == 3 ? 1 : 2;
}
// Q ×QB, KS K stages, VS V stages, the barriers (Q full/empty ×2, tail; full and empty per stage), and slack for the
// 1024-byte alignment.
constexpr int smem_bytes(int ks, int vs) {
  return 1024 + q_buffers(vs) * kQBytes + (ks + vs) * kTileBytes + 8 * (5 + 2 * ks + 2 * vs);
}

struct Sm90Params {
  int log2_bs;   // block size = 1 << log2_bs
  int box_rows;  // key rows per K/V TMA box: min(block size, kBN)
  int m_blocks;  // 128-row blocks of the longest sequence's tile rows
  int heads;     // query heads, or kv heads when packed
  int snake;     // 1: a persistent block walks its rounds of items in alternating directions (PrefillSm90Options)
};
// TRACE's (kernel lab): the timeline, int64 [blocks][trace_items][kTraceStamps] clock64 values.
struct Sm90TraceParams : Sm90Params {
  long long* trace;
  int trace_items;
};

// One work item: 128 tile rows of one (head or kv head, sequence).
struct WorkItem {
  int s, y, m0, q_start, num_rows, seq_len_k, offset, num_tiles;
};

// KS: K stages, VS: V stages (2, or 3 with one Q buffer). ABLATE (kernel lab only, wrong results): 1 = K/V loaded for
// the first stages only (the stages are reused: no load traffic), 2 = no softmax (P = S as is, no exponentials), 3 = no
// P V GEMM. CONT: the consumers' turns alternate across work items without a barrier between items (see the consumers).
// LAZY (production, kPrefillSm90LazyRescale): a row's running max moves only when a tile's max passes it by more than
// kLazyRescaleLog2, and a warp whose rows all kept theirs skips O's rescale (FlashAttention-4's conditional rescale;
// the exponentials then reach 2^kLazyRescaleLog2, well inside f32 and bf16's range).
// EF (production, kPrefillSm90ExpFirst; with LAZY and without DH): past an item's first tile a tile's exponentials come
// first, against the running max, packed into P as they come, the tile's max taken only in a warp where a row's sum
// shows an exponential may have reached 2^kLazyRescaleLog2 (the same bits; kernel_config.h has the figures). With DH
// ptxas serializes the wgmma that way (C7511).
// Lab forms that lost were deleted once measured (kernel_config.h and docs/cuda.md keep their figures): the K / V
// multicast over pairs of heads (clusters of two blocks), the wait for P V kept after the next tile's softmax, each
// consumer's half of Q given back after its last S = Q Kᵀ, Q in registers for S = Q Kᵀ, dynamic work items, the lazy
// rescale with 2 V stages and two Q buffers, the next item's Q prefetched into L2, and rows stored through shared
// memory with TMA.
// DH (production up to kPrefillSm90DiagHalfMaxKeyTiles key tiles): where a consumer's last row lies in the first
// half of its last key tile (the diagonal tile of a causal item whose rows start on a tile boundary: consumer 0's),
// the tile's other 64 keys lie past all of its rows, so that tile's S = Q Kᵀ (m64n64), softmax and P V (4 k-steps
// of 8) run on its first 64 keys only. Skipped keys are masked keys: P is 0 there, so only work that adds zeros goes.
// TRACE (kernel lab, launch_prefill_attention_sm90_trace): clock64 stamps per block and item, at the producer's and
// each consumer's item boundaries.
// QR (PrefillSm90Options::q_ring, production up to kPrefillSm90QRingMaxKeyTiles key tiles; with one Q buffer and 3
// K stages only): Q and the K tiles share the four slots (QkRing), so the next item's Q loads into the slot of the
// item's oldest K tile once its S = Q Kᵀ is done, a few tiles before the item ends, where a Q buffer of its own loads
// only once both consumers are done with the item.
template <bool PACK, bool INTRA, int KS, int ABLATE = 0, bool CONT = false, int VS = 2, bool LAZY = false,
          bool DH = false, bool TRACE = false, bool EF = false, bool QR = false>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                  const __grid_constant__ CUtensorMap tm_v, const AttentionArgs a,
                                  const std::conditional_t<TRACE, Sm90TraceParams, Sm90Params> p) {
  static_assert(!EF || (LAZY && !DH), "the exponentials first are built with the lazy rescale, without DH");
  static_assert(!QR || (VS == 3 && KS == 3), "Q in the K stages' ring is built with one Q buffer and 3 K stages");
#if RL_SM90_ENABLED
  using namespace sm90;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  constexpr int QB = q_buffers(VS);
  const uint32_t skv = base + QB * kQBytes, bars = skv + (KS + VS) * kTileBytes;
  auto sk = [&](int st) { return skv + st * kTileBytes; };
  auto sv = [&](int st) { return skv + (KS + st) * kTileBytes; };
  auto sq = [&](int qb) { return base + qb * kQBytes; };
  auto q_full = [&](int qb) { return bars + 8 * qb; };
  auto q_empty = [&](int qb) { return bars + 16 + 8 * qb; };
  const uint32_t tail_bar = bars + 32;
  // TRACE: stamp e of this block's item number k (lane 0 of the warp that calls it; items past trace_items go
  // unrecorded).
  auto stamp = [&](int item_k, int e) {
    if constexpr (TRACE) {
      if ((threadIdx.x & 31) == 0 && item_k < p.trace_items) {
        p.trace[(static_cast<int64_t>(blockIdx.x) * p.trace_items + item_k) * kTraceStamps + e] = clock64();
      }
    }
  };
  auto full_k = [&](int st) { return bars + 40 + 8 * st; };
  auto empty_k = [&](int st) { return bars + 40 + 8 * (KS + st); };
  auto full_v = [&](int st) { return bars + 40 + 8 * (2 * KS + st); };
  auto empty_v = [&](int st) { return bars + 40 + 8 * (2 * KS + VS + st); };
  // K's stages as the consumers and the producer address them: with QR, slot 0 is the Q buffer and its barriers,
  // slot s > 0 K stage s - 1 (they lie side by side in shared memory).
  static_assert(kQBytes == kTileBytes, "a Q tile and a K tile take the same slot");
  auto kbuf = [&](int st) { return QR ? base + st * kTileBytes : sk(st); };
  auto kfull = [&](int st) { return QR ? (st == 0 ? q_full(0) : full_k(st - 1)) : full_k(st); };
  auto kempty = [&](int st) { return QR ? (st == 0 ? q_empty(0) : empty_k(st - 1)) : empty_k(st); };

  // The warpgroup index through a shuffle: the compiler then knows it is warp-uniform, and so are the branches
  // around the wgmma instructions (otherwise ptxas serializes them, warning C7520).
  const int tid = threadIdx.x, warp = (tid / 32) % 4, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int group = static_cast<int>(a.num_heads / a.num_kv_heads);
  const int G = PACK ? group : 1;  // tile rows per query token
  // Work items, longest causal rows first across the batch: item i is m-block m_blocks − 1 − i / (heads · seqs),
  // then head, then sequence. A block takes items blockIdx.x, blockIdx.x + gridDim.x, ... (a persistent grid of
  // one block per SM: the next item's Q and first K/V tiles load while this one finishes; or one block per item).
  const int first_item = blockIdx.x, item_stride = gridDim.x;
  const int per_m = p.heads * static_cast<int>(a.num_seqs), total = p.m_blocks * per_m;
  // The item of a block's round r (r = 0, 1, ... while r · item_stride < total; past total: none): first_item +
  // r · item_stride, or with snake order the mirrored slot (item_stride − 1 − first_item) on odd rounds, so that
  // the blocks that take a round's longest item take its shortest one next.
  const auto item_of = [&](int r) {
    return r * item_stride + (p.snake && (r & 1) ? item_stride - 1 - first_item : first_item);
  };
  // Fills w for item i; false when the m-block lies past the sequence's rows (nothing to do).
  auto get_item = [&](int i, WorkItem& w) {
    const int rest = i % per_m;
    w.y = rest % p.heads;
    w.s = rest / p.heads;
    w.m0 = (p.m_blocks - 1 - i / per_m) * kBM;
    w.q_start = a.cu_seqlens_q[w.s];
    w.num_rows = (a.cu_seqlens_q[w.s + 1] - w.q_start) * G;
    if (w.m0 >= w.num_rows) return false;
    w.seq_len_k = a.seq_lens_k[w.s];
    w.offset = w.seq_len_k - w.num_rows / G;  // position of query token t is offset + t
    const int last_token = (min(w.m0 + kBM, w.num_rows) - 1) / G;
    const int k_end = min(w.seq_len_k, w.offset + last_token + 1);
    w.num_tiles = (k_end + kBN - 1) / kBN;
    return true;
  };

  if (tid == 0) {
    for (int qb = 0; qb < QB; ++qb) {
      mbar_init(q_full(qb), 1);
      mbar_init(q_empty(qb), 8);  // each consumer warp
    }
    mbar_init(tail_bar, 1);
    for (int st = 0; st < KS; ++st) {
      mbar_init(full_k(st), 1);
      mbar_init(empty_k(st), 8);  // each consumer warp arrives once per tile
    }
    for (int st = 0; st < VS; ++st) {
      mbar_init(full_v(st), 1);
      mbar_init(empty_v(st), 8);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer ----
    regs_dec<40>();
    if (warp != 0) return;
    if (lane == 0) {
      prefetch_tensor_map(&tm_q);
      prefetch_tensor_map(&tm_k);
      prefetch_tensor_map(&tm_v);
    }
    const int bs_mask = (1 << p.log2_bs) - 1;
    int g = 0, k = 0, tails = 0;  // tiles, items and tail tiles so far: stage and barrier phases
    QkRing ring;                  // QR: the slots
    uint32_t used = 0;            // QR: bit s, slot s has been filled before
    WorkItem w;
    for (int r = 0; r * item_stride < total; ++r) {
      const int i = item_of(r);
      const int qb = k % QB;
      if (i >= total || !get_item(i, w)) continue;
      stamp(k, 0);
      const int kvh = PACK ? w.y : w.y / group;
      const uint32_t q_bar = QR ? kfull(ring.q()) : q_full(qb);
      // The two column-half boxes of consumer c's 64 rows of this item's Q into buffer qb (QR: its slot),
      // completing on bar.
      const auto issue_q_rows = [&](int c, uint32_t bar) {
        for (int h = 0; h < 2; ++h) {
          tma_load_3d((QR ? kbuf(ring.q()) : sq(qb)) + h * kBM * kHalfRow + c * 64 * kHalfRow, &tm_q, h * 64,
                      PACK ? w.y * G : w.y, w.q_start + (w.m0 + c * 64) / G, bar);
        }
      };
      if constexpr (QR) {
        if ((used >> ring.q()) & 1u) mbar_wait(kempty(ring.q()), ring.qpar() ^ 1u);
        used |= 1u << ring.q();
      } else if (k >= QB) {
        mbar_wait(q_empty(qb), ((k / QB) - 1) & 1);
      }
      stamp(k, 1);
      if (lane == 0) {
        mbar_arrive_expect_tx(q_bar, kQBytes);
        for (int c = 0; c < 2; ++c) issue_q_rows(c, q_bar);  // both consumers' halves
      }
      const int32_t* table = a.block_tables + static_cast<int64_t>(w.s) * a.max_blocks;
      // K and V of a stage are released separately (K once S = Q Kᵀ is done, V once P V is), so the next K tile
      // loads a whole tile period ahead of its use. The slots of a tile's pages are looked up before the waits.
      for (int t = 0; t < w.num_tiles; ++t, ++g) {
        const int kst = QR ? ring.slot(t) : g % KS, vst = g % VS;
        const uint32_t kph = QR ? ring.parity(t) : (g / KS) & 1, vph = (g / VS) & 1;
        const bool k_used = QR ? (used >> kst) & 1u : g >= KS;  // the stage has a use to wait out
        if constexpr (QR) used |= 1u << kst;
        const int n0 = t * kBN, valid = min(kBN, w.seq_len_k - n0);
        const int boxes = (valid + p.box_rows - 1) / p.box_rows;
        const uint32_t bytes = static_cast<uint32_t>(boxes * p.box_rows) * 2 * kHalfRow;
        // Lane b looks up box b's slot (boxes ≤ 16 with block size ≥ 8) before the waits.
        int slot = 0;
        if (lane < boxes) {
          const int key = n0 + lane * p.box_rows;
          slot = (table[key >> p.log2_bs] << p.log2_bs) + (key & bs_mask);
        }
        const bool tail = valid < kBN;
        const uint32_t k_dst = kbuf(kst), v_dst = sv(vst);
        const uint32_t v_bar = tail ? tail_bar : full_v(vst);
        if (ABLATE == 1 && k_used) {
          mbar_wait(kempty(kst), kph ^ 1);
          if (lane == 0) mbar_arrive(kfull(kst));
          mbar_wait(empty_v(vst), vph ^ 1);
          if (lane == 0) mbar_arrive(full_v(vst));
          continue;
        }
        // Lane 0 announces the bytes, then lane b issues box b's copies (both column halves): issued from one
        // lane, a tile's 32 K and 32 V copies at block size 16 held the producer for a good part of a tile period.
        if (k_used) mbar_wait(kempty(kst), kph ^ 1);
        if (lane == 0) mbar_arrive_expect_tx(kfull(kst), bytes);
        __syncwarp();
        if (lane < boxes) {
          const uint32_t row_off = lane * p.box_rows * kHalfRow;
          tma_load_3d(k_dst + row_off, &tm_k, 0, kvh, slot, kfull(kst));
          tma_load_3d(k_dst + kBN * kHalfRow + row_off, &tm_k, 64, kvh, slot, kfull(kst));
        }
        if (g >= VS) mbar_wait(empty_v(vst), vph ^ 1);
        if (lane == 0) mbar_arrive_expect_tx(v_bar, bytes);
        __syncwarp();
        if (lane < boxes) {
          const uint32_t row_off = lane * p.box_rows * kHalfRow;
          tma_load_3d(v_dst + row_off, &tm_v, 0, kvh, slot, v_bar);
          tma_load_3d(v_dst + kBN * kHalfRow + row_off, &tm_v, 64, kvh, slot, v_bar);
        }
        if (tail) {
          // The last tile of the sequence: once its V rows have landed, zero rows [valid, kBN) of both halves
          // (stale slots of the last page, and rows no box covered), then release the stage's V to the consumers.
          mbar_wait(tail_bar, tails & 1);
          ++tails;
          const int chunks = (kBN - valid) * 16;  // 16-byte chunks: 8 per half row, 2 halves
          for (int c16 = lane; c16 < chunks; c16 += 32) {
            const int row = valid + c16 / 16, h = (c16 / 8) & 1, c = c16 & 7;
            const uint32_t addr = v_dst + h * kBN * kHalfRow + row * kHalfRow + c * 16;
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0) : "memory");
          }
          fence_proxy_async();
          __syncwarp();
          if (lane == 0) mbar_arrive(full_v(vst));
        }
      }
      if constexpr (QR) ring.next(w.num_tiles);
      ++k;
    }
    return;
  }

  // ---- consumers ----
  // 232 registers (the producer 40). FlashAttention-3's 240 / 24 gives the same consumer code: ptxas's build of it
  // (session 33) had 8 fewer instructions in the whole production kernel and the same loop bodies, no spills.
  regs_inc<232>();
  const int cw = wg - 1;  // consumer index: rows [m0 + 64 cw, +64) of each item's tile
  const float scale_log2 = a.scale * 1.4426950408889634f;  // log2(e)
  constexpr float kLazyRescaleLog2 = 8.0f;  // LAZY: how far a tile's max may pass the running max unrescaled
  // Ping-pong: consumer c issues its GEMMs only while it holds the turn (named barrier 1 + c) and then passes it
  // on, so one consumer's softmax runs while the other's GEMMs occupy the tensor cores. Each side syncs
  // 1 + num_tiles times an item, each sync followed by one pass, so the turns strictly alternate (a consumer
  // arrives on the other's barrier only after its own sync, which needs the other's previous pass: never two
  // arrivals in a row on one barrier). Consumer 0 starts.
  //   - Default: per item consumer 1 arrives once first and skips its last pass, and barrier 3 closes the item,
  //     so both consumers leave an item together: its last tiles' P V, the epilogues and the next item's first
  //     S = Q Kᵀ and softmax run with the tensor cores partly idle.
  //   - CONT (lab): consumer 1 arrives first only before its first item and passes on every tile, so the turns
  //     run on across items with no barrier: consumer 0 stores its rows and starts the next item's S = Q Kᵀ
  //     while consumer 1's last P V runs (FlashAttention-3's order). Consumer 1's pass after the block's last
  //     tile is taken by a final sync of consumer 0.
  const int my_bar = 1 + cw, other_bar = 2 - cw;
  int g = 0, k = 0;  // tiles and items so far: stage and barrier phases, as the producer counts them
  QkRing ring;       // QR: the slots, as the producer walks them
  WorkItem w;
  for (int r = 0; r * item_stride < total; ++r) {
    const int item = item_of(r);
    if (item >= total || !get_item(item, w)) continue;
    const int m0 = w.m0, num_rows = w.num_rows, offset = w.offset, seq_len_k = w.seq_len_k;
    const int num_tiles = w.num_tiles, q_start = w.q_start, kvh = PACK ? w.y : w.y / group;
    auto row_token = [&](int i) { return PACK ? i / G : i; };
    auto row_head = [&](int i) { return PACK ? kvh * G + i % G : w.y; };
    auto stage_k = [&](int t) { return QR ? ring.slot(t) : (g + t) % KS; };
    auto phase_k = [&](int t) { return QR ? ring.parity(t) : static_cast<uint32_t>((g + t) / KS) & 1u; };
    auto stage_v = [&](int t) { return (g + t) % VS; };
    auto phase_v = [&](int t) { return static_cast<uint32_t>((g + t) / VS) & 1u; };
    const int qb = k % QB;
    const int row_base = m0 + cw * 64;
    const bool has_rows = row_base < num_rows;
    const int wg_first_pos = offset + row_token(row_base);
    const int wg_last_pos = offset + row_token(min(row_base + 63, num_rows - 1));
    const int r0 = row_base + warp * 16 + lane / 4;  // this thread's rows r0 and r0 + 8
    const int pos[2] = {offset + row_token(r0), offset + row_token(r0 + 8)};

    // Tiles this warpgroup computes: a prefix of the block's tiles (the later ones lie past all of its rows).
    const int my_tiles = has_rows ? min(num_tiles, wg_last_pos / kBN + 1) : 0;
    // DH: the last of them needs only its first kBN / 2 keys (every later key is past this consumer's last row).
    const bool half_last = DH && my_tiles > 0 && wg_last_pos - (my_tiles - 1) * kBN < kBN / 2;

    float o[64], sc[64];
    uint32_t pa[kBN / 16][4];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
    const uint32_t q_rows = (QR ? kbuf(ring.q()) : sq(qb)) + cw * 64 * kHalfRow;
    // S's first 64 keys: the m64n64 accumulator is the first half of the m64n128 one (DH).
    float(&sc_lo)[kBN / 4] = *reinterpret_cast<float(*)[kBN / 4]>(sc);
    // S = Q Kᵀ for the tile in stage st: 8 k-steps of 16 over head_dim (two 64-column halves, 32 bytes per step);
    // half (a compile-time constant, DH): the tile's first 64 keys only.
    auto issue_s = [&](int st, auto half) {
      constexpr bool kHalf = decltype(half)::value;
      const uint32_t k_tile = kbuf(st);
      // Each k-step's descriptors: k-step 0's with the start address advanced (desc_advance), one add where building
      // them from the address again took five uniform-datapath instructions before each wgmma (kernel_config.h).
      const uint64_t q0 = desc_sw128(q_rows, 16, 1024), k0 = desc_sw128(k_tile, 16, 1024);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const auto k_desc = [&] { return desc_advance(k0, (kk / 4) * kBN * kHalfRow + (kk % 4) * 32); };
        const uint64_t da = desc_advance(q0, (kk / 4) * kBM * kHalfRow + (kk % 4) * 32);
        if constexpr (kHalf) {
          wgmma_m64n64_ss(sc_lo, da, k_desc(), kk > 0);
        } else {
          wgmma_m64n128_ss(sc, da, k_desc(), kk > 0);
        }
      }
    };
    auto pass_turn = [&](int t) {
      if (CONT || t + 1 < num_tiles || cw == 0) named_arrive(other_bar, 256);
    };
    auto pin_all = [&] {
      pin(sc);
      pin(o);
#pragma unroll
      for (int k2 = 0; k2 < kBN / 16; ++k2) pin(pa[k2]);
    };
    // A stage goes back to its producer.
    auto release = [&](uint32_t bar) {
      __syncwarp();
      if (lane == 0) mbar_arrive(bar);
    };
    auto release_k = [&](int t) { release(kempty(stage_k(t))); };
    auto release_v = [&](int t) { release(empty_v(stage_v(t))); };
    // Mask and online softmax of S (tile t) in place: sc becomes P (unnormalized, log2 domain); returns each row's
    // correction factor for O (r = 0: row r0, r = 1: row r0 + 8; a quad of lanes shares a row). half: the tile's
    // first 64 keys only (sc's first 32 values). EF, past the first tile: P may go straight into pa (p_packed), sc
    // left as S.
    bool p_packed = false;
    auto softmax = [&](int t, float (&corr)[2], auto half) {
      constexpr int kCols = decltype(half)::value ? kBN / 2 : kBN;
      const int n0 = t * kBN;
      if constexpr (EF) p_packed = false;
      if (ABLATE == 2) {
        corr[0] = corr[1] = 1.0f;
        return;
      }
      // Causal + length mask, only where the tile crosses the diagonal or the sequence end.
      if (n0 + kCols - 1 > wg_first_pos || n0 + kCols > seq_len_k) {
#pragma unroll
        for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = n0 + j * 8 + 2 * (lane & 3) + (e & 1);
            if (key > pos[e >> 1] || key >= seq_len_k) sc[4 * j + e] = -INFINITY;
          }
        }
      }
      if constexpr (EF) {
        if (t > 0) {
          // Past its first tile (which holds key 0) a row's running max is finite: the exponentials against it at
          // once, P packed as they come, no max. A row whose 32 exponentials here sum below 2^kLazyRescaleLog2 has
          // none at or above it, so the tile's max did not pass the running max by kLazyRescaleLog2: the path below
          // would keep the running max and compute these very values. A warp with any other row runs that path
          // (sc is still S), which takes the max and may move it.
          constexpr float kKeepBelow = 1 << static_cast<int>(kLazyRescaleLog2);
          float sum[2] = {0.0f, 0.0f};
#pragma unroll
          for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const float e0 = fast_exp2(fmaf(sc[4 * j + 2 * r], scale_log2, -row_m[r]));
              const float e1 = fast_exp2(fmaf(sc[4 * j + 2 * r + 1], scale_log2, -row_m[r]));
              sum[r] += e0 + e1;
              pa[j / 2][(j & 1) * 2 + r] = pack_bf16x2(e0, e1);
            }
          }
          if (__all_sync(0xffffffffu, sum[0] < kKeepBelow && sum[1] < kKeepBelow)) {
            row_l[0] += sum[0];
            row_l[1] += sum[1];
            corr[0] = corr[1] = 1.0f;
            p_packed = true;
            return;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < kCols / 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * r], sc[4 * j + 2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float m_new = fmaxf(row_m[r], mx * scale_log2);
        if (LAZY && !(m_new > row_m[r] + kLazyRescaleLog2)) m_new = row_m[r];  // -inf + 8 stays -inf
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        corr[r] = LAZY && m_new == row_m[r] ? 1.0f : fast_exp2(row_m[r] - m_use);
        row_m[r] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kCols / 8; ++j) {
          sc[4 * j + 2 * r] = fast_exp2(fmaf(sc[4 * j + 2 * r], scale_log2, -m_use));
          sc[4 * j + 2 * r + 1] = fast_exp2(fmaf(sc[4 * j + 2 * r + 1], scale_log2, -m_use));
          sum += sc[4 * j + 2 * r] + sc[4 * j + 2 * r + 1];
        }
        row_l[r] = row_l[r] * corr[r] + sum;
      }
    };
    // O *= corr per row, then P to bf16 in the wgmma A-fragment layout (the accumulator layout of S, k = keys); half:
    // the first 64 keys' P only.
    auto rescale_and_pack = [&](const float (&corr)[2], auto half) {
      constexpr int kSteps = (decltype(half)::value ? kBN / 2 : kBN) / 16;
      if (EF && p_packed) return;  // P is in pa, the running max stayed: corr is 1, O stays as it is
      if (!LAZY || __any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
        for (int j = 0; j < kD / 8; ++j) {
          o[4 * j + 0] *= corr[0];
          o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1];
          o[4 * j + 3] *= corr[1];
        }
      }
#pragma unroll
      for (int k2 = 0; k2 < kSteps; ++k2) {
        pa[k2][0] = pack_bf16x2(sc[8 * k2 + 0], sc[8 * k2 + 1]);
        pa[k2][1] = pack_bf16x2(sc[8 * k2 + 2], sc[8 * k2 + 3]);
        pa[k2][2] = pack_bf16x2(sc[8 * k2 + 4], sc[8 * k2 + 5]);
        pa[k2][3] = pack_bf16x2(sc[8 * k2 + 6], sc[8 * k2 + 7]);
      }
    };
    // One computed tile t, entered with P_t in pa: holding the turn, issue S of tile t + 1 (unless t is this
    // consumer's last tile) and P V of tile t, pass the turn, then prepare P_{t+1}. INTRA: the softmax of S_{t+1}
    // runs while P V of tile t is still on the tensor cores (FlashAttention-3's intra-warpgroup overlap; O is
    // rescaled only after that GEMM is done); otherwise both GEMMs are waited for first. Every wait closes the
    // iteration (a loop-carried accumulator copied on the back edge while its wgmma is in flight, or a wgmma under
    // a condition, makes ptxas serialize the wgmmas: C7515); issue_next is a compile-time constant for the same
    // reason, and so are next_half and this_half (DH: tile t + 1's S, softmax and P, and tile t's P V, on the first
    // 64 keys only).
    auto compute_tile = [&](int t, auto issue_next, auto next_half, auto this_half) {
      constexpr bool kNext = decltype(issue_next)::value;
      constexpr int kPvSteps = (decltype(this_half)::value ? kBN / 2 : kBN) / 16;
      mbar_wait(full_v(stage_v(t)), phase_v(t));
      if (kNext) mbar_wait(kfull(stage_k(t + 1)), phase_k(t + 1));
      named_sync(my_bar, 256);
      pin_all();  // every update of the accumulators stays before the fence
      wgmma_fence();
      if constexpr (kNext) {
        issue_s(stage_k(t + 1), next_half);
        wgmma_commit();
      }
      // O += P V, V MN-major: its two 64-column halves kBN · 128 B apart (leading-dimension offset), 8-key groups
      // 1024 B apart (stride offset).
      const uint32_t v_tile = sv(stage_v(t));
      const uint64_t v0 = desc_sw128(v_tile, kBN * kHalfRow, 1024);
#pragma unroll
      for (int k2 = 0; k2 < kPvSteps; ++k2) {
        if (ABLATE != 3) wgmma_m64n128_rs_tb(o, pa[k2], desc_advance(v0, k2 * 16 * kHalfRow));
      }
      wgmma_commit();
      pass_turn(t);
      if constexpr (kNext) {
        float corr[2];
        if constexpr (INTRA && EF) {
          wgmma_wait<1>();  // S_{t+1} done
          pin(sc);
          release_k(t + 1);
          wgmma_wait<0>();  // P V of tile t done before the softmax writes P (ptxas had it there anyway)
          pin_all();
          softmax(t + 1, corr, next_half);
        } else if constexpr (INTRA) {
          wgmma_wait<1>();  // S_{t+1} done, P V of tile t may still run
          pin(sc);
          release_k(t + 1);
          softmax(t + 1, corr, next_half);
          wgmma_wait<0>();  // ptxas moves it up to the softmax's first max
          pin_all();
        } else {
          wgmma_wait<0>();
          pin_all();
          release_k(t + 1);
          softmax(t + 1, corr, next_half);
        }
        release_v(t);
        rescale_and_pack(corr, next_half);
      } else {
        wgmma_wait<0>();
        pin_all();
        release_v(t);
      }
    };

    if (cw == 1 && (!CONT || k == 0)) named_arrive(other_bar, 256);
    if constexpr (QR) {
      mbar_wait(kfull(ring.q()), ring.qpar());
    } else {
      mbar_wait(q_full(qb), (k / QB) & 1);
    }
    if (warp == 0) stamp(k, 2 + 3 * cw);
    mbar_wait(kfull(stage_k(0)), phase_k(0));
    named_sync(my_bar, 256);
    if (my_tiles > 0) {
      // The first tile's S and P (DH: on its first 64 keys where it is also the last and needs only those).
      auto first_tile = [&](auto half) {
        pin(sc);
        wgmma_fence();
        issue_s(stage_k(0), half);
        wgmma_commit();
        named_arrive(other_bar, 256);
        wgmma_wait<0>();
        pin(sc);
        release_k(0);
        float corr[2];
        softmax(0, corr, half);
        rescale_and_pack(corr, half);
      };
      constexpr std::true_type kYes{};
      constexpr std::false_type kNo{};
      if (DH && my_tiles == 1 && half_last) {
        first_tile(kYes);
      } else {
        first_tile(kNo);
      }
      if constexpr (DH) {
        // The last tile's S is issued by the call before it: both calls take its half from half_last.
        for (int t = 0; t + 2 < my_tiles; ++t) compute_tile(t, kYes, kNo, kNo);
        if (half_last) {
          if (my_tiles > 1) compute_tile(my_tiles - 2, kYes, kYes, kNo);
          compute_tile(my_tiles - 1, kNo, kNo, kYes);
        } else {
          if (my_tiles > 1) compute_tile(my_tiles - 2, kYes, kNo, kNo);
          compute_tile(my_tiles - 1, kNo, kNo, kNo);
        }
      } else {
        for (int t = 0; t + 1 < my_tiles; ++t) compute_tile(t, kYes, kNo, kNo);
        compute_tile(my_tiles - 1, kNo, kNo, kNo);
      }
    } else {
      named_arrive(other_bar, 256);
    }
    // Tiles past all of this consumer's rows: keep the stage and turn protocol, compute nothing.
    for (int t = my_tiles; t < num_tiles; ++t) {
      mbar_wait(kfull(stage_k(t)), phase_k(t));
      mbar_wait(full_v(stage_v(t)), phase_v(t));
      named_sync(my_bar, 256);
      pass_turn(t);
      release_k(t);
      release_v(t);
    }

    if (warp == 0) stamp(k, 3 + 3 * cw);
    // Q of this item is no longer read: the producer may load another item's Q (or, QR, a K tile) into its slot.
    __syncwarp();
    if (lane == 0) mbar_arrive(QR ? kempty(ring.q()) : q_empty(qb));
    // Default: both consumers are past this item's turn barriers before consumer 1's first arrival for the next
    // item (two arrivals of its on barrier 1 in a row would complete it without consumer 0).
    if (!CONT) named_sync(3, 256);
    // Normalize and store this thread's two rows: each 8-column group's bf16 pairs gathered by one lane of the
    // row's quad (quad_transpose), so a lane stores 16 bytes where it stored 4 (a quarter of the store instructions,
    // each still writing 8 rows).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_l[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = r0 + 8 * r;
      const bool store = has_rows && row < num_rows;  // quad-uniform; every lane joins the shuffles
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      uint16_t* dst = a.out + (static_cast<int64_t>(q_start) + row_token(row)) * a.num_heads * kD +
                      static_cast<int64_t>(row_head(row)) * kD + 8 * (lane & 3);
#pragma unroll
      for (int jg = 0; jg < kD / 32; ++jg) {
        uint32_t v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int j = 4 * jg + i;
          v[i] = pack_bf16x2(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
        }
        const uint4 c = quad_transpose(v, lane & 3);
        if (store) *reinterpret_cast<uint4*>(dst + jg * 32) = c;
      }
    }
    if (warp == 0) stamp(k, 4 + 3 * cw);
    if constexpr (QR) ring.next(num_tiles);
    g += num_tiles;
    ++k;
  }
  if (CONT && cw == 0 && k > 0) named_sync(my_bar, 256);  // consumer 1's pass after the block's last tile
#endif
}

// A bf16 3-D tensor map (dims innermost first; strides of dims 1 and 2 in bytes) with 128-byte swizzle.
CUtensorMap make_map(const void* base, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t stride1, uint64_t stride2,
                     uint32_t b0, uint32_t b1, uint32_t b2) {
  const uint64_t dims[3] = {d0, d1, d2}, strides[2] = {stride1, stride2};
  const uint32_t box[3] = {b0, b1, b2};
  return make_bf16_tensor_map(base, 3, dims, strides, box);
}

template <bool PACK, bool INTRA, int KS, int ABLATE = 0, bool CONT = false, int VS = 2, bool LAZY = false,
          bool DH = false, bool TRACE = false, bool EF = false, bool QR = false>
int launch_sm90(const AttentionArgs& a, bool persistent, int num_sms, cudaStream_t stream, bool snake,
                long long* trace = nullptr, int trace_items = 0) {
  auto kernel = prefill_attention_sm90_kernel<PACK, INTRA, KS, ABLATE, CONT, VS, LAZY, DH, TRACE, EF, QR>;
  constexpr int kSmemBytes = smem_bytes(KS, VS);
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
  static bool configured = false;
  if (!configured) {
    RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    configured = true;
  }
  const int64_t group = a.num_heads / a.num_kv_heads, G = PACK ? group : 1;
  // Q: (column, head, token) over the query part of the qkv rows; a box is 64 rows of one consumer.
  const CUtensorMap tq = make_map(a.qkv, kD, a.num_heads, a.num_tokens, kD * 2, a.row * 2, 64,
                                  static_cast<uint32_t>(G), static_cast<uint32_t>(64 / G));
  std::conditional_t<TRACE, Sm90TraceParams, Sm90Params> p;
  if constexpr (TRACE) {
    p.trace = trace;
    p.trace_items = trace_items;
  }
  p.log2_bs = 0;
  while ((int64_t(1) << p.log2_bs) < a.block_size) ++p.log2_bs;
  p.box_rows = static_cast<int>(std::min<int64_t>(a.block_size, kBN));
  p.m_blocks = static_cast<int>(ceil_div(a.max_seqlen_q * G, kBM));
  p.heads = static_cast<int>(PACK ? a.num_kv_heads : a.num_heads);
  p.snake = snake ? 1 : 0;
  const int64_t kv_stride = a.num_kv_heads * kD * 2;
  const CUtensorMap tk = make_map(a.k_cache, kD, a.num_kv_heads, a.kv_slots, kD * 2, kv_stride, 64, 1,
                                  static_cast<uint32_t>(p.box_rows));
  const CUtensorMap tv = make_map(a.v_cache, kD, a.num_kv_heads, a.kv_slots, kD * 2, kv_stride, 64, 1,
                                  static_cast<uint32_t>(p.box_rows));
  const int64_t items = static_cast<int64_t>(p.m_blocks) * p.heads * a.num_seqs;
  RL_CHECK_MSG(items < (int64_t(1) << 31), "Hopper prefill: %lld work items", static_cast<long long>(items));
  const int64_t blocks = persistent ? std::min<int64_t>(items, num_sms) : items;
  kernel<<<static_cast<unsigned int>(blocks), kThreads, kSmemBytes, stream>>>(tq, tk, tv, a, p);
  RL_CUDA_CHECK_LAUNCH();
  return static_cast<int>(blocks);
}

}  // namespace

bool prefill_attention_sm90_supported(const AttentionArgs& a) {
  static const bool disabled = [] {
    const char* e = std::getenv("RIDGELINE_CUDA_PREFILL_SM90");
    return e && std::strcmp(e, "0") == 0;
  }();
  // The output rows are stored 16 bytes at a time (quad_transpose).
  return !disabled && !a.kv_fp8 && device_is_sm90() && a.head_dim == kD && a.row % 8 == 0 && aligned16(a.out) &&
         a.kv_slots > 0 && a.block_size >= 8 && (a.block_size & (a.block_size - 1)) == 0 && a.num_kv_heads > 0 &&
         a.num_heads % a.num_kv_heads == 0;
}

void launch_prefill_attention_sm90(const AttentionArgs& a, const PrefillSm90Options& o, int num_sms,
                                   cudaStream_t stream) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const bool packed = o.pack && group > 1 && 64 % group == 0;
  // The lazy rescale (production): instantiated with the production form only (unpacked, intra overlap, 3 K stages,
  // continuous turns, 3 V stages and one Q buffer), with and without the diagonal's half tiles (production up to 2k
  // keys); ignored elsewhere. The exponentials first (production without the half tiles): in that form only.
  const bool lazy = !packed && o.intra_overlap && o.k_stages == 3 && o.continuous_turns && o.v_stages == 3 &&
                    o.lazy_rescale;
  if (lazy) {
    // Q in the K stages' ring (q_ring), built with production's two forms only.
    if (o.q_ring && o.diag_half) {
      launch_sm90<false, true, 3, 0, true, 3, true, true, false, false, true>(a, o.persistent, num_sms, stream,
                                                                              o.snake);
    } else if (o.q_ring && o.exp_first) {
      launch_sm90<false, true, 3, 0, true, 3, true, false, false, true, true>(a, o.persistent, num_sms, stream,
                                                                              o.snake);
    } else if (o.diag_half) {
      launch_sm90<false, true, 3, 0, true, 3, true, true>(a, o.persistent, num_sms, stream, o.snake);
    } else if (o.exp_first) {
      launch_sm90<false, true, 3, 0, true, 3, true, false, false, true>(a, o.persistent, num_sms, stream, o.snake);
    } else {
      launch_sm90<false, true, 3, 0, true, 3, true>(a, o.persistent, num_sms, stream, o.snake);
    }
    return;
  }
  if (o.continuous_turns || o.v_stages == 3) {  // lab: instantiated with the production overlap and K stages only
    RL_CHECK_MSG(o.intra_overlap && o.k_stages == 3, "Hopper prefill lab: needs intra overlap and 3 K stages");
    if (packed) {
      RL_CHECK_MSG(o.v_stages == 2, "Hopper prefill lab: 3 V stages are built for unpacked blocks only");
      launch_sm90<true, true, 3, 0, true>(a, o.persistent, num_sms, stream, o.snake);
    } else if (o.v_stages == 2) {
      launch_sm90<false, true, 3, 0, true>(a, o.persistent, num_sms, stream, o.snake);
    } else if (o.continuous_turns) {
      launch_sm90<false, true, 3, 0, true, 3>(a, o.persistent, num_sms, stream, o.snake);
    } else {
      launch_sm90<false, true, 3, 0, false, 3>(a, o.persistent, num_sms, stream, o.snake);
    }
    return;
  }
  // The instances the options select (packed x intra-overlap x K stages).
  const int v = (packed ? 4 : 0) + (o.intra_overlap ? 2 : 0) + (o.k_stages == 3 ? 1 : 0);
  switch (v) {
    case 0: launch_sm90<false, false, 2>(a, o.persistent, num_sms, stream, o.snake); break;
    case 1: launch_sm90<false, false, 3>(a, o.persistent, num_sms, stream, o.snake); break;
    case 2: launch_sm90<false, true, 2>(a, o.persistent, num_sms, stream, o.snake); break;
    case 3: launch_sm90<false, true, 3>(a, o.persistent, num_sms, stream, o.snake); break;
    case 4: launch_sm90<true, false, 2>(a, o.persistent, num_sms, stream, o.snake); break;
    case 5: launch_sm90<true, false, 3>(a, o.persistent, num_sms, stream, o.snake); break;
    case 6: launch_sm90<true, true, 2>(a, o.persistent, num_sms, stream, o.snake); break;
    default: launch_sm90<true, true, 3>(a, o.persistent, num_sms, stream, o.snake); break;
  }
}

int launch_prefill_attention_sm90_trace(const AttentionArgs& a, int num_sms, cudaStream_t stream, long long* trace,
                                        int max_items, bool q_ring) {
  // Production's form (kernel_config.h) and snake order, without the half tiles at any length: with them and the
  // stamps, ptxas serializes the wgmmas (C7511), which would time another kernel. q_ring: Q in the K
  // stages' ring (the caller's choice, as the backend makes it).
  constexpr int ks = kPrefillSm90KStages, vs = kPrefillSm90VStages;
  constexpr bool cont = kPrefillSm90ContinuousTurns, lazy = kPrefillSm90LazyRescale;
  const bool snake = prefill_sm90_snake(a.max_seqlen_k);
  if (q_ring) {
    return launch_sm90<false, true, ks, 0, cont, vs, lazy, false, true, false, true>(a, true, num_sms, stream, snake,
                                                                                    trace, max_items);
  }
  return launch_sm90<false, true, ks, 0, cont, vs, lazy, false, true>(a, true, num_sms, stream, snake, trace,
                                                                      max_items);
}

void launch_prefill_attention_sm90_ablation(const AttentionArgs& a, int ablate, int num_sms, cudaStream_t stream) {
  // The production form (kernel_config.h) without the diagonal's half tiles, so the ablations follow its defaults.
  constexpr int ks = kPrefillSm90KStages, vs = kPrefillSm90VStages;
  constexpr bool cont = kPrefillSm90ContinuousTurns, lazy = kPrefillSm90LazyRescale;
  const bool snake = prefill_sm90_snake(a.max_seqlen_k);
  switch (ablate) {
    case 1: launch_sm90<false, true, ks, 1, cont, vs, lazy>(a, true, num_sms, stream, snake); break;
    case 2: launch_sm90<false, true, ks, 2, cont, vs, lazy>(a, true, num_sms, stream, snake); break;
    default: launch_sm90<false, true, ks, 3, cont, vs, lazy>(a, true, num_sms, stream, snake); break;
  }
}

}  // namespace rl::cuda
