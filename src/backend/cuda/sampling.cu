// Sampling on the device: the argmax of f32 logits rows (ties → the lowest id), and the one sampling path of
// ops.h (SampleRowParams) for every parameter, so a step downloads token ids, never num_seqs × vocab logits.
#include <cfloat>
#include <climits>
#include <cmath>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/sampling_filters.cuh"
#include "core/check.h"

namespace rl::cuda {

namespace {

constexpr int kArgmaxThreads = 1024;

__device__ inline bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// One block per row: each thread scans a strided slice, then a warp-shuffle and shared-memory reduction.
__global__ void argmax_rows_kernel(const float* logits, int64_t vocab, int32_t* out) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
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

// Probabilities are accumulated in 2^-40 fixed point so the top-p histogram is exact and order-independent.
constexpr double kMassScale = 1099511627776.0;

constexpr int kScanUnroll = 8;  // loads in flight a thread in sample_kernel's passes over its slice

__device__ __forceinline__ float ld(const float* row, int64_t i) {
  const float v = row[i];
  return v != v ? -INFINITY : v;  // NaN never wins and is never kept
}

__device__ __forceinline__ unsigned long long mass_of(float logp) {
  return static_cast<unsigned long long>(static_cast<double>(expf(logp)) * kMassScale);
}

__device__ __forceinline__ bool ranks_before(float va, int a, float vb, int b) {
  return va > vb || (va == vb && a < b);
}

// Sums v over the block; every thread gets the total. scratch: >= 32 entries of shared memory.
__device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0ull;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double block_sum_f64(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A row is sampled by a thread-block cluster of kSampleCluster blocks (sm_90; one block elsewhere), block r
// owning the vocabulary slice [r·S, (r+1)·S). Every reduction over the row (any non-finite, the argmax, the
// top-p total, each radix pass's histogram, the race's winner) is a block reduction of the slice followed by
// one exchange through distributed shared memory: each block writes its partial into its own slot, the cluster
// barrier publishes it, and every block combines all the partials in rank order, so all blocks hold the same
// result without a second barrier. Each reduction site has its own slot (the histograms alternate between two
// buffers), and a block leaves only after the cluster's last barrier, so no partial is overwritten or freed
// while another block may still read it. The results are those of one block over the whole row: counts and
// fixed-point masses are integers, and argmaxes break ties by the lowest id.
// (H200, 128k vocabulary, one block per row: 463 µs for top-k 50 + top-p 0.95, 25 µs greedy.)
// Up to kSampleCluster blocks a row, as many as keep the grid in one wave (a block takes a whole SM): at batch 64
// eight blocks a row made 512 blocks in four waves, 64 µs a greedy step (ncu, Llama-3.1-8B, session 15).
constexpr int kSampleCluster = 8;
int sample_cluster_for(int64_t rows, int num_sms) {
  int c = kSampleCluster;
  while (c > 1 && rows * c > num_sms) c /= 2;
  return c;
}

struct ArgmaxSlot {
  float v;
  int i;
};

// The cluster's argmax of every block's (v, i); slot: this reduction site's __shared__ slot.
__device__ __forceinline__ void cluster_argmax(float v, int i, ArgmaxSlot* slot, float* bv, int* bi) {
  if (threadIdx.x == 0) *slot = ArgmaxSlot{v, i};
  cl_sync();
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (unsigned r = 0; r < cl_size(); ++r) {
    const ArgmaxSlot o = *cl_map(slot, r);
    if (o.i != INT_MAX && (best_i == INT_MAX || o.v > best || (o.v == best && o.i < best_i))) {
      best = o.v;
      best_i = o.i;
    }
  }
  *bv = best;
  *bi = best_i;
}

__device__ __forceinline__ unsigned long long cluster_sum_u64(unsigned long long v, unsigned long long* slot) {
  if (threadIdx.x == 0) *slot = v;
  cl_sync();
  unsigned long long t = 0;
  for (unsigned r = 0; r < cl_size(); ++r) t += *cl_map(slot, r);
  return t;
}

__device__ __forceinline__ bool cluster_or(bool v, int* slot) {
  if (threadIdx.x == 0) *slot = v ? 1 : 0;
  cl_sync();
  int t = 0;
  for (unsigned r = 0; r < cl_size(); ++r) t |= *cl_map(slot, r);
  return t != 0;
}

// The row's token into out_tokens and, where the row names it, into pinned host memory (SampleRowParams::host_token,
// mapped: the store crosses the bus as the kernel runs, and the host reads it after a fence).
__device__ __forceinline__ void put_token(const SampleBatch& b, const SampleRowParams& p, int64_t r, int32_t token) {
  b.out_tokens[r] = token;
  if (p.host_token != nullptr) *p.host_token = token;
}

// The steps of ops.h (SampleRowParams) in order, as the CPU reference (cpu_sampling.cpp); grid (cluster, rows).
// Top-k and top-p thresholds come from an MSB-first radix select over order-preserving keys (4 passes of 8 bits;
// counts for top-k, fixed-point mass for top-p), then an exponential race among the kept tokens. The raw
// logprobs and teacher-forced rows (rare) are computed by block 0 over the whole row, as with one block.
// __launch_bounds__: 1024 threads leave 64 registers a thread; without the bound the forced-token branch took the
// kernel to 72 and every launch failed ("too many resources requested for launch", seen on the H200).
__global__ void __launch_bounds__(kSampleThreads, 1) sample_kernel(float* logits, int64_t vocab, SampleBatch b) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t r_id = blockIdx.y;
  float* row = logits + r_id * vocab;
  const SampleRowParams p = b.params[r_id];
  const int64_t words = (vocab + 31) / 32;
  const unsigned rank = cl_rank(), nranks = cl_size();
  const int64_t span = (vocab + nranks - 1) / nranks;
  const int64_t lo = span * rank < vocab ? span * rank : vocab;
  const int64_t hi = lo + span < vocab ? lo + span : vocab;
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ double sd[32];
  __shared__ unsigned long long hist[2][256];
  __shared__ unsigned long long tot[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ unsigned long long s_rest;
  // Exchange slots, one per reduction site.
  __shared__ int x_raw_bad, x_processed_bad;
  __shared__ ArgmaxSlot x_top, x_race;
  __shared__ unsigned long long x_total;
  const int tid = threadIdx.x;

  // A plain row: nothing changes its logits before the choice (no bias, no min_tokens suppression in force, no
  // mask, no penalties), and it wants no logprobs and forces no token. Its raw logits are the ones the choice reads,
  // so the choice's pass finds NaN and +Inf itself (a greedy decode's every row): no raw pass, no exchange for it.
  const bool plain = p.num_logprobs < 0 && p.forced_token < 0 && p.bias_begin == p.bias_end &&
                     !(static_cast<int64_t>(p.step) < p.min_tokens && p.suppress_begin < p.suppress_end) &&
                     p.mask_row < 0 && p.penalty_slot < 0;

  // 0. A numerically broken model (NaN or +Inf among the raw logits) fails the row (ops.h, kSampleNonFinite).
  //    The slice's passes load kScanUnroll elements a thread before using any: one load in flight at a time left
  //    each pass waiting on L2 latency.
  bool raw_bad = false;
  for (int64_t base = lo + tid; !plain && base < hi; base += static_cast<int64_t>(blockDim.x) * kScanUnroll) {
    float x[kScanUnroll];
#pragma unroll
    for (int j = 0; j < kScanUnroll; ++j) {
      const int64_t i = base + static_cast<int64_t>(j) * blockDim.x;
      x[j] = i < hi ? row[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kScanUnroll; ++j) raw_bad |= !(x[j] < INFINITY);
  }
  if (!plain && cluster_or(__syncthreads_or(raw_bad), &x_raw_bad)) {
    if (tid == 0 && rank == 0) {
      put_token(b, p, r_id, kSampleNonFinite);
      if (p.num_logprobs >= 0) b.out_logprobs[r_id] = 0.0f;
    }
    cl_sync();
    return;
  }

  // 1. Raw logprobs (block 0, the whole row; the others wait before any processor changes the row).
  float lse = 0.0f;
  if (p.num_logprobs >= 0 && rank == 0) {
    float lm = -INFINITY;
    for (int64_t i = tid; i < vocab; i += blockDim.x) lm = fmaxf(lm, ld(row, i));
    const float m = block_max(lm, sv);
    double part = 0.0;
    float* raw = b.raw_scratch + r_id * vocab;
    for (int64_t i = tid; i < vocab; i += blockDim.x) {
      const float v = ld(row, i);
      raw[i] = v;
      part += exp(static_cast<double>(v - m));
    }
    lse = m + static_cast<float>(log(block_sum_f64(part, sd)));
    float pv = INFINITY;
    int pi = -1;
    const int n = static_cast<int>(p.num_logprobs < vocab ? p.num_logprobs : vocab);
    for (int k = 0; k < n; ++k) {
      float bv = -INFINITY;
      int bi = INT_MAX;
      for (int64_t i = tid; i < vocab; i += blockDim.x) {
        const float v = ld(row, i);
        if (pi >= 0 && !ranks_before(pv, pi, v, static_cast<int>(i))) continue;
        if (bi == INT_MAX || ranks_before(v, static_cast<int>(i), bv, bi)) {
          bv = v;
          bi = static_cast<int>(i);
        }
      }
      const int best = block_argmax(bv, bi, sv, si);
      pv = ld(row, best);
      pi = best;
      if (tid == 0) {
        b.out_top_ids[r_id * kMaxTopLogprobs + k] = best;
        b.out_top_logprobs[r_id * kMaxTopLogprobs + k] = pv - lse;
      }
    }
  }
  if (p.forced_token >= 0) {  // teacher-forced (prompt logprobs): score the given token, sample nothing
    if (rank == 0) {
      const int f = static_cast<int>(p.forced_token < vocab ? p.forced_token : vocab - 1);
      const float fv = ld(row, f);
      unsigned long long before = 0;
      for (int64_t i = tid; i < vocab; i += blockDim.x) {
        before += ranks_before(ld(row, i), static_cast<int>(i), fv, f) ? 1ull : 0ull;
      }
      const unsigned long long rank_f = block_sum_u64(before, reinterpret_cast<unsigned long long*>(sd));
      if (tid == 0) {
        put_token(b, p, r_id, f);
        b.out_logprobs[r_id] = fv - lse;
        b.out_ranks[r_id] = static_cast<int32_t>(rank_f + 1);
      }
    }
    cl_sync();
    return;
  }
  if (p.num_logprobs >= 0) cl_sync();  // block 0 has read the raw row
  // 2. Bias, min_tokens suppression (sparse lists; each block applies the entries in its slice), then the allowed
  //    mask and 3. penalties (one dense pass over the slice). From here on a block writes and reads only its slice.
  if (!plain) {
    for (int j = p.bias_begin + tid; j < p.bias_end; j += blockDim.x) {
      const int32_t id = b.bias_ids[j];
      if (id >= lo && id < hi) row[id] = ld(row, id) + b.bias_values[j];
    }
    __syncthreads();
    if (static_cast<int64_t>(p.step) < p.min_tokens) {
      for (int j = p.suppress_begin + tid; j < p.suppress_end; j += blockDim.x) {
        const int32_t id = b.suppress_ids[j];
        if (id >= lo && id < hi) row[id] = -INFINITY;
      }
    }
    __syncthreads();
  }
  if (p.mask_row >= 0 || p.penalty_slot >= 0) {
    const uint32_t* mask = p.mask_row >= 0 ? b.allowed_mask + p.mask_row * words : nullptr;
    const int32_t* counts = p.penalty_slot >= 0 ? b.penalty_counts + p.penalty_slot * vocab : nullptr;
    const uint32_t* prompt = p.penalty_slot >= 0 ? b.prompt_bits + p.penalty_slot * words : nullptr;
    for (int64_t i = lo + tid; i < hi; i += blockDim.x) {
      float v = ld(row, i);
      if (mask && !((mask[i >> 5] >> (i & 31)) & 1u)) v = -INFINITY;
      if (counts) {
        const int32_t c = counts[i];
        if (p.repetition_penalty != 1.0f && (c > 0 || ((prompt[i >> 5] >> (i & 31)) & 1u))) {
          v = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
        }
        if (c > 0) v -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
      }
      row[i] = v;
    }
    __syncthreads();
  }

  // 4. Choose.
  float local_max = -INFINITY;
  int local_arg = INT_MAX;
  bool broken = false;  // +Inf or NaN after the processors (an infinite bias)
  for (int64_t base = lo + tid; base < hi; base += static_cast<int64_t>(blockDim.x) * kScanUnroll) {
    float x[kScanUnroll];
#pragma unroll
    for (int j = 0; j < kScanUnroll; ++j) {
      const int64_t i = base + static_cast<int64_t>(j) * blockDim.x;
      x[j] = i < hi ? row[i] : -INFINITY;  // past the slice: never wins, never broken
    }
#pragma unroll
    for (int j = 0; j < kScanUnroll; ++j) {  // in increasing index order: ties keep the lowest id
      broken |= !(x[j] < INFINITY);
      const float v = x[j] != x[j] ? -INFINITY : x[j];
      if (v > local_max) {
        local_max = v;
        local_arg = static_cast<int>(base + static_cast<int64_t>(j) * blockDim.x);
      }
    }
  }
  const bool processed_bad = cluster_or(__syncthreads_or(broken), &x_processed_bad);
  block_argmax_vi(&local_max, &local_arg, sv, si);
  float m = -INFINITY;
  int top = INT_MAX;
  cluster_argmax(local_max, local_arg, &x_top, &m, &top);
  // A plain row's NaN or +Inf is a raw one (step 0's code); elsewhere it came from a processor (an infinite bias).
  int token = top == INT_MAX ? kSampleNothingLeft : top;
  if (processed_bad) token = plain ? kSampleNonFinite : kSampleNothingLeft;
  if (token >= 0 && p.temperature > 0.0f) {
    const float inv_t = 1.0f / p.temperature;
    int pass = 0;  // alternates the histogram buffers (see the comment above kSampleCluster)
    // The largest key t such that the weight (count or mass) of candidate keys >= t (key >= floor) reaches
    // target; the smallest candidate key when rounding never reaches it.
    auto select = [&](uint32_t floor, bool by_mass, unsigned long long target) -> uint32_t {
      if (tid == 0) {
        s_prefix = 0;
        s_mask = 0;
        s_rest = target;
      }
      for (int shift = 24; shift >= 0; shift -= 8, ++pass) {
        unsigned long long* h_own = hist[pass & 1];
        for (int h = tid; h < 256; h += blockDim.x) h_own[h] = 0;
        __syncthreads();
        const uint32_t prefix = s_prefix, mask = s_mask;
        // Warp-aggregated: the lanes of a warp that fall into the same bin add their weights with one shared atomic
        // from the lowest of them. Real and random logits alike put most of a row into a few bins of the upper
        // bytes, where one atomic per element serialised (1.25 ms for top-k + top-p over 128k ids on the H200).
        // The sums are integers (counts, fixed-point mass), so the histogram is exact whatever the grouping.
        // Each lane loads kSelectUnroll elements (coalesced across the warp) before it aggregates any: with one load
        // in flight per warp the pass waited on L2 latency (~50-90 µs a pass against ~12 µs for the argmax pass).
        // (Lab, H200: a ballot-per-distinct-bin aggregation instead of __match_any_sync was 15-45 % slower.)
        const int lane = tid & 31;
        constexpr int kSelectUnroll = 8;
        for (int64_t base = lo + static_cast<int64_t>(tid - lane) * kSelectUnroll; base < hi;
             base += static_cast<int64_t>(blockDim.x) * kSelectUnroll) {  // whole warps iterate together
          float vals[kSelectUnroll];
#pragma unroll
          for (int j = 0; j < kSelectUnroll; ++j) {
            const int64_t i = base + j * 32 + lane;
            vals[j] = i < hi ? ld(row, i) : -INFINITY;  // -inf is never a candidate (key < floor)
          }
#pragma unroll
          for (int j = 0; j < kSelectUnroll; ++j) {
            const float v = vals[j];
            const uint32_t key = order_key(v);
            int bin = -1;
            unsigned long long w = 0;
            if (key >= floor && (key & mask) == prefix) {
              bin = static_cast<int>((key >> shift) & 255u);
              w = by_mass ? mass_of((v - m) * inv_t) : 1ull;
            }
            const unsigned same = __match_any_sync(0xffffffffu, bin);
            unsigned long long sum = 0;
            if (__all_sync(0xffffffffu, same == 0xffffffffu)) {  // one bin (or none) for the whole warp
              if (bin >= 0) {
                sum = w;
                for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
              }
            } else if (by_mass) {
              for (int k = 0; k < 32; ++k) {
                const unsigned long long wk = __shfl_sync(0xffffffffu, w, k);
                if ((same >> k) & 1u) sum += wk;
              }
            } else {
              sum = static_cast<unsigned long long>(__popc(same));
            }
            if (bin >= 0 && lane == __ffs(same) - 1) atomicAdd(&h_own[bin], sum);
          }
        }
        __syncthreads();
        cl_sync();  // every block's histogram of this pass is complete
        for (int h = tid; h < 256; h += blockDim.x) {
          unsigned long long t = 0;
          for (unsigned r = 0; r < nranks; ++r) t += cl_map(h_own, r)[h];
          tot[h] = t;
        }
        __syncthreads();
        if (tid == 0) {
          unsigned long long cum = 0;
          int chosen = -1, lowest = -1;
          for (int h = 255; h >= 0; --h) {
            if (tot[h] == 0) continue;
            lowest = h;
            if (cum + tot[h] >= s_rest) {
              chosen = h;
              break;
            }
            cum += tot[h];
          }
          if (chosen < 0) chosen = lowest < 0 ? 0 : lowest;
          s_rest = s_rest > cum ? s_rest - cum : 0;
          s_prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
          s_mask = mask | (255u << shift);
        }
        __syncthreads();
      }
      return s_prefix;
    };
    uint32_t floor_key = order_key(-FLT_MAX);  // -inf is never a candidate
    if (p.top_k > 0 && p.top_k < vocab) floor_key = select(floor_key, false, static_cast<unsigned long long>(p.top_k));
    if (p.top_p < 1.0f) {
      unsigned long long part = 0;
      for (int64_t i = lo + tid; i < hi; i += blockDim.x) {
        const float v = ld(row, i);
        if (order_key(v) >= floor_key) part += mass_of((v - m) * inv_t);
      }
      const unsigned long long total =
          cluster_sum_u64(block_sum_u64(part, reinterpret_cast<unsigned long long*>(sd)), &x_total);
      unsigned long long target =
          static_cast<unsigned long long>(static_cast<double>(p.top_p) * static_cast<double>(total));
      floor_key = select(floor_key, true, target < 1 ? 1 : target);
    }
    const uint64_t stream = mix64_sample(p.seed ^ mix64_sample(p.step + 0x5851f42d4c957f2dull));
    float best = -INFINITY;
    int best_i = INT_MAX;
    for (int64_t i = lo + tid; i < hi; i += blockDim.x) {
      const float v = ld(row, i);
      if (order_key(v) < floor_key) continue;
      const float logp = (v - m) * inv_t;
      if (p.min_p > 0.0f && expf(logp) < p.min_p) continue;
      const float score = logp - logf(-logf(uniform_open(stream, static_cast<uint64_t>(i))));
      if (score > best) {
        best = score;
        best_i = static_cast<int>(i);
      }
    }
    block_argmax_vi(&best, &best_i, sv, si);
    float win = -INFINITY;
    int chosen = INT_MAX;
    cluster_argmax(best, best_i, &x_race, &win, &chosen);
    token = chosen == INT_MAX ? top : chosen;
  }
  if (tid == 0 && rank == 0) {
    put_token(b, p, r_id, token);
    if (token >= 0 && p.penalty_slot >= 0) b.penalty_counts[p.penalty_slot * vocab + token] += 1;
    if (p.num_logprobs >= 0) {
      b.out_logprobs[r_id] = token >= 0 ? b.raw_scratch[r_id * vocab + token] - lse : 0.0f;
    }
  }
  cl_sync();  // no block leaves while another may still read its exchange slots
}

// One block: resets a penalty slot to the request's known tokens.
__global__ void init_penalty_slot_kernel(PenaltySlotInit in, int32_t* counts_all, uint32_t* bits_all,
                                         int64_t vocab) {
  const int64_t words = (vocab + 31) / 32;
  int32_t* counts = counts_all + in.slot * vocab;
  uint32_t* bits = bits_all + in.slot * words;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) counts[i] = 0;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) bits[i] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < in.num_prompt; i += blockDim.x) {
    const int32_t t = in.prompt_ids[i];
    if (t >= 0 && t < vocab) atomicOr(&bits[t >> 5], 1u << (t & 31));
  }
  for (int64_t i = threadIdx.x; i < in.num_output; i += blockDim.x) {
    const int32_t t = in.output_ids[i];
    if (t >= 0 && t < vocab) atomicAdd(&counts[t], 1);
  }
}

__global__ void resolve_pending_ids_kernel(int32_t* ids, int64_t n, const int32_t* sampled) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const int32_t v = ids[t];
  if (v < 0) ids[t] = resolve_pending_id(v, sampled);
}

}  // namespace

void launch_sample(float* logits, int64_t vocab, const SampleBatch& batch, int num_sms, cudaStream_t stream) {
  launch_sample_lab(logits, vocab, batch, num_sms, stream, 0);
}

void launch_sample_lab(float* logits, int64_t vocab, const SampleBatch& batch, int num_sms, cudaStream_t stream,
                       int cluster_size) {
  if (batch.num_rows == 0) return;
  RL_CHECK_MSG(batch.num_rows <= 65535, "sample: %lld rows exceed the grid's y limit",
               static_cast<long long>(batch.num_rows));
  // One cluster of kSampleCluster blocks per row on sm_90 (pdl_supported: compute capability >= 9, which also
  // has clusters); one block per row elsewhere.
  const bool sm90 = pdl_supported();
  const unsigned cluster = !sm90              ? 1
                           : cluster_size > 0 ? static_cast<unsigned>(cluster_size)
                                              : static_cast<unsigned>(sample_cluster_for(batch.num_rows, num_sms));
  RL_CHECK_MSG(cluster <= 16, "sample: clusters of at most 16 blocks, not %u", cluster);
  // 16 is a non-portable cluster size (the kernel bench's comparison).
  launch_pdl_cluster(sample_kernel, dim3(cluster, static_cast<unsigned int>(batch.num_rows)), dim3(kSampleThreads), 0,
                     stream, cluster, logits, vocab, batch);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_init_penalty_slot(const PenaltySlotInit& init, int32_t* counts, uint32_t* bits, int64_t vocab,
                              cudaStream_t stream) {
  init_penalty_slot_kernel<<<1, 1024, 0, stream>>>(init, counts, bits, vocab);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_resolve_pending_ids(int32_t* ids, int64_t n, const int32_t* sampled, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(resolve_pending_ids_kernel, dim3(static_cast<unsigned int>((n + 255) / 256)), dim3(256), 0, stream, ids, n,
             sampled);
  RL_CUDA_CHECK_LAUNCH();
}

void launch_argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch_pdl(argmax_rows_kernel, dim3(static_cast<unsigned int>(rows)), dim3(kArgmaxThreads), 0, stream, logits,
             vocab, out);
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
