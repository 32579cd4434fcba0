// The CUDA backend: bf16 activations, weights and KV cache, f32 accumulation, our own kernels (cuBLASLt for
// GEMMs with M > 16 unless deterministic). Every op is enqueued asynchronously on one stream owned by the backend and is
// graph-capturable: no synchronization, allocation or host read of device data inside an op; dispatch depends
// only on host-side fields (shapes, AttentionMetadata::all_decode, max_seqlen_*, num_seqs).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "core/status.h"

namespace rl {

namespace cuda {
class LtGemm;
}

class CudaBackend final : public Backend {
 public:
  // Use create_cuda_backend(): it reports a missing device as an error value.
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;

  DeviceKind device() const override { return DeviceKind::kCuda; }
  std::string name() const override;
  DType act_dtype() const override { return DType::kBF16; }
  bool supports_weight_dtype(DType dt) const override { return dt == DType::kBF16; }

  void* alloc(size_t nbytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* host_src, size_t nbytes) override;
  void download(void* host_dst, const void* src, size_t nbytes) override;
  void fill_zero(void* dst, size_t nbytes) override;
  void synchronize() override;
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;

  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override;
  // Tensor parallelism (cuda_tp_ops.cpp).
  void embedding_shard(const Tensor& ids, const Tensor& table, int64_t vocab_begin, const Tensor& out) override;
  void copy_columns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col, int64_t cols) override;
  void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) override;
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& out,
                    const NormParams& p) override;
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) override;
  void qk_norm_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                    const RopeParams& rope, const NormParams& norm) override;
  void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slot_mapping,
                const KvLayer& cache) override;
  void attention(const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                 const Tensor& out) override;
  void silu_mul(const Tensor& gate_up, const Tensor& out) override;
  // The streaming GEMV rounding to bf16 before its f32 store (launch_gemv_widened) where linear would take the GEMV;
  // else linear and cast.
  void linear_widened(const Tensor& x, const Tensor& w, const Tensor& scratch, const Tensor& out) override;
  void linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                       const Tensor& out) override;
  void add(const Tensor& residual, const Tensor& x) override;
  // The fused decode ops (streaming GEMV prologue / epilogue, RoPE + KV write): M <= kGemvMaxM on sm_90, never in
  // deterministic mode (the invariant GEMM has no such epilogues); otherwise the composition.
  bool fuses_norm_linear(int64_t num_rows) const override;
  // Where cuBLASLt serves linear (M > kGemvMaxM; kernel_config.h, kGemmResidualEpilogue): linear_add without a bias
  // adds the residual in the GEMM's epilogue; not in deterministic mode. set_gemm_residual(false): the composition
  // (A/B; RIDGELINE_CUDA_GEMM_RESIDUAL=0 at creation).
  bool fuses_linear_add(int64_t num_rows) const override;
  void set_gemm_residual(bool on) { gemm_residual_ = on; }
  void set_fused_decode(bool on) { fused_decode_ = on; }
  bool fused_decode() const { return fused_decode_; }
  void set_fused_rope_kv_write(bool on) { fused_rope_kv_write_ = on; }
  void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, const NormParams& np, const Tensor& w,
                       const Tensor& bias, const Tensor& normed, const Tensor& y) override;
  void rms_norm_linear_silu_mul(const Tensor& x, const Tensor& norm_weight, const NormParams& np, const Tensor& w,
                                const Tensor& bias, const Tensor& normed, const Tensor& gate_up,
                                const Tensor& out) override;
  void linear_add(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                  const Tensor& residual) override;
  void qk_norm_rope_kv_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                             const RopeParams& rope, const NormParams& norm, const Tensor& slot_mapping,
                             const KvLayer& cache) override;
  void rope_kv_write_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                               const RopeParams& rope, const NormParams& norm, const Tensor& slot_mapping,
                               const KvLayer& cache, const AttentionMetadata& meta, const Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override;
  void fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) override;
  void cast(const Tensor& src, const Tensor& dst) override;
  void argmax_rows(const Tensor& logits, const Tensor& out) override;
  void sample(const Tensor& logits, const SampleBatch& batch) override;
  void init_penalty_slots(const PenaltySlotInit* inits, int64_t num_inits, const SampleBatch& batch,
                          int64_t vocab_size) override;
  void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) override;

  void* alloc_pinned(size_t nbytes) override;
  void free_pinned(void* p) override;
  // Copies of at most kCopyKernelMaxBytes with memory from alloc_pinned run as a kernel in the stream (kernel_config.h
  // says why); the rest through the copy engine.
  void upload_async(void* dst, const void* pinned_src, size_t nbytes) override;
  void download_async(void* pinned_dst, const void* src, size_t nbytes) override;
  // One copy kernel (launch_copy_segments) where each copy would run as a kernel alone, at most
  // cuda::kCopyMaxSegments of them, and the pending ids lie inside one copy's destination with the alignment the
  // kernel resolves them at; else the copies one by one and resolve_pending_ids.
  void upload_many_async(const PinnedUpload* uploads, size_t num_uploads, const PendingIds* pending) override;
  // Whether small copies may run as a kernel (RIDGELINE_CUDA_COPY_KERNEL=0 turns it off; tests set both).
  void set_copy_kernel(bool on) { copy_kernel_ = on; }
  bool copy_kernel() const { return copy_kernel_; }
  uint64_t record_fence() override;
  void wait_fence(uint64_t fence) override;
  uint64_t record_marker() override;
  double marker_seconds(uint64_t marker) override;
  Status start_kernel_trace() override;  // CUPTI (kernel_trace.h)
  std::vector<KernelSpan> take_kernel_spans() override;
  void apply_token_bitmask(const Tensor& logits, const Tensor& bitmask) override;
  // Layer-library ops (cuda_layer_ops.cpp).
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const NormParams& p) override;
  void add_layer_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const Tensor& out, const NormParams& p) override;
  void add_position_embedding(const Tensor& positions, const Tensor& table, const Tensor& out) override;
  void activation(const Tensor& in, const Tensor& out, const ActParams& p) override;
  void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& gate_up_bias, const Tensor& down, const Tensor& down_bias, const MoeParams& p,
                   void* scratch, const Tensor& out) override;

  // Multi-head latent attention (cuda_mla_ops.cpp): the tensor-core kernel for kv_lora_rank 512 + rope 64, the
  // naive one for other widths (and with AttentionImpl::kNaive); deterministic mode as for attention (fixed key
  // chunks merged in order).
  bool supports_mla() const override { return true; }
  void mla_prepare(const Tensor& q, const Tensor& ckv, const Tensor& kv_norm, const Tensor& positions,
                   const Tensor& slot_mapping, const MlaRopeParams& p, const Tensor& q_lat,
                   const KvLayer& cache) override;
  void head_linear(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y, int64_t y_stride) override;
  void mla_attention(const Tensor& q_lat, const KvLayer& cache, const AttentionMetadata& meta, const MlaLayout& l,
                     const Tensor& out) override;

  // Batch-invariant kernels: linear uses the invariant GEMM family for every M (one MMA chain per output element
  // over K, no split-K) instead of the split-K GEMV and cuBLASLt; attention computes every row, decode rows
  // included, with the prefill kernel family (one pass over 64-key tiles from key 0, no batch-dependent KV split).
  // Norms and the element-wise ops are row-local in both modes.
  // The batch-1 dense stack in one persistent kernel (cuda_stack_ops.cpp, decode_stack.cu). On by default on
  // sm_90; RIDGELINE_CUDA_DECODE_STACK=0 at creation or set_dense_stack(false) turns it off (the A/B switch).
  std::string dense_stack_unsupported(const DenseStack& s) const override;
  size_t dense_stack_scratch_bytes(const DenseStack& s) const override;
  int64_t dense_stack_max_context() const override;
  void dense_stack_decode(const DenseStack& s, const DenseStackStep& step) override;
  void set_dense_stack(bool on) { dense_stack_ = on; }
  // Steps run through dense_stack_decode so far (tests check that the stack served them).
  int64_t dense_stack_launches() const { return dense_stack_launches_; }
  void set_deterministic(bool on) override { deterministic_ = on; }
  std::string attention_slow_path(const QkvLayout& layout, int64_t block_size) const override;
  bool deterministic() const override { return deterministic_; }

  // The stream every op runs on (for CUDA-graph capture by the runtime).
  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }
  int num_sms() const { return num_sms_; }
  // The skinny GEMM's split-K workspace (tests and the kernel lab launch it directly).
  const cuda::SkinnyWorkspace& skinny_workspace() const { return skinny_ws_; }
  // Whether linear runs the skinny GEMM where it serves (else cuBLASLt): the A/B switch of benchmarks and tests.
  void set_skinny_gemm_use(cuda::SkinnyGemmUse use) { skinny_use_ = use; }
  void set_gemm_tuning(bool on) override;  // only with RIDGELINE_CUDA_GEMM_TUNE=1 (the lab and tests: lt_gemm())
  cuda::LtGemm& lt_gemm() { return *gemm_; }

  // Which attention kernel attention() uses; kAuto picks split-KV decode, the Hopper prefill (head_dim 128 on
  // compute capability 9.0) or FA2 prefill (naive for other shapes). Tests and benchmarks force one to compare them.
  // kAuto: the fastest kernel for the shape; kNaive: the reference kernel; kFlash2: the FA2 prefill kernel even
  // where the Hopper one serves; kHopperPacked: the Hopper prefill with GQA-packed blocks (tests and the lab).
  // kDecode*: decode batches through that split-KV decode kernel where the shape allows it (tests of every kernel).
  enum class AttentionImpl { kAuto, kNaive, kFlash2, kHopperPacked, kDecodeSimt, kDecodeMma, kDecodeMmaPrefetch,
                             kDecodeMmaEarly, kDecodeStaged, kDecodeStagedCluster };
  void set_attention_impl(AttentionImpl impl) { attention_impl_ = impl; }
  // A mixed batch's leading decode rows (AttentionMetadata::num_leading_decodes) through the decode kernel and the
  // rest through the prefill kernel (kernel_config.h kSplitMixedDecodeRows; RIDGELINE_CUDA_SPLIT_MIXED=1|0).
  void set_split_mixed(bool on) { split_mixed_ = on; }
  bool split_mixed() const { return split_mixed_; }
  // Decode attention rotating q and the new k itself and writing the KV row (rope_kv_write_attention in one kernel;
  // kernel_config.h kDecodeFusedRopeAttention, RIDGELINE_CUDA_FUSED_ROPE_ATTENTION=1|0 end to end).
  void set_fused_rope_attention(bool on) { fused_rope_attention_ = on; }
  bool fused_rope_attention() const { return fused_rope_attention_; }
  // The Hopper prefill's form (PrefillSm90Options), set whole: its fields continuous_turns, v_stages, lazy_rescale and
  // exp_first; the launch sets the rest (pack, intra_overlap, persistent, k_stages, snake, diag_half, q_ring). The
  // constructor takes kernel_config.h's production form (kPrefillSm90ContinuousTurns, kPrefillSm90VStages,
  // kPrefillSm90LazyRescale, kPrefillSm90ExpFirst) or RIDGELINE_CUDA_PREFILL_SM90's words
  // (per_item_v2|continuous|v3|continuous_v3, "lazy", "expfirst"). Tests run every combination that is built.
  void set_prefill_sm90_form(const cuda::PrefillSm90Options& form) { prefill_form_ = form; }
  const cuda::PrefillSm90Options& prefill_sm90_form() const { return prefill_form_; }
  // The Hopper prefill's snake-ordered rounds: -1 by the launch's longest key row (kernel_config.h,
  // prefill_sm90_snake; the default), 0 off, 1 on (lab).
  void set_prefill_snake_mode(int mode) { prefill_snake_mode_ = mode; }
  int prefill_snake_mode() const { return prefill_snake_mode_; }
  // The Hopper prefill's half tiles on the causal diagonal (PrefillSm90Options::diag_half): -1 by the launch's longest
  // key row (kernel_config.h, prefill_sm90_diag_half; the default), 0 off, 1 on.
  void set_prefill_diag_half_mode(int mode) { prefill_diag_half_mode_ = mode; }
  int prefill_diag_half_mode() const { return prefill_diag_half_mode_; }
  // Q in the K stages' ring (PrefillSm90Options::q_ring): -1 by the launch's longest key row (kernel_config.h,
  // prefill_sm90_q_ring; the default), 0 off, 1 on. prefill_q_ring: the mode applied to a launch's longest key row.
  void set_prefill_q_ring_mode(int mode) { prefill_q_ring_mode_ = mode; }
  int prefill_q_ring_mode() const { return prefill_q_ring_mode_; }
  bool prefill_q_ring(int64_t max_seqlen_k) const {
    return prefill_q_ring_mode_ < 0 ? cuda::prefill_sm90_q_ring(max_seqlen_k) : prefill_q_ring_mode_ == 1;
  }
  // Deterministic attention computes a decode step's KV chunks in parallel when their states fit this many floats
  // of scratch (< 0: the whole split-KV scratch), else in registers; both give the same bits. Tests shrink it to
  // reach the in-register path.
  void set_chunk_scratch_limit(int64_t floats) { chunk_scratch_limit_ = floats; }

 private:
  void launch_decode(const cuda::AttentionArgs& a);
  // Whether a copy of n bytes to or from host memory runs as a kernel: on, small, and inside an alloc_pinned block.
  bool copy_by_kernel(const void* host, size_t n) const;
  int device_ = 0;
  int num_sms_ = 0;
  cudaStream_t stream_ = nullptr;
  void* gemm_workspace_ = nullptr;
  float* decode_partials_ = nullptr;  // [kDecodeWorkspaceRows * 128] o then [kDecodeWorkspaceRows] lse
  int* decode_counters_ = nullptr;    // [kDecodeWorkspaceRows], zero between decode launches
  cuda::SkinnyWorkspace skinny_ws_;   // split partials and per-tile counters of the skinny GEMM
  cuda::DecodeKernel decode_kernel_ = cuda::DecodeKernel::kAuto;  // RIDGELINE_CUDA_DECODE_KERNEL (lab A/B)
  int64_t decode_splits_ = 0;  // RIDGELINE_CUDA_DECODE_SPLITS (lab A/B): the split count forced, 0 = the heuristic
  cuda::PrefillSm90Options prefill_form_;  // set_prefill_sm90_form (the constructor: kernel_config.h)
  int prefill_snake_mode_ = -1;  // set_prefill_snake_mode
  int prefill_diag_half_mode_ = -1;  // set_prefill_diag_half_mode
  int prefill_q_ring_mode_ = -1;  // set_prefill_q_ring_mode
  bool copy_kernel_ = true;  // set_copy_kernel
  // The pinned allocations (base → bytes): copy_by_kernel runs only on these.
  mutable std::mutex pinned_mu_;
  std::map<uintptr_t, size_t> pinned_;
  bool gemm_tuning_ = false;  // set_gemm_tuning takes effect (opt-in: RIDGELINE_CUDA_GEMM_TUNE=1)
  // linear for kGemvMaxM < M ≤ kSkinnyGemmMaxM (opt-in: RIDGELINE_CUDA_SKINNY_GEMM=1|all|long)
  cuda::SkinnyGemmUse skinny_use_ = cuda::SkinnyGemmUse::kOff;
  // Fences: a ring of events; fence f is events_[f % kNumFences], recorded at most kNumFences fences ago.
  static constexpr int kNumFences = 8;
  cudaEvent_t events_[kNumFences] = {};
  uint64_t next_fence_ = 1;
  // Profiling markers: timing events by id, relative to a reference event whose host time is known.
  cudaEvent_t marker_ref_ = nullptr;
  double marker_ref_seconds_ = 0.0;
  std::unordered_map<uint64_t, cudaEvent_t> markers_;
  uint64_t next_marker_ = 1;
  std::unique_ptr<cuda::LtGemm> gemm_;
  AttentionImpl attention_impl_ = AttentionImpl::kAuto;
  bool deterministic_ = false;
  // The fused decode kernels (fuses_norm_linear, qk_norm_rope_kv_write) are opt-in until a device run has checked
  // them: RIDGELINE_CUDA_FUSED_DECODE=1 at creation or set_fused_decode(true); otherwise the fused decode ops run
  // composed (the unfused kernels). Also the A/B switch for benchmarks.
  bool fused_decode_ = false;
  // q/k norm + RoPE and the KV write in one kernel (qk_norm_rope_kv_write; bitwise the two ops): on unless
  // RIDGELINE_CUDA_FUSED_ROPE_KV_WRITE=0 (the A/B switch) or the fused decode path is on (which includes it).
  bool fused_rope_kv_write_ = true;
  bool gemm_residual_ = cuda::kGemmResidualEpilogue;  // set_gemm_residual
  bool fused_rope_attention_ = false;  // set_fused_rope_attention
  bool split_mixed_ = false;           // set_split_mixed
  int64_t chunk_scratch_limit_ = -1;
  bool dense_stack_ = true;
  int stack_lab_ = 0;  // RIDGELINE_CUDA_STACK_LAB: decode_stack.h's lab bits (timing ablations only)
  int64_t stack_max_context_ = 0;  // RIDGELINE_CUDA_STACK_MAX_CONTEXT (lab A/B); 0: decode_stack.h kStackMaxContext
  int64_t dense_stack_launches_ = 0;
};

// Fails (as a value) when there is no CUDA device with that index.
Result<std::unique_ptr<Backend>> create_cuda_backend(int device_index);

}  // namespace rl
