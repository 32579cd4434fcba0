// The kAvx512 tier (AVX-512 F/BW/VL/DQ): f32 FMA over 16 lanes. f32 weights load directly; bf16
// weights are widened in registers (zero-extend to 32 bits, shift left 16), so no f32 copy of a
// weight ever exists. Register tiles of MR input rows × NR weight rows; each weight tile is read
// once per MR rows of x. int8 weights use the AVX2 kernel (this tier has no VNNI and no 512-bit
// vpsignb).
#include "backend/cpu/cpu_kernels_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_kernels.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports (GCC
// bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Every function below is compiled for these features (clang ignores GCC's target pragma; its own
// attribute region does the same).
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

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 load16_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16_tail(const uint16_t* p, __mmask16 m) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

// y[r * ldy + j] = dot(x row r, w row j) for r < MR, j < NR; x rows stride ldx, w rows stride k.
template <int MR, int NR, typename W>
void tile(const float* x, int64_t ldx, const W* w, int64_t k, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load16(w + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * ldx + i);
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load16_tail(w + j * k + i, m);
    for (int r = 0; r < MR; ++r) {
      __m512 xv = _mm512_maskz_loadu_ps(m, x + r * ldx + i);
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) y[r * ldy + j] = _mm512_reduce_add_ps(acc[r][j]);
}

template <int NR, typename W>
void rows_block(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t j) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4) tile<4, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
  switch (m - r) {
    case 3:
      tile<3, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
      break;
    case 2:
      tile<2, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
      break;
    case 1:
      tile<1, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
      break;
    default:
      break;
  }
}

// Decode (one x row): 16 weight rows, each read to its end before the next (one sequential stream for the
// hardware prefetchers, four accumulators per row), their sums reduced together (avx512_bf16's gemv16_bf16 has
// the measurements).
template <typename W>
void gemv16(const float* x, const W* w, int64_t k, float* y) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) {
    const W* row = w + j * k;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load16(row + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), load16(row + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), load16(row + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), load16(row + i + 48), a3);
    }
    for (; i + 16 <= k; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load16(row + i), a0);
    if (i < k) {
      const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), load16_tail(row + i, m), a1);
    }
    acc[j] = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  }
  _mm512_storeu_ps(y, avx512_inl::reduce16(acc));
}

template <typename W>
void linear_widen(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0,
                  int64_t n1) {
  int64_t j = n0;
  if (m == 1) {
    for (; j + 16 <= n1; j += 16) gemv16(x, w + j * k, k, y + j);
  }
  for (; j + 4 <= n1; j += 4) rows_block<4>(x, w, y, m, n, k, j);
  for (; j < n1; ++j) rows_block<1>(x, w, y, m, n, k, j);
}

void linear_f32(const LinearActs& a, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                int64_t n0, int64_t n1) {
  if (m <= kGemvMaxRows) {
    linear_widen(a.x, w, y, m, n, k, n0, n1);
  } else {
    cpu_sgemm_slice(a.x, w, y, m, n, k, n0, n1);
  }
}

void linear_bf16(const LinearActs& a, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                 int64_t n0, int64_t n1) {
  linear_widen(a.x, w, y, m, n, k, n0, n1);
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void axpy_f32(float s, const float* x, float* y, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(sv, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        y + i, m,
        _mm512_fmadd_ps(sv, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// bf16 rows (the bf16 KV cache), widened by load16 as the bf16 weights are.
float dot_bf16(const float* a, const uint16_t* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), load16_tail(b + i, m), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void axpy_bf16(float s, const uint16_t* x, float* y, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(sv, load16(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(sv, load16_tail(x + i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Keys in chunks of 16: the 16 scores of a query head come from 16 FMA chains over d reduced together
// (avx512_inl::reduce16); the chunk's K and V rows are read once for all the group's heads while they sit in L1;
// the softmax is online (running max m, sum l, output o rescaled by exp(m_old - m_new) per chunk). KV float: the
// f32 cache; uint16_t: the bf16 cache, each K/V vector widened by load16 as it is read (exact), so both compute
// the same operations in the same order on the same values.
namespace {

template <typename KV>
bool attn_group(const AttnGroupArgsT<KV>& a) {
  constexpr int64_t kMaxD = 256, kMaxGroup = 16;
  if (a.d % 16 != 0 || a.d > kMaxD || a.group > kMaxGroup || a.group < 1 || a.nk < 1) return false;
  const int64_t d = a.d, vecs = d / 16;
  alignas(64) float o[kMaxGroup * kMaxD];
  float m[kMaxGroup], l[kMaxGroup];
  for (int64_t g = 0; g < a.group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    for (int64_t c = 0; c < d; ++c) o[g * d + c] = 0.0f;
  }
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < a.nk; j0 += 16) {
    const int cnt = static_cast<int>(std::min<int64_t>(16, a.nk - j0));
    const KV* kr[16];
    const KV* vr[16];
    for (int t = 0; t < 16; ++t) {
      const int64_t j = j0 + std::min(t, cnt - 1);  // past the end: repeat the last key (masked below)
      const int64_t slot = static_cast<int64_t>(a.table[j / a.bs]) * a.bs + j % a.bs;
      kr[t] = a.k + slot * a.slot_stride;
      vr[t] = a.v + slot * a.slot_stride;
    }
    const __mmask16 valid = static_cast<__mmask16>((1u << cnt) - 1);
    for (int64_t g = 0; g < a.group; ++g) {
      const float* q = a.q + g * d;
      __m512 acc[16];
      for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t c = 0; c < vecs; ++c) {
        const __m512 qv = _mm512_loadu_ps(q + c * 16);
        for (int t = 0; t < 16; ++t) acc[t] = _mm512_fmadd_ps(qv, load16(kr[t] + c * 16), acc[t]);
      }
      const __m512 s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid,
                                          _mm512_mul_ps(avx512_inl::reduce16(acc), scale));
      const float m_new = std::max(m[g], _mm512_reduce_max_ps(s));
      const float corr = std::exp(m[g] - m_new);  // m[g] = -inf at the first chunk: 0
      alignas(64) float p[16];
      _mm512_store_ps(p, s);
      float sum = 0.0f;
      for (int t = 0; t < 16; ++t) {
        p[t] = std::exp(p[t] - m_new);  // masked keys: exp(-inf) = 0
        sum += p[t];
      }
      l[g] = l[g] * corr + sum;
      m[g] = m_new;
      float* og = o + g * d;
      const __m512 cv = _mm512_set1_ps(corr);
      for (int64_t c = 0; c < vecs; ++c) {
        __m512 ov = _mm512_mul_ps(_mm512_load_ps(og + c * 16), cv);
        for (int t = 0; t < cnt; ++t) ov = _mm512_fmadd_ps(_mm512_set1_ps(p[t]), load16(vr[t] + c * 16), ov);
        _mm512_store_ps(og + c * 16, ov);
      }
    }
  }
  for (int64_t g = 0; g < a.group; ++g) {
    const __m512 inv = _mm512_set1_ps(1.0f / l[g]);
    for (int64_t c = 0; c < vecs; ++c) {
      _mm512_storeu_ps(a.out + g * d + c * 16, _mm512_mul_ps(_mm512_load_ps(o + g * d + c * 16), inv));
    }
  }
  return true;
}

}  // namespace

bool attn_group_f32(const AttnGroupArgs& a) { return attn_group(a); }

namespace {

void silu_mul(const float* gate, const float* up, float* out, int64_t n) { avx512_inl::silu_mul(gate, up, out, n); }

}  // namespace
bool attn_group_bf16(const AttnGroupArgsBf16& a) { return attn_group(a); }

}  // namespace avx512
}  // namespace rl

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop

namespace rl {

// The table itself is built with the baseline target: only the kernels carry AVX-512 code.
const CpuKernels& cpu_kernels_avx512() {
  static const CpuKernels k = [] {
    CpuKernels t = cpu_kernels_avx2();
    t.isa = CpuIsa::kAvx512;
    t.bf16_acts = false;
    t.linear_f32 = avx512::linear_f32;
    t.linear_bf16 = avx512::linear_bf16;
    t.dot_f32 = avx512::dot_f32;
    t.axpy_f32 = avx512::axpy_f32;
    t.dot_bf16 = avx512::dot_bf16;
    t.axpy_bf16 = avx512::axpy_bf16;
    t.attn_group_f32 = avx512::attn_group_f32;
    t.attn_group_bf16 = avx512::attn_group_bf16;
    t.attn_span_f32 = avx512::attn_span_f32;
    t.attn_span_bf16 = avx512::attn_span_bf16;
    t.attn_span_fp8 = avx512::attn_span_fp8;
    t.silu_mul = avx512::silu_mul;
    return t;
  }();
  return k;
}

}  // namespace rl
