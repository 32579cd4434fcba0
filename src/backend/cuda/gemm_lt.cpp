#include "backend/cuda/gemm_lt.h"

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

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
const LtGemm::Plan& LtGemm::plan_for(int64_t m, int64_t n, int64_t k, DType y_dt) {
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
  cublasLtMatmulPreference_t pref;
  RL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  RL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  RL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  RL_CHECK_MSG(found > 0, "cuBLASLt has no algorithm for m=%ld n=%ld k=%ld", static_cast<long>(m),
               static_cast<long>(n), static_cast<long>(k));
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::run(const void* x, const void* w, void* y, DType y_dt, int64_t m, int64_t n, int64_t k,
                 cudaStream_t stream) {
  const Plan& p = plan_for(m, n, k, y_dt);
  const float alpha = 1.0f, beta = 0.0f;
  RL_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                 workspace_, workspace_bytes_, stream));
}

}  // namespace rl::cuda
