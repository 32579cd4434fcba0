// The kAvx2 tier (AVX2 + FMA + F16C): f32 FMA over 8 lanes; bf16 weights widened in registers; int8
// weights by vpmaddubsw/vpmaddwd with the sign trick (|x| as u8 times w carrying x's sign, so
// |products| <= 127 * 127 and the int16 pair sums never saturate). Register tiles of MR input rows
// × 4 weight rows.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/cpu_kernels.h"
#include "core/dtype.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports (GCC
// bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Every function below is compiled for these features (clang ignores GCC's target pragma; its own
// attribute region does the same).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace rl {
namespace avx2 {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return bf16_to_f32(v); }

// y[r * ldy + j] = dot(x row r, w row j) for r < MR, j < NR; x rows stride ldx, w rows stride k.
template <int MR, int NR, typename W>
void tile(const float* x, int64_t ldx, const W* w, int64_t k, float* y, int64_t ldy) {
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load8(w + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[r][j]);
      for (int64_t t = i; t < k; ++t) s += x[r * ldx + t] * widen(w[j * k + t]);
      y[r * ldy + j] = s;
    }
  }
}

template <int NR, typename W>
void rows_block(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t j) {
  int64_t r = 0;
  for (; r + 2 <= m; r += 2) tile<2, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
  if (r < m) tile<1, NR>(x + r * k, k, w + j * k, k, y + r * n + j, n);
}

// Decode (one x row): each weight row read to its end before the next (one sequential stream for the hardware
// prefetchers; four accumulators per row), then summed (avx512_bf16's gemv16_bf16 has the measurements).
template <typename W>
void gemv_row(const float* x, const W* row, int64_t k, float* y) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8(row + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), load8(row + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), load8(row + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), load8(row + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8(row + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < k; ++i) s += x[i] * widen(row[i]);
  *y = s;
}

template <typename W>
void linear_widen(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0,
                  int64_t n1) {
  int64_t j = n0;
  if (m == 1) {
    for (; j < n1; ++j) gemv_row(x, w + j * k, k, y + j);
    return;
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

// int8: one x row (already quantised, zero-padded to a multiple of 32) against NR weight rows.
template <int MR, int NR>
void tile_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t n, int64_t k, int64_t r0,
             int64_t j0) {
  __m256i acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* wbase = w.q + j0 * k;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m256i wv[NR];
    for (int j = 0; j < NR; ++j)
      wv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wbase + j * k + i));
    for (int r = 0; r < MR; ++r) {
      __m256i xv =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.x_i8 + (r0 + r) * a.ld + i));
      __m256i ax = _mm256_abs_epi8(xv);
      for (int j = 0; j < NR; ++j) {
        __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[j], xv));
        acc[r][j] = _mm256_add_epi32(acc[r][j], _mm256_madd_epi16(p, ones));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    const int8_t* xr = a.x_i8 + (r0 + r) * a.ld;
    for (int j = 0; j < NR; ++j) {
      int32_t s = hsum_i32(acc[r][j]);
      for (int64_t t = i; t < k; ++t) s += static_cast<int32_t>(xr[t]) * wbase[j * k + t];
      y[(r0 + r) * n + j0 + j] = static_cast<float>(s) * a.x_scale[r0 + r] * w.scale[j0 + j];
    }
  }
}

template <int NR>
void rows_block_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t m, int64_t n,
                   int64_t k, int64_t j) {
  int64_t r = 0;
  for (; r + 2 <= m; r += 2) tile_i8<2, NR>(a, w, y, n, k, r, j);
  if (r < m) tile_i8<1, NR>(a, w, y, n, k, r, j);
}

}  // namespace

void linear_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t m, int64_t n,
               int64_t k, int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (m == 1) {  // decode: one row at a time, a sequential stream (see gemv_row)
    for (; j < n1; ++j) tile_i8<1, 1>(a, w, y, n, k, 0, j);
    return;
  }
  for (; j + 4 <= n1; j += 4) rows_block_i8<4>(a, w, y, m, n, k, j);
  for (; j < n1; ++j) rows_block_i8<1>(a, w, y, m, n, k, j);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_f32(float s, const float* x, float* y, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += s * x[i];
}

// bf16 rows (the bf16 KV cache) widened by load8 as the bf16 weights are.
float dot_bf16(const float* a, const uint16_t* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * widen(b[i]);
  return s;
}

void axpy_bf16(float s, const uint16_t* x, float* y, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, load8(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += s * widen(x[i]);
}

}  // namespace avx2
}  // namespace rl

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop

namespace rl {

const CpuKernels& cpu_kernels_avx2() {
  static const CpuKernels k = [] {
    CpuKernels t;
    t.isa = CpuIsa::kAvx2;
    t.linear_f32 = avx2::linear_f32;
    t.linear_bf16 = avx2::linear_bf16;
    t.linear_i8 = avx2::linear_i8;
    t.dot_f32 = avx2::dot_f32;
    t.axpy_f32 = avx2::axpy_f32;
    t.dot_bf16 = avx2::dot_bf16;
    t.axpy_bf16 = avx2::axpy_bf16;
    t.silu_mul = cpu_kernels_scalar().silu_mul;  // the compiler's loop around std::exp
    return t;
  }();
  return k;
}

}  // namespace rl
