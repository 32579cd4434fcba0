// cuBLASLt bf16 GEMM with f32 accumulation for linear at M > kGemvMaxM. Plans (layouts + the heuristic's algo)
// are cached per shape so a call after the first is a single cublasLtMatmul (capturable into a CUDA graph).
// With tuning on (set_tuning), a shape's first call outside a graph capture times the heuristic's candidates on
// its own operands and keeps the fastest (kernel_config.h, "cuBLASLt tuning").
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "core/dtype.h"

namespace rl::cuda {

class LtGemm {
 public:
  // workspace: device memory of workspace_bytes owned by the caller, used by every call.
  LtGemm(void* workspace, size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // y[m, n] (bf16 or f32, row-major) = x[m, k] · w[n, k]ᵀ; x, w bf16 row-major. accumulate: y += x · wᵀ instead, y
  // added in the epilogue (beta = 1 with C = D = y, in place; cuBLASLt's kernels may round the product first).
  void run(const void* x, const void* w, void* y, DType y_dt, int64_t m, int64_t n, int64_t k, cudaStream_t stream,
           bool accumulate = false);

  // While on, run() tunes each shape (M ≤ kGemmTuneMaxM) it has not tuned yet: a one-time stall that
  // synchronizes the stream, so never on while a step is timed (and skipped while a graph is captured).
  void set_tuning(bool on) { tuning_ = on; }
  // How a shape was served: the candidates' median times (µs, heuristic order; -1: refused) and the index kept
  // (-1: not tuned).
  struct TuneReport {
    std::vector<float> median_us;
    int chosen = -1;
  };
  TuneReport report(int64_t m, int64_t n, int64_t k, DType y_dt) const;

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's, best first (1 until tuned); algo is one
    TuneReport tune;
  };
  Plan& plan_for(int64_t m, int64_t n, int64_t k, DType y_dt);
  void query(Plan& p, int count);
  void tune(Plan& p, const void* x, const void* w, void* y, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  bool tuning_ = false;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> plans_;
};

}  // namespace rl::cuda
