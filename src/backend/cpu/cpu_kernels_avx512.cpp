// The kAvx512 tier (AVX-512 F/BW/VL/DQ): f32 FMA over 16 lanes. f32 weights load directly; bf16
// weights are widened in registers (zero-extend to 32 bits, shift left 16), so no f32 copy of a
// weight ever exists. Register tiles of MR input rows × NR weight rows; each weight tile is read
// once per MR rows of x. int8 weights use the AVX2 kernel (this tier has no VNNI and no 512-bit
// vpsignb).
#include "backend/cpu/cpu_kernels_avx512.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/cpu_kernels.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports (GCC
// bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

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

template <typename W>
void linear_widen(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0,
                  int64_t n1) {
  int64_t j = n0;
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

}  // namespace avx512
}  // namespace rl

#pragma GCC pop_options
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
    return t;
  }();
  return k;
}

}  // namespace rl
