// One head's optional RMSNorm and neox RoPE by one warp, as transformers computes them: the norm and the rotation in
// f32, one rounding to bf16. Lane l holds elements i = l + 32 j of the first half and their partners i + half
// (head_dim ≤ 256, so j < 4). qk_norm_rope_kernel (elementwise.cu) and the decode attention kernel that rotates its
// own q and the new k (decode_attention.cu, kMmaRope) share it, so both round the same bits.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace rl::cuda {

// The model constants a lane needs: its norm weights (1 without a norm) and inverse frequencies (0 where inv_freq is
// null: a kernel that passes norm_rope_head a trig table needs none). Read from memory no kernel of a step writes, so
// a kernel may load them before pdl_wait().
struct RopeLane {
  float w_lo[4], w_hi[4], freq[4];
};
__device__ __forceinline__ RopeLane rope_lane(const void* norm_w, bool norm_f32, const float* inv_freq, int64_t half) {
  const int lane = threadIdx.x & 31;
  RopeLane r;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t i = lane + 32 * j;
    r.w_lo[j] = norm_w && i < half ? load_param(norm_w, norm_f32, i) : 1.0f;
    r.w_hi[j] = norm_w && i < half ? load_param(norm_w, norm_f32, i + half) : 1.0f;
    r.freq[j] = inv_freq && i < half ? inv_freq[i] : 0.0f;
  }
  return r;
}

// src: the head's d bf16 values; norm: whether to RMS-normalise (eps) first; pos: the token's position. The rotated
// head goes to dst and, where dst2 is set, to dst2 too (either may alias src: each lane reads its elements first).
// trig: the token's table of cos (elements 0 .. d/2 - 1) then sin, as rope_trig_table computes it, or null to compute
// each lane's angles here (the same bits either way).
__device__ __forceinline__ void norm_rope_head(const RopeLane& c, const uint16_t* src, int64_t d, bool norm, float eps,
                                               float pos, uint16_t* dst, uint16_t* dst2,
                                               const float* trig = nullptr) {
  const int lane = threadIdx.x & 31;
  const int64_t half = d / 2;
  float lo[4], hi[4];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t i = lane + 32 * j;
    lo[j] = i < half ? bf16_bits_to_f32(src[i]) : 0.0f;
    hi[j] = i < half ? bf16_bits_to_f32(src[i + half]) : 0.0f;
    ss += lo[j] * lo[j] + hi[j] * hi[j];
  }
  if (norm) {
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < half) {
        lo[j] = c.w_lo[j] * (lo[j] * inv);
        hi[j] = c.w_hi[j] * (hi[j] * inv);
      }
    }
  }
  // As transformers: angle = float(position) * inv_freq in f32, then precise cos/sin.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < half) {
      float sn, cs;
      if (trig) {
        cs = trig[i];
        sn = trig[half + i];
      } else {
        sincosf(pos * c.freq[j], &sn, &cs);
      }
      const uint16_t r0 = f32_to_bf16_bits(lo[j] * cs - hi[j] * sn);
      const uint16_t r1 = f32_to_bf16_bits(hi[j] * cs + lo[j] * sn);
      dst[i] = r0;
      dst[i + half] = r1;
      if (dst2) {
        dst2[i] = r0;
        dst2[i + half] = r1;
      }
    }
  }
}

// The block's threads fill trig ([d/2] cos, then [d/2] sin) for one position: the angles norm_rope_head computes per
// lane (float(position) * inv_freq[i] in f32, precise sincosf), once a token instead of once a head.
__device__ __forceinline__ void rope_trig_table(const float* inv_freq, int64_t half, float pos, float* trig) {
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float sn, cs;
    sincosf(pos * inv_freq[i], &sn, &cs);
    trig[i] = cs;
    trig[half + i] = sn;
  }
}

}  // namespace rl::cuda
