// Host launchers of the layer-library kernels (layer_ops.cu, moe.cu, attention_naive.cu): LayerNorm, learned
// positions, activations, MoE routing and the grouped expert GEMMs, sliding-window/sink attention. Same rules as
// cuda_kernels.h: enqueue on `stream`, never synchronize, allocate or read device memory on the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/ops.h"

namespace rl::cuda {

// out = layer_norm(x) * w + b; with `residual` non-null: residual += x first (stored as bf16). w, b: bf16/f32.
void launch_layer_norm(uint16_t* residual, const uint16_t* x, const void* w, const void* b, DType param_dt,
                       uint16_t* out, int64_t rows, int64_t hidden, float eps, cudaStream_t stream);
// out[t, :] += table[positions[t], :]
void launch_add_position_embedding(const int32_t* positions, const void* table, DType table_dt, int64_t rows,
                                   int64_t hidden, uint16_t* out, cudaStream_t stream);
// out = act(in) (Activation); bf16.
void launch_activation(const uint16_t* in, uint16_t* out, int64_t rows, int64_t inter, const ActParams& p,
                       cudaStream_t stream);
// logits bf16 [rows, E] → ids i32 [rows, k + num_shared], weights f32 [rows, k + num_shared] (ops.h MoeRouting;
// shared experts last, weight 1). E ≤ 256; kSigmoidGroupTopK: n_group ≤ 32.
void launch_moe_route(const uint16_t* logits, int64_t rows, int64_t num_experts, const MoeRouteParams& p, int32_t* ids,
                      float* weights, cudaStream_t stream);

struct MoeArgs {
  const uint16_t* x = nullptr;   // [T, H]
  const int32_t* ids = nullptr;  // [T, k]
  const float* weights = nullptr;
  const uint16_t* gate_up = nullptr;   // [E, G, H], G = 2I (gated) or I
  const void* gate_up_bias = nullptr;  // [E, G] or null
  const uint16_t* down = nullptr;      // [E, H, I]
  const void* down_bias = nullptr;     // [E, H] or null
  DType bias_dt = DType::kBF16;
  uint16_t* out = nullptr;  // [T, H]
  int64_t num_tokens = 0;
  MoeParams p;
  void* scratch = nullptr;  // moe_scratch_bytes(p, T, 2)
};
// Permutation by expert, grouped GEMM (one launch over all experts' row tiles), activation, grouped GEMM,
// weighted combine: 6 launches whatever the number of active experts.
void launch_moe(const MoeArgs& a, cudaStream_t stream);

// Paged attention with a sliding window (> 0) and/or per-head sink logits (f32 [num_heads], may be null).
// One warp per (token, head), exact online softmax (the naive kernel's scheme).
void launch_attention_window(const AttentionArgs& a, int64_t window, const float* sinks, cudaStream_t stream);

}  // namespace rl::cuda
