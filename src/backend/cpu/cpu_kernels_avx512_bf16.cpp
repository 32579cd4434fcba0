// The kAvx512Bf16 tier (AVX-512 + AVX512_BF16 + AVX512_VNNI) and kAvx512Fp16 above it.
// bf16 weights: vdpbf16ps multiplies bf16 pairs and accumulates in f32, with the activations
// rounded to bf16 once per call (as llama.cpp rounds them to f16 for its F16 weights); 32 products
// per instruction. int8 weights: vpdpbusd multiplies u8 × s8 quadruples into i32; the s8
// activations are offset by +128 (x ^ 0x80) to make them unsigned and the offset is taken back with
// the weight row's precomputed sum: Σ (x + 128) w = Σ x w + 128 Σ w. 64 products per instruction.
// Register tiles of MR input rows × NR weight rows, accumulated over all of k, then reduced
// horizontally.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_kernels_avx512.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports (GCC
// bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Every function below is compiled for these features (clang ignores GCC's target pragma; its own
// attribute region does the same).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c")
#endif

#include "backend/cpu/cpu_kernels_avx512_inl.h"

namespace rl {
namespace avx512_bf16 {
namespace {

using avx512_inl::reduce16;
using avx512_inl::reduce16_epi32;

// x rows: stride ld (zero-padded to a multiple of 64), w rows: stride k.
template <int MR, int NR>
void tile_bf16(const uint16_t* x, int64_t ld, const uint16_t* w, int64_t k, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m512i wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_si512(w + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m512i xv = _mm512_loadu_si512(x + r * ld + i);
      for (int j = 0; j < NR; ++j) {
        acc[r][j] = _mm512_dpbf16_ps(acc[r][j], reinterpret_cast<__m512bh>(xv),
                                     reinterpret_cast<__m512bh>(wv[j]));
      }
    }
  }
  if (i < k) {
    const __mmask32 m = static_cast<__mmask32>((1ull << (k - i)) - 1);
    __m512i wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_epi16(m, w + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m512i xv = _mm512_loadu_si512(x + r * ld + i);  // padding is zero
      for (int j = 0; j < NR; ++j) {
        acc[r][j] = _mm512_dpbf16_ps(acc[r][j], reinterpret_cast<__m512bh>(xv),
                                     reinterpret_cast<__m512bh>(wv[j]));
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) y[r * ldy + j] = _mm512_reduce_add_ps(acc[r][j]);
}

// Decode (one x row): 16 weight rows, each read to its end before the next (one sequential stream, which the
// hardware prefetchers follow), their sums reduced together. Per row, 8 vectors (512 bytes) per iteration into two
// accumulators: against 4 vectors into four, the whole decode step's GEMVs ran 3-5 % faster on 2 threads and 13-15 %
// on one (a lab A/B over Qwen3-0.6B's 28 layers' and lm_head's shapes, alternated step by step, AMD EPYC).
void gemv16_bf16(const uint16_t* x, const uint16_t* w, int64_t k, float* y) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) {
    const uint16_t* row = w + j * k;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    // acc += x[i, i + 32) · row[i, i + 32) in bf16 pairs (the x row is zero-padded: whole loads past k are safe).
    const auto dot32 = [&](__m512 acc, int64_t i, __m512i wv) {
      return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + i)),
                              reinterpret_cast<__m512bh>(wv));
    };
    for (; i + 256 <= k; i += 256) {
      for (int u = 0; u < 256; u += 64) {
        a0 = dot32(a0, i + u, _mm512_loadu_si512(row + i + u));
        a1 = dot32(a1, i + u + 32, _mm512_loadu_si512(row + i + u + 32));
      }
    }
    for (; i + 32 <= k; i += 32) a0 = dot32(a0, i, _mm512_loadu_si512(row + i));
    if (i < k) a1 = dot32(a1, i, _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << (k - i)) - 1), row + i));
    acc[j] = _mm512_add_ps(a0, a1);
  }
  _mm512_storeu_ps(y, reduce16(acc));
}

template <int NR>
void rows_block_bf16(const LinearActs& a, const uint16_t* w, float* y, int64_t m, int64_t n,
                     int64_t k, int64_t j) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4)
    tile_bf16<4, NR>(a.x_bf16 + r * a.ld, a.ld, w + j * k, k, y + r * n + j, n);
  switch (m - r) {
    case 3:
      tile_bf16<3, NR>(a.x_bf16 + r * a.ld, a.ld, w + j * k, k, y + r * n + j, n);
      break;
    case 2:
      tile_bf16<2, NR>(a.x_bf16 + r * a.ld, a.ld, w + j * k, k, y + r * n + j, n);
      break;
    case 1:
      tile_bf16<1, NR>(a.x_bf16 + r * a.ld, a.ld, w + j * k, k, y + r * n + j, n);
      break;
    default:
      break;
  }
}

void linear_bf16(const LinearActs& a, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                 int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (m == 1) {
    for (; j + 16 <= n1; j += 16) gemv16_bf16(a.x_bf16, w + j * k, k, y + j);
  }
  for (; j + 4 <= n1; j += 4) rows_block_bf16<4>(a, w, y, m, n, k, j);
  for (; j < n1; ++j) rows_block_bf16<1>(a, w, y, m, n, k, j);
}

template <int MR, int NR>
void tile_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t n, int64_t k, int64_t r0,
             int64_t j0) {
  __m512i acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_setzero_si512();
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* wbase = w.q + j0 * k;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    __m512i wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_si512(wbase + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m512i xv = _mm512_xor_si512(_mm512_loadu_si512(a.x_i8 + (r0 + r) * a.ld + i), offset);
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[j]);
    }
  }
  if (i < k) {
    const __mmask64 m = (1ull << (k - i)) - 1;
    __m512i wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_epi8(m, wbase + j * k + i);
    for (int r = 0; r < MR; ++r) {
      __m512i xv = _mm512_xor_si512(_mm512_loadu_si512(a.x_i8 + (r0 + r) * a.ld + i), offset);
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[j]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int j = 0; j < NR; ++j) {
      const int32_t s = _mm512_reduce_add_epi32(acc[r][j]) - 128 * w.row_sum[j0 + j];
      y[(r0 + r) * n + j0 + j] = static_cast<float>(s) * a.x_scale[r0 + r] * w.scale[j0 + j];
    }
  }
}

// Decode (one x row) with int8 weights, as gemv16_bf16: 16 rows [j0, j0 + 16), each read to its end, 8 vectors per
// iteration into two accumulators (against 4 into four: the decode step's GEMVs 4-9 % faster on 2 threads, 14-20 %
// on one), and the 16 results scaled in one vector.
void gemv16_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t k, int64_t j0) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* x = a.x_i8;
  // acc += (x[i, i + 64) + 128) · wv, u8 × s8 quadruples (the x row is zero-padded: whole loads past k are safe).
  const auto dot64 = [&](__m512i acc, int64_t i, __m512i wv) {
    return _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_loadu_si512(x + i), offset), wv);
  };
  __m512i acc[16];
  for (int j = 0; j < 16; ++j) {
    const int8_t* row = w.q + (j0 + j) * k;
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 512 <= k; i += 512) {
      for (int u = 0; u < 512; u += 128) {
        a0 = dot64(a0, i + u, _mm512_loadu_si512(row + i + u));
        a1 = dot64(a1, i + u + 64, _mm512_loadu_si512(row + i + u + 64));
      }
    }
    for (; i + 64 <= k; i += 64) a0 = dot64(a0, i, _mm512_loadu_si512(row + i));
    if (i < k) a1 = dot64(a1, i, _mm512_maskz_loadu_epi8((1ull << (k - i)) - 1, row + i));
    acc[j] = _mm512_add_epi32(a0, a1);
  }
  // y = (Σ - 128 row_sum) · x_scale · w_scale, in that order (as tile_i8).
  const __m512i sums = _mm512_sub_epi32(reduce16_epi32(acc), _mm512_slli_epi32(_mm512_loadu_si512(w.row_sum + j0), 7));
  _mm512_storeu_ps(y + j0, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(a.x_scale[0])),
                                         _mm512_loadu_ps(w.scale + j0)));
}

template <int NR>
void rows_block_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t m, int64_t n,
                   int64_t k, int64_t j) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4) tile_i8<4, NR>(a, w, y, n, k, r, j);
  switch (m - r) {
    case 3:
      tile_i8<3, NR>(a, w, y, n, k, r, j);
      break;
    case 2:
      tile_i8<2, NR>(a, w, y, n, k, r, j);
      break;
    case 1:
      tile_i8<1, NR>(a, w, y, n, k, r, j);
      break;
    default:
      break;
  }
}

void linear_i8(const LinearActs& a, const I8WeightView& w, float* y, int64_t m, int64_t n,
               int64_t k, int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (m == 1) {
    for (; j + 16 <= n1; j += 16) gemv16_i8(a, w, y, k, j);
  }
  for (; j + 4 <= n1; j += 4) rows_block_i8<4>(a, w, y, m, n, k, j);
  for (; j < n1; ++j) rows_block_i8<1>(a, w, y, m, n, k, j);
}

}  // namespace
}  // namespace avx512_bf16
}  // namespace rl

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop

namespace rl {

const CpuKernels& cpu_kernels_avx512_bf16() {
  static const CpuKernels k = [] {
    CpuKernels t = cpu_kernels_avx512();
    t.isa = CpuIsa::kAvx512Bf16;
    t.bf16_acts = true;
    t.linear_bf16 = avx512_bf16::linear_bf16;
    t.linear_i8 = avx512_bf16::linear_i8;
    return t;
  }();
  return k;
}

// AVX512_FP16 adds half-precision arithmetic; no weight or activation here is f16, so this tier
// runs the kAvx512Bf16 kernels. It is detected and named so that `inspect` reports the machine
// truthfully.
const CpuKernels& cpu_kernels_avx512_fp16() {
  static const CpuKernels k = [] {
    CpuKernels t = cpu_kernels_avx512_bf16();
    t.isa = CpuIsa::kAvx512Fp16;
    return t;
  }();
  return k;
}

}  // namespace rl
