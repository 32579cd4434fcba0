// AVX-512 helpers shared by the AVX-512 tier files. Include only inside their AVX-512 target region (the
// functions take that region's target attributes), within namespace rl.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace rl::avx512_inl {

struct AddPs {
  __m512 operator()(__m512 x, __m512 y) const { return _mm512_add_ps(x, y); }
};
struct MaxPs {
  __m512 operator()(__m512 x, __m512 y) const { return _mm512_max_ps(x, y); }
};

// op over the lanes of 16 vectors at once: lane j of the result = op of the lanes of a[j], by a transpose-and-op tree
// (about 35 shuffles and 20 ops for all 16, against ~8 dependent operations each for 16 separate reductions).
template <typename Op>
inline __m512 reduce16_by(const __m512* a, Op op) {
  __m512 c[8];
  for (int p = 0; p < 8; ++p) {  // c[p] 128-bit lanes: a[2p] (lanes 0, 1) and a[2p + 1] (lanes 2, 3), halves combined
    const __m512 x = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44);
    const __m512 y = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xEE);
    c[p] = op(x, y);
  }
  __m512 d[4];
  for (int q = 0; q < 4; ++q) {  // d[q] lane l: 4 partial results of a[4q + l]
    const __m512 x = _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0x88);
    const __m512 y = _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0xDD);
    d[q] = op(x, y);
  }
  // Within each lane: e (from d0, d1) lane l = [a[l] 02, a[4+l] 02, a[l] 13, a[4+l] 13] combined pairwise, etc.
  const __m512 e0 = op(_mm512_unpacklo_ps(d[0], d[1]), _mm512_unpackhi_ps(d[0], d[1]));
  const __m512 e1 = op(_mm512_unpacklo_ps(d[2], d[3]), _mm512_unpackhi_ps(d[2], d[3]));
  const __m512d e0d = _mm512_castps_pd(e0), e1d = _mm512_castps_pd(e1);
  // r lane l = [op a[l], op a[4 + l], op a[8 + l], op a[12 + l]]
  const __m512 r = op(_mm512_castpd_ps(_mm512_unpacklo_pd(e0d, e1d)), _mm512_castpd_ps(_mm512_unpackhi_pd(e0d, e1d)));
  // Output j = l + 4 t sits at r[4 l + t].
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(idx, r);
}

// Sums of 16 vectors at once: lane j of the result = Σ lanes of a[j].
inline __m512 reduce16(const __m512* a) { return reduce16_by(a, AddPs{}); }
// Maxima of 16 vectors at once: lane j of the result = max of the lanes of a[j].
inline __m512 reduce16_max(const __m512* a) { return reduce16_by(a, MaxPs{}); }

// reduce16 for 32-bit integers (exact).
inline __m512i reduce16_epi32(const __m512i* a) {
  __m512i c[8];
  for (int p = 0; p < 8; ++p) {
    c[p] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[2 * p], a[2 * p + 1], 0x44),
                            _mm512_shuffle_i32x4(a[2 * p], a[2 * p + 1], 0xEE));
  }
  __m512i d[4];
  for (int q = 0; q < 4; ++q) {
    d[q] = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2 * q], c[2 * q + 1], 0x88),
                            _mm512_shuffle_i32x4(c[2 * q], c[2 * q + 1], 0xDD));
  }
  const __m512i e0 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[0], d[1]), _mm512_unpackhi_epi32(d[0], d[1]));
  const __m512i e1 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2], d[3]), _mm512_unpackhi_epi32(d[2], d[3]));
  const __m512i r = _mm512_add_epi32(_mm512_unpacklo_epi64(e0, e1), _mm512_unpackhi_epi64(e0, e1));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(idx, r);
}

// e^x in 16 lanes (a few ulp from std::exp; test_cpu_kernels checks SwiGLU to 1e-6): x = n ln2 + r with
// |r| <= ln2 / 2, e^r by Cephes' degree-5 minimax polynomial (expf), 2^n by vscalefps. x is clamped to
// [-104, 88.7] first: far below zero gives ~0 (callers mask exact zeros), far above gives ~3.4e38, not inf.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// SwiGLU over n elements (CpuKernels::silu_mul) with exp16: gate / (1 + e^-gate) * up.
inline void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
                                                    _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace rl::avx512_inl
