// Tile sizes, launch shapes and dispatch heuristics of the CUDA kernels, with the reasons for each (design §7).
// Measured figures behind them are in docs/cuda.md and docs/benchmarks.md.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rl::cuda {

// Element-wise kernels: grid-stride loops; 8 blocks of 256 per SM on 132 SMs saturate HBM for streaming ops.
constexpr int kElementwiseThreads = 256;
constexpr int64_t kElementwiseMaxBlocks = 132 * 8;
// Per-row kernels (norms, gathers): one block per row; 256 threads cover hidden 4096 with one 16 B vector each
// per two passes, and rows are many enough at prefill to fill the chip.
constexpr int kRowThreads = 256;

// linear: M ≤ kGemvMaxM uses our GEMV (weights streamed once, bandwidth-bound); above it cuBLASLt, where the
// problem turns compute-bound (at M = 16 the GEMV still reads each weight byte once; at M = 64 tensor cores win).
constexpr int64_t kGemvMaxM = 16;
// GEMV (tensor-core skinny GEMM): a block owns 16 weight rows and its kGemvWarps warps split K, each lane
// keeping 4 steps × 2 × 16 B of weights in flight: N = 14336 gives 896 blocks of 16 KB in flight each, more
// than the ~32 KB per SM that HBM latency × bandwidth asks for (Little's law).
constexpr int kGemvWarps = 4;
// 32-k steps each warp loads before it multiplies (bytes in flight per lane: kGemvUnroll × 2 × 16 B).
constexpr int kGemvUnroll = 4;

// The GEMV kernel family serves M ≤ kSkinnyMaxM (n8 tiles of x rows: 1, 2, 4 or 8). Past M = 16 it is used only
// by the batch-invariant mode (and the kernel lab) until measured against cuBLASLt at those M.
constexpr int64_t kSkinnyMaxM = 64;
// Steps per lane in flight for 4 and 8 n8 tiles of x rows: x fragments take kNT × unroll × 4 registers.
constexpr int kGemvUnrollWide = 2;

// Batch-invariant mode (issue 13): every linear reduces each output element in the GEMV's order (K in 32-wide
// steps, step s in class s % kInvariantSplitK, classes summed in order), whatever M. The split count is the
// GEMV's warp count, fixed for all M and shapes.
constexpr int kInvariantSplitK = kGemvWarps;
// Large-M invariant GEMM (gemm_invariant.cu): 128 weight rows × 128 x rows per block, 8 warps as 2 × 4, each
// warp 64 × 32 (4 × 4 m16n8 tiles: 16 MMAs per 8 16-byte LDS), chain + running-total accumulators (128
// registers), one block per SM; a 4-stage cp.async pipeline of 16 KB stages hides the load latency.
constexpr int kInvGemmBlockW = 128;
constexpr int kInvGemmBlockX = 128;
constexpr int kInvGemmWarpsW = 2;
constexpr int kInvGemmWarpsX = 4;
constexpr int kInvGemmStages = 4;

// cuBLASLt workspace: 32 MiB is what cuBLAS recommends for Hopper split-K / stream-K kernels.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// Decode attention (split-KV). One block = (sequence, kv head, split), 4 warps, each warp walks whole 16-token
// pages; a page load serves all query heads of the GQA group (up to kDecodeMaxGroup per block).
constexpr int kDecodeWarps = 4;
constexpr int kDecodeMaxGroup = 8;
constexpr int kDecodePageSize = 16;
// Splits pay while each warp of a split still has 2 pages: at batch 1 S=4k, 32 splits (2 pages per warp) ran at
// 0.92 TB/s, 16 at 0.86, 64 (1 page per warp) at 0.74 and 128–256 at ~0.71 (kernel lab, docs/cuda.md).
constexpr int64_t kDecodeMinPagesPerSplit = 2 * kDecodeWarps;
constexpr int kDecodeMaxSplits = 256;
// Aim for about 4 blocks per SM (132 SMs) so HBM sees enough loads in flight even at batch 1.
constexpr int64_t kDecodeTargetBlocks = 132 * 4;
// Workspace for split partials (f32 o [head_dim] + lse): rows of (seq, head, split), allocated at creation.
constexpr int64_t kDecodeWorkspaceRows = int64_t(1) << 17;  // 64 MiB of partials at head_dim 128

// Chooses the split count of the decode kernel from host-side fields only (graph-capturable dispatch).
inline int64_t decode_num_splits(int64_t num_seqs, int64_t num_kv_blocks_per_seq_group, int64_t max_seqlen_k,
                                 int64_t num_heads, int64_t head_dim, int num_sms) {
  const int64_t max_pages = (max_seqlen_k + kDecodePageSize - 1) / kDecodePageSize;
  const int64_t base_blocks = num_seqs * num_kv_blocks_per_seq_group;
  const int64_t target = kDecodeTargetBlocks * num_sms / 132;
  int64_t splits = std::max<int64_t>(1, (target + base_blocks - 1) / base_blocks);
  splits = std::min(splits, std::max<int64_t>(1, max_pages / kDecodeMinPagesPerSplit));
  const int64_t per_split_rows = num_seqs * num_heads;
  const int64_t rows_cap = kDecodeWorkspaceRows * 128 / std::max<int64_t>(head_dim, 128);
  splits = std::min(splits, std::max<int64_t>(1, rows_cap / std::max<int64_t>(per_split_rows, 1)));
  return std::min<int64_t>(splits, kDecodeMaxSplits);
}

// Prefill attention (FlashAttention-2 style): kPrefillWarps warps × kPrefillMTiles m16 tiles of query rows
// (128 rows per block), key tiles of kPrefillBlockN, K/V double-buffered in shared memory with cp.async.
// Two m-tiles per warp use every K/V fragment loaded from shared memory twice: with one (v2, 64-row blocks)
// the kernel was bound by ldmatrix bandwidth at 140–168 TFLOP/s. Registers: O 2×64 + S 2×32 f32 at D = 128,
// so Q is re-read from shared memory per k-step instead of living in registers. Shared memory at D = 128:
// Q 32 KB + K/V 2 stages × 2 × 16 KB = 96 KB, two blocks per SM.
constexpr int kPrefillWarps = 4;
constexpr int kPrefillMTiles = 2;
constexpr int kPrefillBlockM = 16 * kPrefillWarps * kPrefillMTiles;
constexpr int kPrefillBlockN = 64;
// head_dim 128: 64-key tiles need 255 registers and spill a little; 32-key tiles halve S (kernel lab decides).
constexpr int kPrefillBlockN128 = 64;

}  // namespace rl::cuda
