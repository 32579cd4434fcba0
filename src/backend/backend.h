// The interface every compute backend implements (CPU reference, CUDA). The model composes these ops; it never
// sees kernels. All tensors passed to ops live in the backend's memory (alloc / upload). Activations use
// act_dtype() (f32 on CPU, bf16 on CUDA); weights may be stored in f32 or bf16; accumulation is f32.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"
#include "core/tensor.h"

namespace rl {

enum class DeviceKind { kCpu, kCuda };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind device() const = 0;
  virtual std::string name() const = 0;
  virtual DType act_dtype() const = 0;
  // Weight storage dtypes the backend can compute with.
  virtual bool supports_weight_dtype(DType dt) const = 0;

  // --- memory ---
  virtual void* alloc(size_t nbytes) = 0;
  // An allocation that reads as zeros (freed with free()). The CPU backend maps large ones from the kernel's zero
  // pages, so a 2 GiB KV pool costs nothing until it is written; elsewhere alloc() then fill_zero().
  virtual void* alloc_zeroed(size_t nbytes) {
    void* p = alloc(nbytes);
    if (nbytes > 0) fill_zero(p, nbytes);
    return p;
  }
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t nbytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t nbytes) = 0;
  virtual void fill_zero(void* dst, size_t nbytes) = 0;
  virtual void synchronize() = 0;
  // Bytes of device memory free and in total (CPU: physical memory).
  virtual void memory_info(size_t* free_bytes, size_t* total_bytes) = 0;

  // --- asynchronous staging (the step pipeline, design.md §8) ---
  // Page-locked host memory for asynchronous copies (CPU: plain memory).
  virtual void* alloc_pinned(size_t nbytes);
  virtual void free_pinned(void* p);
  // Copies enqueued in stream order with the ops; the host buffer must stay untouched until a fence recorded
  // after the copy has passed. CPU: immediate.
  virtual void upload_async(void* dst, const void* pinned_src, size_t nbytes);
  virtual void download_async(void* pinned_dst, const void* src, size_t nbytes);
  // One copy of upload_many_async.
  struct PinnedUpload {
    void* dst = nullptr;
    const void* pinned_src = nullptr;
    size_t nbytes = 0;
  };
  // resolve_pending_ids's arguments, for upload_many_async.
  struct PendingIds {
    Tensor ids;
    Tensor sampled;
  };
  // upload_async of each copy, then, with pending (ids that the copies write), resolve_pending_ids over them: what
  // a step stages, enqueued as one (CUDA: one copy kernel, which resolves the ids as it writes them, where every
  // copy could run as a kernel on its own).
  virtual void upload_many_async(const PinnedUpload* uploads, size_t num_uploads, const PendingIds* pending);
  // A fence after everything enqueued so far; wait_fence blocks the host until the device has passed it.
  virtual uint64_t record_fence() { return 0; }
  virtual void wait_fence(uint64_t /*fence*/) {}
  // Profiling markers enqueued in stream order: marker_seconds() blocks until the device passed the marker and
  // returns when that happened, on now_seconds()'s clock (CPU: the time of record_marker()).
  virtual uint64_t record_marker();
  virtual double marker_seconds(uint64_t marker);
  // Per-kernel device spans (--profile-kernels): start_kernel_trace records every kernel the device runs from now
  // on, CUDA graphs included; take_kernel_spans returns those completed so far, on now_seconds()'s clock, in start
  // order. A backend without kernel timestamps (CPU) refuses to start, saying so.
  struct KernelSpan {
    std::string name;
    double start = 0, seconds = 0;
  };
  virtual Status start_kernel_trace();
  virtual std::vector<KernelSpan> take_kernel_spans() { return {}; }

  // --- ops ---
  // ids: i32 [T]; table: [vocab, hidden]; out: [T, hidden]
  virtual void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) = 0;
  // out = rms_norm(x) * weight. x, out: [T, hidden]; weight: [hidden]
  virtual void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) = 0;
  // residual += x; out = rms_norm(residual) * weight (the fused pre-norm of every block after the first).
  virtual void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& out,
                            const NormParams& p) = 0;
  // y = x · wᵀ (+ bias). x: [M, K]; w: [N, K]; bias: [N] or null data; y: [M, N]
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) = 0;
  // In place on the q and k parts of qkv (QkvLayout): optional per-head RMSNorm (Qwen3 q_norm / k_norm;
  // weights [head_dim], null data = none), then neox-style RoPE at positions (i32 [T]).
  virtual void qk_norm_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                            const RopeParams& rope, const NormParams& norm) = 0;
  // Writes the k and v parts of qkv into the cache at slot_mapping (i32 [T]; slot = block * block_size +
  // offset; a negative slot is skipped).
  virtual void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slot_mapping,
                        const KvLayer& cache) = 0;
  // Causal GQA attention of the q part of qkv over the paged cache (which already holds this step's K/V):
  // query row i of sequence s sits at position seq_lens_k[s] - (cu[s+1] - cu[s]) + (i - cu[s]).
  // out: [T, num_heads * head_dim]
  virtual void attention(const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                         const Tensor& out) = 0;
  // gate_up: [T, 2 * I] (gate then up); out: [T, I] = silu(gate) * up
  virtual void silu_mul(const Tensor& gate_up, const Tensor& out) = 0;
  // A gated MLP's gate_up projection and SiLU·mul: out [T, I] = silu(x · gateᵀ) * (x · upᵀ) for w [2I, K] (gate rows
  // first), bias [2I] or none. This default is linear into scratch ([T, 2I]) then silu_mul; a backend with a fused
  // kernel overrides it (and may leave scratch untouched).
  virtual void linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                               const Tensor& out) {
    linear(x, w, bias, scratch);
    silu_mul(scratch, out);
  }
  // residual += x element-wise (the sum rounded to the activation dtype, as add_rms_norm stores it).
  virtual void add(const Tensor& residual, const Tensor& x) = 0;

  // --- fused decode ops ---
  // The pre-norm folded into the projection after it and the residual add into the projection before it, and
  // RoPE with the KV-cache write. Each default below composes the ops above; a backend with a fused kernel
  // overrides it (and may then leave the scratch tensors untouched). Every fused form computes each row on its
  // own (no row depends on the others), with the unfused roundings except where noted.
  // Whether rms_norm_linear, rms_norm_linear_silu_mul and linear_add run as one kernel each for num_rows rows.
  // The model takes the fused path only then: composed, linear_add costs one kernel more than the add-norm
  // it replaces.
  virtual bool fuses_norm_linear(int64_t num_rows) const {
    (void)num_rows;
    return false;
  }
  // Whether linear_add without a bias runs as one kernel for num_rows rows where the norms stay separate
  // (fuses_norm_linear false: prefill sizes). The model then adds its o_proj / down_proj outputs into the residual
  // stream inside the projection and runs a plain norm where it ran add + norm. Such a linear_add may round once
  // (the f32 product plus the residual) where the composition rounds the product first.
  virtual bool fuses_linear_add(int64_t num_rows) const {
    (void)num_rows;
    return false;
  }
  // y = rms_norm(x) · wᵀ (+ bias). x: [M, K]; norm_weight: [K]; w: [N, K]; normed: [M, K] scratch; y: [M, N].
  // CUDA's fused kernel keeps rms_norm's summation order and roundings: bitwise the composition.
  virtual void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, const NormParams& np, const Tensor& w,
                               const Tensor& bias, const Tensor& normed, const Tensor& y) {
    rms_norm(x, norm_weight, normed, np);
    linear(normed, w, bias, y);
  }
  // out [M, I] = silu(gate) * up of rms_norm(x) · wᵀ for w [2I, K] (the gated MLP's pre-norm, gate_up projection
  // and SwiGLU). normed: [M, K], gate_up: [M, 2I] scratch.
  virtual void rms_norm_linear_silu_mul(const Tensor& x, const Tensor& norm_weight, const NormParams& np,
                                        const Tensor& w, const Tensor& bias, const Tensor& normed,
                                        const Tensor& gate_up, const Tensor& out) {
    rms_norm(x, norm_weight, normed, np);
    linear_silu_mul(normed, w, bias, gate_up, out);
  }
  // out (f32 [M, N]) = x · wᵀ rounded to scratch's dtype (the activation dtype), then widened: the logits as linear
  // into scratch and a cast give them, which is this default. A backend whose kernel rounds before it stores f32
  // overrides it, leaving scratch untouched and launching no cast. x: [M, K]; w: [N, K]; scratch: [M, N].
  virtual void linear_widened(const Tensor& x, const Tensor& w, const Tensor& scratch, const Tensor& out) {
    linear(x, w, Tensor(), scratch);
    cast(scratch, out);
  }
  // residual += x · wᵀ (+ bias), the projection rounded to the activation dtype before the add (as linear, then
  // add), except on a backend's fuses_linear_add path, which may round only the sum. x: [M, K]; w: [N, K]; scratch,
  // residual: [M, N].
  virtual void linear_add(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                          const Tensor& residual) {
    linear(x, w, bias, scratch);
    add(residual, scratch);
  }
  // qk_norm_rope, then kv_write of the rotated k and of v (bitwise the same as the two ops).
  virtual void qk_norm_rope_kv_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                     const Tensor& positions, const RopeParams& rope, const NormParams& norm,
                                     const Tensor& slot_mapping, const KvLayer& cache) {
    qk_norm_rope(qkv, q_norm, k_norm, positions, rope, norm);
    kv_write(qkv, rope.layout, slot_mapping, cache);
  }
  // qk_norm_rope_kv_write, then attention (meta.layout is rope.layout): one op, so that a backend may rotate q and k
  // inside its decode attention kernel. The output and the cache are bitwise the two ops'; qkv may be left holding
  // the projections unrotated (nothing reads it after attention).
  virtual void rope_kv_write_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                       const Tensor& positions, const RopeParams& rope, const NormParams& norm,
                                       const Tensor& slot_mapping, const KvLayer& cache, const AttentionMetadata& meta,
                                       const Tensor& out) {
    qk_norm_rope_kv_write(qkv, q_norm, k_norm, positions, rope, norm, slot_mapping, cache);
    attention(qkv, cache, meta, out);
  }

  // A whole batch-1 decode step's dense layers as one kernel (ops.h DenseStack). dense_stack_unsupported: empty
  // when this backend runs the stack (a model checks it once, after loading), else why not. The model takes it
  // only outside deterministic mode: its reductions are not the batched kernels' (not batch-invariant).
  virtual std::string dense_stack_unsupported(const DenseStack& s) const {
    (void)s;
    return "the backend has no dense-stack kernel";
  }
  virtual size_t dense_stack_scratch_bytes(const DenseStack& s) const {
    (void)s;
    return 0;
  }
  // The longest context (keys, the new one included) at which the stack beats the layer kernels.
  virtual int64_t dense_stack_max_context() const { return 0; }
  virtual void dense_stack_decode(const DenseStack& s, const DenseStackStep& step) {
    (void)s;
    (void)step;
    RL_CHECK_MSG(false, "dense_stack_decode: not supported by this backend");
  }

  // out[i] = x[indices[i]]. x: [T, H]; indices: i32 [n]; out: [n, H]
  virtual void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) = 0;
  // Fills t (f32 or bf16) with uniform values in [lo, hi) from a counter-based generator keyed by seed:
  // the same seed gives the same values on every backend (used for --dummy-weights).
  virtual void fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) = 0;
  // Greedy sampling on the device: out (i32 [n]) = argmax of each row of logits (f32 [n, vocab]); ties → the
  // lowest id. A row holding NaN or +Inf, or nothing above -inf, gets -1 (the model is numerically broken: the
  // engine fails that request); sample gives the codes of ops.h.
  virtual void argmax_rows(const Tensor& logits, const Tensor& out) = 0;
  // The one sampling path (ops.h, SampleRowParams): every parameter, one counter-based RNG. Enqueued like every
  // op (graph-capturable on CUDA); reads its parameters from backend memory.
  virtual void sample(const Tensor& logits, const SampleBatch& batch) = 0;
  // Resets penalty slots (ops.h, PenaltySlotInit; the structs in host memory, the ids in backend memory).
  virtual void init_penalty_slots(const PenaltySlotInit* inits, int64_t num_inits, const SampleBatch& batch,
                                  int64_t vocab_size) = 0;
  // ids: i32 [T]. Entries < 0 are references to tokens sampled on the device: id = -(k + 1) becomes sampled[k]
  // (the previous step's output, which the host has not read yet).
  virtual void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) = 0;
  // Grammar-constrained decoding: logits[r, t] = -inf where bit t of row r of bitmask is 0 (bit t of a row is bit
  // t % 32 of its word t / 32). logits: f32 [n, vocab]; bitmask: i32 [n, ceil(vocab / 32)].
  virtual void apply_token_bitmask(const Tensor& logits, const Tensor& bitmask) = 0;
  // Converts between dtypes element-wise (same shape), e.g. bf16 logits → f32.
  virtual void cast(const Tensor& src, const Tensor& dst) = 0;

  // --- ops of the model layer library (model/layers) ---
  // out = layer_norm(x) * weight + bias (bias may be null data). x, out: [T, hidden]
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                          const NormParams& p) = 0;
  // residual += x; out = layer_norm(residual) * weight + bias.
  virtual void add_layer_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& out, const NormParams& p) = 0;
  // out[t] += table[positions[t]] (learned absolute positions). positions: i32 [T]; table: [max_pos, hidden]
  virtual void add_position_embedding(const Tensor& positions, const Tensor& table, const Tensor& out) = 0;
  // out = act(in): see Activation for the shapes.
  virtual void activation(const Tensor& in, const Tensor& out, const ActParams& p) = 0;
  // Router logits [T, E] (activation dtype) → ids i32 [T, top_k] and weights f32 [T, top_k], computed in f32.
  // Ties between equal logits go to the lower expert id.
  virtual void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids,
                         const Tensor& weights) = 0;
  // x: [T, H]; ids/weights from moe_route; gate_up: [E, (gated ? 2 : 1) I, H] (gate rows then up rows);
  // gate_up_bias: [E, 2I] or null; down: [E, H, I]; down_bias: [E, H] or null; scratch: at least
  // moe_scratch_bytes(p, T, act bytes) bytes; out: [T, H] = sum_j weights[t, j] * expert_{ids[t, j]}(x[t]).
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                           const Tensor& gate_up_bias, const Tensor& down, const Tensor& down_bias,
                           const MoeParams& p, void* scratch, const Tensor& out) = 0;

  // --- multi-head latent attention (ops.h, MlaLayout) ---
  // Backends without these ops return false; a model that needs them refuses to load.
  virtual bool supports_mla() const { return false; }
  // q: [T, num_heads * q_head] (the q projection); ckv: [T, latent] (kv_a_proj_with_mqa); kv_norm: [kv_lora_rank].
  // Writes q_lat[t, h, kv_lora_rank:] = RoPE(q rope part) * q_rope_scale (q_lat: [T, num_heads * latent]; its
  // first kv_lora_rank columns per head are left to head_linear), and cache row slot_mapping[t] =
  // [rms_norm(ckv[:kv_lora_rank]) * kv_norm, RoPE(ckv rope part)] (negative slots skipped).
  virtual void mla_prepare(const Tensor& q, const Tensor& ckv, const Tensor& kv_norm, const Tensor& positions,
                           const Tensor& slot_mapping, const MlaRopeParams& p, const Tensor& q_lat,
                           const KvLayer& cache);
  // Per head b: y[t, b, :N] = x[t, b, :K] · w[b]ᵀ. x: [T, B * x_stride] (K <= x_stride); w: [B, N, K];
  // y: [T, B * y_stride] (N <= y_stride; the other columns are left alone).
  virtual void head_linear(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y, int64_t y_stride);
  // Causal attention of q_lat ([T, num_heads * latent]) over the latent cache (rows [latent], one per token,
  // through the block tables): out[t, h] = Σ_j softmax_j(scale · q_lat[t, h] · row_j) · row_j[:kv_lora_rank].
  // out: [T, num_heads * kv_lora_rank]. meta.layout is unused.
  virtual void mla_attention(const Tensor& q_lat, const KvLayer& cache, const AttentionMetadata& meta,
                             const MlaLayout& layout, const Tensor& out);

  // --- tensor parallelism (docs/distributed.md) ---
  // Vocab-parallel embedding: out[t] = table[ids[t] - vocab_begin] when vocab_begin <= ids[t] < vocab_begin +
  // rows, zeros otherwise, so the ranks' outputs sum to the whole lookup. ids: i32 [T]; table: [rows, hidden].
  virtual void embedding_shard(const Tensor& ids, const Tensor& table, int64_t vocab_begin, const Tensor& out);
  // Strided block copy: dst[i, dst_col + j] = src[i, src_col + j] for i < src rows, j < cols. src and dst: 2-D,
  // row-major, same dtype and row count (the vocab-parallel logits are put back in vocabulary order with it).
  virtual void copy_columns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col, int64_t cols);

  // --- batch invariance (deterministic inference) ---
  // On: every op computes a row with a reduction order that does not depend on the other rows of the call
  // (their number, a prompt's chunking, prefix hits, mixed prefill/decode batches), so a request's logits are
  // bitwise the same alone or in any batch. Off: the backend may pick faster batch-dependent kernels. A backend
  // with a single kernel family per op ignores it. Set before the first op (or between steps, never inside a
  // captured graph: graphs bake the chosen kernels).
  virtual void set_deterministic(bool on) { (void)on; }
  virtual bool deterministic() const { return false; }

  // --- GEMM tuning ---
  // While on, the first linear of each shape times the GEMM library's candidate algorithms on its own operands
  // and keeps the fastest: a one-time stall that synchronizes the stream. Turned on around the eager step before
  // a decode graph is captured (never while a step is timed). A backend with one GEMM per shape ignores it.
  virtual void set_gemm_tuning(bool on) { (void)on; }

  // --- kernel coverage ---
  // Empty when fast kernels serve attention at this shape for every step kind (prefill, decode); otherwise one
  // line naming the slow path that will serve it. Meant to be checked when a model and its KV layout are set up,
  // so that a shape without a fast kernel is reported at load instead of discovered at the first request.
  virtual std::string attention_slow_path(const QkvLayout& layout, int64_t block_size) const {
    (void)layout;
    (void)block_size;
    return "";
  }
};

// A device allocation owned by a backend (RAII).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, size_t nbytes) : backend_(backend), size_(nbytes) {
    ptr_ = nbytes ? backend->alloc(nbytes) : nullptr;
  }
  struct Zeroed {};
  DeviceBuffer(Backend* backend, size_t nbytes, Zeroed) : backend_(backend), size_(nbytes) {
    ptr_ = nbytes ? backend->alloc_zeroed(nbytes) : nullptr;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = o.backend_;
      ptr_ = o.ptr_;
      size_ = o.size_;
      o.ptr_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return size_; }
  void reset() {
    if (ptr_ && backend_) backend_->free(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rl
