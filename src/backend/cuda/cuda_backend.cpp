#include "backend/cuda/cuda_backend.h"

#include "core/log.h"

#include <cstdlib>
#include <string>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/kernel_trace.h"
#include "backend/cuda/gemv_stream.h"
#include "backend/cuda/kernel_config.h"
#include "core/check.h"

namespace rl {

namespace {

uint16_t* bf16_ptr(const Tensor& t) {
  RL_CHECK_MSG(t.dtype == DType::kBF16, "expected a bf16 tensor, got %s %s", std::string(dtype_name(t.dtype)).c_str(),
               t.shape_str().c_str());
  return static_cast<uint16_t*>(t.data);
}

// A KV cache tensor's data as the kernels take it (bf16 elements, or FP8 e4m3 bytes behind the same pointer type:
// AttentionArgs::kv_fp8 says which).
uint16_t* kv_ptr(const Tensor& t) {
  RL_CHECK_MSG(t.dtype == DType::kBF16 || t.dtype == DType::kFP8E4M3, "expected a bf16 or fp8 KV cache, got %s",
               std::string(dtype_name(t.dtype)).c_str());
  return static_cast<uint16_t*>(t.data);
}

void check_param_dtype(const Tensor& t) { RL_CHECK(t.dtype == DType::kBF16 || t.dtype == DType::kF32); }
// An optional bias: absent, or a bf16/f32 vector of n values.
void check_bias(const Tensor& bias, int64_t n) {
  if (!bias.data) return;
  check_param_dtype(bias);
  RL_CHECK(bias.numel() == n);
}
// The streaming GEMV's RMSNorm prologue (the fused decode ops).
void set_norm_prologue(cuda::GemvStreamParams& p, const Tensor& norm_weight, const NormParams& np) {
  p.norm_w = norm_weight.data;
  p.norm_w_f32 = norm_weight.dtype == DType::kF32;
  p.eps = np.eps;
}

// The streaming GEMV's parameters for y = x · wᵀ (+ bias) (w: [N, K], or [2N, K] when gated).
cuda::GemvStreamParams stream_params(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                                     bool gated) {
  cuda::GemvStreamParams p;
  p.x = bf16_ptr(x);
  p.w = bf16_ptr(w);
  p.bias = bias.data;
  p.bias_f32 = bias.dtype == DType::kF32;
  p.y = y.data;
  p.y_f32 = y.dtype == DType::kF32;
  p.gated = gated;
  p.m = static_cast<int>(x.rows());
  p.n = y.dim(-1);
  p.k = x.dim(-1);
  return p;
}

}  // namespace

CudaBackend::CudaBackend(int device_index) : device_(device_index) {
  RL_CUDA_CHECK(cudaSetDevice(device_));
  RL_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_));
  RL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RL_CUDA_CHECK(cudaMalloc(&gemm_workspace_, cuda::kCublasWorkspaceBytes));
  const size_t partial_floats = static_cast<size_t>(cuda::kDecodeWorkspaceRows) * (128 + 1);
  RL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&decode_partials_), partial_floats * sizeof(float)));
  RL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&decode_counters_), cuda::kDecodeWorkspaceRows * sizeof(int)));
  RL_CUDA_CHECK(cudaMemset(decode_counters_, 0, cuda::kDecodeWorkspaceRows * sizeof(int)));
  skinny_ws_.partial_floats = cuda::kSkinnyWorkspaceFloats;
  skinny_ws_.num_counters = cuda::kSkinnyWorkspaceCounters;
  RL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&skinny_ws_.partial), skinny_ws_.partial_floats * sizeof(float)));
  RL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&skinny_ws_.counters), skinny_ws_.num_counters * sizeof(int)));
  RL_CUDA_CHECK(cudaMemset(skinny_ws_.counters, 0, skinny_ws_.num_counters * sizeof(int)));
  // Off by default: slower end to end than cuBLASLt at batch 32 and 64 (kernel_config.h, "Skinny GEMM").
  if (const char* env = std::getenv("RIDGELINE_CUDA_SKINNY_GEMM")) {
    const std::string v = env;
    skinny_use_ = v == "1" || v == "all" ? cuda::SkinnyGemmUse::kAll
                  : v == "long"          ? cuda::SkinnyGemmUse::kLong
                                         : cuda::SkinnyGemmUse::kOff;
  }
  for (cudaEvent_t& e : events_) RL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  gemm_ = std::make_unique<cuda::LtGemm>(gemm_workspace_, cuda::kCublasWorkspaceBytes);
  // Opt-in until measured on a GPU (kernel_config.h, "cuBLASLt tuning").
  if (const char* env = std::getenv("RIDGELINE_CUDA_GEMM_TUNE"); env != nullptr && std::string(env) == "1") {
    gemm_tuning_ = true;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_DECODE_STACK"); env != nullptr && std::string(env) == "0") {
    dense_stack_ = false;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_STACK_LAB")) stack_lab_ = std::atoi(env);
  // Lab A/B of the stack's context bound (decode_stack.h kStackMaxContext): keys, 1 to 65536.
  if (const char* env = std::getenv("RIDGELINE_CUDA_STACK_MAX_CONTEXT")) {
    const long long v = std::atoll(env);
    RL_CHECK_MSG(v >= 1 && v <= 65536, "RIDGELINE_CUDA_STACK_MAX_CONTEXT=%s: want 1 to 65536 keys", env);
    stack_max_context_ = v;
  }
  // End-to-end A/B of the decode attention kernels (kernel_config.h, kDecodeMmaKernel): simt, mma, mma_prefetch,
  // mma_early, staged, staged_cluster. Unset: the production choice.
  if (const char* env = std::getenv("RIDGELINE_CUDA_DECODE_KERNEL")) {
    const std::string k = env;
    decode_kernel_ = k == "simt"           ? cuda::DecodeKernel::kSimt
                     : k == "mma"          ? cuda::DecodeKernel::kMma
                     : k == "mma_prefetch" ? cuda::DecodeKernel::kMmaPrefetch
                     : k == "mma_early"    ? cuda::DecodeKernel::kMmaEarly
                     : k == "staged"       ? cuda::DecodeKernel::kStaged
                     : k == "staged_cluster" ? cuda::DecodeKernel::kStagedCluster
                                           : cuda::DecodeKernel::kAuto;
  }
  // End-to-end A/B of the decode split count (kernel_config.h decode_num_splits, decode_staged_num_splits).
  if (const char* env = std::getenv("RIDGELINE_CUDA_DECODE_SPLITS")) decode_splits_ = std::atoll(env);
  // End-to-end A/B of the Hopper prefill's forms (kernel_config.h, kPrefillSm90ContinuousTurns and
  // kPrefillSm90VStages): a value names its form whole, "continuous" and "v3" its choices (so "per_item_v2" is the form
  // before session 18, "continuous_v3_lazy_autosnake_autodiaghalf_expfirst" production, "continuous_v3" its eager
  // rescale; the words "snake" / "autosnake", "diaghalf" / "autodiaghalf", "expfirst": PrefillSm90Options); "0" turns
  // the kernel off (prefill_attention_sm90_supported).
  prefill_form_.continuous_turns = cuda::kPrefillSm90ContinuousTurns;
  prefill_form_.v_stages = cuda::kPrefillSm90VStages;
  prefill_form_.lazy_rescale = cuda::kPrefillSm90LazyRescale;
  prefill_form_.exp_first = cuda::kPrefillSm90ExpFirst;
  if (const char* env = std::getenv("RIDGELINE_CUDA_PREFILL_SM90"); env != nullptr && std::string(env) != "0") {
    const std::string v = env;
    const auto has = [&v](const char* word) { return v.find(word) != std::string::npos; };
    prefill_form_.continuous_turns = has("continuous");
    prefill_form_.v_stages = has("v3") ? 3 : 2;
    prefill_form_.lazy_rescale = has("lazy");
    // "autosnake": snake order where production takes it (prefill_sm90_snake); "snake": always.
    prefill_snake_mode_ = has("autosnake") ? -1 : has("snake") ? 1 : 0;
    // "autodiaghalf": the diagonal's half tiles where production takes them (prefill_sm90_diag_half); "diaghalf":
    // always.
    prefill_diag_half_mode_ = has("autodiaghalf") ? -1 : has("diaghalf") ? 1 : 0;
    // "expfirst": the exponentials first, where the half tiles are off (production's form past the half tiles' limit).
    prefill_form_.exp_first = has("expfirst");
    // "autoqring": Q in the K stages' ring where production takes it (prefill_sm90_q_ring); "qring": always.
    prefill_q_ring_mode_ = has("autoqring") ? -1 : has("qring") ? 1 : 0;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_FUSED_DECODE"); env != nullptr && std::string(env) == "1") {
    fused_decode_ = true;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_FUSED_ROPE_KV_WRITE"); env != nullptr && std::string(env) == "0") {
    fused_rope_kv_write_ = false;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_GEMM_RESIDUAL"); env != nullptr && std::string(env) == "0") {
    gemm_residual_ = false;
  }
  if (const char* env = std::getenv("RIDGELINE_CUDA_COPY_KERNEL"); env != nullptr && std::string(env) == "0") {
    copy_kernel_ = false;
  }
  split_mixed_ = cuda::kSplitMixedDecodeRows;
  if (const char* env = std::getenv("RIDGELINE_CUDA_SPLIT_MIXED")) split_mixed_ = std::string(env) == "1";
  fused_rope_attention_ = cuda::kDecodeFusedRopeAttention;
  if (const char* env = std::getenv("RIDGELINE_CUDA_FUSED_ROPE_ATTENTION")) {
    fused_rope_attention_ = std::string(env) == "1";
  }
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  gemm_.reset();
  cudaFree(decode_partials_);
  cudaFree(decode_counters_);
  cudaFree(skinny_ws_.partial);
  cudaFree(skinny_ws_.counters);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (auto& [id, e] : markers_) cudaEventDestroy(e);
  if (marker_ref_) cudaEventDestroy(marker_ref_);
  cudaFree(gemm_workspace_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  cudaDeviceProp prop{};
  RL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  return std::string("cuda:") + std::to_string(device_) + " (" + prop.name + ", " + std::to_string(num_sms_) +
         " SMs)";
}

void* CudaBackend::alloc(size_t nbytes) {
  void* p = nullptr;
  RL_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(nbytes, 1)));
  return p;
}
void CudaBackend::free(void* p) {
  if (p) RL_CUDA_CHECK(cudaFree(p));
}
void CudaBackend::upload(void* dst, const void* src, size_t n) {
  RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
  RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaBackend::download(void* dst, const void* src, size_t n) {
  RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
  RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaBackend::fill_zero(void* dst, size_t n) { RL_CUDA_CHECK(cudaMemsetAsync(dst, 0, n, stream_)); }
void CudaBackend::synchronize() { RL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
void CudaBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  RL_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  check_param_dtype(table);
  RL_CHECK(ids.dtype == DType::kI32 && out.dim(-1) == table.dim(1) && out.rows() == ids.numel());
  cuda::launch_embedding(ids.as<int32_t>(), ids.numel(), table.data, table.dtype, table.dim(0), table.dim(1),
                         bf16_ptr(out), stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) {
  check_param_dtype(weight);
  RL_CHECK(weight.numel() == x.dim(-1) && out.numel() == x.numel());
  cuda::launch_rms_norm(nullptr, bf16_ptr(x), weight.data, weight.dtype, bf16_ptr(out), x.rows(), x.dim(-1), p.eps,
                        stream_);
}

void CudaBackend::add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& out,
                               const NormParams& p) {
  check_param_dtype(weight);
  RL_CHECK(weight.numel() == x.dim(-1) && out.numel() == x.numel() && residual.numel() == x.numel());
  cuda::launch_rms_norm(bf16_ptr(residual), bf16_ptr(x), weight.data, weight.dtype, bf16_ptr(out), x.rows(),
                        x.dim(-1), p.eps, stream_);
}

void CudaBackend::set_gemm_tuning(bool on) { gemm_->set_tuning(on && gemm_tuning_); }

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && y.dim(-1) == n && y.rows() == m);
  RL_CHECK(y.dtype == DType::kBF16 || y.dtype == DType::kF32);
  check_bias(bias, n);
  if (m == 0) return;
  const uint16_t* xp = bf16_ptr(x);
  const uint16_t* wp = bf16_ptr(w);
  if (deterministic_) {
    // One reduction order for every M (kernel_config.h, "Batch-invariant mode").
    cuda::launch_gemv_invariant(xp, wp, bias.data, bias.dtype, y.data, y.dtype, m, n, k, stream_);
    return;
  }
  if (m <= cuda::kGemvMaxM) {
    cuda::launch_gemv(xp, wp, bias.data, bias.dtype, y.data, y.dtype, m, n, k, stream_);
    return;
  }
  if (m <= cuda::kSkinnyGemmMaxM && cuda::skinny_gemm_serves(skinny_use_, n, k) &&
      cuda::skinny_gemm_supported(xp, wp, m, n, k)) {
    cuda::launch_skinny_gemm(xp, wp, bias.data, bias.dtype, y.data, y.dtype, m, n, k, skinny_ws_, num_sms_, stream_);
    return;
  }
  gemm_->run(bf16_ptr(x), bf16_ptr(w), y.data, y.dtype, m, n, k, stream_);
  if (bias.data) cuda::launch_add_bias(y.data, y.dtype, bias.data, bias.dtype, m, n, stream_);
}

namespace {
// The arguments of the q/k norm + RoPE kernel (without the KV write), checked.
cuda::QkNormRopeArgs qk_norm_rope_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                       const Tensor& positions, const RopeParams& rope, const NormParams& norm) {
  const QkvLayout& l = rope.layout;
  RL_CHECK(qkv.dim(-1) == l.row() && l.head_dim % 2 == 0 && l.head_dim <= 256 && rope.inv_freq);
  RL_CHECK(positions.dtype == DType::kI32 && positions.numel() == qkv.rows());
  RL_CHECK(!q_norm.data || !k_norm.data || q_norm.dtype == k_norm.dtype);
  cuda::QkNormRopeArgs a;
  a.qkv = bf16_ptr(qkv);
  a.positions = positions.as<int32_t>();
  a.inv_freq = rope.inv_freq;
  a.q_norm = q_norm.data;
  a.k_norm = k_norm.data;
  a.norm_dt = q_norm.data ? q_norm.dtype : (k_norm.data ? k_norm.dtype : DType::kBF16);
  a.num_tokens = qkv.rows();
  a.num_heads = l.num_heads;
  a.num_kv_heads = l.num_kv_heads;
  a.head_dim = l.head_dim;
  a.eps = norm.eps;
  return a;
}
}  // namespace

void CudaBackend::qk_norm_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                               const Tensor& positions, const RopeParams& rope, const NormParams& norm) {
  cuda::launch_qk_norm_rope(qk_norm_rope_args(qkv, q_norm, k_norm, positions, rope, norm), stream_);
}

void CudaBackend::kv_write(const Tensor& qkv, const QkvLayout& l, const Tensor& slot_mapping,
                           const KvLayer& cache) {
  const int64_t kv_row = l.num_kv_heads * l.head_dim;
  RL_CHECK(qkv.dim(-1) == l.row() && cache.num_kv_heads() * cache.head_dim() == kv_row);
  RL_CHECK(slot_mapping.dtype == DType::kI32 && slot_mapping.numel() == qkv.rows());
  RL_CHECK(cache.v.dtype == cache.k.dtype);
  cuda::launch_kv_write(bf16_ptr(qkv), qkv.rows(), l.row(), l.k_offset(), l.v_offset(), kv_row,
                        slot_mapping.as<int32_t>(), cache.k.dim(0) * cache.block_size(), kv_ptr(cache.k),
                        kv_ptr(cache.v), cache.k.dtype == DType::kFP8E4M3, stream_);
}

namespace {
// The attention kernels' arguments, checked.
cuda::AttentionArgs attention_args(const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                                   const Tensor& out) {
  const QkvLayout& l = meta.layout;
  RL_CHECK(qkv.dim(-1) == l.row() && cache.head_dim() == l.head_dim && cache.num_kv_heads() == l.num_kv_heads);
  RL_CHECK(l.num_kv_heads > 0 && l.num_heads % l.num_kv_heads == 0 && l.head_dim <= 256);
  RL_CHECK(out.numel() == qkv.rows() * l.num_heads * l.head_dim);
  cuda::AttentionArgs a;
  RL_CHECK(cache.v.dtype == cache.k.dtype);
  a.qkv = bf16_ptr(qkv);
  a.k_cache = kv_ptr(cache.k);
  a.v_cache = kv_ptr(cache.v);
  a.kv_fp8 = cache.k.dtype == DType::kFP8E4M3;
  a.cu_seqlens_q = meta.cu_seqlens_q.as<int32_t>();
  a.seq_lens_k = meta.seq_lens_k.as<int32_t>();
  a.block_tables = meta.block_tables.as<int32_t>();
  a.out = bf16_ptr(out);
  a.num_tokens = qkv.rows();
  a.num_seqs = meta.num_seqs;
  a.max_seqlen_q = meta.max_seqlen_q;
  a.max_seqlen_k = meta.max_seqlen_k;
  a.max_blocks = meta.block_tables.dim(1);
  a.num_heads = l.num_heads;
  a.num_kv_heads = l.num_kv_heads;
  a.head_dim = l.head_dim;
  a.block_size = cache.block_size();
  a.row = l.row();
  a.kv_slots = cache.k.dim(0) * cache.block_size();
  a.scale = meta.scale;
  return a;
}
}  // namespace

void CudaBackend::rope_kv_write_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                          const Tensor& positions, const RopeParams& rope, const NormParams& norm,
                                          const Tensor& slot_mapping, const KvLayer& cache,
                                          const AttentionMetadata& meta, const Tensor& out) {
  // The decode attention kernel rotates q and the new k itself and writes the KV row (lab until measured:
  // kernel_config.h, kDecodeFusedRopeAttention); every other case runs the two ops.
  if (fused_rope_attention_ && !deterministic_ && attention_impl_ == AttentionImpl::kAuto && meta.all_decode &&
      meta.plain() && cache.k.dtype == DType::kBF16 && rope.layout.row() == meta.layout.row()) {
    const cuda::AttentionArgs a = attention_args(qkv, cache, meta, out);
    if (a.num_tokens > 0 && a.num_seqs > 0 && cuda::decode_attention_rope_supported(a)) {
      const cuda::QkNormRopeArgs q = qk_norm_rope_args(qkv, q_norm, k_norm, positions, rope, norm);  // checks
      RL_CHECK(slot_mapping.dtype == DType::kI32 && slot_mapping.numel() == qkv.rows());
      cuda::DecodeRope r;
      r.positions = q.positions;
      r.slots = slot_mapping.as<int32_t>();
      r.num_slots = a.kv_slots;
      r.inv_freq = q.inv_freq;
      r.q_norm = q.q_norm;
      r.k_norm = q.k_norm;
      r.norm_f32 = q.norm_dt == DType::kF32;
      r.eps = q.eps;
      r.k_cache = bf16_ptr(cache.k);
      r.v_cache = bf16_ptr(cache.v);
      const size_t o_floats = static_cast<size_t>(cuda::kDecodeWorkspaceRows) * 128;
      cuda::DecodeWorkspace ws{decode_partials_, decode_partials_ + o_floats, decode_counters_,
                               cuda::kDecodeWorkspaceRows};
      cuda::launch_decode_attention_rope(a, r, ws, num_sms_, stream_);
      return;
    }
  }
  Backend::rope_kv_write_attention(qkv, q_norm, k_norm, positions, rope, norm, slot_mapping, cache, meta, out);
}

// The split-KV decode kernel the backend's settings pick (tests and A/B switches force one) over a's sequences.
void CudaBackend::launch_decode(const cuda::AttentionArgs& a) {
  const size_t o_floats = static_cast<size_t>(cuda::kDecodeWorkspaceRows) * 128;
  cuda::DecodeWorkspace ws{decode_partials_, decode_partials_ + o_floats, decode_counters_,
                           cuda::kDecodeWorkspaceRows};
  cuda::DecodeLab lab;
  lab.kernel = attention_impl_ == AttentionImpl::kDecodeSimt        ? cuda::DecodeKernel::kSimt
               : attention_impl_ == AttentionImpl::kDecodeMma         ? cuda::DecodeKernel::kMma
               : attention_impl_ == AttentionImpl::kDecodeMmaPrefetch ? cuda::DecodeKernel::kMmaPrefetch
               : attention_impl_ == AttentionImpl::kDecodeMmaEarly    ? cuda::DecodeKernel::kMmaEarly
               : attention_impl_ == AttentionImpl::kDecodeStaged      ? cuda::DecodeKernel::kStaged
               : attention_impl_ == AttentionImpl::kDecodeStagedCluster ? cuda::DecodeKernel::kStagedCluster
                                                                      : decode_kernel_;
  lab.num_splits = decode_splits_;
  if (lab.kernel == cuda::DecodeKernel::kAuto && lab.num_splits == 0) {
    cuda::launch_decode_attention(a, ws, num_sms_, stream_);
  } else {
    cuda::launch_decode_attention_lab(a, ws, num_sms_, stream_, lab);  // tests and end-to-end A/B
  }
}

void CudaBackend::attention(const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                            const Tensor& out) {
  cuda::AttentionArgs a = attention_args(qkv, cache, meta, out);
  if (a.num_tokens == 0 || a.num_seqs == 0) return;
  if (!meta.plain()) return cuda::launch_attention_window(a, meta.sliding_window, meta.sinks, stream_);
  // An FP8 cache: the decode kernels and the FA2 prefill kernel (the Hopper prefill reads bf16 tiles by TMA, and
  // deterministic mode is refused at load: runtime/kv_dtype.h); the naive kernel for anything else.
  RL_CHECK_MSG(!(a.kv_fp8 && deterministic_), "an fp8 KV cache in deterministic mode (refused at load)");
  if (attention_impl_ == AttentionImpl::kAuto && deterministic_) {
    // Every row through one kernel family whose per-row arithmetic does not depend on the batch.
    if (cuda::prefill_attention_supported(a)) {
      // The chunk states share the split-KV decode scratch (one attention call uses it at a time).
      const int64_t total = cuda::kDecodeWorkspaceRows * (128 + 1);
      const int64_t o_floats = total / (a.head_dim + 2) * a.head_dim;
      cuda::ChunkWorkspace ws{decode_partials_, decode_partials_ + o_floats, 0,
                              chunk_scratch_limit_ < 0 ? total : std::min(total, chunk_scratch_limit_)};
      cuda::launch_attention_rows(a, meta.all_decode, ws, stream_);
      return;
    }
  } else if (attention_impl_ != AttentionImpl::kNaive) {
    if (meta.all_decode && cuda::decode_attention_supported(a)) {
      launch_decode(a);
      return;
    }
    // A mixed batch's leading decode rows (lab until measured: kernel_config.h kSplitMixedDecodeRows) through the
    // decode kernel, as in an all-decode step; the sequences after them through the prefill kernel below, whose
    // arguments then start at the first of those (row indices stay absolute).
    const int64_t nd = meta.num_leading_decodes;
    if (split_mixed_ && !meta.all_decode && nd > 0 && nd < a.num_seqs && attention_impl_ == AttentionImpl::kAuto) {
      cuda::AttentionArgs d = a;
      d.num_seqs = nd;
      d.num_tokens = nd;
      d.max_seqlen_q = 1;
      if (cuda::decode_attention_supported(d)) {
        launch_decode(d);
        a.cu_seqlens_q += nd;
        a.seq_lens_k += nd;
        a.block_tables += nd * a.max_blocks;
        a.num_seqs -= nd;
      }
    }
    if (attention_impl_ != AttentionImpl::kFlash2 && !a.kv_fp8 && cuda::prefill_attention_sm90_supported(a)) {
      cuda::PrefillSm90Options o = prefill_form_;
      o.pack = attention_impl_ == AttentionImpl::kHopperPacked || cuda::kPrefillSm90Pack;
      o.intra_overlap = cuda::kPrefillSm90IntraOverlap;
      o.persistent = cuda::kPrefillSm90Persistent;
      o.k_stages = cuda::kPrefillSm90KStages;
      if (o.pack) o.v_stages = 2;  // 3 V stages are built for unpacked blocks only (the lazy rescale and the lab
                                   // forms: where built, launch_prefill_attention_sm90 decides)
      o.snake = prefill_snake_mode_ < 0 ? cuda::prefill_sm90_snake(a.max_seqlen_k) : prefill_snake_mode_ == 1;
      o.diag_half = prefill_diag_half_mode_ < 0 ? cuda::prefill_sm90_diag_half(a.max_seqlen_k)
                                                : prefill_diag_half_mode_ == 1;
      o.q_ring = prefill_q_ring(a.max_seqlen_k);
      cuda::launch_prefill_attention_sm90(a, o, num_sms_, stream_);
      return;
    }
    if (cuda::prefill_attention_supported(a)) {
      cuda::launch_prefill_attention(a, stream_);
      return;
    }
  }
  cuda::launch_attention_naive(a, stream_);
}

void CudaBackend::silu_mul(const Tensor& gate_up, const Tensor& out) {
  RL_CHECK(gate_up.dim(-1) == 2 * out.dim(-1) && gate_up.rows() == out.rows());
  cuda::launch_silu_mul(bf16_ptr(gate_up), bf16_ptr(out), out.rows(), out.dim(-1), stream_);
}

void CudaBackend::linear_widened(const Tensor& x, const Tensor& w, const Tensor& scratch, const Tensor& out) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && out.dim(-1) == n && out.rows() == m && out.dtype == DType::kF32);
  // Deterministic mode keeps linear's batch-invariant kernel; the GEMV serves linear only up to kGemvMaxM rows.
  if (!deterministic_ && m > 0 && x.dtype == DType::kBF16 && w.dtype == DType::kBF16 &&
      scratch.dtype == DType::kBF16 &&
      cuda::launch_gemv_widened(bf16_ptr(x), bf16_ptr(w), out.as<float>(), m, n, k, stream_)) {
    return;
  }
  Backend::linear_widened(x, w, scratch, out);
}

void CudaBackend::linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                                  const Tensor& out) {
  const int64_t m = x.rows(), k = x.dim(-1), n = out.dim(-1);
  RL_CHECK(w.dim(0) == 2 * n && w.dim(1) == k && out.rows() == m);
  if (bias.data) check_param_dtype(bias);
  // Deterministic mode keeps linear + silu_mul: the fused epilogue (no bf16 rounding of gate/up) serves only
  // M <= kGemvMaxM, so a row's bits would depend on the batch size.
  if (!deterministic_ && m > 0 && out.dtype == DType::kBF16 &&
      cuda::launch_gemv_silu_mul(bf16_ptr(x), bf16_ptr(w), bias.data, bias.dtype, out.data, out.dtype, m, n, k,
                                 stream_)) {
    return;
  }
  Backend::linear_silu_mul(x, w, bias, scratch, out);
}

void CudaBackend::add(const Tensor& residual, const Tensor& x) {
  RL_CHECK(residual.numel() == x.numel());
  cuda::launch_add(bf16_ptr(residual), bf16_ptr(x), x.numel(), stream_);
}

bool CudaBackend::fuses_norm_linear(int64_t num_rows) const {
  return fused_decode_ && !deterministic_ && num_rows >= 1 && num_rows <= cuda::kGemvMaxM &&
         num_rows <= cuda::kFusedNormLinearMaxM && cuda::gemv_stream_supported(num_rows);
}

bool CudaBackend::fuses_linear_add(int64_t num_rows) const {
  // Where linear() takes cuBLASLt for every shape (the skinny GEMM, where on, may take some up to kSkinnyGemmMaxM).
  return gemm_residual_ && !deterministic_ && num_rows > cuda::kGemvMaxM &&
         (num_rows > cuda::kSkinnyGemmMaxM || skinny_use_ == cuda::SkinnyGemmUse::kOff);
}

void CudaBackend::rms_norm_linear(const Tensor& x, const Tensor& norm_weight, const NormParams& np, const Tensor& w,
                                  const Tensor& bias, const Tensor& normed, const Tensor& y) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && y.dim(-1) == n && y.rows() == m && norm_weight.numel() == k);
  RL_CHECK(y.dtype == DType::kBF16 || y.dtype == DType::kF32);
  check_param_dtype(norm_weight);
  check_bias(bias, n);
  if (fuses_norm_linear(m) && cuda::gemv_aligned(bf16_ptr(x), bf16_ptr(w), k) && cuda::aligned16(norm_weight.data)) {
    cuda::GemvStreamParams p = stream_params(x, w, bias, y, false);
    set_norm_prologue(p, norm_weight, np);
    cuda::launch_gemv_stream(p, stream_);
    return;
  }
  Backend::rms_norm_linear(x, norm_weight, np, w, bias, normed, y);
}

void CudaBackend::rms_norm_linear_silu_mul(const Tensor& x, const Tensor& norm_weight, const NormParams& np,
                                           const Tensor& w, const Tensor& bias, const Tensor& normed,
                                           const Tensor& gate_up, const Tensor& out) {
  const int64_t m = x.rows(), k = x.dim(-1), n = out.dim(-1);
  RL_CHECK(w.dim(0) == 2 * n && w.dim(1) == k && out.rows() == m && norm_weight.numel() == k);
  check_param_dtype(norm_weight);
  check_bias(bias, 2 * n);
  if (fuses_norm_linear(m) && out.dtype == DType::kBF16 && cuda::gemv_aligned(bf16_ptr(x), bf16_ptr(w), k) &&
      cuda::aligned16(norm_weight.data)) {
    cuda::GemvStreamParams p = stream_params(x, w, bias, out, true);
    set_norm_prologue(p, norm_weight, np);
    cuda::launch_gemv_stream(p, stream_);
    return;
  }
  Backend::rms_norm_linear_silu_mul(x, norm_weight, np, w, bias, normed, gate_up, out);
}

void CudaBackend::linear_add(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                             const Tensor& residual) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && residual.dim(-1) == n && residual.rows() == m);
  check_bias(bias, n);
  if (fuses_norm_linear(m) && cuda::gemv_aligned(bf16_ptr(x), bf16_ptr(w), k)) {
    cuda::GemvStreamParams p = stream_params(x, w, bias, residual, false);
    p.residual = bf16_ptr(residual);
    cuda::launch_gemv_stream(p, stream_);
    return;
  }
  if (fuses_linear_add(m) && !bias.data) {  // the residual added in cuBLASLt's epilogue
    gemm_->run(bf16_ptr(x), bf16_ptr(w), bf16_ptr(residual), DType::kBF16, m, n, k, stream_, /*accumulate=*/true);
    return;
  }
  Backend::linear_add(x, w, bias, scratch, residual);
}

void CudaBackend::qk_norm_rope_kv_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                        const Tensor& positions, const RopeParams& rope, const NormParams& norm,
                                        const Tensor& slot_mapping, const KvLayer& cache) {
  if (!fused_decode_ && !fused_rope_kv_write_) {
    Backend::qk_norm_rope_kv_write(qkv, q_norm, k_norm, positions, rope, norm, slot_mapping, cache);
    return;
  }
  const QkvLayout& l = rope.layout;
  RL_CHECK(cache.num_kv_heads() * cache.head_dim() == l.num_kv_heads * l.head_dim);
  RL_CHECK(slot_mapping.dtype == DType::kI32 && slot_mapping.numel() == qkv.rows());
  cuda::QkNormRopeArgs a = qk_norm_rope_args(qkv, q_norm, k_norm, positions, rope, norm);
  RL_CHECK(cache.v.dtype == cache.k.dtype);
  a.slots = slot_mapping.as<int32_t>();
  a.num_slots = cache.k.dim(0) * cache.block_size();
  a.k_cache = kv_ptr(cache.k);
  a.v_cache = kv_ptr(cache.v);
  a.kv_fp8 = cache.k.dtype == DType::kFP8E4M3;
  cuda::launch_qk_norm_rope(a, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) {
  RL_CHECK(indices.dtype == DType::kI32 && x.dtype == out.dtype && x.dim(-1) == out.dim(-1));
  RL_CHECK(out.rows() == indices.numel());
  cuda::launch_gather_rows(x.data, x.rows(), indices.as<int32_t>(), indices.numel(),
                           x.dim(-1) * static_cast<int64_t>(dtype_size(x.dtype)), out.data, stream_);
}

void CudaBackend::fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) {
  RL_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16);
  cuda::launch_fill_uniform(t.data, t.dtype, t.numel(), seed, lo, hi, stream_);
}

void CudaBackend::cast(const Tensor& src, const Tensor& dst) {
  RL_CHECK(src.numel() == dst.numel());
  if (src.dtype == dst.dtype) {
    RL_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  auto ok = [](DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; };
  RL_CHECK(ok(src.dtype) && ok(dst.dtype));
  cuda::launch_cast(src.data, src.dtype, dst.data, dst.dtype, src.numel(), stream_);
}

void CudaBackend::argmax_rows(const Tensor& logits, const Tensor& out) {
  RL_CHECK(logits.dtype == DType::kF32 && out.dtype == DType::kI32);
  RL_CHECK(logits.ndim == 2);
  cuda::launch_argmax_rows(logits.as<float>(), logits.dim(0), logits.dim(1), out.as<int32_t>(), stream_);
}

void CudaBackend::sample(const Tensor& logits, const SampleBatch& batch) {
  RL_CHECK(logits.dtype == DType::kF32 && logits.ndim == 2 && logits.dim(0) >= batch.num_rows);
  cuda::launch_sample(logits.as<float>(), logits.dim(1), batch, num_sms_, stream_);
}

void CudaBackend::init_penalty_slots(const PenaltySlotInit* inits, int64_t num_inits, const SampleBatch& batch,
                                     int64_t vocab_size) {
  for (int64_t i = 0; i < num_inits; ++i) {
    cuda::launch_init_penalty_slot(inits[i], batch.penalty_counts, batch.prompt_bits, vocab_size, stream_);
  }
}

void CudaBackend::resolve_pending_ids(const Tensor& ids, const Tensor& sampled) {
  RL_CHECK(ids.dtype == DType::kI32 && sampled.dtype == DType::kI32);
  cuda::launch_resolve_pending_ids(ids.as<int32_t>(), ids.numel(), sampled.as<int32_t>(), stream_);
}

void* CudaBackend::alloc_pinned(size_t nbytes) {
  void* p = nullptr;
  const size_t n = std::max<size_t>(nbytes, 1);
  // Mapped (as every pinned allocation is under unified addressing): the copy kernel reads and writes it in place.
  RL_CUDA_CHECK(cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable));
  std::lock_guard<std::mutex> lock(pinned_mu_);
  pinned_[reinterpret_cast<uintptr_t>(p)] = n;
  return p;
}

void CudaBackend::free_pinned(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(pinned_mu_);
    pinned_.erase(reinterpret_cast<uintptr_t>(p));
  }
  RL_CUDA_CHECK(cudaFreeHost(p));
}

bool CudaBackend::copy_by_kernel(const void* host, size_t n) const {
  if (!copy_kernel_ || n > static_cast<size_t>(cuda::kCopyKernelMaxBytes)) return false;
  // Only memory from alloc_pinned (mapped): a pageable pointer would fault in the kernel.
  const uintptr_t a = reinterpret_cast<uintptr_t>(host);
  std::lock_guard<std::mutex> lock(pinned_mu_);
  auto it = pinned_.upper_bound(a);
  if (it == pinned_.begin()) return false;
  --it;
  return a - it->first + n <= it->second;
}

void CudaBackend::upload_async(void* dst, const void* src, size_t n) {
  if (copy_by_kernel(src, n)) {
    cuda::launch_copy_bytes(dst, src, static_cast<int64_t>(n), stream_);
    return;
  }
  RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::upload_many_async(const PinnedUpload* uploads, size_t num_uploads, const PendingIds* pending) {
  bool one = num_uploads <= static_cast<size_t>(cuda::kCopyMaxSegments);
  for (size_t i = 0; i < num_uploads; ++i) one = one && copy_by_kernel(uploads[i].pinned_src, uploads[i].nbytes);
  cuda::CopySegments c;
  for (size_t i = 0; i < num_uploads && one; ++i) {
    const PinnedUpload& u = uploads[i];
    if (u.nbytes == 0) continue;
    c.dst[c.num] = static_cast<char*>(u.dst);
    c.src[c.num] = static_cast<const char*>(u.pinned_src);
    c.bytes[c.num++] = static_cast<int64_t>(u.nbytes);
  }
  if (one && pending != nullptr && pending->ids.numel() > 0) {
    RL_CHECK(pending->ids.dtype == DType::kI32 && pending->sampled.dtype == DType::kI32);
    const auto lo = reinterpret_cast<uintptr_t>(pending->ids.data);
    const uintptr_t hi = lo + static_cast<uintptr_t>(pending->ids.numel()) * 4;
    bool inside = false;  // in one copy's destination, on its words
    for (int s = 0; s < c.num; ++s) {
      const auto d = reinterpret_cast<uintptr_t>(c.dst[s]), h = reinterpret_cast<uintptr_t>(c.src[s]);
      const auto n = static_cast<uintptr_t>(c.bytes[s]);
      inside = inside || (lo >= d && hi <= d + n && ((d | h | n | (lo - d)) & 3) == 0);
    }
    one = inside;
    c.ids = pending->ids.as<int32_t>();
    c.num_ids = pending->ids.numel();
    c.sampled = pending->sampled.as<int32_t>();
  }
  if (!one) {
    Backend::upload_many_async(uploads, num_uploads, pending);
    return;
  }
  if (c.num > 0) cuda::launch_copy_segments(c, stream_);
}

void CudaBackend::download_async(void* dst, const void* src, size_t n) {
  if (copy_by_kernel(dst, n)) {
    cuda::launch_copy_bytes(dst, src, static_cast<int64_t>(n), stream_);
    return;
  }
  RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
}

uint64_t CudaBackend::record_fence() {
  const uint64_t f = next_fence_++;
  RL_CUDA_CHECK(cudaEventRecord(events_[f % kNumFences], stream_));
  return f;
}

void CudaBackend::wait_fence(uint64_t fence) {
  if (fence == 0) return;
  RL_CHECK_MSG(fence + kNumFences >= next_fence_, "fence %llu was overwritten", static_cast<unsigned long long>(fence));
  RL_CUDA_CHECK(cudaEventSynchronize(events_[fence % kNumFences]));
}

uint64_t CudaBackend::record_marker() {
  if (marker_ref_ == nullptr) {
    RL_CUDA_CHECK(cudaEventCreate(&marker_ref_));
    RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    RL_CUDA_CHECK(cudaEventRecord(marker_ref_, stream_));
    RL_CUDA_CHECK(cudaEventSynchronize(marker_ref_));
    marker_ref_seconds_ = now_seconds();
  }
  cudaEvent_t e = nullptr;
  RL_CUDA_CHECK(cudaEventCreate(&e));
  RL_CUDA_CHECK(cudaEventRecord(e, stream_));
  markers_[next_marker_] = e;
  return next_marker_++;
}

double CudaBackend::marker_seconds(uint64_t marker) {
  auto it = markers_.find(marker);
  RL_CHECK_MSG(it != markers_.end(), "unknown profiling marker %llu", static_cast<unsigned long long>(marker));
  RL_CUDA_CHECK(cudaEventSynchronize(it->second));
  float ms = 0.0f;
  RL_CUDA_CHECK(cudaEventElapsedTime(&ms, marker_ref_, it->second));
  cudaEventDestroy(it->second);
  markers_.erase(it);
  return marker_ref_seconds_ + ms * 1e-3;
}

Status CudaBackend::start_kernel_trace() { return cuda::kernel_trace_start(); }

std::vector<Backend::KernelSpan> CudaBackend::take_kernel_spans() {
  std::vector<KernelSpan> out = cuda::kernel_trace_take();
  if (const int64_t dropped = cuda::kernel_trace_dropped(); dropped > 0) {
    log_warn("kernel trace: " + std::to_string(dropped) + " kernels past the first " +
             std::to_string(cuda::kKernelTraceMaxRecords) + " were not kept");
  }
  return out;
}

std::string CudaBackend::attention_slow_path(const QkvLayout& l, int64_t block_size) const {
  return cuda::attention_slow_path(l.head_dim, l.num_heads, l.num_kv_heads, block_size);
}

Result<std::unique_ptr<Backend>> create_cuda_backend(int device_index) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return Status::error(std::string("no CUDA device available: ") + cudaGetErrorString(err));
  }
  if (device_index < 0 || device_index >= count) {
    return Status::error("CUDA device " + std::to_string(device_index) + " does not exist (" +
                         std::to_string(count) + " device(s) present)");
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device_index));
}

}  // namespace rl

namespace rl {

void CudaBackend::apply_token_bitmask(const Tensor& logits, const Tensor& bitmask) {
  RL_CHECK(logits.dtype == DType::kF32 && bitmask.dtype == DType::kI32 && logits.ndim == 2 && bitmask.ndim == 2);
  RL_CHECK(bitmask.dim(0) == logits.dim(0) && bitmask.dim(1) * 32 >= logits.dim(1));
  cuda::launch_apply_token_bitmask(logits.as<float>(), logits.dim(0), logits.dim(1), bitmask.as<int32_t>(),
                                   bitmask.dim(1), stream_);
}

}  // namespace rl
