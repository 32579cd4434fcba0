// The CPU backend: the correctness reference for every other backend, multithreaded over a ThreadPool.
// Activations are f32; weights f32, bf16 or int8 (core/quant.h). The linear layers and attention run the
// kernels of one instruction-set tier (cpu_kernels.h), chosen at construction from cpuid (cpu_isa.h); the
// kScalar tier is the readable reference the others are tested against.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "core/thread_pool.h"

namespace rl {

class CpuBackend final : public Backend {
 public:
  // isa: the kernel tier; it must not exceed detect_cpu_isa().
  explicit CpuBackend(int num_threads, CpuIsa isa = selected_cpu_isa());

  DeviceKind device() const override { return DeviceKind::kCpu; }
  std::string name() const override;
  DType act_dtype() const override { return DType::kF32; }
  bool supports_weight_dtype(DType dt) const override {
    return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kI8;
  }

  void* alloc(size_t nbytes) override;
  void* alloc_zeroed(size_t nbytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* host_src, size_t nbytes) override;
  void download(void* host_dst, const void* src, size_t nbytes) override;
  void fill_zero(void* dst, size_t nbytes) override;
  void synchronize() override {}
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;

  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override;
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
  void fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) override;
  void silu_mul(const Tensor& gate_up, const Tensor& out) override;
  void linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                       const Tensor& out) override;
  void add(const Tensor& residual, const Tensor& x) override;
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override;
  void cast(const Tensor& src, const Tensor& dst) override;
  void argmax_rows(const Tensor& logits, const Tensor& out) override;
  void sample(const Tensor& logits, const SampleBatch& batch) override;
  void init_penalty_slots(const PenaltySlotInit* inits, int64_t num_inits, const SampleBatch& batch,
                          int64_t vocab_size) override;
  void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) override;
  void apply_token_bitmask(const Tensor& logits, const Tensor& bitmask) override;
  // Layer-library ops (cpu_layer_ops.cpp).
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
  // Multi-head latent attention (cpu_mla.cpp).
  bool supports_mla() const override { return true; }
  void mla_prepare(const Tensor& q, const Tensor& ckv, const Tensor& kv_norm, const Tensor& positions,
                   const Tensor& slot_mapping, const MlaRopeParams& p, const Tensor& q_lat,
                   const KvLayer& cache) override;
  void head_linear(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y, int64_t y_stride) override;
  void mla_attention(const Tensor& q_lat, const KvLayer& cache, const AttentionMetadata& meta,
                     const MlaLayout& layout, const Tensor& out) override;

  // The fused decode ops run as the Backend defaults (compositions of the ops above). Off (the default), the
  // model keeps its unfused path; tests switch it on to run the model's fused path against the reference ops.
  bool fuses_norm_linear(int64_t num_rows) const override { return fused_path_ && num_rows > 0; }
  void set_fused_path(bool on) { fused_path_ = on; }

  ThreadPool& pool() { return pool_; }
  const CpuKernels& kernels() const { return *kern_; }

 private:
  // x as the kernels for weights of dtype wdt read it (LinearActs): rounded to bf16 or quantised to int8 into the
  // buffers below where the tier asks for it (in parallel over rows).
  LinearActs prepare_acts(const Tensor& x, DType wdt);
  // y [m, n] columns [n0, n1) = x · wᵀ on the calling thread, through the tier's kernel for w's dtype.
  void linear_columns(const LinearActs& a, const Tensor& w, float* y, int64_t m, int64_t n0, int64_t n1) const;
  // y [m, n] columns [n0, n1) += bias (f32 or bf16, [n]).
  void add_bias(const Tensor& bias, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) const;

  ThreadPool pool_;
  std::mutex mapped_mu_;
  std::unordered_map<void*, size_t> mapped_;  // alloc_zeroed's mappings and their lengths (freed by munmap)
  const CpuKernels* kern_;
  // Activations prepared once per linear call (bf16-rounded or int8-quantised rows), reused across calls.
  std::vector<uint16_t> act_bf16_;
  std::vector<int8_t> act_i8_;
  std::vector<float> act_scale_;
  bool fused_path_ = false;
};

// fn(task, thread_index) for every task in [0, n), handed out one at a time from a shared counter: a thread that
// finishes early, or was not descheduled, takes the next task, so no thread idles while tasks remain.
void cpu_parallel_tasks(ThreadPool& pool, int64_t n, const std::function<void(int64_t, int)>& fn);

// Each token's sequence (its cu_seqlens_q interval) for the num_tokens query rows of an attention call.
std::vector<int32_t> cpu_sequence_of_tokens(const AttentionMetadata& meta, int64_t num_tokens);

// Causal paged attention (cpu_attention.cpp), its dot products and sums through `kern`.
void cpu_paged_attention(ThreadPool& pool, const CpuKernels& kern, const Tensor& qkv, const KvLayer& cache,
                         const AttentionMetadata& meta, const Tensor& out);
// The same with a sliding window and/or attention sinks (cpu_attention_window.cpp).
void cpu_paged_attention_window(ThreadPool& pool, const Tensor& qkv, const KvLayer& cache,
                                const AttentionMetadata& meta, const Tensor& out);
// Activations and routing of one row range (cpu_layer_ops.cpp), shared with tests' references.
void cpu_activation_rows(const float* in, float* out, int64_t rows, int64_t inter, const ActParams& p);
void cpu_route_row(const float* logits, int64_t num_experts, const MoeRouteParams& p, int32_t* ids, float* w);


}  // namespace rl
