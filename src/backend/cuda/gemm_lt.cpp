#include "backend/cuda/gemm_lt.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_config.h"
#include "core/check.h"
#include "core/log.h"

namespace rl::cuda {

LtGemm::LtGemm(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  RL_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  cublasLtDestroy(handle_);
}

// Row-major y[m, n] = x[m, k] · w[n, k]ᵀ is column-major yᵀ[n, m] = w · xᵀ where w is read as a column-major
// [k, n] matrix (ld k) transposed, and x as a column-major [k, m] matrix (ld k).
LtGemm::Plan& LtGemm::plan_for(int64_t m, int64_t n, int64_t k, DType y_dt) {
  const auto key = std::make_tuple(m, n, k, static_cast<int>(y_dt));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  RL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  RL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  RL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  const cudaDataType_t c_type = y_dt == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c_type, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
  query(p, 1);  // the heuristic's first choice; tuning asks for more
  RL_CHECK_MSG(!p.candidates.empty(), "cuBLASLt has no algorithm for m=%ld n=%ld k=%ld", static_cast<long>(m),
               static_cast<long>(n), static_cast<long>(k));
  p.algo = p.candidates[0];
  return plans_.emplace(key, p).first->second;
}

// The heuristic's best `count` algorithms for the plan's shape (at most kGemmTuneCandidates), best first.
void LtGemm::query(Plan& p, int count) {
  cublasLtMatmulPreference_t pref;
  RL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  RL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t results[kGemmTuneCandidates] = {};
  int found = 0;
  RL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref,
                                                 std::min(count, kGemmTuneCandidates), results, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  p.candidates.clear();
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(results[i].algo);
  }
}

// Times every candidate on the call's own operands (each rewrites y; the caller's launch that follows writes
// the final values) and keeps the fastest. Before each timed launch a buffer of twice the L2 is rewritten, so the
// weights come from HBM as in a decode step, not from the L2 the previous launch filled.
void LtGemm::tune(Plan& p, const void* x, const void* w, void* y, cudaStream_t stream) {
  query(p, kGemmTuneCandidates);
  RL_CHECK(!p.candidates.empty());
  const size_t n = p.candidates.size();
  p.tune.median_us.assign(n, 0.0f);
  p.tune.chosen = 0;
  p.algo = p.candidates[0];
  if (n < 2) return;
  int dev = 0, l2 = 0;
  RL_CUDA_CHECK(cudaGetDevice(&dev));
  RL_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const size_t flush_bytes = 2 * static_cast<size_t>(l2);
  void* flush = nullptr;
  if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // no room: time with a warm L2 rather than not at all
    flush = nullptr;
  }
  cudaEvent_t start, stop;
  RL_CUDA_CHECK(cudaEventCreate(&start));
  RL_CUDA_CHECK(cudaEventCreate(&stop));
  const float alpha = 1.0f, beta = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const cublasLtMatmulAlgo_t* algo = &p.candidates[i];
    // An algorithm the heuristic offered may still refuse these pointers; it is then no candidate.
    if (cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, algo, workspace_,
                       workspace_bytes_, stream) != CUBLAS_STATUS_SUCCESS) {
      p.tune.median_us[i] = -1.0f;
      continue;
    }
    float t[kGemmTuneReps];
    for (int r = 0; r < kGemmTuneReps; ++r) {
      if (flush) RL_CUDA_CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream));
      RL_CUDA_CHECK(cudaEventRecord(start, stream));
      RL_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, algo,
                                     workspace_, workspace_bytes_, stream));
      RL_CUDA_CHECK(cudaEventRecord(stop, stream));
      RL_CUDA_CHECK(cudaEventSynchronize(stop));
      RL_CUDA_CHECK(cudaEventElapsedTime(&t[r], start, stop));
    }
    std::sort(t, t + kGemmTuneReps);
    p.tune.median_us[i] = t[kGemmTuneReps / 2] * 1000.0f;
  }
  RL_CUDA_CHECK(cudaEventDestroy(start));
  RL_CUDA_CHECK(cudaEventDestroy(stop));
  if (flush) RL_CUDA_CHECK(cudaFree(flush));
  int best = 0;
  for (size_t i = 1; i < n; ++i) {
    const float ti = p.tune.median_us[i];
    if (ti > 0.0f && (p.tune.median_us[best] <= 0.0f || ti < p.tune.median_us[best])) best = static_cast<int>(i);
  }
  // The heuristic's first choice stays unless another is clearly faster (timing noise must not flip it).
  if (p.tune.median_us[0] > 0.0f && p.tune.median_us[best] > (1.0f - kGemmTuneMinGain) * p.tune.median_us[0]) {
    best = 0;
  }
  p.tune.chosen = best;
  p.algo = p.candidates[static_cast<size_t>(best)];
}

LtGemm::TuneReport LtGemm::report(int64_t m, int64_t n, int64_t k, DType y_dt) const {
  auto it = plans_.find(std::make_tuple(m, n, k, static_cast<int>(y_dt)));
  return it == plans_.end() ? TuneReport{} : it->second.tune;
}

void LtGemm::run(const void* x, const void* w, void* y, DType y_dt, int64_t m, int64_t n, int64_t k,
                 cudaStream_t stream, bool accumulate) {
  Plan& p = plan_for(m, n, k, y_dt);
  // Tuning rewrites y with each candidate: never where y holds the addend.
  if (tuning_ && !accumulate && p.tune.chosen < 0 && m <= kGemmTuneMaxM) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    RL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
      tune(p, x, w, y, stream);
      if (log_level() <= LogLevel::kDebug) {
        char head[128];
        std::snprintf(head, sizeof(head), "gemm tune m=%ld n=%ld k=%ld: kept %d; µs:", static_cast<long>(m),
                      static_cast<long>(n), static_cast<long>(k), p.tune.chosen);
        std::string line = head;
        for (float us : p.tune.median_us) {
          char v[32];
          std::snprintf(v, sizeof(v), " %.1f", static_cast<double>(us));
          line += v;
        }
        log_debug(line);
      }
    }
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  RL_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                 workspace_, workspace_bytes_, stream));
}

}  // namespace rl::cuda
