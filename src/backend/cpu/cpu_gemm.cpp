// CPU GEMM for linear layers: y [M, N] = x [M, K] · wᵀ, w [N, K] (the PyTorch/HF weight layout).
// Work is split over N (output features) across the pool; each thread calls single-threaded OpenBLAS on its
// slice, so the pool is the only source of threads. bf16 weights: for small M (decode) a fused
// convert-and-dot GEMV streams the weights once; for larger M each thread converts a panel of weight rows to f32
// and runs sgemm on it, so conversion cost is amortised over M.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace rl {

namespace {

// Row panel for the bf16 → f32 conversion path: 64 rows × K stays in L2 for K up to a few thousand.
constexpr int64_t kPanelRows = 64;
// Up to this many input rows, the streaming GEMV path is used (f32 and bf16 weights).
constexpr int64_t kGemvMaxRows = 4;

void ensure_blas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

inline float bf16f(uint16_t h) { return bf16_to_f32(h); }
inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return bf16f(v); }

// Dot products of `m` input rows with weight rows [n0, n1), 4 weight rows at a time for memory-level
// parallelism. The inner loops vectorise (shift + fma) under -O3.
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

}  // namespace

void cpu_gemm_f32(ThreadPool& pool, const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) {
  if (m <= kGemvMaxRows) {  // decode: stream the weights once; sgemm's packing does not pay at M this small
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) { gemv_rows(x, w, y, m, n, k, b, e); }, 16);
    return;
  }
  ensure_blas_single_threaded();
  // Slices of N in multiples of 16 keep each thread's output columns cache-line aligned.
  pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(e - b),
                static_cast<int>(k), 1.0f, x, static_cast<int>(k), w + b * k, static_cast<int>(k), 0.0f, y + b,
                static_cast<int>(n));
  }, 16);
}

void cpu_gemm_bf16(ThreadPool& pool, const float* x, const uint16_t* w, float* y, int64_t m, int64_t n,
                   int64_t k) {
  if (m <= kGemvMaxRows) {
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) { gemv_rows(x, w, y, m, n, k, b, e); }, 16);
    return;
  }
  ensure_blas_single_threaded();
  pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    std::vector<float> panel(static_cast<size_t>(kPanelRows * k));
    for (int64_t j = b; j < e; j += kPanelRows) {
      int64_t rows = std::min(kPanelRows, e - j);
      convert_to_f32(w + j * k, DType::kBF16, panel.data(), static_cast<size_t>(rows * k));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                  static_cast<int>(k), 1.0f, x, static_cast<int>(k), panel.data(), static_cast<int>(k), 0.0f,
                  y + j, static_cast<int>(n));
    }
  }, kPanelRows);
}

}  // namespace rl
