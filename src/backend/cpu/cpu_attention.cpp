// Causal GQA attention over the paged KV cache, in f32. The reference: an exact (two-pass) softmax per (query
// token, query head), reading its sequence's K/V through the block table. The AVX-512 tiers: for head dims that are
// multiples of 32, every head of a token at once over spans of its keys (attn_span_f32 / attn_span_bf16: the cache
// read in memory order, a decode token's keys split over the threads); otherwise per (query token, KV head), the
// group's query heads together with an online softmax (attn_group_f32 / attn_group_bf16). The cache holds f32, or
// bf16 (each element widened exactly to f32 as it is read; queries, scores and sums stay f32), or fp8 e4m3 (widened
// exactly too, through a table of its 256 values; the span kernel or the reference loop, no grouped kernel).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace rl {

namespace {

// The span path's smallest span, in 16-key chunks: below it, splitting a token's keys over threads costs more
// (each span permutes the queries and its partial is merged) than it gains.
constexpr int64_t kMinSpanChunks = 2;

// KV: the cache's element type (float: f32, uint16_t: bf16 bits, uint8_t: fp8 e4m3 bits).
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
  const std::vector<int32_t> seq_of = cpu_sequence_of_tokens(meta, num_tokens);

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

  const auto attn_span = attn_span_kernel(kern, kc);
  AttnSpanArgsT<KV> probe;
  probe.num_heads = num_heads;
  probe.num_kv_heads = num_kv_heads;
  probe.d = d;
  if (attn_span != nullptr && attn_span(probe)) {
    // Every head of a token at once over a span of its keys (AttnSpanArgs). With fewer tokens than two per
    // thread (decode), each token's 16-key chunks are split evenly into up to that many spans (at least
    // kMinSpanChunks chunks each), so that the threads share one token's keys; otherwise each token is one span.
    // Longest first, handed out one at a time (causal prefill: the late tokens have the most keys).
    const int64_t tasks_wanted = 2 * pool.num_threads();
    const int64_t spans_per_token = num_tokens >= tasks_wanted ? 1 : (tasks_wanted + num_tokens - 1) / num_tokens;
    struct Span {
      int64_t tok, j0, j1;
      int64_t part;  // its partial softmax in `parts` when the token has several spans, else -1
    };
    std::vector<Span> spans;
    std::vector<int64_t> first_part(static_cast<size_t>(num_tokens), -1);  // -1: one span, written directly
    std::vector<int64_t> num_spans(static_cast<size_t>(num_tokens), 1);
    int64_t num_parts = 0;
    for (int64_t tok = 0; tok < num_tokens; ++tok) {
      const int64_t nk = num_keys(tok), chunks = (nk + 15) / 16;
      const int64_t ns = std::max<int64_t>(1, std::min(spans_per_token, chunks / kMinSpanChunks));
      num_spans[static_cast<size_t>(tok)] = ns;
      if (ns > 1) first_part[static_cast<size_t>(tok)] = num_parts;
      for (int64_t i = 0; i < ns; ++i) {  // chunks [chunks * i / ns, chunks * (i + 1) / ns)
        const int64_t j0 = chunks * i / ns * 16, j1 = std::min(nk, chunks * (i + 1) / ns * 16);
        spans.push_back({tok, j0, j1, ns > 1 ? num_parts++ : -1});
      }
    }
    std::stable_sort(spans.begin(), spans.end(),
                     [](const Span& x, const Span& y) { return x.j1 - x.j0 > y.j1 - y.j0; });
    // A partial: o [num_heads, d], then m [num_heads], then l [num_heads].
    const int64_t part_floats = num_heads * (d + 2);
    std::vector<float> parts(static_cast<size_t>(num_parts * part_floats));
    std::vector<std::vector<float>> own(static_cast<size_t>(pool.num_threads()));
    cpu_parallel_tasks(pool, static_cast<int64_t>(spans.size()), [&](int64_t i, int thread) {
      const Span& sp = spans[static_cast<size_t>(i)];
      float* part;
      if (sp.part >= 0) {
        part = parts.data() + sp.part * part_floats;
      } else {
        std::vector<float>& mine = own[static_cast<size_t>(thread)];
        mine.resize(static_cast<size_t>(part_floats));
        part = mine.data();
      }
      AttnSpanArgsT<KV> a = probe;
      a.q = qkv.f32() + sp.tok * row;
      a.k = kc;
      a.v = vc;
      a.table = tables + seq_of[static_cast<size_t>(sp.tok)] * max_blocks;
      a.bs = bs;
      a.j0 = sp.j0;
      a.j1 = sp.j1;
      a.scale = meta.scale;
      a.o = part;
      a.m = part + num_heads * d;
      a.l = a.m + num_heads;
      RL_CHECK(attn_span(a));
      if (sp.part >= 0) return;
      float* o = out.f32() + sp.tok * num_heads * d;
      for (int64_t h = 0; h < num_heads; ++h) {
        const float inv = 1.0f / a.l[h];
        for (int64_t c = 0; c < d; ++c) o[h * d + c] = a.o[h * d + c] * inv;
      }
    });
    // Tokens of several spans: out = Σ_s o_s e^(m_s - M) / Σ_s l_s e^(m_s - M), M = max_s m_s.
    for (int64_t tok = 0; tok < num_tokens; ++tok) {
      const int64_t p0 = first_part[static_cast<size_t>(tok)];
      if (p0 < 0) continue;
      const int64_t np = num_spans[static_cast<size_t>(tok)];
      float* o = out.f32() + tok * num_heads * d;
      for (int64_t h = 0; h < num_heads; ++h) {
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t p = p0; p < p0 + np; ++p) {
          mx = std::max(mx, parts[static_cast<size_t>(p * part_floats + num_heads * d + h)]);
        }
        std::fill(o + h * d, o + (h + 1) * d, 0.0f);
        for (int64_t p = p0; p < p0 + np; ++p) {
          const float* part = parts.data() + p * part_floats;
          const float w = std::exp(part[num_heads * d + h] - mx);
          sum += part[num_heads * d + num_heads + h] * w;
          for (int64_t c = 0; c < d; ++c) o[h * d + c] += part[h * d + c] * w;
        }
        const float inv = 1.0f / sum;
        for (int64_t c = 0; c < d; ++c) o[h * d + c] *= inv;
      }
    }
    return;
  }

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
    case DType::kFP8E4M3:
      return paged_attention<uint8_t>(pool, kern, qkv, cache, meta, out);
    default:
      RL_CHECK_MSG(false, "CPU attention: a %s KV cache is not supported (f32, bf16 or fp8)",
                   std::string(dtype_name(cache.k.dtype)).c_str());
  }
}

}  // namespace rl
