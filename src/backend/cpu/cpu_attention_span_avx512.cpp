// Decode attention on the AVX-512 tiers (kernel table attn_span_f32 / _bf16 / _fp8, cpu_kernels.h): one query
// token, every head, over a span of its keys, in 16-key chunks. Why this shape:
// - Memory order. A chunk's K rows of all KV heads are read first (the scores of every head), then its V rows: with
//   16-token blocks, one contiguous 32 KiB (bf16) of the cache each. The next chunk's rows are prefetched while this
//   one is computed (its addresses come from the block table, which the hardware cannot follow), into L2
//   (prefetcht2): a chunk's K and V (64 KiB) do not fit in L1, and prefetching them there evicted the rows in use
//   (AMD EPYC, 1 thread, Qwen3-0.6B layer at 544 keys: no prefetch 199-206 us, into L1 279-311, into L2 174-191).
//   Two chunks ahead was no better than one.
// - The query heads of a GQA group share each row: a row is loaded and widened once for up to 4 heads
//   (heads_per_pass), and the V sums keep 8 accumulators in flight (2 were a chain of dependent FMAs per head).
// - The softmax of 16 heads at once: their maxima and sums from one transpose-and-reduce tree each, the rescale
//   factors in 16 lanes, instead of a horizontal max, a horizontal sum and a scalar exp per head and chunk, which
//   were latency chains as long as the head's dot products (544 keys, 2 threads: 117-163 -> 80-109 us per layer).
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
constexpr int64_t kMaxHeads = 128;  // query heads of one token, a multiple of 16

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
// 16 fp8 e4m3 codes (one per 32-bit lane, upper bits zero) as f32, exactly: a normal code's exponent and mantissa
// bits moved into place with the bias difference (127 - 7) added; a subnormal's mantissa m as m * 2^-9 (never a
// denormal f32 operand, so DAZ cannot touch it); 0x7f NaN; then the sign. Equal to fp8_e4m3_to_f32 (the table).
inline __m512 fp8_lanes_to_f32(__m512i c) {
  const __m512i mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
  __m512 v = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
  v = _mm512_mask_mul_ps(v, _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8)), _mm512_cvtepi32_ps(mag),
                         _mm512_set1_ps(1.0f / 512.0f));
  v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)), _mm512_set1_ps(NAN));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}
// An fp8 e4m3 row (the FP8 KV cache): the 32 bytes zero-extended to 16-bit lanes put element 2j in the low half of
// 32-bit lane j and element 2j + 1 in the high half, the same order as a bf16 row. The widening is exact, so an
// fp8 cache too computes bitwise what an f32 cache of the widened values computes.
inline void load32(const uint8_t* p, __m512& e, __m512& o) {
  const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  e = fp8_lanes_to_f32(_mm512_and_si512(w, _mm512_set1_epi32(0xffff)));
  o = fp8_lanes_to_f32(_mm512_srli_epi32(w, 16));
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

// The 16 rows at base + off[t] (d elements each) into L2, one prefetch per cache line.
template <typename KV>
inline void prefetch_rows_l2(const KV* base, const int64_t* off, int64_t d) {
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(KV));
  for (int t = 0; t < 16; ++t) {
    for (int64_t c = 0; c < d; c += kLine) _mm_prefetch(reinterpret_cast<const char*>(base + off[t] + c), _MM_HINT_T2);
  }
}

// Query heads per pass over a chunk's rows: the largest of 4, 2, 1 that divides the GQA group. The heads of a pass
// share each K and V row as it is loaded and widened (a group of 2 loads and widens each row once instead of
// twice).
inline int heads_per_pass(int64_t group) { return group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1; }

// Dot products of GS query heads (q: GS rows of d, load32 order) with the chunk's 16 keys (rows at kb + off[t]),
// reduced: s[g] lane t = q_g . k_t. Keys are taken 16 / GS at a time (GS x 16 / GS accumulators in registers), each
// (head, key) accumulated over the pairs in order, then the 16 keys of a head reduced together (reduce16).
template <int GS, typename KV>
inline void chunk_scores(const float* q, int64_t d, const KV* kb, const int64_t* off, __m512* s) {
  constexpr int kKeys = 16 / GS;
  const int64_t pairs = d / 32;
  alignas(64) __m512 dots[GS][16];
  for (int t0 = 0; t0 < 16; t0 += kKeys) {
    __m512 acc[GS][kKeys];
    for (int g = 0; g < GS; ++g)
      for (int t = 0; t < kKeys; ++t) acc[g][t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      __m512 qe[GS], qo[GS];
      for (int g = 0; g < GS; ++g) {
        qe[g] = _mm512_load_ps(q + g * d + p * 32);
        qo[g] = _mm512_load_ps(q + g * d + p * 32 + 16);
      }
      for (int t = 0; t < kKeys; ++t) {
        __m512 e, o;
        load32(kb + off[t0 + t] + p * 32, e, o);
        for (int g = 0; g < GS; ++g) acc[g][t] = _mm512_fmadd_ps(qo[g], o, _mm512_fmadd_ps(qe[g], e, acc[g][t]));
      }
    }
    for (int g = 0; g < GS; ++g)
      for (int t = 0; t < kKeys; ++t) dots[g][t0 + t] = acc[g][t];
  }
  for (int g = 0; g < GS; ++g) s[g] = avx512_inl::reduce16(dots[g]);
}

// o_g[pairs p0 .. p0 + NP) = o_g * corr_g + Σ_{t < cnt} w_g,t v_t for GS heads (o: GS rows of d, load32 order;
// w_g,t = pw[t * pw_stride + g], corr_g = corr[g]): 2 NP GS accumulators, each V row loaded and widened once for
// the GS heads.
template <int GS, int NP, typename KV>
inline void chunk_accumulate(float* o, int64_t d, int64_t p0, const KV* vb, const int64_t* off, int cnt,
                             const float* pw, int64_t pw_stride, const float* corr) {
  __m512 acc[GS][2 * NP];
  for (int g = 0; g < GS; ++g) {
    const __m512 cv = _mm512_set1_ps(corr[g]);
    for (int i = 0; i < 2 * NP; ++i) acc[g][i] = _mm512_mul_ps(_mm512_loadu_ps(o + g * d + p0 * 32 + i * 16), cv);
  }
  for (int t = 0; t < cnt; ++t) {
    for (int p = 0; p < NP; ++p) {
      __m512 e, v;
      load32(vb + off[t] + (p0 + p) * 32, e, v);
      for (int g = 0; g < GS; ++g) {
        const __m512 w = _mm512_set1_ps(pw[t * pw_stride + g]);
        acc[g][2 * p] = _mm512_fmadd_ps(w, e, acc[g][2 * p]);
        acc[g][2 * p + 1] = _mm512_fmadd_ps(w, v, acc[g][2 * p + 1]);
      }
    }
  }
  for (int g = 0; g < GS; ++g)
    for (int i = 0; i < 2 * NP; ++i) _mm512_storeu_ps(o + g * d + p0 * 32 + i * 16, acc[g][i]);
}

// Online softmax of one chunk for up to 16 heads [h0, h0 + hn) at once: s[h - h0] lane t = the score of key t
// (keys at or past cnt masked). m, l (per head) are updated; corr[h] = e^(m_old - m_new) and pw[t * 16 + h - h0] =
// e^(s - m_new) are written for chunk_accumulate. Sixteen heads' maxima and sums come from one transpose-and-add
// tree each (reduce16 with max, then add) instead of a horizontal reduction per head.
inline void chunk_softmax(const __m512* s, int hn, __mmask16 valid, float* m, float* l, float* corr, float* pw) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 sv[16], pv[16];
  for (int h = 0; h < 16; ++h) sv[h] = h < hn ? _mm512_mask_mov_ps(ninf, valid, s[h]) : _mm512_setzero_ps();
  const __mmask16 heads = static_cast<__mmask16>((1u << hn) - 1);
  const __m512 m_old = _mm512_mask_loadu_ps(ninf, heads, m);
  const __m512 m_new = _mm512_max_ps(m_old, avx512_inl::reduce16_max(sv));
  // m_old = -inf at the first chunk: corr = 0 (exp16 clamps to ~0; o and l are 0 then anyway).
  const __m512 cv = avx512_inl::exp16(_mm512_sub_ps(m_old, m_new));
  alignas(64) float mn[16];
  _mm512_store_ps(mn, m_new);
  for (int h = 0; h < 16; ++h) {
    pv[h] = _mm512_maskz_mov_ps(valid, avx512_inl::exp16(_mm512_sub_ps(sv[h], _mm512_set1_ps(mn[h]))));
  }
  const __m512 l_new = _mm512_fmadd_ps(_mm512_mask_loadu_ps(_mm512_setzero_ps(), heads, l), cv,
                                       avx512_inl::reduce16(pv));
  _mm512_mask_storeu_ps(m, heads, m_new);
  _mm512_mask_storeu_ps(l, heads, l_new);
  _mm512_mask_storeu_ps(corr, heads, cv);
  // pw[t][h]: keys by rows, heads by columns (a 16 x 16 transpose through memory; the reads are broadcasts).
  for (int h = 0; h < hn; ++h) {
    alignas(64) float row[16];
    _mm512_store_ps(row, pv[h]);
    for (int t = 0; t < 16; ++t) pw[t * 16 + h] = row[t];
  }
}

template <int GS, typename KV>
void attn_span_pass(const AttnSpanArgsT<KV>& a) {
  const int64_t d = a.d, heads = a.num_heads, kv_heads = a.num_kv_heads;
  const int64_t group = heads / kv_heads, pairs = d / 32, stride = kv_heads * d;
  constexpr int kNP = 4 / GS;  // pairs per chunk_accumulate call: 8 accumulators
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
  alignas(64) __m512 s[kMaxHeads];
  alignas(64) float pw[(kMaxHeads / 16) * 16 * 16];  // per block of 16 heads: [16 keys][16 heads]
  alignas(64) float corr[kMaxHeads];
  int64_t off[16], next[16];
  chunk_offsets(a.table, a.bs, stride, a.j0, a.j1, off);
  for (int64_t c0 = a.j0; c0 < a.j1; c0 += 16) {
    const int cnt = static_cast<int>(std::min<int64_t>(16, a.j1 - c0));
    const bool more = c0 + 16 < a.j1;
    if (more) chunk_offsets(a.table, a.bs, stride, c0 + 16, a.j1, next);
    // Scores of every head: the chunk's K rows, KV head by KV head (its block in memory order), the next chunk's K
    // rows of the same KV head prefetched into L2 (see the top).
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
      const KV* kb = a.k + kvh * d;
      if (more) prefetch_rows_l2(kb, next, d);
      for (int64_t h0 = kvh * group; h0 < (kvh + 1) * group; h0 += GS) {
        chunk_scores<GS>(q + h0 * d, d, kb, off, s + h0);
        for (int g = 0; g < GS; ++g) s[h0 + g] = _mm512_mul_ps(s[h0 + g], scale);
      }
    }
    const __mmask16 valid = static_cast<__mmask16>((1u << cnt) - 1);
    for (int64_t h0 = 0; h0 < heads; h0 += 16) {
      chunk_softmax(s + h0, static_cast<int>(std::min<int64_t>(16, heads - h0)), valid, a.m + h0, a.l + h0,
                    corr + h0, pw + h0 * 16);
    }
    // The weighted V rows, KV head by KV head, the next chunk's V rows prefetched.
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
      const KV* vb = a.v + kvh * d;
      if (more) prefetch_rows_l2(vb, next, d);
      for (int64_t h0 = kvh * group; h0 < (kvh + 1) * group; h0 += GS) {
        // Head h's weight of key t: pw[(h / 16) * 256 + t * 16 + h % 16]; the GS heads sit in one block of 16.
        const float* w = pw + (h0 / 16) * 256 + h0 % 16;
        int64_t p = 0;
        float* o = a.o + h0 * d;
        for (; p + kNP <= pairs; p += kNP) chunk_accumulate<GS, kNP>(o, d, p, vb, off, cnt, w, 16, corr + h0);
        for (; p < pairs; ++p) chunk_accumulate<GS, 1>(o, d, p, vb, off, cnt, w, 16, corr + h0);
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
}

template <typename KV>
bool attn_span(const AttnSpanArgsT<KV>& a) {
  const int64_t d = a.d, heads = a.num_heads, kv_heads = a.num_kv_heads;
  if (d % 32 != 0 || d > kMaxD || heads > kMaxHeads || kv_heads < 1 || heads % kv_heads != 0 || a.j0 % 16 != 0 ||
      a.j1 < a.j0) {
    return false;
  }
  if (a.j1 == a.j0) return true;  // the shape probe
  switch (heads_per_pass(heads / kv_heads)) {
    case 4:
      attn_span_pass<4>(a);
      break;
    case 2:
      attn_span_pass<2>(a);
      break;
    default:
      attn_span_pass<1>(a);
      break;
  }
  return true;
}

}  // namespace

bool attn_span_f32(const AttnSpanArgs& a) { return attn_span(a); }
bool attn_span_bf16(const AttnSpanArgsBf16& a) { return attn_span(a); }
bool attn_span_fp8(const AttnSpanArgsFp8& a) { return attn_span(a); }

}  // namespace avx512
}  // namespace rl

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
