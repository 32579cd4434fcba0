// Reference paged attention with a sliding window and attention sinks (GPT-OSS), in f32 with an exact softmax.
// Keys of the query at position p: positions max(0, p - window + 1) .. p; a sink adds exp(sink_h) to the
// softmax denominator (a logit with no value). The cache holds f32, bf16 or fp8 e4m3 (widened exactly to f32 as
// read).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace rl {

namespace {

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }
inline float widen(uint8_t x) { return fp8_e4m3_to_f32(x); }

// KV: the cache's element type (float: f32, uint16_t: bf16 bits, uint8_t: fp8 e4m3 bits).
template <typename KV>
void paged_attention_window(ThreadPool& pool, const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                            const Tensor& out) {
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
  const int64_t num_tokens = qkv.dim(0);
  const std::vector<int32_t> seq_of = cpu_sequence_of_tokens(meta, num_tokens);

  pool.parallel_for(num_tokens * num_heads, [&](int64_t b, int64_t e, int) {
    std::vector<float> scores(static_cast<size_t>(meta.max_seqlen_k));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t task = b; task < e; ++task) {
      const int64_t tok = task / num_heads, h = task % num_heads, kvh = h / group;
      const int32_t s = seq_of[static_cast<size_t>(tok)];
      const int64_t qlen = cu[s + 1] - cu[s];
      const int64_t pos = seq_lens[s] - qlen + (tok - cu[s]);
      const int64_t first = meta.sliding_window > 0 ? std::max<int64_t>(0, pos - meta.sliding_window + 1) : 0;
      RL_CHECK(pos / bs < max_blocks);
      const float* qv = qkv.f32() + tok * row + h * d;
      const int32_t* table = tables + s * max_blocks;
      float mx = meta.sinks ? meta.sinks[h] : -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
        const KV* kv = kc + (slot * num_kv_heads + kvh) * d;
        float dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += qv[c] * widen(kv[c]);
        scores[static_cast<size_t>(j - first)] = dot * meta.scale;
        mx = std::max(mx, dot * meta.scale);
      }
      float sum = meta.sinks ? std::exp(meta.sinks[h] - mx) : 0.0f;
      for (int64_t j = first; j <= pos; ++j) {
        float& sc = scores[static_cast<size_t>(j - first)];
        sc = std::exp(sc - mx);
        sum += sc;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
        const KV* vv = vc + (slot * num_kv_heads + kvh) * d;
        const float p = scores[static_cast<size_t>(j - first)];
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p * widen(vv[c]);
      }
      float* o = out.f32() + (tok * num_heads + h) * d;
      for (int64_t c = 0; c < d; ++c) o[c] = acc[static_cast<size_t>(c)] / sum;
    }
  });
}

}  // namespace

void cpu_paged_attention_window(ThreadPool& pool, const Tensor& qkv, const KvLayer& cache,
                                const AttentionMetadata& meta, const Tensor& out) {
  RL_CHECK(cache.head_dim() == meta.layout.head_dim && cache.v.dtype == cache.k.dtype);
  switch (cache.k.dtype) {
    case DType::kF32:
      return paged_attention_window<float>(pool, qkv, cache, meta, out);
    case DType::kBF16:
      return paged_attention_window<uint16_t>(pool, qkv, cache, meta, out);
    case DType::kFP8E4M3:
      return paged_attention_window<uint8_t>(pool, qkv, cache, meta, out);
    default:
      RL_CHECK_MSG(false, "CPU attention: a %s KV cache is not supported (f32, bf16 or fp8)",
                   std::string(dtype_name(cache.k.dtype)).c_str());
  }
}

}  // namespace rl
