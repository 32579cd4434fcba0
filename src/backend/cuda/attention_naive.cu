// Version 1 of paged attention (kernel lab v1): one warp per (query token, query head), keys one at a time with
// an online softmax in f32. Slow (a warp reduction per key) but shape-agnostic (head_dim ≤ 256, any block size,
// any GQA ratio): the fallback for shapes the fast kernels do not cover. Reads a bf16 or an FP8 e4m3 cache.
// The same kernel serves sliding windows and attention sinks (GPT-OSS; launch_attention_window): the key range cut
// to the window, and the softmax started from the head's sink logit (a term exp(sink - m) in the denominator, no
// value), which the fast decode / prefill kernels do not take.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/layer_kernels.h"

namespace rl::cuda {
namespace {

// The sequence whose query rows [cu[s], cu[s+1]) contain row `tok` (cu is non-decreasing).
__device__ __forceinline__ int find_seq(const int32_t* cu, int num_seqs, int64_t tok) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= tok) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// WINDOW: keys from pos - window + 1 (window > 0) and the softmax started from sinks[h] (sinks may be null).
template <bool WINDOW>
__global__ void attention_naive_kernel(AttentionArgs a, int64_t window, const float* sinks) {
  const int64_t task = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (task >= a.num_tokens * a.num_heads) return;
  const int lane = threadIdx.x & 31;
  const int64_t tok = task / a.num_heads, h = task % a.num_heads;
  const int64_t kvh = h / (a.num_heads / a.num_kv_heads), d = a.head_dim, bs = a.block_size;
  const int s = find_seq(a.cu_seqlens_q, static_cast<int>(a.num_seqs), tok);
  const int64_t qlen = a.cu_seqlens_q[s + 1] - a.cu_seqlens_q[s];
  const int64_t pos = a.seq_lens_k[s] - qlen + (tok - a.cu_seqlens_q[s]);
  const int64_t first = WINDOW && window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const uint16_t* q = a.qkv + tok * a.row + h * d;
  float qf[8], acc[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t c = lane + 32 * j;
    qf[j] = c < d ? bf16_bits_to_f32(q[c]) * a.scale : 0.0f;
    acc[j] = 0.0f;
  }
  float m = WINDOW && sinks ? sinks[h] : -INFINITY, l = WINDOW && sinks ? 1.0f : 0.0f;
  for (int64_t key = first; key <= pos; ++key) {
    const int64_t slot = static_cast<int64_t>(table[key / bs]) * bs + key % bs;
    const int64_t off = (slot * a.num_kv_heads + kvh) * d;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = lane + 32 * j;
      if (c < d) dot += qf[j] * kv_cache_elem(a.k_cache, off + c, a.kv_fp8);
    }
    dot = warp_sum(dot);
    const float m_new = fmaxf(m, dot);
    const float corr = __expf(m - m_new), p = __expf(dot - m_new);
    l = l * corr + p;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = lane + 32 * j;
      if (c < d) acc[j] = acc[j] * corr + p * kv_cache_elem(a.v_cache, off + c, a.kv_fp8);
    }
    m = m_new;
  }
  uint16_t* o = a.out + tok * a.num_heads * d + h * d;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t c = lane + 32 * j;
    if (c < d) o[c] = f32_to_bf16_bits(acc[j] * inv);
  }
}

}  // namespace

void launch_attention_naive(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t tasks = a.num_tokens * a.num_heads;
  if (tasks == 0) return;
  attention_naive_kernel<false><<<ceil_div(tasks, 4), 128, 0, stream>>>(a, 0, nullptr);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_attention_window(const AttentionArgs& a, int64_t window, const float* sinks, cudaStream_t stream) {
  const int64_t tasks = a.num_tokens * a.num_heads;
  if (tasks == 0) return;
  attention_naive_kernel<true><<<ceil_div(tasks, 4), 128, 0, stream>>>(a, window, sinks);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
