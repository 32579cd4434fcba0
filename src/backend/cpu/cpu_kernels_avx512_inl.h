// AVX-512 helpers shared by the AVX-512 tier files. Include only inside their AVX-512 target region (the
// functions take that region's target attributes), within namespace rl.
#pragma once

#include <immintrin.h>

namespace rl::avx512_inl {

// Sums of 16 vectors at once: lane j of the result = Σ lanes of a[j], by a transpose-and-add tree (about 35
// shuffles and 20 adds for all 16, against ~8 dependent operations each for 16 separate horizontal sums).
inline __m512 reduce16(const __m512* a) {
  __m512 c[8];
  for (int p = 0; p < 8; ++p) {  // c[p] 128-bit lanes: a[2p] (lanes 0, 1) and a[2p + 1] (lanes 2, 3), halves added
    const __m512 x = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44);
    const __m512 y = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xEE);
    c[p] = _mm512_add_ps(x, y);
  }
  __m512 d[4];
  for (int q = 0; q < 4; ++q) {  // d[q] lane l: 4 partial sums of a[4q + l]
    const __m512 x = _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0x88);
    const __m512 y = _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0xDD);
    d[q] = _mm512_add_ps(x, y);
  }
  // Within each lane: e (from d0, d1) lane l = [a[l] 02, a[4+l] 02, a[l] 13, a[4+l] 13] summed pairwise, etc.
  const __m512 e0 = _mm512_add_ps(_mm512_unpacklo_ps(d[0], d[1]), _mm512_unpackhi_ps(d[0], d[1]));
  const __m512 e1 = _mm512_add_ps(_mm512_unpacklo_ps(d[2], d[3]), _mm512_unpackhi_ps(d[2], d[3]));
  const __m512d e0d = _mm512_castps_pd(e0), e1d = _mm512_castps_pd(e1);
  // r lane l = [Σ a[l], Σ a[4 + l], Σ a[8 + l], Σ a[12 + l]]
  const __m512 r = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(e0d, e1d)),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(e0d, e1d)));
  // Output j = l + 4 t sits at r[4 l + t].
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(idx, r);
}

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

}  // namespace rl::avx512_inl
