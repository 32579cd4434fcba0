// Causal GQA attention over the paged KV cache, in f32. The reference: an exact (two-pass) softmax per (query
// token, query head), reading its sequence's K/V through the block table. The fast tiers (kernel table
// attn_group_f32 / attn_group_bf16): per (query token, KV head), the group's query heads together with an online
// softmax. The cache holds f32, or bf16 (each element widened exactly to f32 as it is read; queries, scores and
// sums stay f32).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace rl {

namespace {

// KV: the cache's element type (float: f32, uint16_t: bf16 bits).
template <typename KV>
void paged_attention(ThreadPool& pool, const CpuKernels& kern, const Tensor& qkv, const KvLayer& cache,
                     const AttentionMetadata& meta, const Tensor& out) {
  const QkvLayout& l = meta.layout;
  const int64_t num_heads = l.num_heads, d = l.head_dim, row = l.row();
  const int64_t num_kv_heads = cache.num_kv_heads(), bs = cache.block_size();
  const int64_t group = num_heads / num_kv_heads;
  const int64_t max_blocks = meta.block_tables.dim(1);
  const int32_t* cu = meta.cu_seqlens_q.i32();
  const int32_t* seq_lens = meta.seq_lens_k.i32();
  const int32_t* tables = meta.block_tables.i32();
  const KV* kc = cache.k.as<KV>();
  const KV* vc = cache.v.as<KV>();

  // Flatten (token, head) into tasks; find each token's sequence by its cu_seqlens interval.
  const int64_t num_tokens = qkv.dim(0);
  std::vector<int32_t> seq_of(static_cast<size_t>(num_tokens));
  for (int64_t s = 0; s < meta.num_seqs; ++s)
    for (int32_t i = cu[s]; i < cu[s + 1]; ++i) seq_of[static_cast<size_t>(i)] = static_cast<int32_t>(s);

  // The fast tiers' kernel takes a token's whole GQA group at once (attn_group_kernel); a shape it does not take,
  // and the scalar and AVX2 tiers, run this reference per head.
  // Query token tok's keys: positions 0..pos of its sequence (causal).
  const auto num_keys = [&](int64_t tok) {
    const int32_t s = seq_of[static_cast<size_t>(tok)];
    const int64_t nk = seq_lens[s] - (cu[s + 1] - cu[s]) + (tok - cu[s]) + 1;
    RL_CHECK((nk + bs - 1) / bs <= max_blocks);
    return nk;
  };
  const auto reference_head = [&](int64_t tok, int64_t h, std::vector<float>& scores, std::vector<float>& acc) {
    const int64_t kvh = h / group;
    const int32_t s = seq_of[static_cast<size_t>(tok)];
    const int64_t nk = num_keys(tok);
    const float* qv = qkv.f32() + tok * row + h * d;
    const int32_t* table = tables + s * max_blocks;
    float mx = -INFINITY;
    for (int64_t j = 0; j < nk; ++j) {
      int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      const KV* kv = kc + (slot * num_kv_heads + kvh) * d;
      scores[static_cast<size_t>(j)] = kv_dot(kern, qv, kv, d) * meta.scale;
      mx = std::max(mx, scores[static_cast<size_t>(j)]);
    }
    float sum = 0;
    for (int64_t j = 0; j < nk; ++j) {
      float p = std::exp(scores[static_cast<size_t>(j)] - mx);
      scores[static_cast<size_t>(j)] = p;
      sum += p;
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < nk; ++j) {
      int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      const KV* vv = vc + (slot * num_kv_heads + kvh) * d;
      kv_axpy(kern, scores[static_cast<size_t>(j)], vv, acc.data(), d);
    }
    float* o = out.f32() + (tok * num_heads + h) * d;
    float inv = 1.0f / sum;
    for (int64_t c = 0; c < d; ++c) o[c] = acc[static_cast<size_t>(c)] * inv;
  };

  const auto attn_group = attn_group_kernel(kern, kc);
  if (attn_group != nullptr) {
    pool.parallel_for(num_tokens * num_kv_heads, [&](int64_t b, int64_t e, int) {
      std::vector<float> scores, acc;
      for (int64_t task = b; task < e; ++task) {
        const int64_t tok = task / num_kv_heads, kvh = task % num_kv_heads;
        const int32_t s = seq_of[static_cast<size_t>(tok)];
        AttnGroupArgsT<KV> a;
        a.q = qkv.f32() + tok * row + kvh * group * d;
        a.out = out.f32() + (tok * num_heads + kvh * group) * d;
        a.k = kc + kvh * d;
        a.v = vc + kvh * d;
        a.table = tables + s * max_blocks;
        a.group = group;
        a.d = d;
        a.bs = bs;
        a.nk = num_keys(tok);
        a.slot_stride = num_kv_heads * d;
        a.scale = meta.scale;
        if (attn_group(a)) continue;
        scores.resize(static_cast<size_t>(meta.max_seqlen_k));
        acc.resize(static_cast<size_t>(d));
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) reference_head(tok, h, scores, acc);
      }
    });
    return;
  }
  pool.parallel_for(num_tokens * num_heads, [&](int64_t b, int64_t e, int) {
    std::vector<float> scores(static_cast<size_t>(meta.max_seqlen_k));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t task = b; task < e; ++task) reference_head(task / num_heads, task % num_heads, scores, acc);
  });
}

}  // namespace

void cpu_paged_attention(ThreadPool& pool, const CpuKernels& kern, const Tensor& qkv, const KvLayer& cache,
                         const AttentionMetadata& meta, const Tensor& out) {
  RL_CHECK(cache.head_dim() == meta.layout.head_dim && cache.v.dtype == cache.k.dtype);
  switch (cache.k.dtype) {
    case DType::kF32:
      return paged_attention<float>(pool, kern, qkv, cache, meta, out);
    case DType::kBF16:
      return paged_attention<uint16_t>(pool, kern, qkv, cache, meta, out);
    default:
      RL_CHECK_MSG(false, "CPU attention: a %s KV cache is not supported (f32 or bf16)",
                   std::string(dtype_name(cache.k.dtype)).c_str());
  }
}

}  // namespace rl
