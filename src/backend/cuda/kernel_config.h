// Tile sizes, launch shapes and dispatch heuristics of the CUDA kernels, with the reasons for each (design §7).
// Measured figures behind them are in docs/cuda.md and docs/benchmarks.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace rl::cuda {

// Element-wise kernels: grid-stride loops; 8 blocks of 256 per SM on 132 SMs saturate HBM for streaming ops.
constexpr int kElementwiseThreads = 256;
constexpr int64_t kElementwiseMaxBlocks = 132 * 8;
// SiLU·mul over rows of 8-element multiples: 8-element chunks a thread (silu_mul_rows_kernel), loaded together, one
// row a blockIdx.x. Measured (H100, session 25, the 32k prompt's trace): 37.5 -> 29.5 ms a prefill against the
// grid-stride form (a 64-bit division a chunk); 32,000 x 14,336 alone 2.94 TB/s, copy 3.02.
constexpr int kSiluMulChunks = 2;
// Host <-> device copies of at most kCopyKernelMaxBytes between pinned host memory and the device run as a kernel
// (launch_copy_bytes, ≤ kCopyKernelMaxBlocks blocks) in the stream instead of through the copy engine: a step's
// staging upload and sampling parameters are a few hundred bytes to a few KB each (since session 36 one kernel,
// launch_copy_segments; the sampled ids need no copy, the sampler writes them to the host), and every hand-off
// between the copy engine and the kernels in one stream left the GPU idle. Measured (H100, session 20,
// scripts/device/step_gaps.sh, Qwen3-0.6B batch 1): from one step's sampling kernel to the next step's first graph
// kernel 17.3 µs as kernels against 27.4 µs through the copy engine (a download and two uploads between them);
// decode 1,077.3 / 1,078.5 tok/s against 1,067.7 / 1,067.2; Llama-3.1-8B batch 1 181.9 / 181.9 against 181.6 /
// 181.6. RIDGELINE_CUDA_COPY_KERNEL=0 sends every copy through the copy engine (A/B).
constexpr int64_t kCopyKernelMaxBytes = 64 * 1024;
constexpr unsigned int kCopyKernelMaxBlocks = 16;
// Per-row kernels (norms, gathers): one block per row; 256 threads cover hidden 4096 with one 16 B vector each
// per two passes, and rows are many enough at prefill to fill the chip.
constexpr int kRowThreads = 256;
// q/k norm + RoPE (+ KV write): one warp a (token, head), or from kQkNormRopeRowsMinTokens tokens on one block (256
// or 128 threads, below) a token, its row staged in shared memory (at most kQkNormRopeRowsMaxSmem bytes with the
// token's cos / sin table). The warp form moves 256 B a warp in 2-byte accesses and computes every head's angles
// again. Both forms give the same bits, so the threshold changes no output. Measured (H100, session 25,
// `rl_bench_kernels elementwise`, Llama-3.1-8B shape with q/k norms and the KV write, TB/s warp / block form, copy
// 3.02): 64 tokens 0.195 / 0.146, 256 0.555 / 0.545, 1,024 1.03 / 1.28, 4,096 1.16 / 1.48, 32,000 1.27 / 1.78, and
// in a second call 512 tokens 0.770 / 0.880; the 32k prompt's trace 23.8 -> 14.3 ms a prefill
// (scripts/device/prefill_elementwise.sh). Then a lab form (QkNormRopeForm::kBlock128 now): blocks of
// 128 threads against 256 (H100, session 25, two processes, with every chunk loaded before the first shared store):
// 512 tokens 0.830 / 0.854 against 0.914 / 0.922 (the warp form 0.845), 4,096 1.700 / 1.716 against 1.648 / 1.623,
// 32,000 2.294 / 2.289 against 1.988 / 1.982 (copy 3.01). Session 26 (H100, one call, 128 / 256 threads): 512 tokens
// 0.908 / 0.991, 1,024 1.385 / 1.348, 2,048 1.775 / 1.672, 4,096 1.805 / 1.723, 32,000 2.400 / 2.087. So from
// kQkNormRopeRowsSmallBlockMinTokens tokens the block form runs 128 threads a block (more blocks resident an SM,
// shorter tails), below it 256.
constexpr int64_t kQkNormRopeRowsMinTokens = 512;
constexpr int64_t kQkNormRopeRowsSmallBlockMinTokens = 1024;
constexpr int64_t kQkNormRopeRowsMaxSmem = 48 * 1024;
// 16-byte chunks of the row a thread of that form loads before it stores them to shared memory (Llama-3.1-8B's 6,144
// q/k/v elements: 3 a thread).
constexpr int kQkNormRopeStageLoads = 4;

// linear: M ≤ kGemvMaxM uses our GEMV (weights streamed once, bandwidth-bound); above it cuBLASLt, where the
// problem turns compute-bound (at M = 16 the GEMV still reads each weight byte once; at M = 64 tensor cores win).
constexpr int64_t kGemvMaxM = 16;
// GEMV (tensor-core skinny GEMM): a block owns 16 weight rows and its kGemvWarps warps split K, each lane
// keeping 4 steps × 2 × 16 B of weights in flight: N = 14336 gives 896 blocks of 16 KB in flight each, more
// than the ~32 KB per SM that HBM latency × bandwidth asks for (Little's law).
constexpr int kGemvWarps = 4;
// 32-k steps each warp loads before it multiplies (bytes in flight per lane: kGemvUnroll × 2 × 16 B).
constexpr int kGemvUnroll = 4;

// The split-K GEMV takes M ≤ kSkinnyMaxM (n8 tiles of x rows: 1, 2, 4 or 8) but serves linear only up to
// kGemvMaxM: at M = 32 / 64 it measured 2.07 / 1.29 TB/s against cuBLASLt's 2.80 / 2.66 (H200, 2026-12-01), its x
// fragments re-read from L1 for every weight load.
constexpr int64_t kSkinnyMaxM = 64;
// Steps per lane in flight for 4 and 8 n8 tiles of x rows: x fragments take kNT × unroll × 4 registers.
constexpr int kGemvUnrollWide = 2;

// Streaming GEMV (sm_90, gemv_stream.cu; kernel lab v3), linear for M ≤ kGemvMaxM: a block owns kGemvStreamRows
// weight rows; per stage its warp 0 issues one bulk copy of kGemvStreamChunk elements per row (512 B contiguous,
// where v2's register loads touched 64 B per row and instruction) into shared memory, kGemvStreamStages stages in
// flight: 4 × 9 KB = 37 KB per block, 6 blocks per SM, ~220 KB per SM in flight, far above the ~32-64 KB that HBM
// latency × bandwidth asks for. Rows are padded by kGemvRowPadBytes so the 16 B fragment reads of lanes (r, q) and
// (r + 1, q) fall into different halves of the 128 B bank window.
// Lab (H200, 2026-12-01, 4096 → 14336 = 896 blocks, M = 1 / 16, TB/s): chunk × stages 256 × 4 2.41 / 2.10,
// 512 × 2 2.82 / 2.74, 256 × 2 2.89-2.99 / 3.16, 128 × 8 2.42 / 2.11, 512 × 4 1.85 / 1.70, 256 × 6 2.78 / 2.42;
// v2 3.01-3.07 / 2.78-2.86. What separates them is whether all 896 blocks are resident at once (256 × 2: 12 per
// SM; 256 × 4: 792 slots, so a second wave). Where the grid is many waves anyway, depth wins: 4096 → 128256 at
// 256 × 4 ran 4.10 TB/s (v2 3.84), 4096 → 28672 3.35 (v2 3.15). So kGemvStreamStages, unless that needs a second
// wave and kGemvStreamStagesOneWave fits the grid in one (gemv_stream_stages).
// The copies of a stage were issued by warp 0 (16 rows, one lane each); spread over the 4 warps (4 rows each) the
// same configurations stream faster (H200, 2026-12-02, M = 1, TB/s, one warp → four): 4096 → 14336 3.20 → 3.38,
// 4096 → 28672 3.37 → 3.63, 4096 → 128256 4.16 → 4.23, 4096 → 6144 2.39 → 2.42, 14336 → 4096 3.20 → 3.21; end to
// end batch-1 decode Llama-3.1-8B 218.6 → 224.2 tok/s, Qwen3-0.6B 1,054 → 1,072, Llama batch 16 2,760 → 2,895.
// A persistent form (about one block per SM streaming its row tiles back to back, stages filling across tiles)
// ran at 0.87 TB/s with one block per SM whatever its stage depth (8 or 16 stages of 256) and 1.49 / 2.48 with 2 / 4
// per SM: a block completes a chunk only every ~1.2 µs, so the stream needs many blocks per SM, not deep stages.
// Tensor-map copies (cp.async.bulk.tensor.2d, 8-row × 64-column boxes with the 128-byte swizzle: 8 copies per
// stage instead of 16) streamed slower in the same rule: 4096 → 14336 3.29 TB/s against 3.41, 4096 → 28672 3.29 /
// 3.59, and end to end Llama-3.1-8B batch 1 212.4 against 224.7 tok/s (H200, 2026-12-02; not kept).
constexpr int kGemvStreamRows = 16;
constexpr int kGemvStreamWarps = 4;
constexpr int kGemvRowPadBytes = 64;
constexpr int kGemvStreamChunk = 256;
constexpr int kGemvStreamStages = 4;
constexpr int kGemvStreamStagesOneWave = 2;
inline int gemv_stream_stages(int64_t ctas, int64_t resident_deep, int64_t resident_shallow) {
  return ctas > resident_deep && ctas <= resident_shallow ? kGemvStreamStagesOneWave : kGemvStreamStages;
}
// Split-K (as a cluster of up to kGemvStreamMaxSplits blocks, partial tiles summed in rank order through
// distributed shared memory) while the row tiles alone give fewer than kGemvStreamCtasPerSm blocks per SM and each
// split keeps at least one chunk. Qwen3-0.6B's o/down projections (N = 1024: 64 row tiles) otherwise stream through
// 64 of 132 SMs: 2048 → 1024 ran 0.39 TB/s split (v2 0.27), 3072 → 1024 0.51 (0.29), 14336 → 4096 2.50 (1.50).
// No split where one block's stages hold its whole K (K ≤ stages × chunk, Qwen's K = 1024 projections): the
// block then prefetches all its weights before pdl_wait, and split-K only adds the cluster's two barriers (split
// 1024 → 4096 / 3072 ran 0.55 / 0.41 TB/s alone, v2 0.66 / 0.50).
constexpr int kGemvStreamCtasPerSm = 4;
// The fused decode ops (Backend::fuses_norm_linear: the streaming GEMV with the RMSNorm prologue or the
// residual-add epilogue) serve M ≤ kFusedNormLinearMaxM. ptxas (sm_90a): the prologue instances hold 80 registers
// with one n8 tile (M ≤ 8; the plain ones 54-56), so 6 blocks per SM as before (shared memory bounds it), but 118
// with two (M ≤ 16; plain 70-72), which leaves 4 blocks per SM.
constexpr int64_t kFusedNormLinearMaxM = 16;
constexpr int kGemvStreamMaxSplits = 8;
// A doubling of the split count is taken only while the doubled grid stays within kGemvStreamMaxSplitCtasPerSm
// blocks per SM, so that the clusters fit on the GPU in one wave. Lab (H200, 2026-12-02, TB/s, M = 1 / 16): the
// 8B o_proj (4096 → 4096, 256 row tiles) went to 4 splits = 1,024 blocks in clusters of 4, of which ncu found 248
// clusters (992 blocks) resident: a second wave of 8 clusters; 1.43 / 1.23, and 1.82 / 1.59 at 2 splits. The 8B
// down_proj (14336 → 4096) likewise: 2.33 / 2.15 at 4 splits, 3.15 / 2.70 at 2. Qwen3-0.6B's N = 1024
// projections (64 tiles: 8 splits, 512 blocks) and the 8B qkv (384 tiles: 2 splits, 768 blocks) are unchanged.
constexpr int kGemvStreamMaxSplitCtasPerSm = 6;
inline int gemv_stream_splits(int64_t tiles, int64_t k, int chunk, int num_sms, int max_splits) {
  if (k <= int64_t(kGemvStreamStages) * chunk) return 1;
  int s = 1;
  while (s * 2 <= max_splits && tiles * s < int64_t(num_sms) * kGemvStreamCtasPerSm &&
         tiles * s * 2 <= int64_t(num_sms) * kGemvStreamMaxSplitCtasPerSm && k / (s * 2) >= chunk) {
    s *= 2;
  }
  return s;
}

// Batch-invariant mode (issue 13): every linear reduces each output element in one canonical order, whatever
// M: a single MMA chain over K in increasing 32-wide steps (no split-K at all, so nothing to keep fixed), then
// + bias (gemm_invariant.cu). Tile configurations (weight rows × x rows, warps, 32-k steps per stage, stages,
// blocks per SM), picked by M in launch_gemm_invariant:
//   M ≤ 8:  32 × 8,  2 warps, 4 steps × 5 stages (51 KB: 4 blocks per SM; N = 14336 gives 448 blocks, one wave,
//           each SM keeping ~128 KB of weights in flight, far above the ~25 KB HBM latency × bandwidth asks for);
//   M ≤ 16: 64 × 16, 4 warps, 4 × 4 (80 KB, 2 per SM);  M ≤ 32: 64 × 32, 4 warps, 4 × 4 (96 KB, 2 per SM);
//   M ≤ 64: 64 × 64, 8 warps (4 × 2), 2 × 4 (64 KB, 3 per SM): x tiles shared by 4 weight-row warps;
//   larger: 256 × 128, 8 warps (4 × 2) of 64 × 64 (64 MMAs per 16 LDS.128, 128 accumulator registers, one
//           block per SM), 1 × 4 (96 KB).
// Measured (H200, 4096 → 14336, 2026-12-01), weight bytes / time: M = 1 / 8: 2.69 / 2.60 TB/s (the split-K GEMV:
// 3.15); M = 16: 2.43 (64 × 16; 32 × 16 gave 2.16); M = 32: 2.08; M = 64: 1.38 (cuBLASLt 2.91); M = 4096:
// 172 TFLOP/s (cuBLASLt 796). Lab configs: 2 (32 × 16), 7 (16 × 16, one warp), and for large M 8 (256 × 128 with
// 2 steps × 3 stages: 206 TFLOP/s) and 9 (128 × 128, 4 warps, 2 blocks per SM: 204) — not the default until a
// device run of InvariantGemmTileConfigsAgreeBitwise (which now covers them) has passed.

// Skinny GEMM (sm_90a, gemm_skinny_sm90.cu): linear for kGemvMaxM < M ≤ kSkinnyGemmMaxM in place of cuBLASLt, opt-in
// (RIDGELINE_CUDA_SKINNY_GEMM=1). Blocks of 128 weight rows × 64 batch columns (wgmma m64n64, two consumer
// warpgroups), weights and x streamed by TMA through kSkinnyGemmStages stages of 24 KB (8: 192 KB, one block per
// SM, 128 KB of weights in flight per SM); split-K over kSkinnyMaxSplits k ranges at most, added in a fixed order by
// the tile's last block. Why it is not the default (H200, 2026-12-03, same run, 2 alternating rounds): alone it
// matches or beats cuBLASLt at M = 32 / 64 on the Llama-3.1-8B shapes (4096 → 14336 at M = 64: 3.05 against
// 2.86 TB/s; the LM head 3.95 against 3.72), but Llama-3.1-8B decode ran slower with it: batch 32 5,606 / 5,615
// tok/s against 5,644 / 5,838 with cuBLASLt, batch 64 9,503 / 9,531 against 9,878 / 9,897 (without programmatic
// dependent launch it was slower still: 5,383 / 9,316).
constexpr int64_t kSkinnyGemmMaxM = 64;
// o_proj / down_proj wherever cuBLASLt serves them (M > kGemvMaxM, and M > kSkinnyGemmMaxM where the skinny GEMM is
// on), without a bias, not in deterministic mode: cuBLASLt adds the residual in its epilogue (beta = 1, C = D = the
// residual stream; Backend::fuses_linear_add), so the next pre-norm is rms_norm (one read and one write of
// [M, hidden]) instead of add_rms_norm (two of each) and the projection's output is not written and read back.
// cuBLASLt's kernels may round the product to bf16 before adding (CudaFusedOps.LinearAddInTheGemmEpilogue: the
// composition's bits at 4096 → 4096, not at 14336 → 4096 with M ≤ 64). Measured (H100, session 26,
// scripts/device/prefill_elementwise.sh, the 32k prompt on the Llama-3.1-8B shape, against
// RIDGELINE_CUDA_GEMM_RESIDUAL=0 in the same call): TTFT 1,154.3 / 1,161.8 ms against 1,162.6 / 1,163.5; over two
// prefills' traces RMSNorm 25.1 against 44.0 ms, the GEMMs +11.1 ms (the epilogue reads the residual).
constexpr bool kGemmResidualEpilogue = true;
// Which linears the skinny GEMM takes from cuBLASLt (CudaBackend::set_skinny_gemm_use; RIDGELINE_CUDA_SKINNY_GEMM=
// 1|all|long): none (production), all, or only the long-K and wide-N shapes (kLong, lab). Why kLong (H200, session
// 18, `rl_bench_kernels skinny`, alone, M = 64, TB/s cuBLASLt / skinny): where cuBLASLt splits K and sums in a second
// kernel, 14336 → 4096 (8B down_proj: 33 + 4.3 µs a layer by ncu, session 15) 2.63 / 2.78, and the LM head
// 4096 → 128256 3.57 / 3.89: ~100 µs of a 5.4 ms batch-64 step together. Elsewhere the skinny GEMM gains ≤ 5 %
// (4096 → 6144 1.93 / 2.02, 4096 → 4096 1.51 / 1.56) or loses (4096 → 28672 3.23 / 3.17), and with all of them it
// lost end to end (above). End to end (H200, session 19, batch 64 at 128/128, 2 rounds alternating): 11,375 / 11,596
// tok/s against 11,419 / 11,269, within the rounds' spread; cuBLASLt's own timed pick (algorithm 3) matched the
// skinny GEMM on both shapes alone (2.757 and 3.931 TB/s). Stays lab until a longer A/B separates them.
// Session 20 (H100, batch 64 at 128/128, --profile-kernels, per step): the skinny GEMM on the short shapes too (the
// 8B's QKV and O projections, where cuBLASLt reads 79 % and 74 % of copy) took 1,983 µs a step against cuBLASLt's
// 687 + 488, and decode ran 8,676 / 8,770 tok/s (short / short and long) against 8,933: not kept.
enum class SkinnyGemmUse { kOff, kLong, kAll };
constexpr int64_t kSkinnyLongK = 8192;
constexpr int64_t kSkinnyWideN = 65536;
inline bool skinny_gemm_serves(SkinnyGemmUse use, int64_t n, int64_t k) {
  return use == SkinnyGemmUse::kAll || (use == SkinnyGemmUse::kLong && (k >= kSkinnyLongK || n >= kSkinnyWideN));
}
constexpr int kSkinnyGemmStages = 8;
constexpr int kSkinnyMaxSplits = 8;
// A split streams at least this many 64-wide k chunks (fewer, and the partial sums cost more than they save).
constexpr int kSkinnyMinChunksPerSplit = 16;
// Split count: about half the resident blocks' worth of (tile, split) work, at most 3 splits, each at least
// kSkinnyMinChunksPerSplit chunks long. Reason (H200, M = 64, 8 stages, weight TB/s by splits 1 / 2 / 3 / 4 / 6 / 8,
// 2026-12-03): 4096 → 6144 (48 tiles) 1.98 / 1.86 / 1.42 / 1.43 / 1.12 / 1.01; 4096 → 4096 (32 tiles) 1.42 / 1.56 /
// 1.52 / 1.46 / 1.05 / 0.96; 1024 → 4096 (32 tiles, 16 chunks) 0.60 / 0.54 / 0.52 / 0.50. The tile's last block
// adds the partials after the others are done, so every split adds to the tail; filling every SM did not pay.
inline int skinny_gemm_splits(int tiles, int chunks, int resident) {
  int s = std::max(1, std::min(3, resident / std::max(1, 2 * tiles)));
  while (s > 1 && (chunks / s < kSkinnyMinChunksPerSplit || static_cast<int64_t>(tiles) * s > resident)) --s;
  return s;
}
// Workspace: 16 MiB of partials (tiles × splits ≤ 512 blocks of 32 KB) and a counter per tile (N ≤ 8M rows).
constexpr int64_t kSkinnyWorkspaceFloats = int64_t(1) << 22;
constexpr int64_t kSkinnyWorkspaceCounters = int64_t(1) << 16;

// cuBLASLt workspace: 32 MiB is what cuBLAS recommends for Hopper split-K / stream-K kernels.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
// cuBLASLt tuning (gemm_lt.cpp): while the runner's eager step before a decode graph's capture runs, the first
// linear of each shape with M ≤ kGemmTuneMaxM times up to kGemmTuneCandidates of the heuristic's algorithms
// (kGemmTuneReps launches each, L2 flushed before every launch, median) and keeps the fastest; the heuristic's
// first choice stays unless another is kGemmTuneMinGain faster. Why: cuBLASLt's first choice for the decode
// batches leaves the mid-size Llama-3.1-8B projections at 63-84 % of copy bandwidth at M = 64 (ncu, H200,
// 2026-12-04: qkv 16.8 µs, o_proj 12.6 µs, down 33 µs + a 4.3 µs split-K reduction), where gate_up streams at 90 %.
// Opt-in (RIDGELINE_CUDA_GEMM_TUNE=1). Measured end to end in session 17 (H100, batch 64 at 128/128, 2 rounds
// alternating): 8,170 / 9,087 tok/s against 8,849 / 8,964, so the choice is erratic: the timed picks differ from run
// to run (docs/benchmarks.md). Not on by default.
constexpr int64_t kGemmTuneMaxM = 1024;
constexpr int kGemmTuneCandidates = 16;
constexpr int kGemmTuneReps = 5;
constexpr float kGemmTuneMinGain = 0.02f;

// Decode attention (split-KV). One block = (sequence, kv head, split), 4 warps, each warp walks whole 16-token
// pages; a page load serves all query heads of the GQA group (up to kDecodeMaxGroup per block).
constexpr int kDecodeWarps = 4;
constexpr int kDecodeMaxGroup = 8;
constexpr int kDecodePageSize = 16;
// Splits pay while each warp of a split still has 2 pages: at batch 1 S=4k, 32 splits (2 pages per warp) ran at
// 0.92 TB/s, 16 at 0.86, 64 (1 page per warp) at 0.74 and 128–256 at ~0.71 (kernel lab, docs/cuda.md). The host
// sizes the split count with this for the launch's longest context; the kernel itself goes down to one page per
// warp, which a shorter context under a grid sized for a longer one (CUDA graphs) uses.
constexpr int64_t kDecodeMinPagesPerSplit = 2 * kDecodeWarps;
// The decode kernel (launch_decode_attention's DecodeLab picks one in the lab): tensor cores for head_dim 64/128 and
// GQA chunks of up to 8 heads, with or without each warp's next page loaded ahead; CUDA cores for the rest.
// kMmaEarly (lab, session 16): the tensor-core kernel with each warp's first page requested before pdl_wait() where
// no kernel of the step writes it. Alone (H200, session 18): B1 S4k 0.91 vs 0.92 TB/s, B64 S4k 4.24 vs 4.28; but
// alone no kernel precedes it, so the early request overlaps nothing. In a CUDA graph (H200, session 19, two calls):
// B1 S4k 1.456 / 1.458 TB/s against 1.421 / 1.425 (11.53 against 11.80 µs); Llama-3.1-8B batch 1 at 4k keys
// 217.1 / 216.8 tok/s against 215.9 / 216.4. Batch 64 end to end is not yet measured (b64_levers.sh VARIANTS=early):
// lab until then. A cluster-merged form (splits merging through distributed shared memory) lost too (session 18:
// B1 S4k 1.32 TB/s in a graph against 1.43, B64 S4k at 16 / 8 heads 2.57 against 4.28) and was removed
// (docs/benchmarks.md).
// kStaged (session 27; compute capability 9.0, head_dim 64 / 128 over bf16, 128 over fp8): the tensor-core kernel
// with every page of a split loading at once into shared memory by TMA (kDecodeStagePages buffers a block of
// kDecodeStagedWarps warps, each warp refilling its own as it reads them; the pages no step kernel writes requested
// before pdl_wait()), one block per SM, the split count from decode_staged_num_splits. Why: at batch 1 the plain
// kernel's warps load their pages one after another (block table, page, fold, next page), 44.8 % of copy at S = 4k
// in a CUDA graph on the H100 (session 20); issue 21.2 asks 60 %. Measured and dropped (H100, session 27, B1 S4k,
// 20 launches in a CUDA graph, 16 splits, µs a launch): the same kernel with 4 warps a block 11.17-11.18 against
// 10.09-10.15 with 8 (a warp folds its 4 pages one after another), and with 4 warps requesting every page after
// pdl_wait() 13.26-13.27 (the plain kernel: 12.32; the early requests overlap the previous kernel's tail).
// kStagedCluster (session 28; production from session 29, below): the staged kernel launched in clusters of its split
// count (2-8 splits, a portable cluster), each split pushing its partial (o, lse) into the cluster's first block
// through distributed shared memory (once the cluster barrier's first phase says every block has started) and
// arriving on the barrier's second phase, on which that block waits before it merges them in split order (the same
// arithmetic and bits as the staged kernel's merge): no partial store to global memory, no atomic, no partial loads
// from L2 on the last block's path.
// Elsewhere (one split, more than kDecodeClusterMaxSplits) it runs as kStaged. The removed form above merged the
// plain kernel, whose warps loaded their pages one after another; the staged kernel's page loads no longer bound
// batch 1, so the merge's round trips show. Measured and dropped (H100, session 28, B1 S4k, 20 launches in a CUDA
// graph, TB/s, cluster merge against global merge at the same forced split count): non-portable clusters of 12 and
// 16 blocks 1.195 / 1.192 against 1.975 / 1.978 and 1.204 / 1.201 against 1.679 / 1.665 (the clusters of 16 one-SM
// blocks do not all fit at once); at 4 splits 1.365 / 1.366 against 1.317 / 1.317.
// Measured and dropped (H100, session 41, rl_bench_kernels decode, B1 S4k, 20 launches in a CUDA graph, µs a launch):
// kStagedCluster with its dependents triggered after each warp's last page request instead of right after
// pdl_wait(), so that the next launch's early page requests would queue behind this launch's refills: 9.514 against
// 8.392 (fp8 8.368 against 8.194; at 12 / 16 splits 1.992 / 1.687 against 1.978 / 1.674 TB/s). The next launch's
// early requests are worth more than the bandwidth they take from this launch's refills. It had the global merge's
// bits (CudaAttention.DecodeClusterMerge*).
enum class DecodeKernel { kAuto, kSimt, kMma, kMmaPrefetch, kMmaEarly, kStaged, kStagedCluster };
constexpr int kDecodeClusterMaxSplits = 8;
constexpr int kDecodeStagedWarps = 8;
// Production (session 27, H100): kStaged where a launch's (sequence, kv head, chunk) blocks fit one wave of the
// staged kernel (one block per SM), else kDecodeMmaKernel. Measured (rl_bench_kernels decode, 20 launches in a CUDA
// graph, µs a launch, against the plain kernel): B1 S4k 10.15 against 12.32, B64 S4k 349.1 against 358.8, B16 S32k
// 688.5 against 715.6; Llama-3.1-8B batch 1 at ~4k keys 169.2 / 169.3 tok/s against 164.4 / 164.3; over an fp8
// cache (one round) B1 S4k 8.79 µs against 10.45, batch 1 at 4k keys 170.7 tok/s against 167.4. At batch 64 and
// 192 keys (h16 kv8, one lone launch) the staged kernel read 1.48 TB/s against 1.72: where blocks take several waves
// the plain kernel's 3 blocks per SM win. Session 28 (H100, two calls on one machine): the cluster merge
// (kStagedCluster) at production's 8 splits, B1 S4k 9.35 / 9.32 µs against 8.77 / 8.76 (neighbouring rows; fp8 8.44 /
// 8.42 against 8.27 / 8.26); Llama-3.1-8B batch 1 at ~4k keys 169.7 / 169.6 / 169.5 tok/s against 170.5 / 170.2 /
// 170.4 (three rounds alternating), over fp8 171.1 / 171.0 against 171.7 / 171.6; batch 16 at ~2k keys (one split: the
// same kernel) 1,572.5 / 1,575.1 / 1,571.2 against 1,576.0 / 1,573.2 / 1,576.3. Those figures are 017e4ac's
// handshake: each thread of the other splits arrived on an mbarrier of the first block (remote arrive, release,
// cluster scope), which the first block waited on. Memcheck was clean and the bits the global merge's, but
// compute-sanitizer racecheck hung in it (no progress in 100 s on a test the global merge passes in 4 s with 0
// hazards). Session 29 (H100): the cluster barrier as the handshake (arrive after the remote stores; the first block
// waits) passed racecheck's run but reported 41,344 hazards, "a block that might not have entered yet": a split may
// store into the first block's shared memory before that block has started. So the barrier now has two phases
// (merge_cluster): every block arrives at the kernel's start and waits before its remote stores. That form: 8 / 8
// decode tests, memcheck 0 errors, racecheck 0 hazards; B1 S4k in a graph 9.27 µs against 8.435 (1.810 against 1.989
// TB/s, 59.8 against 65.7 % of copy; fp8 8.419 against 8.214); Llama-3.1-8B batch 1 at ~4k keys 174.4 / 174.6 / 174.6
// tok/s against 176.1 / 176.1 / 176.1 (three rounds alternating, +0.9 %), over fp8 175.7 / 175.9 / 175.8 against
// 177.6 / 177.5 / 177.5; batch 16 at ~2k keys (one split) 1,605.0 / 1,601.1 / 1,605.2 against 1,604.0 / 1,601.7 /
// 1,605.6. Production since.
constexpr DecodeKernel kDecodeStagedKernel = DecodeKernel::kStagedCluster;
// Page buffers a block of the staged decode kernel (kStaged) keeps loading: 16 pages of K and V, 128 KB at head_dim
// 128 (one block per SM), 64 KB at 64; 2 a warp. The block merge's shared memory (41.7 KB) lies beside them.
// Measured and dropped (H100, session 27, Llama-3.1-8B batch 1 at ~4k keys, tok/s, each against the form before it
// in one call): the merge's shared memory in the buffers' place once they are folded (129 KB a block, a barrier
// more) 174.1 / 174.1 against 174.5 / 174.5; with it, 24 buffers (193 KB; a 4k split in one fill from 11 splits)
// 173.9 / 173.8 against 16 buffers' 174.4 / 174.4, and 173.5-173.9 at 8, 11, 12 or 16 splits.
constexpr int kDecodeStagePages = 16;
// Decode steps: q/k norm + RoPE and the KV write inside the tensor-core decode attention kernel (DecodeRope) instead
// of a kernel before it: one kernel fewer a layer. Off until measured (session 17, no GPU). Why: at batch 64 the
// RoPE + KV-write kernel took 4.7 µs a layer by ncu (session 15), ~0.15 ms of a 5.5 ms Llama-3.1-8B step, and the
// batch-64 target needs 0.18 ms. Each block rotates its chunk's q heads (8 at most) again, and the split holding the
// new key writes it before loading its page. Measured (H100, session 17, 2 rounds alternating): batch 64 at 128/128
// 8,831 / 8,994 tok/s against 8,849 / 8,964, within noise; greedy ids equal end to end. H200 (session 18, 2 rounds
// alternating): batch 64 11,056 / 11,313 against 11,308 / 11,855, and Llama-3.1-8B batch 1 at 4k keys 212.6 / 212.5
// against 216.5 / 216.4: slower. Each block re-rotates its chunk's q heads, and the split holding the new key waits
// for its write before loading its page; that costs more than the launch it saves. Stays off.
constexpr bool kDecodeFusedRopeAttention = false;
// Measured and dropped (session 24, H100, the 32,000-token prompt's trace, scripts/device/ttft_profile.sh): the q/k
// norm + RoPE + KV write kernel (one warp a (token, head), 0.37 ms a layer there, ~40 % of copy) taking 4 heads a
// warp at prefill sizes and loading all four before computing: 32.3 ms a prefill against 23.8 in the same call (the
// first form, positions and slots loaded head by head: 30.5 against 24.1 in an earlier call). The kernel stays one
// head a warp.
// Measured and dropped (5e6f01c, session 24, H100, Llama-3.1-8B batch 64 at 128 / 128, kernel trace a step): the
// decode attention kernel asking L2 for the whole output projection weight (33.5 MB) while it runs. The O GEMM
// went 15.23 -> 12.13 µs a layer, but attention 19.62 -> 23.97 µs: at batch 64 it already reads its KV at a rate the
// prefetch competes with; decode 8,874 / 8,866 -> 8,910 / 8,966 tok/s over bf16, 9,276 / 9,139 -> 9,191 / 9,178
// over fp8 (noise).
// Mixed steps (decode rows beside prefill chunks): the leading decode rows through the decode kernel, the rest through
// the prefill kernel, instead of every row through the prefill kernel. There a decode row is a work item per query
// head whose 128-row tiles hold one valid row: each key tile of its context costs a whole tile's two GEMMs, and each
// query head re-reads the K/V tiles. Measured (H200, session 18): the kernel row mixed_attn (256 decode rows at
// 1,536 keys beside 8 prefill chunks of 1,024) 582 µs split against 1,628 µs (the decode rows alone: 376 µs); the
// offline 1000 × 1024/1024 run on the Llama-3.1-8B shape (256 sequences) 9,658 out tok/s against 9,373 in one call.
constexpr bool kSplitMixedDecodeRows = true;
// Production: the tensor-core kernel without the register prefetch for head_dim 64 / 128. Reason (H200, Llama-3.1-8B
// shape 32q/8kv d128, rl_bench_kernels decode, session 15): against the CUDA-core kernel, B=64 S=4k 4.26-4.32 vs
// 3.81-3.83 TB/s, B=16 S=32k 4.33-4.39 vs 4.09-4.14, B=1 S=4k 0.90 vs 0.82-0.84, and batch 64 at 80 / 192 / 512 keys
// under a 4k graph's grid 1.28 / 2.23 / 3.32 vs 0.70 / 1.25 / 2.17 TB/s (the CUDA-core loop's ~1,000 instructions a
// page bound it there). The register prefetch (kMmaPrefetch, 218 registers: 2 blocks per SM) read 0.92-0.95 at B=1
// S=4k but 2.03 at B=64 S=192, and end to end (batch 64, 128/128) 11,730 / 11,083 tok/s against 11,638 / 11,711.
// Also measured and dropped: L2 prefetches of a warp's next 1-6 pages (slower at every shape, down to 2.5 TB/s at
// B=64 S=4k) and reading a warp's block-table entries 32 at a time (no change).
constexpr DecodeKernel kDecodeMmaKernel = DecodeKernel::kMma;
constexpr int kDecodeMaxSplits = 256;
// Workspace for split partials (f32 o [head_dim] + lse): rows of (seq, head, split), allocated at creation.
constexpr int64_t kDecodeWorkspaceRows = int64_t(1) << 17;  // 64 MiB of partials at head_dim 128
// Each extra split costs its merge: a split must buy more than 1 % of wave efficiency (below).
constexpr double kDecodeSplitPenalty = 0.01;

// The split count in [1, cap] whose grid (base_blocks × splits) best fills whole waves of `slots` resident blocks,
// less kDecodeSplitPenalty a split; the smallest count among equal scores.
inline int64_t best_wave_splits(int64_t base_blocks, int64_t cap, int64_t slots) {
  int64_t best = 1;
  double best_score = -1e30;
  for (int64_t s = 1; s <= cap; ++s) {
    const int64_t blocks = base_blocks * s, waves = (blocks + slots - 1) / slots;
    const double score = static_cast<double>(blocks) / static_cast<double>(waves * slots) - kDecodeSplitPenalty * s;
    if (score > best_score + 1e-9) {
      best = s;
      best_score = score;
    }
  }
  return best;
}

// Chooses the split count of the decode kernel from host-side fields only (graph-capturable dispatch): the count
// whose grid best fills whole waves of `slots` resident blocks (blocks per SM × SMs, from the occupancy of the
// kernel instance), less kDecodeSplitPenalty per split, within the pages-per-split and workspace limits. Reason
// (H200, 32q/8kv, D=128, 3 resident blocks per SM = 396 slots, 2026-12-01): B=64 S=4k ran 3.24 / 3.65 / 3.84 /
// 3.65 / 3.60 TB/s with 1 / 2 / 3 / 4 / 8 splits (wave efficiency .65 / .86 / .97 / .86 / .94), B=16 S=32k
// 2.44 / 3.57 / 4.13 / 3.26 / 3.90 (.32 / .65 / .97 / .65 / .86 at 1 / 2 / 3 / 4 / 8): the old target of
// 4 blocks per SM picked 2 and 5 splits. At B=1 every count up to the pages limit fits one wave, and more splits
// won (32: 0.86-0.92 TB/s, the limit).
inline int64_t decode_num_splits(int64_t num_seqs, int64_t num_kv_blocks_per_seq_group, int64_t max_seqlen_k,
                                 int64_t num_heads, int64_t head_dim, int64_t slots) {
  const int64_t max_pages = (max_seqlen_k + kDecodePageSize - 1) / kDecodePageSize;
  const int64_t base_blocks = std::max<int64_t>(1, num_seqs * num_kv_blocks_per_seq_group);
  int64_t cap = std::min<int64_t>(kDecodeMaxSplits, std::max<int64_t>(1, max_pages / kDecodeMinPagesPerSplit));
  const int64_t per_split_rows = num_seqs * num_heads;
  const int64_t rows_cap = kDecodeWorkspaceRows * 128 / std::max<int64_t>(head_dim, 128);
  cap = std::min(cap, std::max<int64_t>(1, rows_cap / std::max<int64_t>(per_split_rows, 1)));
  slots = std::max<int64_t>(slots, 1);
  return best_wave_splits(base_blocks, cap, slots);
}

// The staged decode kernel's split count (DecodeKernel::kStaged): enough splits that a split of the longest context
// fits the block's kDecodeStagePages buffers (longer splits refill their buffers as they go), within half of
// `slots` (the SMs, one block each), at most kDecodeMaxSplits. Why half (H100, session 27, Llama-3.1-8B batch 1 at
// ~4k keys, two rounds, RIDGELINE_CUDA_DECODE_SPLITS): 8 splits (64 blocks) 174.9 / 175.0 tok/s, 12 174.6 / 174.6,
// 16 (one block per SM) 173.9 / 174.0. A block takes most of an SM's shared memory, and the SMs it leaves free take
// the next kernel's blocks early (programmatic dependent launch: the o_proj GEMV's weight prefetch).
inline int64_t decode_staged_num_splits(int64_t num_seqs, int64_t num_kv_blocks_per_seq_group, int64_t max_seqlen_k,
                                        int64_t slots) {
  const int64_t max_pages = (max_seqlen_k + kDecodePageSize - 1) / kDecodePageSize;
  const int64_t base_blocks = std::max<int64_t>(1, num_seqs * num_kv_blocks_per_seq_group);
  const int64_t want = (max_pages + kDecodeStagePages - 1) / kDecodeStagePages;
  const int64_t fit = std::max<int64_t>(1, slots / (2 * base_blocks));
  return std::max<int64_t>(1, std::min({want, fit, static_cast<int64_t>(kDecodeMaxSplits)}));
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
// head_dim 256: one m16 tile per warp (64-row blocks): O is 128 f32 registers per thread; shared memory
// Q 32 KB + K/V 2 stages × 2 × 32 KB = 160 KB, one block per SM.
constexpr int kPrefillMTiles256 = 1;
// Hopper prefill (prefill_attention_sm90.cu), head_dim 128: GQA-packed blocks (one kv head, rows = (token, head)
// pairs, each K/V tile loaded once per group) or one block per query head (K/V tiles re-read from L2 per head).
constexpr bool kPrefillSm90Pack = false;
// Hopper prefill: the softmax of S_{t+1} runs while P V of tile t is on the tensor cores (FlashAttention-3's
// intra-warpgroup overlap), on top of the ping-pong between the two consumer warpgroups. As compiled, ptxas hoists
// the wait for P V above that softmax (session 20's ncu; tools/wait_order.py on the SASS says "serialized"), so the
// issue order is: S_{t+1} and P V issued, the turn passed, both waited for, then the softmax. The lab form that kept
// the wait in place (wgmma_wait_in_place; SASS "overlapped"; deleted in session 32) ran slower on the H100 (session 21,
// `bench kernels prefill`, three alternating rounds, TFLOP/s of the wait in place against the hoisted wait):
// 4 × 4k 535.2 / 534.8 / 534.6 against 547.6 / 544.5 / 545.1, 16 × 1k 379.7 / 386.9 / 385.0 against 382.4 / 390.3 /
// 390.0, 1 × 16k 553.4 / 552.9 / 587.3 against 582.5 / 601.5 / 557.9; the 32k TTFT 1,217-1,230 ms against
// 1,212-1,227. On the H200 (session 21, one alternating call) the TTFT was 1,235.5 / 1,237.1 against 1,231.9 /
// 1,233.5. Likely why: the other consumer's GEMMs keep the tensor cores busy during this one's softmax either way.
// Also measured and dropped (session 21, H200, three alternating rounds): one in four / one in two of the softmax's
// exponentials on the FMA pipe (FlashAttention-4's degree-3 polynomial, 9 instructions each, in place of a MUFU.EX2):
// 4 × 4k 488.5-489.7 / 447.9-453.7 against 545.8-549.1 TFLOP/s, 16 × 1k 358.1-360.7 / 338.2-339.6 against
// 386.7-387.4, 1 × 16k 508.7-534.8 / 469.0-480.7 against 573.8-601.8; the 32k TTFT 1,269-1,278 / 1,310-1,315 ms
// against 1,232-1,234. So the softmax is not bound by the special-function unit alone: each consumer warp's
// instruction issue (about 4.5 instructions an element beside the exponential) is as tight, and every added
// instruction lengthens it. Nor did the reverse pay (session 21, H100, three alternating rounds): each row's sum of P
// from the tensor cores (P times a 128 × 8 block of ones, 8 wgmma with n = 8 beside P V, rescaled with O) in place of
// 64 additions a thread: 4 × 4k 545.0 / 547.4 / 546.1 against 552.1 / 549.5 / 554.2 TFLOP/s, 16 × 1k 358.3 / 352.8 /
// 361.6 against 384.7 / 386.5 / 386.1, 1 × 16k 580.8 / 600.2 / 608.1 against 578.1 / 606.3 / 591.6; the 32k TTFT
// 1,196.5 / 1,193.2 against 1,197.7 / 1,194.2 ms.
constexpr bool kPrefillSm90IntraOverlap = true;
// Hopper prefill: one block per SM walking the work items (longest first), so an item's Q and first K/V tiles load
// while the previous item's last tiles and output store finish; else one block per item.
constexpr bool kPrefillSm90Persistent = true;
// Hopper prefill: K tiles in flight. Three fill the 227 KB of shared memory (Q ×2 + 3 K + 2 V tiles of 32 KB, or with
// kPrefillSm90VStages = 3: Q + 3 K + 3 V).
constexpr int kPrefillSm90KStages = 3;
// Measured and dropped (1f0d23d, session 25, H100, one call, `rl_bench_kernels prefill` lab rows beside production's
// lab row, TFLOP/s): 2 K stages, which leaves room for a second Q buffer beside 3 V stages (the next item's Q loading
// under this one instead of after it): 4 x 4k 498.2 / 493.2, 16 x 1k 368.4 / 363.7, 1 x 16k 554.3 / 564.2; the 32k
// TTFT 1,207.8 / 1,208.3 ms against 1,200.4 / 1,204.2. A K tile is released right after its S = Q Kᵀ, so 2 stages
// give its load about one tile period, and long prompts lose more than short items gain from the early Q.
// Hopper prefill: whether the two consumers' ping-pong turns run on across work items (one consumer stores its rows
// and starts the next item's first S = Q Kᵀ while the other's last P V runs) instead of both meeting at a barrier
// after each item, which drains the tensor cores for about a tile at every item's end (16 × 1k averages 4.5 key
// tiles an item). With kPrefillSm90VStages, measured (H200, session 18, `bench kernels prefill`, neighbouring rows,
// TFLOP/s, per item + 2 V stages / continuous / 3 V stages / both): 4 × 4k 450 / 469 / 467 / 481, 16 × 1k
// 328 / 364 / 339 / 350, 1 × 16k 503 / 515 / 519 / 536; the 32k prompt's TTFT 1,268 and 1,272 ms (per item, before
// and after) against 1,265 / 1,267 / 1,259. Both on. RIDGELINE_CUDA_PREFILL_SM90=per_item_v2 runs the old form.
constexpr bool kPrefillSm90ContinuousTurns = true;
// Hopper prefill: V tiles in flight. A V stage is released only once P V is done by both consumers (after the next
// tile's softmax), so with 2 stages the load of tile t + 2 has about one tile period minus a softmax to land, where
// K (released right after S = Q Kᵀ) has two. 3 V stages fit only with one Q buffer (the next item's Q then loads
// after this item, not under it). Measured with kPrefillSm90ContinuousTurns above.
constexpr int kPrefillSm90VStages = 3;
// Measured and dropped (the Q halves: a lab form from session 29 to 31, deleted in session 32): with 3 V stages the one
// Q buffer is given back only after both consumers' last P V of an item, and the producer loads the next item's Q (and
// then its first K / V tiles) only after that, so both consumers wait about one TMA round trip an item with the tensor
// cores idle. In the lab form each consumer's 64-row half has its own barriers and goes back once that consumer's last
// S = Q Kᵀ is done; the producer loads the first consumer's half, then the item's first K tile, then the second's. Why
// it may matter: an item is ~8 µs of tensor-core work at 16 × 1k (4.5 key tiles on average), ~30 µs at 4 × 4k and ~120
// µs at 1 × 16k, so a ~1 µs wait an item would cost ~12 / 3 / 1 %, the order of the gaps to cuDNN in session 29 (0.909
// / 0.956 / 0.964). Production's PTX is unchanged by it (opcode for opcode). Measured (H100, session 31,
// prefill_vs_cudnn.sh, 2 + 4 + 5 rounds alternating in three calls, medians, TFLOP/s, Q halves / production then
// without the diagonal's half tiles): 4 × 4k 560.5 / 559.5, 556.0 / 557.9, 555.6 / 558.1; 16 × 1k 396.8 / 387.4, 394.1
// / 384.2, 389.8 / 386.9; 1 × 32k 562.1 / 567.2, 558.3 / 570.5, 560.0 / 567.5; the 32k TTFT 1,159.2 ms against 1,151.5
// (one each). A gain at 16 × 1k, a loss at 4 × 4k and 1 × 32k.
// Measured and dropped (Q in registers: a lab form from session 30 to 31, deleted in session 32): each consumer warp
// copies its 16 rows of Q into registers (8 ldmatrix.x4, the A fragments of S = Q Kᵀ's 8 k-steps) as an item starts and
// gives the Q buffer back at once. Two hypotheses: (1) a tile's shared-memory reads drop from 6 KB to 4 KB a k-step of
// S = Q Kᵀ (A from registers, K alone from shared memory), which at the tensor cores' rate is ~96 → ~64 B a cycle for S
// beside ~64 for P V and ~32 of TMA writes, against the SM's 128 B a cycle of shared-memory bandwidth; (2) the next
// item's Q loads under the whole item, as with the Q halves. Cost: 32 more registers a consumer thread. Measured (H100,
// session 31, the same calls and rounds, Q in registers / production then): 4 × 4k 565.1 / 559.5, 563.3 / 557.9, 563.8
// / 558.1; 16 × 1k 392.1 / 387.4, 389.8 / 384.2, 389.7 / 386.9; 1 × 32k 566.2 / 567.2, 569.4 / 570.5, 562.6 / 567.5;
// the 32k TTFT 1,157.6 ms against 1,151.5. About 1 % at the short shapes, none at 32k, less than the diagonal's half
// tiles at 16 × 1k (which it cannot be built with).
// Hopper prefill: the diagonal's half tiles (PrefillSm90Options::diag_half, session 31). Where a consumer's last row
// lies in the first half of its last key tile, that tile runs on its first 64 keys (m64n64 S = Q Kᵀ, 4 of the 8 P V
// k-steps, the softmax on 32 values): the other 64 keys are past all of its rows, so only work that adds zeros goes.
// In a fresh causal prompt (items start on tile boundaries) that is consumer 0's diagonal tile of every item: 4 of 72
// consumer tiles at 16 × 1k (5.6 %), 16 of 1,056 at 4 × 4k (1.5 %), 0.4 % at 1 × 16k. Built without the Q forms:
// with either, ptxas serializes every wgmma (C7511, too few registers). Measured (H100, session 31,
// prefill_vs_cudnn.sh, short processes alternating, 2 + 4 + 5 rounds in three calls, TFLOP/s, medians, forced on /
// production without it): 4 × 4k 562.0 / 559.5, 561.6 / 557.9, 562.5 / 558.1; 16 × 1k 392.1 / 387.4, 392.6 / 384.2,
// 393.2 / 386.9; 1 × 16k bimodal for every form (~590 or ~630 from round to round), no difference to read; 1 × 32k
// 573.0 / 567.2, 564.0 / 570.5, 567.3 / 567.5; the 32k prompt's TTFT (3 rounds alternating) 1,157.5 / 1,152.8 /
// 1,154.6 ms against 1,153.2 / 1,148.5 / 1,151.9, slower in every round (its extra code paths, with ~0.2 % of the tiles
// to save). So on where the launch's longest key row has at most kPrefillSm90DiagHalfMaxKeyTiles key tiles (the
// measured gains: 4k keys and less; 2k since session 35, below), off above (RIDGELINE_CUDA_PREFILL_SM90: "diaghalf"
// forces it on, a value without "autodiaghalf" or "diaghalf" off). Then in production (H100, session 31, another
// machine, 3 rounds, medians, production / without it / cuDNN): 4 × 4k 566.7 / 561.2 / 586.2, 16 × 1k 396.8 / 387.0 /
// 428.6; the CUDA op tests (128), memcheck and racecheck of the small prefill tests, and the engine tests on CUDA
// passed.
// Measured and dropped (dynamic items: written in session 31, run and deleted in session 32): a persistent block took
// its next work item from an atomic counter instead of static rounds (modelled with items' tile counts, static rounds
// leave the busiest block 3.1 % over the mean at 16 × 1k, taking the next free item 0.3 %). H100, session 32,
// prefill_vs_cudnn.sh, 4 rounds alternating, 40 launches a row, dynamic / production, TFLOP/s: 4 × 4k 546.8 / 542.2 /
// 543.0 / 538.2 against 561.7 / 558.4 / 556.5 / 555.3; 16 × 1k 372.6 / 369.1 / 351.4 / 378.7 against 392.2 / 375.1 /
// 360.0 / 365.1; 1 × 16k 551.5 / 551.1 / 558.6 / 571.2 against 582.6 / 557.2 / 573.4 / 576.5; the 32k TTFT 1,145.1 /
// 1,147.2 ms against 1,145.2 / 1,153.1. The layout test and memcheck passed; racecheck reported 70 hazards between
// the producer's store of an item's index into shared memory and the consumers' load of it, ordered only by the Q
// barrier's arrive (release) and wait (acquire). The timeline (`rl_bench_kernels prefill_trace`, same call) said why
// it could not gain: at 16 × 1k each consumer spends ~72 % of its block's span in its tiles, 13-22 % storing its rows
// and 6-14 % waiting for the next item's Q (the producer ~15 % waiting for the Q buffer), so the time goes between an
// item's tiles, not to the busiest block.
// Measured and dropped (session 33, H100, one call, prefill_vs_cudnn.sh, 3 rounds alternating, 40 launches a row,
// TFLOP/s by round), three forms aimed at the timeline's time between an item's tiles:
//   - the lazy rescale with 2 V stages and two Q buffers (the next item's Q loads under this one; without the half
//     tiles: with them C7511): 4 × 4k 547.3 / 547.7 / 543.5, 16 × 1k 376.9 / 368.9 / 365.8, 1 × 16k 552.8 / 558.8 /
//     567.1, 1 × 32k 579.9 / 582.2 / 578.2;
//   - production with the next item's Q prefetched into L2 at an item's last key tile (cp.async.bulk.prefetch.tensor):
//     542.9 / 539.3 / 545.3, 347.6 / 345.6 / 370.4, 555.0 / 554.1 / 565.3, 575.5 / 579.9 / 575.5; the 32k TTFT
//     1,152.7 / 1,153.8 ms against 1,143.0 / 1,143.6;
//   - rows stored through shared memory (stmatrix into the consumer's Q rows, two TMA boxes a warp; without the half
//     tiles, so against the form without them): 547.1 / 543.0 / 542.3, 352.0 / 373.2 / 367.8, 552.1 / 547.3 / 550.0,
//     568.2 / 572.6 / 572.5;
//   - against production 566.6 / 560.7 / 563.6, 363.5 / 374.9 / 395.2, 561.5 / 567.1 / 587.1, 588.6 / 586.3 / 583.2;
//     without the half tiles 551.1 / 559.5 / 556.2, 379.6 / 354.1 / 351.7, 573.5 / 575.0 / 563.8, 588.6 / 587.9 /
//     587.3; cuDNN 538.1 / 555.7 / 545.6, 361.4 / 395.1 / 362.0, 648.0 / 612.6 / 630.3.
//   None gains at any length beyond the rounds' spread, and each loses 1-3 % at 4 × 4k and from 16k keys. The layout
//   test, memcheck (all three) and racecheck (the first and third) were clean.
// Measured and dropped (session 33, H100, one call, prefill_vs_cudnn.sh, 3 rounds alternating, 40 launches a row,
// TFLOP/s by round): the exponentials against the running max (a lab form, never committed: a tile after an item's
// first computed its exponentials against the row's running max at once, packing P straight into the A fragments
// while S stayed in registers, with the tile's max beside them; only where a row's max passed the running max by more
// than 2^8 did the warp run the usual softmax again, so the bits were production's, which a test checked on the
// device). It takes the max's dependency chain and shuffles off the path to the first exponential, and it was slower:
// 4 × 4k 544.7 / 544.5 / 542.4, 16 × 1k 376.7 / 352.8 / 371.7, 1 × 16k 550.0 / 560.6 / 548.5, 1 × 32k 576.5 / 577.7 /
// 577.9 (built without the half tiles: with them C7511) against production 563.4 / 558.8 / 560.1, 377.6 / 388.5 /
// 390.6, 572.0 / 571.0 / 576.2, 582.5 / 581.5 / 583.0, without the half tiles 554.6 / 552.9 / 552.7, 382.5 / 360.3 /
// 349.7, 563.8 / 572.2 / 562.5, 582.9 / 582.5 / 582.0; the 32k TTFT 1,158.8 / 1,157.8 ms against 1,153.3 / 1,158.9.
// So the softmax is not bound by its latency to the first exponential either (as session 21 found for the
// special-function unit alone): what costs is the instructions the consumer warps issue.
// Hopper prefill: each wgmma's shared-memory descriptor is its operand's k-step-0 descriptor with the address field
// advanced by one add (sm90.cuh desc_advance), where building it from the address again took five uniform-datapath
// instructions before each of a tile's 16 wgmma (session 33's SASS): ~80 issue slots a consumer warp a tile, issued
// on the scheduler the other consumer's softmax runs on. Same descriptors, so the same bits (a device test compared
// the two forms bit for bit, queries in [-2, 2) and [-16, 16), with and without the half tiles); ptxas's loop body
// 709 -> 666 instructions. Measured (H100, session 33, prefill_vs_cudnn.sh, 4 rounds alternating, 40 launches a row,
// TFLOP/s by round, advanced / built again): 4 × 4k 566.9 / 560.0 / 562.1 / 565.8 against 565.6 / 559.4 / 560.8 /
// 547.2; 16 × 1k 396.6 / 384.0 / 365.0 / 364.6 against 368.4 / 368.3 / 364.9 / 375.0; 1 × 16k 568.7 / 576.7 / 576.2
// / 576.5 against 578.6 / 571.7 / 566.1 / 567.8; 1 × 32k 584.9 / 585.8 / 585.6 / 585.3 against 587.3 / 581.6 / 581.9
// / 585.0; the 32k TTFT 1,149.2 / 1,142.6 / 1,146.4 ms against 1,148.8 / 1,151.4 / 1,150.0. Small (0.2-2 %) but never
// a loss: every instance builds its descriptors this way since.
// The half tiles' limit, from session 35 (H100): without the half tiles production runs the exponentials first
// (kPrefillSm90ExpFirst, below), which cannot be built with them. That form against the half tiles, at every length
// (2-3 rounds in two calls, TFLOP/s): 4 × 4k 572.5 / 576.2 / 573.4 against 566.5 / 565.5 / 563.3 (+1.5 %), 16 × 1k
// 386.3 / 384.5 / 386.3 against 392.1 / 401.8 / 394.3 (−2 %). So the half tiles up to 16 key tiles (2k keys), the
// exponentials first above. Until session 35: 32 (4k keys). Between the two (H100, session 36, prefill_vs_cudnn.sh
// with RIDGELINE_BENCH_PREFILL_EXTRA=8x2048,6x3072, three rounds, TFLOP/s, half tiles / exponentials first):
// 8 × 2k 501.9 / 505.3 / 505.6 against 494.4 / 499.4 / 497.6 (+1.5 %), 6 × 3k 534.1 / 544.0 / 545.1 against
// 541.9 / 552.4 / 547.4 (a tie within the spread): the limit stays at 2k.
constexpr int64_t kPrefillSm90DiagHalfMaxKeyTiles = 16;
inline bool prefill_sm90_diag_half(int64_t max_seqlen_k) {
  return max_seqlen_k <= kPrefillSm90DiagHalfMaxKeyTiles * 128;
}
// Hopper prefill, the production form (above): a row's running max moves only when a tile's max passes it by more
// than 2^8, and a warp whose rows all kept theirs skips O's rescale (FlashAttention-4's conditional rescale). Measured
// (H100, session 20, `bench kernels prefill`, neighbouring lab rows, TFLOP/s, eager / lazy): 4 × 4k 469.7 / 490.6,
// 16 × 1k 369.2 / 370.6, 1 × 16k 514.5 / 542.6; the 32k prompt's TTFT 1,224 / 1,228 ms eager against 1,219 / 1,213
// lazy. On. RIDGELINE_CUDA_PREFILL_SM90=continuous_v3 runs the eager form, continuous_v3_lazy this one.
// Measured and dropped (H100, session 41, scripts/device/ttft_clock.sh's first form): the threshold at 2^16 instead
// of 2^8 (a lab build for the exponentials-first forms, RIDGELINE_CUDA_PREFILL_LAZY_LOG2). The 32k prompt's attention
// ran 548 TFLOP/s over its 32 layers against 546 (one trace each, one call), the wide-scores op test passed with it. By
// arithmetic the dummy weights spread a row's scores about 2.4 log2 units, so the running max after a row's first
// tile (about +6) rises about 4 more over 32k keys, under 8: the fast path already holds, and the threshold has
// nothing to take.
constexpr bool kPrefillSm90LazyRescale = true;
// Hopper prefill, the exponentials first (production since session 35 where the diagonal's half tiles are off:
// PrefillSm90Options::exp_first, RIDGELINE_CUDA_PREFILL_SM90 word "expfirst"; built with the lazy rescale and without
// the half tiles): past an item's first tile a tile's exponentials come first, against the row's running max, packed
// into P as they come, with no max; only a warp where some row's 32 exponentials sum to 2^8 or more runs the usual path
// (max, shuffles, lazy test, exponentials again from S, which stayed in its registers). A sum below 2^8 means no
// exponential reached 2^8, so the tile's max stayed within 2^8 of the running max, where the lazy rescale keeps it: the
// same values, so the same bits. It removes a tile's 64 FMNMX, 4 shuffles and ~20 flag instructions a consumer warp,
// which session 34's Nsight Compute profile (H200, 16k tokens, layer 0) put at ~335 of the softmax's ~1,140 cycles a
// tile. Session 33's form that took the max beside the exponentials (issued, off the path) lost 2-3 %: the issue slots
// are what costs. Measured as a lab form (H100, session 34, prefill_vs_cudnn.sh, two calls on one machine, 3 + 3 rounds
// alternating, 40 launches a row, TFLOP/s, this form in production's place above 4k keys / production; each form's
// rl_bench_kernels built from its own tree): 1 × 16k 614.8 / 594.4 / 590.3 and 594.9 / 589.1 / 606.0 against 610.4 /
// 571.2 / 565.1 and 560.1 / 590.0 / 560.9; 1 × 32k 614.6 / 611.8 / 602.2 and 617.3 / 612.2 / 612.0 against 577.4 /
// 583.0 / 582.3 and 585.4 / 583.8 / 586.0 (+5 %). In production (H100, session 35, one machine, the op tests (the
// layout test's bits 256 and 512, HopperPrefillWideScores with queries in [-16, 16)), memcheck and racecheck of the
// small prefill tests with it, memcheck of the wide test; then prefill_vs_cudnn.sh, 40 launches a row, medians of 6-8
// rounds over four calls, TFLOP/s, production / without it ("noexpfirst")): 1 × 16k 614.0 / 562.4, 1 × 32k 615.2 /
// 582.6 (+5.6 %), the same XXH3 output words at every shape; the 32k prompt's TTFT 1,119 / 1,121 ms against 1,137 /
// 1,138 (80.3 against 79.0 % of its 899.5 ms roofline). At every length without the half tiles ("expfirst_nodiaghalf",
// 2-3 rounds in two calls against production beside it): 4 × 4k 572.5 / 576.2 / 573.4 against 566.5 / 565.5 / 563.3
// (+1.5 %), 16 × 1k 386.3 / 384.5 / 386.3 against 392.1 / 401.8 / 394.3 (−2 %): see kPrefillSm90DiagHalfMaxKeyTiles.
// With the half tiles ptxas serializes the wgmma (C7511) once the softmax writes P, so it is not built there. Also
// measured there and dropped: P packed before O's rescale branch in the usual path (so ptxas mixes the F2FP into the
// exponentials and row 1's max into row 0's): 1-3 % slower everywhere (4 × 4k 554.1 / 552.0 / 549.0 against 559.2 /
// 563.2 / 563.1, 1 × 32k 567.0 / 563.3 / 566.7 against 577.4 / 583.0 / 582.3).
constexpr bool kPrefillSm90ExpFirst = true;
// Hopper prefill: a persistent block's rounds of work items in alternating directions (PrefillSm90Options::snake).
// Items go longest causal rows first and block b takes slot b of every round, so block 0 takes each round's longest
// item: about 4 key tiles a round more than block 131 at 32 heads, ~3 % of a 1 × 16k launch's work. Measured (H100,
// session 24, `rl_bench_kernels prefill` with RIDGELINE_CUDA_PREFILL_SM90=continuous_v3_lazy_snake against
// production, two rounds alternating, TFLOP/s): 4 × 4k 563.8 / 561.2 against 551.3 / 549.9, 16 × 1k 374.3 / 379.6
// against 383.0 / 382.0, 1 × 16k 617.8 / 623.4 against 607.3 / 574.6, 1 × 32k 570.0 / 554.6 (snake) against 577.2 /
// 567.3 in each process's second 32k row; the 32k prompt's TTFT 1,211.1 / 1,215.2 ms against 1,218.3 / 1,223.4. A
// gain at 4 × 4k, a loss at 16 × 1k and 1 × 32k. Session 25 (H100, scripts/device/prefill_vs_cudnn.sh: short
// processes of the production rows alone, alternating with torch's cuDNN, 4 and 6 rounds in two calls, TFLOP/s
// medians, snake / plain / cuDNN): 4 × 4k 558.1 / 553.2 / 550.6 and 559.2 / 549.9 / 553.9, 16 × 1k 377.1 / 386.4 /
// 363.6 and 378.3 / 385.1 / 389.8, 1 × 16k 633.5 / 603.0 / 627.4 and 625.9 / 601.6 / 633.2, 1 × 32k 574.0 / 556.9
// and 581.3 / 576.1; the 32k prompt's TTFT 1,204.4 / 1,203.5 ms against 1,211.9 / 1,207.8 (prefill_forms.sh). So on
// where the longest item has kPrefillSm90SnakeMinKeyTiles key tiles or more (the imbalance it removes grows with the
// items' lengths), off for short items (16 × 1k: 8 tiles at most).
constexpr int64_t kPrefillSm90SnakeMinKeyTiles = 16;
inline bool prefill_sm90_snake(int64_t max_seqlen_k) { return max_seqlen_k >= kPrefillSm90SnakeMinKeyTiles * 128; }
// Hopper prefill: Q in the K stages' ring (PrefillSm90Options::q_ring, session 37; built with production's two forms,
// the diagonal's half tiles and the exponentials first). The Q buffer and the 3 K stages are one ring of four slots,
// so the next item's Q loads into the slot of this item's oldest K tile once its S = Q Kᵀ is done, a few tiles before
// the item ends, where the Q buffer of its own loaded only once both consumers were done with the item: the shorter
// the items, the more of a block's span that wait was. Measured (H100, session 39, prefill_vs_cudnn.sh, 40 launches a
// row, 1 + 3 rounds alternating in two calls on one machine, TFLOP/s, ring forced on / production without it /
// cuDNN): 4 × 4k 591.7, 595.6 / 591.4 / 594.4 against 588.1, 588.6 / 585.8 / 590.2 (+1 %; cuDNN 533.1, 578.5 /
// 578.4 / 585.4); 8 × 2k 526.9, 528.2 / 529.2 / 525.6 against 513.9, 515.9 / 515.1 / 511.9 (+2.6 %); 16 × 1k 435.9,
// 434.8 / 432.3 / 435.2 against 410.0, 400.8 / 407.1 / 409.7 (+7 %; cuDNN 390.6, 416.7 / 396.1 / 415.8); but 1 × 16k
// 606.3, 587.3 / 597.8 / 580.8 against 597.1, 593.1 / 610.5 / 662.9 (medians 592.6 against 603.8) and 1 × 32k 603.7,
// 596.3 / 605.7 / 601.9 against 620.0, 619.6 / 607.3 / 617.8 (−2.6 %): long items gain little from an earlier Q,
// and the next Q holds a K stage through an item's last tiles (the likely cost; not timed apart). The same XXH3
// output words at every shape; the attention and golden tests, memcheck and racecheck of the small prefill tests
// passed with it. So on where the launch's longest key row has at most kPrefillSm90QRingMaxKeyTiles key tiles (the
// measured gains), off above (RIDGELINE_CUDA_PREFILL_SM90: "qring" forces it on, a value without "autoqring" or
// "qring" off). Then in
// production (H100, session 39, three calls on freshly started machines, 3 rounds each, medians, ours / cuDNN in the
// same call): 4 × 4k 1.050 / 1.042 / 1.027, 16 × 1k 1.165 / 1.151 / 1.056, 1 × 16k 1.005 / 1.066 / 1.071; without the
// ring in the first call 585.2 against 591.6 at 4 × 4k, 401.9 against 438.2 at 16 × 1k.
constexpr int64_t kPrefillSm90QRingMaxKeyTiles = 32;
inline bool prefill_sm90_q_ring(int64_t max_seqlen_k) { return max_seqlen_k <= kPrefillSm90QRingMaxKeyTiles * 128; }
// Deterministic mode, decode-shaped steps: one warp per (sequence, kv head) whose 16 tile rows hold the GQA
// group's query heads (group ≤ 16), so each K/V tile is read once per group and the grid has B × kv_heads blocks.
// Deterministic mode cuts every row's keys into chunks of kDetChunkKeys at absolute key positions (a multiple of
// both key tiles): a decode step runs B × kv_heads × chunks blocks plus a combine instead of B × kv_heads long
// ones, and the result does not depend on the batch because the chunk size never does.
constexpr int kDetChunkKeys = 256;

// Multi-head latent attention (mla_attention.cu), kv_lora_rank 512 + rope 64. A block holds kMlaBlockM16 × 16
// query rows of one sequence, rows (token, head) packed head-fastest, so every latent tile of kMlaBlockN keys
// (32 × 1152 B) loaded into shared memory serves up to 64 heads (FlashMLA's point: the heads share one latent row,
// so attention is a GEMM over heads). 8 warps: S = Q·Kᵀ as m16n8 tiles over the 576-wide rows (one MMA chain per
// score), the softmax of a tile's rows in shared memory, then each warp owns 64 of the 512 output columns for all
// rows (O = 128 f32 registers per thread at 64 rows). Rows per block: 64 when a sequence's step has that many
// (128-head decode: 2 blocks per token), else 32 or 16 (16-head decode). The key tile size is fixed (it shapes the
// per-row online softmax), the row count is not: a row's arithmetic is the same in every instance.
constexpr int kMlaBlockN = 32;
constexpr int kMlaThreads = 256;
// Pipeline depth of the latent tiles: 3 stages at 64 / 32 rows (196 / 152 KB of shared memory with Q, scores, P
// and row states; one block per SM), 2 at 16 rows (94 KB, two blocks per SM). ptxas (sm_90a, 2026-12-02): 234 / 174
// registers at 64 / 32 rows, 118 at 16 (128 with the in-register chunk merge), no spills.
constexpr int kMlaStages = 3;
constexpr int kMlaStages16 = 2;
// Split-K over keys (flash decoding) for few long sequences: each split takes at least kMlaMinTilesPerSplit tiles
// (128 keys) and at most kMlaMaxSplits splits; the count fills whole waves of resident blocks as
// decode_num_splits does, within the partial-state workspace (the split-KV decode scratch: o [512] + (m, l) f32 per
// (token, head, split)). A split's partial o is 2 KB per row, so with 128 heads each split writes and the combine
// reads 256 KB, about 7 tiles of latent: the lab (rl_bench_kernels mla, mla_lab) sweeps the count at both widths.
constexpr int64_t kMlaMinTilesPerSplit = 4;
constexpr int64_t kMlaMaxSplits = 128;
constexpr int64_t kMlaPartialFloats = 512 + 2;
// Deterministic mode: chunks of kMlaDetChunkTiles tiles (256 keys) at absolute key positions, each an online
// softmax from a fresh state, merged in increasing order (in parallel blocks + a combine when the states fit the
// workspace, else in registers at 16 rows per block).
constexpr int kMlaDetChunkTiles = 8;

inline int64_t mla_num_splits(int64_t base_blocks, int64_t max_seqlen_k, int64_t rows, int64_t capacity_floats,
                              int64_t slots) {
  const int64_t max_tiles = (max_seqlen_k + kMlaBlockN - 1) / kMlaBlockN;
  int64_t cap = std::min<int64_t>(kMlaMaxSplits, std::max<int64_t>(1, max_tiles / kMlaMinTilesPerSplit));
  cap = std::min<int64_t>(cap, capacity_floats / std::max<int64_t>(1, rows * kMlaPartialFloats));
  if (cap <= 1) return 1;
  slots = std::max<int64_t>(slots, 1);
  base_blocks = std::max<int64_t>(base_blocks, 1);
  // Every split fits the first wave (few sequences): as many as the limits allow. At batch 1 with 16 heads the
  // grid has one block per split, which the wave score below (1/slots per split against 1 % per merge) would leave
  // at a single block.
  if (base_blocks * cap <= slots) return cap;
  return best_wave_splits(base_blocks, cap, slots);
}

// Which attention shapes have fast kernels (the dispatch in cuda_backend.cpp and prefill_attention_supported /
// decode_attention_supported in the .cu files; host-only so it is unit-tested without a GPU). Empty when the
// FA2 prefill kernel and the split-KV decode kernel both serve the shape; otherwise what serves it instead.
inline std::string attention_slow_path(int64_t head_dim, int64_t num_heads, int64_t num_kv_heads, int64_t block_size) {
  const std::string shape = "head_dim " + std::to_string(head_dim) + ", block size " + std::to_string(block_size);
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || head_dim > 256 || head_dim <= 0) {
    return shape + ": unsupported attention shape (heads " + std::to_string(num_heads) + " / kv heads " +
           std::to_string(num_kv_heads) + "; head_dim at most 256)";
  }
  const bool pow2 = block_size > 0 && (block_size & (block_size - 1)) == 0;
  if ((head_dim != 64 && head_dim != 128 && head_dim != 256) || !pow2 || head_dim % 8 != 0) {
    return shape + ": no fast CUDA attention kernel (head_dim 64, 128 or 256 with a power-of-two block size); " +
           "the naive kernel (one warp per token and head, far slower) serves prefill and decode";
  }
  if (block_size != kDecodePageSize) {
    return shape + ": decode steps run the prefill kernel (no split-KV decode kernel for this shape: it needs " +
           "block size " + std::to_string(kDecodePageSize) + "), slow at small batch";
  }
  return "";
}

}  // namespace rl::cuda
