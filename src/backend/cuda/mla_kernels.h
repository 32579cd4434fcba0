// Host-side launchers of the multi-head latent attention kernels (DeepSeek MLA; ops.h MlaLayout, Backend::mla_*):
// the latent cache write with the q RoPE (mla_prepare.cu), the per-head projections (head_linear.cu) and the
// paged attention of absorbed queries over the latent rows (mla_attention.cu). bf16 activations and cache, f32
// accumulation; every launcher is graph-capturable (no host read of device data, no allocation).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace rl::cuda {

struct MlaPrepareArgs {
  const uint16_t* q = nullptr;    // bf16 [T, num_heads * (nope_dim + rope_dim)]
  const uint16_t* ckv = nullptr;  // bf16 [T, kv_lora_rank + rope_dim]
  const void* kv_norm = nullptr;  // [kv_lora_rank], bf16 or f32 (kv_norm_f32)
  bool kv_norm_f32 = false;
  const int32_t* positions = nullptr;  // [T]
  const int32_t* slots = nullptr;      // [T], negative: no cache write
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  uint16_t* q_lat = nullptr;           // bf16 [T, num_heads * latent]; columns [kv_lora_rank, latent) written
  uint16_t* cache = nullptr;           // bf16 [num_slots, latent]
  int64_t num_tokens = 0, num_heads = 0, nope_dim = 0, rope_dim = 0, kv_lora_rank = 0, num_slots = 0;
  bool interleaved = true;
  float q_rope_scale = 1.0f, eps = 1e-6f;
};
// Backend::mla_prepare: one block per token (RoPE angles once per token in shared memory).
void launch_mla_prepare(const MlaPrepareArgs& a, cudaStream_t stream);

// Backend::head_linear: y[t, b * y_stride + n] = Σ_k x[t, b * x_stride + k] · w[b, n, k] for n < N, k < K.
// x, w, y bf16. Each output element is one chain of m16n8k16 MMAs over K in increasing order, whatever T is
// (batch-invariant in both modes). Requires head_linear_supported().
bool head_linear_supported(const void* x, const void* w, const void* y, int64_t x_stride, int64_t y_stride, int64_t n,
                           int64_t k);
void launch_head_linear(const uint16_t* x, int64_t x_stride, const uint16_t* w, uint16_t* y, int64_t y_stride,
                        int64_t num_tokens, int64_t num_heads, int64_t n, int64_t k, cudaStream_t stream);

// Paged latent attention (semantics: Backend::mla_attention). Query row (token t, head h) is q_lat[t, h, :]; its
// sequence s has its positions as in Backend::attention (causal, offset by the prefix in the cache).
struct MlaAttentionArgs {
  const uint16_t* q_lat = nullptr;  // bf16 [num_tokens, num_heads * latent]
  const uint16_t* cache = nullptr;  // bf16 [num_blocks * block_size, latent]
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* seq_lens_k = nullptr;
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks]
  uint16_t* out = nullptr;                // bf16 [num_tokens, num_heads * kv_lora_rank]
  int64_t num_tokens = 0, num_seqs = 0, max_seqlen_q = 0, max_seqlen_k = 0, max_blocks = 0;
  int64_t num_heads = 0, kv_lora_rank = 0, rope_dim = 0, block_size = 0;
  float scale = 1.0f;
  int64_t latent() const { return kv_lora_rank + rope_dim; }
};
// Split partial states: per (token, head, split) the unnormalized o (f32 [kv_lora_rank]) and (m, l).
struct MlaWorkspace {
  float* data = nullptr;
  int64_t capacity_floats = 0;
};
// The tensor-core kernel serves kv_lora_rank 512 + rope 64 with a power-of-two block size; the naive kernel
// (one warp per (token, head); latent ≤ 576) serves any other shape.
bool mla_attention_fast_supported(const MlaAttentionArgs& a);
bool mla_attention_naive_supported(const MlaAttentionArgs& a);
// deterministic: the keys are cut into fixed chunks of kMlaDetChunkTiles tiles at absolute key positions, merged
// in order (a row's bits never depend on the batch). splits_override > 0 forces the split count of the default
// mode (kernel lab); force_naive runs the naive kernel.
void launch_mla_attention(const MlaAttentionArgs& a, const MlaWorkspace& ws, bool deterministic, int num_sms,
                          cudaStream_t stream, int64_t splits_override = 0, bool force_naive = false);

}  // namespace rl::cuda
