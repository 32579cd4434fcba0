// Host-side launchers of the CUDA kernels (defined in the .cu files of this folder). Plain C++ types only, so
// cuda_backend.cpp compiles with the host compiler. Every launcher enqueues on `stream` and never synchronizes,
// allocates or reads device memory on the host (all of them are CUDA-graph capturable).
// Activations are bf16 (uint16_t bit patterns); weights and norm weights bf16 or f32 as tagged by DType.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kernel_config.h"
#include "backend/ops.h"
#include "core/dtype.h"

namespace rl::cuda {

// Whether p may be read or written with 16-byte vector accesses.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// out[i, :] = table[ids[i], :]. out: bf16 [n, hidden]; table: [vocab, hidden] bf16 or f32.
void launch_embedding(const int32_t* ids, int64_t n, const void* table, DType table_dt, int64_t vocab,
                      int64_t hidden, uint16_t* out, cudaStream_t stream);
// out = rms_norm(x) * w; with `residual` non-null: residual += x first (stored rounded to bf16) and the norm
// is taken of the new residual. x, residual, out: bf16 [rows, hidden]; w: [hidden] bf16 or f32.
void launch_rms_norm(uint16_t* residual, const uint16_t* x, const void* w, DType w_dt, uint16_t* out,
                     int64_t rows, int64_t hidden, float eps, cudaStream_t stream);

struct QkNormRopeArgs {
  uint16_t* qkv = nullptr;  // bf16 [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;  // [head_dim / 2]
  const void* q_norm = nullptr;     // [head_dim] or null
  const void* k_norm = nullptr;
  DType norm_dt = DType::kBF16;
  int64_t num_tokens = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float eps = 1e-6f;
  // KV write fused in (k_cache set): the rotated k heads and the v heads also go to the caches at slots[t]
  // (negative: skipped), as launch_kv_write would copy them. k_cache, v_cache: bf16 [num_slots, num_kv_heads *
  // head_dim].
  const int32_t* slots = nullptr;
  int64_t num_slots = 0;
  uint16_t* k_cache = nullptr;
  uint16_t* v_cache = nullptr;
  // The caches hold FP8 e4m3 bytes (the same element offsets): each element written is the rotated (k) or copied (v)
  // bf16 value as kv_write_kernel<uint8_t> rounds it.
  bool kv_fp8 = false;
};
// In place on qkv: per (token, q or k head) optional RMSNorm then neox RoPE; with a.k_cache, the KV write too.
void launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream);
// Kernel lab (rl_bench_kernels): the forms, bitwise equal: one warp a (token, head), or one block of 256 or 128
// threads a token (kernel_config.h, kQkNormRopeRowsMinTokens); kAuto is launch_qk_norm_rope's choice.
enum class QkNormRopeForm { kAuto, kWarpPerHead, kBlock256, kBlock128 };
void launch_qk_norm_rope_lab(const QkNormRopeArgs& a, QkNormRopeForm form, cudaStream_t stream);
// residual[i] = bf16(residual[i] + x[i]), i < n; bf16.
void launch_add(uint16_t* residual, const uint16_t* x, int64_t n, cudaStream_t stream);

// Copies the k and v parts of each qkv row into the caches at slot_mapping (negative slots skipped).
// k_cache, v_cache: [num_slots, num_kv_heads * head_dim] of bf16, or (fp8) of FP8 e4m3 bytes, each element rounded
// to nearest even, saturating at ±448 (rl::f32_to_fp8_e4m3 of the bf16 value).
void launch_kv_write(const uint16_t* qkv, int64_t num_tokens, int64_t row, int64_t k_offset, int64_t v_offset,
                     int64_t kv_row, const int32_t* slots, int64_t num_slots, void* k_cache, void* v_cache, bool fp8,
                     cudaStream_t stream);
// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]; bf16.
void launch_silu_mul(const uint16_t* gate_up, uint16_t* out, int64_t rows, int64_t inter, cudaStream_t stream);
// out[i, :] = x[indices[i], :]; rows of row_bytes bytes.
void launch_gather_rows(const void* x, int64_t num_rows_x, const int32_t* indices, int64_t n, int64_t row_bytes,
                        void* out, cudaStream_t stream);
// n bytes from src to dst by a kernel; either may be pinned host memory (read or written in place over the bus).
void launch_copy_bytes(void* dst, const void* src, int64_t n, cudaStream_t stream);
// Up to kCopyMaxSegments such copies in one kernel (launch_copy_bytes is one of them); and, where num_ids > 0, the i32
// ids [num_ids] that one of them writes (4-byte aligned within a copy whose two sides are 4-byte aligned and whose
// size is a multiple of 4) resolved as they are written: an entry v < 0 becomes max(sampled[-v - 1], 0), as
// launch_resolve_pending_ids does it afterwards.
constexpr int kCopyMaxSegments = 4;
struct CopySegments {
  char* dst[kCopyMaxSegments] = {};
  const char* src[kCopyMaxSegments] = {};
  int64_t bytes[kCopyMaxSegments] = {};
  int num = 0;
  int32_t* ids = nullptr;
  int64_t num_ids = 0;
  const int32_t* sampled = nullptr;
};
void launch_copy_segments(const CopySegments& c, cudaStream_t stream);
// Element-wise conversion between f32, f16 and bf16.
void launch_cast(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n, cudaStream_t stream);
// out[r] = argmax of logits row r (f32 [rows, vocab]); ties → lowest id (sampling.cu).
void launch_argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream);
// The one sampling path (ops.h, SampleRowParams) over logits f32 [batch.num_rows, vocab] (sampling.cu).
// Blocks per row on sm_90: sample_cluster_for(rows, num_sms) (launch_sample_lab forces another).
void launch_sample(float* logits, int64_t vocab, const SampleBatch& batch, int num_sms, cudaStream_t stream);
void launch_init_penalty_slot(const PenaltySlotInit& init, int32_t* counts, uint32_t* bits, int64_t vocab,
                              cudaStream_t stream);
// ids[t] < 0 → sampled[-ids[t] - 1].
void launch_resolve_pending_ids(int32_t* ids, int64_t n, const int32_t* sampled, cudaStream_t stream);
// logits[r, t] = -inf where bit t of bitmask row r is clear (token_mask.cu).
void launch_apply_token_bitmask(float* logits, int64_t rows, int64_t vocab, const int32_t* bitmask, int64_t words,
                                cudaStream_t stream);
// t[i] = lo + (hi - lo) * uniform_from_counter(seed, i) (core/random.h), stored as f32 or bf16.
void launch_fill_uniform(void* t, DType dt, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

// y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias) for small M (≤ kSkinnyMaxM; any M on the unaligned scalar path),
// bandwidth-bound: each weight row is read once for all M rows. x, w: bf16; bias: [N] bf16/f32 or null; y: bf16
// or f32. sm_90 runs the streaming kernel (gemv_stream.cu, programmatic dependent launch), older GPUs v2.
// Split-K over warps (and, streaming, over a cluster's blocks) in a fixed order, but not the batch-invariant order
// (launch_gemv_invariant). Other variants: launch_gemv_lab.
void launch_gemv(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream);
// y (f32 [M, N]) = x · wᵀ rounded to bf16, stored widened: bitwise launch_gemv into bf16 and launch_cast to f32, in
// one kernel (the LM head's logits). Returns false, launching nothing, where the streaming GEMV does not serve the
// shape (unaligned, M > kGemvMaxM, before sm_90).
bool launch_gemv_widened(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                         cudaStream_t stream);
// y[M, N] = silu(x · gateᵀ) · (x · upᵀ) (+ bias [2N] before the activation) for w = [gate; up] of [2N, K]: the
// gated MLP's gate_up projection and SiLU·mul in one kernel (the streaming GEMV's gated epilogue). Returns false,
// launching nothing, where it has no kernel for the shape (unaligned, M > kGemvMaxM, before sm_90).
bool launch_gemv_silu_mul(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                          int64_t m, int64_t n, int64_t k, cudaStream_t stream);
// Whether launch_gemv takes the tensor-core path (16-byte aligned x and w, K % 8 == 0); otherwise a scalar
// kernel (any M) serves. Both reduce each output element in an order that does not depend on M.
bool gemv_aligned(const uint16_t* x, const uint16_t* w, int64_t k);
// Batch-invariant linear for any M (deterministic mode): launch_gemm_invariant when gemv_aligned, else the scalar
// kernel (whose per-element order does not depend on M either). Same semantics as launch_gemv.
void launch_gemv_invariant(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                           int64_t m, int64_t n, int64_t k, cudaStream_t stream);
// Batch-invariant GEMM for any M (gemm_invariant.cu): one MMA chain per output element over K in increasing
// 32-wide steps, no split-K, so a row's output bits do not depend on M. Requires gemv_aligned(). The tile is
// picked by M (kernel_config.h; launch_gemm_invariant_lab forces one).
void launch_gemm_invariant(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                           DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream);
// Skinny GEMM for Hopper (gemm_skinny_sm90.cu): linear for M ≤ 64 with TMA + wgmma, swap-AB (weight rows on the
// MMA's M side), split-K added in a fixed order. Same semantics as launch_gemv. The workspace holds the split
// partials and one counter per 128-row tile (zero between launches).
struct SkinnyWorkspace {
  float* partial = nullptr;
  int64_t partial_floats = 0;
  int* counters = nullptr;
  int64_t num_counters = 0;
};
// Whether the device and operands suit it: compute capability 9.0, 1 ≤ m ≤ 64, k % 8 == 0, 16-byte aligned x, w.
bool skinny_gemm_supported(const uint16_t* x, const uint16_t* w, int64_t m, int64_t n, int64_t k);
// kSkinnyGemmStages stages, skinny_gemm_splits() splits (launch_skinny_gemm_lab forces others).
void launch_skinny_gemm(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                        int64_t m, int64_t n, int64_t k, const SkinnyWorkspace& ws, int num_sms, cudaStream_t stream);
// y[M, N] += bias[N] (after a cuBLASLt GEMM).
void launch_add_bias(void* y, DType y_dt, const void* bias, DType bias_dt, int64_t m, int64_t n,
                     cudaStream_t stream);

// Paged attention problem, shared by the attention kernels. Semantics: Backend::attention.
struct AttentionArgs {
  const uint16_t* qkv = nullptr;  // bf16 [num_tokens, row]
  const uint16_t* k_cache = nullptr;  // bf16 [num_blocks, block_size, num_kv_heads, head_dim]
  const uint16_t* v_cache = nullptr;
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* seq_lens_k = nullptr;    // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks]
  uint16_t* out = nullptr;                // bf16 [num_tokens, num_heads * head_dim]
  int64_t num_tokens = 0, num_seqs = 0, max_seqlen_q = 0, max_seqlen_k = 0, max_blocks = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0, row = 0;
  int64_t kv_slots = 0;  // slots of the K/V pool (num_blocks · block_size); 0: unknown (no TMA paths)
  float scale = 1.0f;
  // k_cache / v_cache hold FP8 e4m3 bytes (the same element offsets; cast to const uint8_t*). Only the kernels that
  // say so read them (decode_attention_supported / prefill_attention_supported check it); the others refuse.
  bool kv_fp8 = false;
};
// Any shape (head_dim ≤ 256): one warp per (token, head), exact online softmax. Slow; the fallback and the
// first version of the kernel lab.
void launch_attention_naive(const AttentionArgs& a, cudaStream_t stream);

// Split-KV decode (one query per sequence), block_size 16, head_dim 64/128/256. partial_o: f32 [num_seqs,
// num_heads, num_splits, head_dim], partial_lse: f32 [num_seqs, num_heads, num_splits]; unused with 1 split.
struct DecodeWorkspace {
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  int* counters = nullptr;    // [capacity_rows], zero between launches: finished splits per (seq, head chunk)
  int64_t capacity_rows = 0;  // (seq, head, split) triples of head_dim 128 the workspace holds (256: half as many)
};
// The grid has one slot per split for the longest context max_seqlen_k allows; each sequence uses as many as its
// own seq_len fills, so a launch (or captured graph) sized for max_model_len stays right for shorter contexts.
// Split count: decode_num_splits(); kernel: kDecodeMmaKernel where the shape allows it (launch_decode_attention_lab
// forces others).
bool decode_attention_supported(const AttentionArgs& a);
void launch_decode_attention(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream);
// Decode attention that first does the step's q/k norm + RoPE and KV write itself (kernel_config.h
// kDecodeFusedRopeAttention): a.qkv holds the projections as the qkv GEMM wrote them (left unrotated); the kernel
// rotates the q heads it reads, and writes the new token's rotated k and its v at slots[t] (negative: skipped)
// before it reads that page. The same bits as launch_qk_norm_rope with the KV write, then launch_decode_attention.
// Shapes: decode_attention_rope_supported (the tensor-core kernel's).
struct DecodeRope {
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* slots = nullptr;      // [num_tokens]
  int64_t num_slots = 0;
  const float* inv_freq = nullptr;     // [head_dim / 2]
  const void* q_norm = nullptr;        // [head_dim] or null
  const void* k_norm = nullptr;
  bool norm_f32 = false;
  float eps = 1e-6f;
  uint16_t* k_cache = nullptr;  // a.k_cache / a.v_cache, written
  uint16_t* v_cache = nullptr;
};
bool decode_attention_rope_supported(const AttentionArgs& a);
void launch_decode_attention_rope(const AttentionArgs& a, const DecodeRope& rope, const DecodeWorkspace& ws,
                                  int num_sms, cudaStream_t stream);

// FlashAttention-2 style prefill (tensor cores), varlen + causal with prefix, paged K/V, head_dim 64/128/256.
bool prefill_attention_supported(const AttentionArgs& a);
// Key tile: kPrefillBlockN (head_dim 64, 256), kPrefillBlockN128 (128; launch_prefill_attention_tile_lab forces one).
void launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream);
// The Hopper prefill (prefill_attention_sm90.cu: TMA + wgmma, warp-specialised, ping-pong consumers), head_dim 128,
// power-of-two block sizes ≥ 8, compute capability 9.0 only, a.kv_slots set. RIDGELINE_CUDA_PREFILL_SM90=0 turns it
// off (the FA2 kernel serves). Its variants (the backend uses kernel_config.h's kPrefillSm90* choices):
struct PrefillSm90Options {
  bool pack = false;           // GQA-packed blocks (one per kv head) where the group divides 64
  bool intra_overlap = false;  // each consumer's softmax overlaps its own P V GEMM
  bool persistent = false;     // num_sms blocks looping over the work items (else one block per item)
  int k_stages = 2;            // K tiles in flight: 2 or 3 (V: 2)
  // The consumers' turns run on across work items with no barrier between items (needs intra_overlap and 3 K
  // stages; kernel_config.h, kPrefillSm90ContinuousTurns).
  bool continuous_turns = false;
  // V tiles in flight: 2, or 3 with one Q buffer instead of two (the next item's Q then loads only once both
  // consumers are done with this one). 3 needs intra_overlap, k_stages 3 and unpacked blocks.
  int v_stages = 2;
  // Built for the production form only (unpacked, intra overlap, 3 K stages, continuous turns, 3 V stages); elsewhere
  // these two are ignored. The running max moves only by more than 2^8, and O's rescale is skipped where no row of a
  // warp moved (FlashAttention-4's conditional rescale; production since session 20, kPrefillSm90LazyRescale).
  bool lazy_rescale = false;
  // With the lazy rescale (prefill_attention_sm90.cu, DH): a consumer's last key tile runs on its first 64 keys where
  // the rest lie past all of its rows (the causal diagonal), an m64n64 S = Q Kᵀ and half the P V k-steps. Production
  // sets it from the launch's longest key row (kernel_config.h, prefill_sm90_diag_half). Built with 3 V stages only
  // (ignored with 2).
  bool diag_half = false;
  // With the lazy rescale and without the half tiles (production there since session 35, kPrefillSm90ExpFirst): past
  // an item's first key tile a tile's exponentials come first, against the rows' running max, and its max only where
  // a row's sum reaches 2^8 (the same bits; kernel_config.h). Ignored elsewhere.
  bool exp_first = false;
  // A persistent block walks its rounds of work items in alternating directions (the item that is a round's
  // longest for one block is its shortest the next round), instead of the same slot every round; production sets it
  // from the launch's longest key row (kernel_config.h, prefill_sm90_snake).
  bool snake = false;
  // With production's forms (the lazy rescale with the half tiles or the exponentials first), Q and the K tiles share
  // the Q buffer and the 3 K stages as one ring of slots, so the next item's Q loads a few tiles before this item
  // ends, into the slot its oldest K tile frees (prefill_attention_sm90.cu, QkRing). Production sets it from the
  // launch's longest key row (kernel_config.h, prefill_sm90_q_ring). Ignored elsewhere.
  bool q_ring = false;
};
bool prefill_attention_sm90_supported(const AttentionArgs& a);
void launch_prefill_attention_sm90(const AttentionArgs& a, const PrefillSm90Options& o, int num_sms,
                                   cudaStream_t stream);
// Kernel lab: the default variant with one part left out (wrong results; for timing differences): 1 = K/V loads
// after the first stages, 2 = the softmax, 3 = the P V GEMM.
void launch_prefill_attention_sm90_ablation(const AttentionArgs& a, int ablate, int num_sms, cudaStream_t stream);
// Kernel lab: production's Hopper prefill (persistent, snake order as production takes it; without the diagonal's
// half tiles, which with the stamps ptxas would serialize) with a timeline. Per block and per item it takes (its
// first max_items), clock64 stamps (the SM's cycle counter): [0] the producer has the item, [1] the producer's wait
// for the Q buffer is over (Q's copies go out), [2] consumer 0 has Q, [3] consumer 0's last tile is done, [4] its
// rows are stored, [5] / [6] / [7] the same for consumer 1. trace: int64 [blocks][max_items][kPrefillSm90TraceStamps],
// zeroed by the caller (0: no such item); returns the block count. The arithmetic of production without the half
// tiles: the same bits. q_ring: the lab's Q in the K stages' ring (PrefillSm90Options::q_ring), stamp [1] then
// the wait for Q's slot.
constexpr int kPrefillSm90TraceStamps = 8;
int launch_prefill_attention_sm90_trace(const AttentionArgs& a, int num_sms, cudaStream_t stream, long long* trace,
                                        int max_items, bool q_ring = false);
// Scratch for chunked batch-invariant attention: per (token, head, chunk) the chunk's unnormalized o (f32
// [head_dim]) and its (m, l). capacity_floats bounds num_tokens · heads · chunks · (head_dim + 2).
struct ChunkWorkspace {
  float* partial_o = nullptr;   // [tokens · heads · num_chunks, head_dim]
  float* partial_ml = nullptr;  // [tokens · heads · num_chunks, 2]
  int num_chunks = 0;           // chunk slots per row (set by the launcher)
  int64_t capacity_floats = 0;  // both arrays together
};
// Batch-invariant attention (deterministic mode; prefill_attention_supported shapes): every row, decode rows
// included, computed by the prefill kernel family, whose per-row arithmetic is the same in every instance. The
// keys are cut into fixed chunks of kDetChunkKeys at absolute positions (issue 13: split sizes fixed, never
// derived from the batch), each chunk an online softmax over 64-key tiles, the chunks merged in order (head_dim
// 256: one unchunked pass). decode_shaped (every sequence has one query token) picks the one-warp GQA-packed
// instance and, when ws holds the states, computes the chunks in parallel (bitwise the same result).
void launch_attention_rows(const AttentionArgs& a, bool decode_shaped, const ChunkWorkspace& ws, cudaStream_t stream);

// --- Kernel lab (rl_bench_kernels, the op tests, end-to-end A/B through environment variables) ---
// The production launches above take no experiment knobs. Each entry point below runs the same dispatch as its
// production launch with one knob forced; a zero / kAuto knob is the production choice.

// variant: 0 = launch_gemv; 1 = v2 with kGemvWarps × kGemvUnroll; 2 = v2 4 warps × unroll 8; 3 = v2 8 × 8 (v2
// variants: M ≤ 16); 10 + c = the streaming kernel's config c (launch_gemv_stream_lab).
void launch_gemv_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y, DType y_dt,
                     int64_t m, int64_t n, int64_t k, cudaStream_t stream, int variant);
// config 1-9 forces one tile configuration (kernel_config.h, "Batch-invariant mode"; every config computes the
// same bits).
void launch_gemm_invariant_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                               DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream, int config);
// stages: 4 or 8 (0: kSkinnyGemmStages); splits > 0 forces the split count.
struct SkinnyLab {
  int stages = 0;
  int splits = 0;
};
void launch_skinny_gemm_lab(const uint16_t* x, const uint16_t* w, const void* bias, DType bias_dt, void* y,
                            DType y_dt, int64_t m, int64_t n, int64_t k, const SkinnyWorkspace& ws, int num_sms,
                            cudaStream_t stream, const SkinnyLab& lab);
// num_splits > 0 forces the slot count (0: decode_num_splits()); min_pages > 0 forces the fewest pages a split
// takes (0: one page per warp, kDecodeWarps); kernel other than kAuto forces that kernel where the shape allows it.
struct DecodeLab {
  int64_t num_splits = 0;
  int min_pages = 0;
  DecodeKernel kernel = DecodeKernel::kAuto;
};
void launch_decode_attention_lab(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream,
                                 const DecodeLab& lab);
// block_n 32 or 64 forces the key tile at head_dim 128.
void launch_prefill_attention_tile_lab(const AttentionArgs& a, cudaStream_t stream, int block_n);
// Head_dim 128: 0 = the prefill instance, 1 = GQA-packed 4 warps × 2 m-tiles, 2 = packed one warp, 3 = packed
// 2 warps.
void launch_prefill_attention_lab(const AttentionArgs& a, int variant, cudaStream_t stream);
// The dense stack's weight-ring hand-off alone (lab_probes.cu), for compute-sanitizer: one block streams `tiles`
// tiles of ring_handoff_probe_rows() rows × ring_handoff_probe_row_elems() bf16 from w through a 2-stage ring;
// out[r] = the sum of row r of every tile. Compute capability 9.0. The options add the stack's launch traits one by
// one (lab_probes.cu says why).
struct RingProbeOptions {
  bool every_thread = true;         // each consumer thread hands the stage back (else lane 0 after __syncwarp())
  bool full_shared_memory = false;  // the block's shared memory filled to its limit with a dynamic region
  bool pdl = false;                 // launched with the PDL attribute (launch_pdl)
  bool large_params = false;        // the source pointer inside 8 KB of kernel parameters
};
int ring_handoff_probe_rows();
int ring_handoff_probe_row_elems();
void launch_ring_handoff_probe(const uint16_t* w, int tiles, float* out, const RingProbeOptions& o,
                               cudaStream_t stream);
// cluster_size > 0 forces the blocks per row on sm_90.
void launch_sample_lab(float* logits, int64_t vocab, const SampleBatch& batch, int num_sms, cudaStream_t stream,
                       int cluster_size);

}  // namespace rl::cuda
