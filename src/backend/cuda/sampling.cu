// Greedy sampling on the device: the argmax of each f32 logits row (ties → the lowest id, as the CPU sampler),
// so a greedy decode step downloads num_seqs ids instead of num_seqs × vocab logits.
#include <cfloat>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/sampling_filters.cuh"

namespace rl::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

__device__ inline bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// One block per row: each thread scans a strided slice, then a warp-shuffle and shared-memory reduction.
__global__ void argmax_rows_kernel(const float* logits, int64_t vocab, int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float bv = -FLT_MAX;
  int bi = INT_MAX;
  bool broken = false;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    float v = row[i];
    broken |= !(v < INFINITY);  // NaN or +Inf
    if (v != v) continue;
    if (better(v, static_cast<int>(i), bv, bi)) {
      bv = v;
      bi = static_cast<int>(i);
    }
  }
  const bool row_broken = __syncthreads_or(broken);
  for (int off = 16; off > 0; off >>= 1) {
    float ov = __shfl_down_sync(0xffffffffu, bv, off);
    int oi = __shfl_down_sync(0xffffffffu, bi, off);
    if (better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int si[kArgmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x / 32;
    bv = lane < nw ? sv[lane] : -FLT_MAX;
    bi = lane < nw ? si[lane] : INT_MAX;
    for (int off = 16; off > 0; off >>= 1) {
      float ov = __shfl_down_sync(0xffffffffu, bv, off);
      int oi = __shfl_down_sync(0xffffffffu, bi, off);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    // -1: NaN or +Inf in the row, or nothing above -inf (Backend::argmax_rows).
    if (lane == 0) out[blockIdx.x] = row_broken || bi == INT_MAX ? -1 : bi;
  }
}

__device__ __forceinline__ float load_logit(const float* row, int64_t i) {
  const float v = row[i];
  return v != v ? -FLT_MAX : v;  // NaN never wins and is never kept
}

// Sums v over the block; every thread gets the total. Deterministic (fixed reduction tree).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Probabilities are accumulated in 2^-40 fixed point so the top-p histogram is exact and order-independent.
constexpr double kMassScale = 1099511627776.0;

// One block per row (DeviceSampleParams in ops.h): top-k and top-p thresholds by MSB-first radix select over
// order-preserving keys of the logits (4 passes of 8 bits each; counts for top-k, fixed-point mass for top-p),
// then an exponential race among the kept tokens.
__global__ void sample_rows_kernel(const float* logits, int64_t vocab, const DeviceSampleParams* params,
                                   int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const DeviceSampleParams p = params[blockIdx.x];
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ unsigned long long hist[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ unsigned long long s_rest;
  const int tid = threadIdx.x;

  float local_max = -FLT_MAX;
  int local_arg = INT_MAX;
  bool broken = false, any = false;
  for (int64_t i = tid; i < vocab; i += blockDim.x) {
    const float raw = row[i];
    broken |= !(raw < INFINITY);  // NaN or +Inf
    any |= raw > -INFINITY;
    const float v = load_logit(row, i);
    if (v > local_max) {
      local_max = v;
      local_arg = static_cast<int>(i);
    }
  }
  // A numerically broken row gets -1 (Backend::sample_rows); the condition is uniform over the block.
  if (__syncthreads_or(broken) || !__syncthreads_or(any)) {
    if (tid == 0) out[blockIdx.x] = -1;
    return;
  }
  if (!(p.temperature > 0.0f)) {
    const int best = block_argmax(local_max, local_arg, sv, si);
    if (tid == 0) out[blockIdx.x] = best == INT_MAX ? 0 : best;
    return;
  }
  const float m = block_max(local_max, sv);
  const float inv_t = 1.0f / p.temperature;

  // Radix select of a threshold key: the largest key t such that the weight (count or mass) of keys >= t among
  // the candidates (key >= floor) reaches `target`.
  auto select = [&](uint32_t floor, bool by_mass, unsigned long long target) -> uint32_t {
    if (tid == 0) {
      s_prefix = 0;
      s_mask = 0;
      s_rest = target;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
      __syncthreads();
      const uint32_t prefix = s_prefix, mask = s_mask;
      for (int64_t i = tid; i < vocab; i += blockDim.x) {
        const float v = load_logit(row, i);
        const uint32_t key = order_key(v);
        if (key < floor || (key & mask) != prefix) continue;
        const unsigned long long w =
            by_mass ? static_cast<unsigned long long>(__expf((v - m) * inv_t) * kMassScale) : 1ull;
        atomicAdd(&hist[(key >> shift) & 255u], w);
      }
      __syncthreads();
      if (tid == 0) {
        unsigned long long cum = 0;
        int chosen = -1, lowest = -1;
        for (int b = 255; b >= 0; --b) {
          if (hist[b] == 0) continue;
          lowest = b;
          if (cum + hist[b] >= s_rest) {
            chosen = b;
            break;
          }
          cum += hist[b];
        }
        if (chosen < 0) chosen = lowest < 0 ? 0 : lowest;  // rounding: keep the whole prefix
        s_rest = s_rest > cum ? s_rest - cum : 0;
        s_prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
        s_mask = mask | (255u << shift);
      }
      __syncthreads();
    }
    return s_prefix;
  };

  uint32_t floor_key = 0;
  if (p.top_k > 0 && p.top_k < vocab) floor_key = select(0, false, static_cast<unsigned long long>(p.top_k));
  if (p.top_p < 1.0f) {
    float part = 0.0f;
    for (int64_t i = tid; i < vocab; i += blockDim.x) {
      const float v = load_logit(row, i);
      if (order_key(v) >= floor_key) part += static_cast<float>(
          static_cast<double>(static_cast<unsigned long long>(__expf((v - m) * inv_t) * kMassScale)));
    }
    const double total = static_cast<double>(block_sum(part, sv));
    const auto target = static_cast<unsigned long long>(fmax(1.0, static_cast<double>(p.top_p) * total));
    floor_key = select(floor_key, true, target);
  }
  const uint64_t stream = mix64_sample(p.seed ^ mix64_sample(p.step + 0x5851f42d4c957f2dull));
  float best = -FLT_MAX;
  int best_i = INT_MAX;
  for (int64_t i = tid; i < vocab; i += blockDim.x) {
    const float v = load_logit(row, i);
    if (order_key(v) < floor_key) continue;
    const float logp = (v - m) * inv_t;  // log of the probability relative to the top token
    if (p.min_p > 0.0f && __expf(logp) < p.min_p) continue;
    const float score = logp - __logf(-__logf(uniform_open(stream, static_cast<uint64_t>(i))));
    if (score > best) {
      best = score;
      best_i = static_cast<int>(i);
    }
  }
  const int chosen = block_argmax(best, best_i, sv, si);
  if (tid == 0) out[blockIdx.x] = chosen == INT_MAX ? local_arg : chosen;
}

}  // namespace

void launch_sample_rows(const float* logits, int64_t rows, int64_t vocab, const DeviceSampleParams* params,
                        int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  sample_rows_kernel<<<static_cast<unsigned int>(rows), kSampleThreads, 0, stream>>>(logits, vocab, params, out);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned int>(rows), kArgmaxThreads, 0, stream>>>(logits, vocab, out);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
