// cuBLASLt bf16 GEMM with f32 accumulation for linear at M > kGemvMaxM. Plans (layouts + the heuristic's algo)
// are cached per shape so a call after the first is a single cublasLtMatmul (capturable into a CUDA graph).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/dtype.h"

namespace rl::cuda {

class LtGemm {
 public:
  // workspace: device memory of workspace_bytes owned by the caller, used by every call.
  LtGemm(void* workspace, size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // y[m, n] (bf16 or f32, row-major) = x[m, k] · w[n, k]ᵀ; x, w bf16 row-major.
  void run(const void* x, const void* w, void* y, DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan_for(int64_t m, int64_t n, int64_t k, DType y_dt);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> plans_;
};

}  // namespace rl::cuda
