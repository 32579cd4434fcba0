// Layer-library kernels: LayerNorm (+ residual add), learned positions, GELU-tanh / clamped-SwiGLU activations,
// MoE routing. bf16 in and out, f32 arithmetic.
#include <algorithm>
#include <cfloat>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/layer_kernels.h"

namespace rl::cuda {
namespace {

// One block per row; the row is kept in registers (hidden ≤ 32 * blockDim per thread pass, looped).
__global__ void layer_norm_kernel(uint16_t* residual, const uint16_t* x, const void* w, const void* b, bool f32p,
                                  uint16_t* out, int64_t hidden, float eps) {
  const int64_t r = blockIdx.x;
  const uint16_t* xr = x + r * hidden;
  uint16_t* rr = residual ? residual + r * hidden : nullptr;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = bf16_bits_to_f32(xr[i]);
    if (rr) {
      v = bf16_bits_to_f32(f32_to_bf16_bits(bf16_bits_to_f32(rr[i]) + v));
      rr[i] = f32_to_bf16_bits(v);
    }
    sum += v;
  }
  const float mean = block_sum(sum) / static_cast<float>(hidden);
  const uint16_t* src = rr ? rr : xr;
  float var = 0;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float d = bf16_bits_to_f32(src[i]) - mean;
    var += d * d;
  }
  const float inv = rsqrtf(block_sum(var) / static_cast<float>(hidden) + eps);
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = (bf16_bits_to_f32(src[i]) - mean) * inv * load_param(w, f32p, i);
    if (b) v += load_param(b, f32p, i);
    out[r * hidden + i] = f32_to_bf16_bits(v);
  }
}

__global__ void add_pos_kernel(const int32_t* positions, const void* table, bool f32t, int64_t hidden, uint16_t* out) {
  const int64_t r = blockIdx.x;
  const int64_t pos = positions[r];
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = bf16_bits_to_f32(out[r * hidden + i]) + load_param(table, f32t, pos * hidden + i);
    out[r * hidden + i] = f32_to_bf16_bits(v);
  }
}

__global__ void activation_kernel(const uint16_t* in, uint16_t* out, int64_t rows, int64_t inter, int kind, float limit,
                                  float alpha) {
  const int64_t n = rows * inter;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / inter, i = idx % inter;
    float o;
    if (kind == static_cast<int>(Activation::kGeluTanh)) {
      const float v = bf16_bits_to_f32(in[idx]);
      o = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    } else {
      const float g = bf16_bits_to_f32(in[r * 2 * inter + i]);
      const float u = bf16_bits_to_f32(in[r * 2 * inter + inter + i]);
      if (kind == static_cast<int>(Activation::kSiluGated)) {
        o = g / (1.0f + __expf(-g)) * u;
      } else {
        const float gate = fminf(g, limit), up = fminf(fmaxf(u, -limit), limit);
        o = (up + 1.0f) * gate / (1.0f + __expf(-gate * alpha));
      }
    }
    out[idx] = f32_to_bf16_bits(o);
  }
}

struct RouteArgs {
  const uint16_t* logits;
  int64_t rows;
  int num_experts, routing, k, num_shared;
  bool norm_topk;
  int n_group, topk_group;  // kSigmoidGroupTopK
  float routed_scaling_factor;
  const float* correction_bias;  // [num_experts] or null
  int32_t* ids;                  // [rows, k + num_shared]
  float* weights;
};

// Warp argmax over the lanes' (value, id) pairs; ties → the lowest id. Every lane gets the result.
__device__ __forceinline__ void warp_argmax(float& best, int& best_e) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
    if (ob > best || (ob == best && oe < best_e)) {
      best = ob;
      best_e = oe;
    }
  }
}

// One warp per row; each lane holds experts lane, lane + 32, ... (≤ 8 each, E ≤ 256). Semantics: ops.h MoeRouting
// and cpu_route_row (the CPU reference), in the same order of operations.
__global__ void moe_route_kernel(RouteArgs a) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (r >= a.rows) return;
  const int lane = threadIdx.x & 31, num_experts = a.num_experts, k = a.k, n = a.k + a.num_shared;
  float v[8], sig[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < num_experts ? bf16_bits_to_f32(a.logits[r * num_experts + e]) : -INFINITY;
    sig[j] = 0.0f;
  }
  if (a.routing == static_cast<int>(MoeRouting::kSoftmaxTopK)) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, v[j]);
    m = warp_max(m);
    float s = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[j] = lane + 32 * j < num_experts ? __expf(v[j] - m) : 0.0f;
      s += v[j];
    }
    s = warp_sum(s);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = lane + 32 * j < num_experts ? v[j] / s : -INFINITY;
  } else if (a.routing == static_cast<int>(MoeRouting::kSigmoidGroupTopK)) {
    // s = sigmoid(logit); choice = s + bias; only the topk_group groups with the largest sum of their two best
    // choices stay, the others' choices become 0 (transformers' masked_fill).
    const int per_group = num_experts / a.n_group;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int e = lane + 32 * j;
      sig[j] = e < num_experts ? 1.0f / (1.0f + expf(-v[j])) : 0.0f;
      v[j] = e < num_experts ? sig[j] + (a.correction_bias ? a.correction_bias[e] : 0.0f) : -INFINITY;
    }
    float gscore = -INFINITY;  // lane g holds group g's score (n_group ≤ 32)
    for (int g = 0; g < a.n_group; ++g) {
      float b1 = -INFINITY, b2 = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int e = lane + 32 * j;
        if (e < num_experts && e / per_group == g) {
          if (v[j] > b1) {
            b2 = b1;
            b1 = v[j];
          } else if (v[j] > b2) {
            b2 = v[j];
          }
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float o1 = __shfl_xor_sync(0xffffffffu, b1, o), o2 = __shfl_xor_sync(0xffffffffu, b2, o);
        const float n1 = fmaxf(b1, o1), n2 = fmaxf(fminf(b1, o1), fmaxf(b2, o2));
        b1 = n1;
        b2 = n2;
      }
      if (lane == g) gscore = b1 + b2;
    }
    uint32_t keep = 0;
    bool taken = false;
    for (int t = 0; t < a.topk_group; ++t) {
      const bool cand = lane < a.n_group && !taken;
      float best = cand ? gscore : -INFINITY;
      int best_g = cand ? lane : INT_MAX;
      warp_argmax(best, best_g);
      keep |= 1u << best_g;
      if (lane == best_g) taken = true;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int e = lane + 32 * j;
      if (e < num_experts && !((keep >> (e / per_group)) & 1u)) v[j] = 0.0f;
    }
  }
  float chosen_sum = 0, first = 0;
  for (int t = 0; t < k; ++t) {
    float best = -INFINITY;
    int best_e = INT_MAX;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int e = lane + 32 * j;
      if (e < num_experts && (v[j] > best || (v[j] == best && e < best_e))) {
        best = v[j];
        best_e = e;
      }
    }
    warp_argmax(best, best_e);
    float w = best;
    if (a.routing == static_cast<int>(MoeRouting::kSigmoidGroupTopK)) {
      // The weight is the unbiased score of the chosen expert (held by lane best_e % 32).
      float sv = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (lane + 32 * j == best_e) sv = sig[j];
      }
      w = __shfl_sync(0xffffffffu, sv, best_e % 32);
    }
    if (lane == best_e % 32) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (lane + 32 * j == best_e) v[j] = -INFINITY;
      }
    }
    if (t == 0) first = best;
    if (a.routing == static_cast<int>(MoeRouting::kTopKSoftmax)) w = __expf(best - first);
    chosen_sum += w;
    if (lane == 0) {
      a.ids[r * n + t] = best_e;
      a.weights[r * n + t] = w;
    }
  }
  __syncwarp();
  if (lane != 0) return;
  for (int j = 0; j < a.num_shared; ++j) {
    a.ids[r * n + k + j] = num_experts + j;
    a.weights[r * n + k + j] = 1.0f;
  }
  if (a.routing == static_cast<int>(MoeRouting::kSigmoidGroupTopK)) {
    const float denom = a.norm_topk ? chosen_sum + 1e-20f : 1.0f;
    for (int t = 0; t < k; ++t) a.weights[r * n + t] = a.weights[r * n + t] / denom * a.routed_scaling_factor;
    return;
  }
  const bool renorm = a.routing == static_cast<int>(MoeRouting::kTopKSoftmax) || a.norm_topk;
  if (renorm) {
    for (int t = 0; t < k; ++t) a.weights[r * n + t] /= chosen_sum;
  }
  if (a.routed_scaling_factor != 1.0f) {
    for (int t = 0; t < k; ++t) a.weights[r * n + t] *= a.routed_scaling_factor;
  }
}

}  // namespace

void launch_layer_norm(uint16_t* residual, const uint16_t* x, const void* w, const void* b, DType param_dt,
                       uint16_t* out, int64_t rows, int64_t hidden, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(residual, x, w, b, param_dt == DType::kF32, out,
                                                                     hidden, eps);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_add_position_embedding(const int32_t* positions, const void* table, DType table_dt, int64_t rows,
                                   int64_t hidden, uint16_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  add_pos_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(positions, table, table_dt == DType::kF32, hidden,
                                                                  out);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_activation(const uint16_t* in, uint16_t* out, int64_t rows, int64_t inter, const ActParams& p,
                       cudaStream_t stream) {
  const int64_t n = rows * inter;
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(n, 256), 65535));
  activation_kernel<<<blocks, 256, 0, stream>>>(in, out, rows, inter, static_cast<int>(p.kind), p.limit, p.alpha);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_moe_route(const uint16_t* logits, int64_t rows, int64_t num_experts, const MoeRouteParams& p, int32_t* ids,
                      float* weights, cudaStream_t stream) {
  if (rows == 0) return;
  RouteArgs a{logits,
              rows,
              static_cast<int>(num_experts),
              static_cast<int>(p.routing),
              static_cast<int>(p.top_k),
              static_cast<int>(p.num_shared),
              p.norm_topk_prob,
              static_cast<int>(p.n_group),
              static_cast<int>(p.topk_group),
              p.routed_scaling_factor,
              p.correction_bias,
              ids,
              weights};
  moe_route_kernel<<<ceil_div(rows, 4), 128, 0, stream>>>(a);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
