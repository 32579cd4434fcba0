// Checks for CUDA runtime and cuBLAS calls. A failing call is an invariant violation (a bug or a broken device),
// so it aborts with file:line and the library's error string, like RL_CHECK.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define RL_CUDA_CHECK(expr)                                                                          \
  do {                                                                                               \
    cudaError_t rl_err_ = (expr);                                                                    \
    if (rl_err_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: CUDA error %s: %s (in %s)\n", __FILE__, __LINE__,                \
                   cudaGetErrorName(rl_err_), cudaGetErrorString(rl_err_), #expr);                   \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

// After a kernel launch: catches bad launch configurations at the launch site (never synchronizes).
#define RL_CUDA_CHECK_LAUNCH() RL_CUDA_CHECK(cudaGetLastError())

#define RL_CUBLAS_CHECK(expr)                                                                        \
  do {                                                                                               \
    cublasStatus_t rl_st_ = (expr);                                                                  \
    if (rl_st_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      std::fprintf(stderr, "%s:%d: cuBLAS error %d (in %s)\n", __FILE__, __LINE__,                  \
                   static_cast<int>(rl_st_), #expr);                                                 \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)
