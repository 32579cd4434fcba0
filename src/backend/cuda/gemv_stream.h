// The streaming GEMV of sm_90 (gemv_stream.cu), reached through launch_gemv's dispatch (gemv.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rl::cuda {

// y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias). x, w: bf16, 16-byte aligned, k % 8 == 0; bias [n] bf16/f32 or null;
// y bf16 or f32. gated: w is [2n, k] (gate rows, then up rows), bias [2n], and y = silu(x·gateᵀ) · (x·upᵀ) in f32
// before the one rounding (the fused SwiGLU of a gated MLP). k_per_split is set by the launcher.
// The weights are read before the previous kernel of the stream has finished (programmatic dependent launch):
// w must not be written by the kernel just before this one.
struct GemvStreamParams {
  const uint16_t* x = nullptr;
  const uint16_t* w = nullptr;
  const void* bias = nullptr;
  bool bias_f32 = false;
  void* y = nullptr;
  bool y_f32 = false;
  bool y_rounded = false;  // y f32 holding each value rounded to bf16 (plain only): a bf16 y and a cast, in one store
  bool gated = false;
  // Prologue (norm_w set; m ≤ 16, default config): each x row is replaced by rms_norm(x) * norm_w ([k], 16-byte
  // aligned) before the product, bitwise as launch_rms_norm computes it (its summation order, its rounding).
  const void* norm_w = nullptr;
  bool norm_w_f32 = false;
  float eps = 1e-6f;
  // Epilogue (residual set, plain only, y bf16): y = bf16(residual + bf16(x · wᵀ + bias)), as linear then a
  // residual add; y may be residual itself (each element is read and written by one thread).
  const uint16_t* residual = nullptr;
  int m = 0;
  int64_t n = 0, k = 0;
  int64_t k_per_split = 0;
};

// Whether this device runs the streaming GEMV for m rows (sm_90, m ≤ kSkinnyMaxM).
bool gemv_stream_supported(int64_t m);
// The tuned configuration (kernel_config.h, or RIDGELINE_CUDA_GEMV_CONFIG). Launched with programmatic dependent
// launch; split-K as a thread-block cluster (fixed reduction order).
void launch_gemv_stream(const GemvStreamParams& p, cudaStream_t stream);
// Kernel lab: config 1-9 forces a chunk × stages and split-cap configuration (gemv_stream.cu); 0 = launch_gemv_stream.
void launch_gemv_stream_lab(const GemvStreamParams& p, cudaStream_t stream, int config);

}  // namespace rl::cuda
