// The readable reference kernels (the kScalar tier of cpu_kernels.h): y [M, N] = x [M, K] · wᵀ, w [N, K] (the
// PyTorch/HF weight layout), for output columns [n0, n1). f32 weights: for small M a streaming GEMV, else
// single-threaded OpenBLAS sgemm on the slice (the pool is the only source of threads). bf16 weights: the same
// GEMV widening each weight, or a panel of weight rows converted to f32 and handed to sgemm. int8 weights:
// integer dot products of the per-row quantised activations with the int8 rows, then both scales.
// The fast tiers (cpu_kernels_<tier>.cpp) must agree with these within rounding.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "core/dtype.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace rl {

namespace {

// Row panel for the bf16 → f32 conversion path: 64 rows × K stays in L2 for K up to a few thousand.
constexpr int64_t kPanelRows = 64;

void ensure_blas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return bf16_to_f32(v); }

// Dot products of `m` input rows with weight rows [n0, n1), 4 weight rows at a time for memory-level
// parallelism; 8 partial sums per dot product.
template <typename W>
void gemv_rows(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0, int64_t n1) {
  for (int64_t j = n0; j < n1; j += 4) {
    int64_t nj = std::min<int64_t>(4, n1 - j);
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * k;
      float acc[4] = {0, 0, 0, 0};
      for (int64_t jj = 0; jj < nj; ++jj) {
        const W* wr = w + (j + jj) * k;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        int64_t i = 0;
        for (; i + 8 <= k; i += 8) {
          s0 += xr[i] * widen(wr[i]);
          s1 += xr[i + 1] * widen(wr[i + 1]);
          s2 += xr[i + 2] * widen(wr[i + 2]);
          s3 += xr[i + 3] * widen(wr[i + 3]);
          s4 += xr[i + 4] * widen(wr[i + 4]);
          s5 += xr[i + 5] * widen(wr[i + 5]);
          s6 += xr[i + 6] * widen(wr[i + 6]);
          s7 += xr[i + 7] * widen(wr[i + 7]);
        }
        for (; i < k; ++i) s0 += xr[i] * widen(wr[i]);
        acc[jj] = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
      }
      for (int64_t jj = 0; jj < nj; ++jj) y[r * n + j + jj] = acc[jj];
    }
  }
}

void linear_f32_ref(const LinearActs& a, const float* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0,
                    int64_t n1) {
  if (m <= kGemvMaxRows) {
    gemv_rows(a.x, w, y, m, n, k, n0, n1);
    return;
  }
  cpu_sgemm_slice(a.x, w, y, m, n, k, n0, n1);
}

void linear_bf16_ref(const LinearActs& a, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                     int64_t n0, int64_t n1) {
  if (m <= kGemvMaxRows) {
    gemv_rows(a.x, w, y, m, n, k, n0, n1);
    return;
  }
  ensure_blas_single_threaded();
  std::vector<float> panel(static_cast<size_t>(kPanelRows * k));
  for (int64_t j = n0; j < n1; j += kPanelRows) {
    int64_t rows = std::min(kPanelRows, n1 - j);
    convert_to_f32(w + j * k, DType::kBF16, panel.data(), static_cast<size_t>(rows * k));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                static_cast<int>(k), 1.0f, a.x, static_cast<int>(k), panel.data(), static_cast<int>(k), 0.0f,
                y + j, static_cast<int>(n));
  }
}

void linear_i8_ref(const LinearActs& a, const I8WeightView& w, float* y, int64_t m, int64_t n, int64_t k,
                   int64_t n0, int64_t n1) {
  for (int64_t r = 0; r < m; ++r) {
    const int8_t* xr = a.x_i8 + r * a.ld;
    for (int64_t j = n0; j < n1; ++j) {
      const int8_t* wr = w.q + j * k;
      int32_t acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<int32_t>(xr[i]) * wr[i];
      y[r * n + j] = static_cast<float>(acc) * a.x_scale[r] * w.scale[j];
    }
  }
}

float dot_f32_ref(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_f32_ref(float s, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}

// A bf16 KV row: each element widened to f32, then the f32 loops above.
void silu_mul_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

float dot_bf16_ref(const float* a, const uint16_t* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * bf16_to_f32(b[i]);
  return s;
}

void axpy_bf16_ref(float s, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * bf16_to_f32(x[i]);
}

}  // namespace

void cpu_sgemm_slice(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k, int64_t n0,
                     int64_t n1) {
  ensure_blas_single_threaded();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n1 - n0),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w + n0 * k, static_cast<int>(k), 0.0f, y + n0,
              static_cast<int>(n));
}

const CpuKernels& cpu_kernels_scalar() {
  static const CpuKernels k = [] {
    CpuKernels t;
    t.isa = CpuIsa::kScalar;
    t.linear_f32 = linear_f32_ref;
    t.linear_bf16 = linear_bf16_ref;
    t.linear_i8 = linear_i8_ref;
    t.dot_f32 = dot_f32_ref;
    t.axpy_f32 = axpy_f32_ref;
    t.dot_bf16 = dot_bf16_ref;
    t.silu_mul = silu_mul_ref;
    t.axpy_bf16 = axpy_bf16_ref;
    return t;
  }();
  return k;
}

const CpuKernels& cpu_kernels(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return cpu_kernels_scalar();
    case CpuIsa::kAvx2: return cpu_kernels_avx2();
    case CpuIsa::kAvx512: return cpu_kernels_avx512();
    case CpuIsa::kAvx512Bf16: return cpu_kernels_avx512_bf16();
    case CpuIsa::kAvx512Fp16: return cpu_kernels_avx512_fp16();
  }
  return cpu_kernels_scalar();
}

}  // namespace rl
