// CudaBackend's multi-head latent attention ops (kernels in mla_ops.cu and mla_attention.cu; semantics in
// backend.h, layout in ops.h MlaLayout). The latent cache is bf16 [num_blocks, block_size, 1, latent].
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mla_kernels.h"

namespace rl {

namespace {

uint16_t* bf16(const Tensor& t) {
  RL_CHECK_MSG(t.dtype == DType::kBF16, "expected a bf16 tensor, got %s %s", std::string(dtype_name(t.dtype)).c_str(),
               t.shape_str().c_str());
  return static_cast<uint16_t*>(t.data);
}

}  // namespace

void CudaBackend::mla_prepare(const Tensor& q, const Tensor& ckv, const Tensor& kv_norm, const Tensor& positions,
                              const Tensor& slot_mapping, const MlaRopeParams& p, const Tensor& q_lat,
                              const KvLayer& cache) {
  const MlaLayout& l = p.layout;
  const int64_t t = q.rows();
  RL_CHECK(q.dim(-1) == l.num_heads * l.q_head() && ckv.dim(-1) == l.latent() && ckv.rows() == t);
  RL_CHECK(q_lat.dim(-1) == l.num_heads * l.latent() && q_lat.rows() == t && l.rope_dim % 2 == 0 && p.inv_freq);
  RL_CHECK(cache.head_dim() == l.latent() && cache.num_kv_heads() == 1 && kv_norm.numel() == l.kv_lora_rank);
  RL_CHECK((kv_norm.dtype == DType::kBF16 || kv_norm.dtype == DType::kF32) && positions.dtype == DType::kI32);
  RL_CHECK(slot_mapping.dtype == DType::kI32 && slot_mapping.numel() == t && positions.numel() == t);
  cuda::MlaPrepareArgs a;
  a.q = bf16(q);
  a.ckv = bf16(ckv);
  a.kv_norm = kv_norm.data;
  a.kv_norm_f32 = kv_norm.dtype == DType::kF32;
  a.positions = positions.as<int32_t>();
  a.slots = slot_mapping.as<int32_t>();
  a.inv_freq = p.inv_freq;
  a.q_lat = bf16(q_lat);
  a.cache = bf16(cache.k);
  a.num_tokens = t;
  a.num_heads = l.num_heads;
  a.nope_dim = l.nope_dim;
  a.rope_dim = l.rope_dim;
  a.kv_lora_rank = l.kv_lora_rank;
  a.num_slots = cache.k.dim(0) * cache.block_size();
  a.interleaved = p.interleaved;
  a.q_rope_scale = p.q_rope_scale;
  a.eps = p.eps;
  cuda::launch_mla_prepare(a, stream_);
}

void CudaBackend::head_linear(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y, int64_t y_stride) {
  const int64_t t = x.rows(), nb = w.dim(0), n = w.dim(1), k = w.dim(2);
  RL_CHECK(w.ndim == 3 && x.dim(-1) == nb * x_stride && y.dim(-1) == nb * y_stride && y.rows() == t);
  RL_CHECK(k <= x_stride && n <= y_stride);
  RL_CHECK_MSG(cuda::head_linear_supported(x.data, w.data, y.data, x_stride, y_stride, n, k),
               "head_linear: no CUDA kernel for strides %ld / %ld, N %ld, K %ld (K and the x stride must be multiples "
               "of 8, N and the y stride even)",
               static_cast<long>(x_stride), static_cast<long>(y_stride), static_cast<long>(n), static_cast<long>(k));
  cuda::launch_head_linear(bf16(x), x_stride, bf16(w), bf16(y), y_stride, t, nb, n, k, stream_);
}

void CudaBackend::mla_attention(const Tensor& q_lat, const KvLayer& cache, const AttentionMetadata& meta,
                                const MlaLayout& l, const Tensor& out) {
  RL_CHECK(q_lat.dim(-1) == l.num_heads * l.latent() && out.dim(-1) == l.num_heads * l.kv_lora_rank);
  RL_CHECK(out.rows() == q_lat.rows() && cache.head_dim() == l.latent() && cache.num_kv_heads() == 1);
  cuda::MlaAttentionArgs a;
  a.q_lat = bf16(q_lat);
  a.cache = bf16(cache.k);
  a.cu_seqlens_q = meta.cu_seqlens_q.as<int32_t>();
  a.seq_lens_k = meta.seq_lens_k.as<int32_t>();
  a.block_tables = meta.block_tables.as<int32_t>();
  a.out = bf16(out);
  a.num_tokens = q_lat.rows();
  a.num_seqs = meta.num_seqs;
  a.max_seqlen_q = meta.max_seqlen_q;
  a.max_seqlen_k = meta.max_seqlen_k;
  a.max_blocks = meta.block_tables.dim(1);
  a.num_heads = l.num_heads;
  a.kv_lora_rank = l.kv_lora_rank;
  a.rope_dim = l.rope_dim;
  a.block_size = cache.block_size();
  a.scale = meta.scale;
  RL_CHECK_MSG(cuda::mla_attention_fast_supported(a) || cuda::mla_attention_naive_supported(a),
               "mla_attention: no CUDA kernel for kv_lora_rank %ld + rope %ld", static_cast<long>(l.kv_lora_rank),
               static_cast<long>(l.rope_dim));
  // The partial states share the split-KV decode scratch (one attention call uses it at a time).
  const cuda::MlaWorkspace ws{decode_partials_, cuda::kDecodeWorkspaceRows * (128 + 1)};
  cuda::launch_mla_attention(a, ws, deterministic_, num_sms_, stream_, 0, attention_impl_ == AttentionImpl::kNaive);
}

}  // namespace rl
