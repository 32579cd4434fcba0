// Decode attention on the AVX-512 tiers (kernel table attn_span_f32 / attn_span_bf16, cpu_kernels.h): one query
// token, every head, over a span of its keys, in 16-key chunks. Why this shape:
// - Memory order. A chunk's K rows of all KV heads are read together, then its V rows: with 16-token blocks, one
//   contiguous 32 KiB (bf16) of the cache each. The next chunk's rows are prefetched while this one is computed
//   (its addresses come from the block table, which the hardware cannot follow), into L2 (prefetcht2): a chunk's
//   K and V (64 KiB) do not fit in L1, and prefetching them there evicted the rows in use (AMD EPYC, 1 thread,
//   Qwen3-0.6B layer at 544 keys: no prefetch 199-206 us, into L1 279-311, into L2 174-191).
// - Threads split a token's keys (spans), not its heads: each thread streams its own blocks; the spans' partial
//   softmaxes merge exactly as the chunks of one span do (cpu_attention.cpp).
// - bf16 rows widen with one instruction per 16 elements: a 32-element load holds the even elements in the low
//   halves of its 32-bit lanes and the odd ones in the high halves, so `<< 16` gives the even elements as f32 and
//   `& 0xffff0000` the odd ones. The query is stored in the same (even, odd) order, so dot products see the same
//   pairs; the output accumulates in that order too and is put back in place once at the end. The widening is
//   exact, and f32 rows are read in the same order, so a bf16 cache computes bitwise what an f32 cache holding
//   the widened values computes.
// - exp in 16 lanes (avx512_inl::exp16) in place of 16 scalar calls per head and chunk, which cost as much as the
//   dot products.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_kernels_avx512.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

#include "backend/cpu/cpu_kernels_avx512_inl.h"

namespace rl {
namespace avx512 {
namespace {

constexpr int64_t kMaxD = 256;      // head dims up to this, multiples of 32
constexpr int64_t kMaxHeads = 128;  // query heads of one token

// 32 elements of a row as two f32 vectors: the even elements (e) and the odd ones (o). A bf16 row needs one
// instruction per vector; an f32 row (the f32 cache) is put in the same order with two permutes, so that both
// caches run the same arithmetic in the same order (bitwise equal results over equal values).
inline void load32(const uint16_t* p, __m512& e, __m512& o) {
  const __m512i v = _mm512_loadu_si512(p);
  e = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  o = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
inline void load32(const float* p, __m512& e, __m512& o) {
  const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  e = _mm512_permutex2var_ps(lo, even, hi);
  o = _mm512_permutex2var_ps(lo, _mm512_add_epi32(even, _mm512_set1_epi32(1)), hi);
}
// Lane i of load32's (e, o) holds element lane_source(i) of the 32.
inline int64_t lane_source(int64_t i) { return i < 16 ? 2 * i : 2 * (i - 16) + 1; }

// Rows of chunk [c0, c0 + 16): element offsets of their slots (keys past j1 repeat the last key; masked later).
inline void chunk_offsets(const int32_t* table, int64_t bs, int64_t stride, int64_t c0, int64_t j1, int64_t* off) {
  for (int t = 0; t < 16; ++t) {
    const int64_t j = std::min<int64_t>(c0 + t, j1 - 1);
    off[t] = (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * stride;
  }
}

template <typename KV>
bool attn_span(const AttnSpanArgsT<KV>& a) {
  const int64_t d = a.d, heads = a.num_heads, kv_heads = a.num_kv_heads;
  if (d % 32 != 0 || d > kMaxD || heads > kMaxHeads || kv_heads < 1 || heads % kv_heads != 0 || a.j0 % 16 != 0 ||
      a.j1 < a.j0) {
    return false;
  }
  if (a.j1 == a.j0) return true;  // the shape probe
  const int64_t group = heads / kv_heads, pairs = d / 32, stride = kv_heads * d;
  // Queries in load32's lane order; a.o accumulates in that order.
  alignas(64) float q[kMaxHeads * kMaxD];
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t p = 0; p < pairs; ++p) {
      for (int64_t i = 0; i < 32; ++i) q[h * d + p * 32 + i] = a.q[h * d + p * 32 + lane_source(i)];
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    a.m[h] = -INFINITY;
    a.l[h] = 0.0f;
    std::fill(a.o + h * d, a.o + (h + 1) * d, 0.0f);
  }
  const __m512 scale = _mm512_set1_ps(a.scale);
  int64_t off[16], next[16];
  chunk_offsets(a.table, a.bs, stride, a.j0, a.j1, off);
  for (int64_t c0 = a.j0; c0 < a.j1; c0 += 16) {
    const int cnt = static_cast<int>(std::min<int64_t>(16, a.j1 - c0));
    const bool more = c0 + 16 < a.j1;
    if (more) chunk_offsets(a.table, a.bs, stride, c0 + 16, a.j1, next);
    const __mmask16 valid = static_cast<__mmask16>((1u << cnt) - 1);
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
      const KV* kb = a.k + kvh * d;
      const KV* vb = a.v + kvh * d;
      if (more) {  // the next chunk's rows of this KV head, one prefetch per cache line, into L2 (see the top)
        constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(KV));
        for (int t = 0; t < 16; ++t) {
          for (int64_t c = 0; c < d; c += kLine) {
            _mm_prefetch(reinterpret_cast<const char*>(kb + next[t] + c), _MM_HINT_T2);
            _mm_prefetch(reinterpret_cast<const char*>(vb + next[t] + c), _MM_HINT_T2);
          }
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kvh * group + g;
        const float* qh = q + h * d;
        __m512 acc[16];
        for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t p = 0; p < pairs; ++p) {
          const __m512 qe = _mm512_load_ps(qh + p * 32), qo = _mm512_load_ps(qh + p * 32 + 16);
          for (int t = 0; t < 16; ++t) {
            __m512 e, o;
            load32(kb + off[t] + p * 32, e, o);
            acc[t] = _mm512_fmadd_ps(qo, o, _mm512_fmadd_ps(qe, e, acc[t]));
          }
        }
        const __m512 s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid,
                                            _mm512_mul_ps(avx512_inl::reduce16(acc), scale));
        const float m_new = std::max(a.m[h], _mm512_reduce_max_ps(s));
        const float corr = std::exp(a.m[h] - m_new);  // a.m[h] = -inf at the first chunk: 0
        const __m512 pv = _mm512_maskz_mov_ps(valid, avx512_inl::exp16(_mm512_sub_ps(s, _mm512_set1_ps(m_new))));
        a.l[h] = a.l[h] * corr + _mm512_reduce_add_ps(pv);
        a.m[h] = m_new;
        alignas(64) float pw[16];
        _mm512_store_ps(pw, pv);
        float* oh = a.o + h * d;
        const __m512 cv = _mm512_set1_ps(corr);
        for (int64_t p = 0; p < pairs; ++p) {
          __m512 oe = _mm512_mul_ps(_mm512_loadu_ps(oh + p * 32), cv);
          __m512 oo = _mm512_mul_ps(_mm512_loadu_ps(oh + p * 32 + 16), cv);
          for (int t = 0; t < cnt; ++t) {
            __m512 e, o;
            load32(vb + off[t] + p * 32, e, o);
            const __m512 w = _mm512_set1_ps(pw[t]);
            oe = _mm512_fmadd_ps(w, e, oe);
            oo = _mm512_fmadd_ps(w, o, oo);
          }
          _mm512_storeu_ps(oh + p * 32, oe);
          _mm512_storeu_ps(oh + p * 32 + 16, oo);
        }
      }
    }
    if (more) std::copy(next, next + 16, off);
  }
  // Back to element order.
  alignas(64) float tmp[32];
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t p = 0; p < pairs; ++p) {
      float* op = a.o + h * d + p * 32;
      for (int64_t i = 0; i < 32; ++i) tmp[lane_source(i)] = op[i];
      std::copy(tmp, tmp + 32, op);
    }
  }
  return true;
}

}  // namespace

bool attn_span_f32(const AttnSpanArgs& a) { return attn_span(a); }
bool attn_span_bf16(const AttnSpanArgsBf16& a) { return attn_span(a); }

}  // namespace avx512
}  // namespace rl

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
