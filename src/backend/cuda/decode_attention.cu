// Split-KV decode attention (FlashDecoding) over the paged cache (block size 16), head_dim 64, 128 or 256. One block
// per (sequence, kv head, group chunk, split); its 4 warps walk whole pages, and one 16-byte load of each K/V row
// serves every query head of the GQA chunk (up to 4). Lanes of a row: D/8 (16 B each); a warp covers 32/(D/8)
// tokens per step.
// Softmax in the log2 domain (q pre-scaled by scale·log2 e). The grid has num_splits split slots (sized on the
// host for the longest context the launch may see, so a CUDA graph captured once serves any length); each
// sequence spreads its pages over as many of them as it can fill (from its seq_len in device memory), and the
// rest exit at once. With several active splits, each writes a partial (normalized o + lse) and the last block
// to finish merges them; with one the block writes the output.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/kernel_config.h"

namespace rl::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

struct DecodeParams {
  AttentionArgs a;
  float* partial_o;
  float* partial_lse;
  int* counters;
  int num_splits;  // split slots in the grid (gridDim.x); partial rows are strided by it
  int num_chunks;  // group / G
  int min_pages;   // pages per split at least (kDecodeWarps: one per warp)
};

template <int D, int G>
__global__ void __launch_bounds__(kDecodeWarps * 32) decode_attention_kernel(DecodeParams p) {
  pdl_wait();  // launched with PDL (cuda_launch.cuh)
  pdl_launch_dependents();
  static_assert(G <= kDecodeWarps, "the merge gives each query head of the chunk one warp");
  constexpr int kLanesPerRow = D / 8;
  constexpr int kTokPerStep = 32 / kLanesPerRow;
  constexpr int kSteps = kDecodePageSize / kTokPerStep;
  constexpr int kPass = kSteps < 8 ? kSteps : 8;  // token steps loaded at once (registers: 2 · kPass uint4)
  const AttentionArgs& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int col = lane % kLanesPerRow, sub = lane / kLanesPerRow;
  const int split = blockIdx.x, s = blockIdx.z;
  const int kvh = blockIdx.y / p.num_chunks;
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t h0 = kvh * group + (blockIdx.y % p.num_chunks) * G;
  const int64_t tok = a.cu_seqlens_q[s];
  const int seq_len = a.seq_lens_k[s];
  const int num_pages = (seq_len + kDecodePageSize - 1) / kDecodePageSize;
  // At least a page per warp. The host caps the split count at kDecodeMinPagesPerSplit pages each for the
  // longest context of the launch, so a shorter one (a graph captured for max_model_len) spreads over more splits
  // with fewer pages per warp: one page round trip per warp instead of two.
  const int pages_per_split = max(p.min_pages, (num_pages + p.num_splits - 1) / p.num_splits);
  const int num_active = (num_pages + pages_per_split - 1) / pages_per_split;
  if (split >= num_active) return;  // block-uniform, before any barrier; never counted by the merge
  const int page_begin = split * pages_per_split;
  const int page_end = min(page_begin + pages_per_split, num_pages);

  float q[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    unpack8(*reinterpret_cast<const uint4*>(a.qkv + tok * a.row + (h0 + g) * D + col * 8), q[g]);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[g][e] *= a.scale * kLog2e;
      acc[g][e] = 0.0f;
    }
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const int64_t token_stride = a.num_kv_heads * D;  // elements between consecutive slots of one head

  for (int page = page_begin + warp; page < page_end; page += kDecodeWarps) {
    const int64_t base = (static_cast<int64_t>(table[page]) * kDecodePageSize * a.num_kv_heads + kvh) * D + col * 8;
    // A page in passes of kPass token steps (two passes at head_dim 256, whose rows take a whole warp), each
    // loading its K/V rows at once and folding them into the online softmax. The first pass of a page always
    // holds its first, valid token, so m stays finite.
#pragma unroll 1
    for (int pass = 0; pass < kSteps / kPass; ++pass) {
      uint4 kv[kPass], vv[kPass];
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        const int64_t off = base + ((pass * kPass + it) * kTokPerStep + sub) * token_stride;
        kv[it] = load_stream(a.k_cache + off);
        vv[it] = load_stream(a.v_cache + off);
      }
      float sc[G][kPass];
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        float kf[8];
        unpack8(kv[it], kf);
        const bool valid = page * kDecodePageSize + (pass * kPass + it) * kTokPerStep + sub < seq_len;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(q[g][e], kf[e], dot);
#pragma unroll
          for (int o = kLanesPerRow / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
          sc[g][it] = valid ? dot : -INFINITY;
        }
        // Slots past the sequence end may hold anything (even NaN bit patterns): never let them reach acc.
        if (!valid) vv[it] = make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float mx = sc[g][0];
#pragma unroll
        for (int it = 1; it < kPass; ++it) mx = fmaxf(mx, sc[g][it]);
#pragma unroll
        for (int o = kLanesPerRow; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float m_new = fmaxf(m[g], mx);  // finite: every page in range holds a valid token
        const float corr = exp2f(m[g] - m_new);
        m[g] = m_new;
        l[g] *= corr;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] *= corr;
#pragma unroll
        for (int it = 0; it < kPass; ++it) sc[g][it] = exp2f(sc[g][it] - m_new);
      }
#pragma unroll
      for (int it = 0; it < kPass; ++it) {
        float vf[8];
        unpack8(vv[it], vf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          l[g] += sc[g][it];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(sc[g][it], vf[e], acc[g][e]);
        }
      }
    }
  }
  // Merge the token sub-groups of the warp (lanes with equal col), then the warps through shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int o = kLanesPerRow; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
    }
  }
  __shared__ float sm_m[kDecodeWarps][G], sm_l[kDecodeWarps][G];
  __shared__ float sm_acc[kDecodeWarps][G][D];
  if (sub == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm_acc[warp][g][col * 8 + e] = acc[g][e];
      if (col == 0) {
        sm_m[warp][g] = m[g];
        sm_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int g = i / D, c = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float sum_l = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float f = exp2f(sm_m[w][g] - mx);
        sum_l += sm_l[w][g] * f;
        o += sm_acc[w][g][c] * f;
      }
      o /= sum_l;
    }
    const int64_t h = h0 + g;
    if (num_active == 1) {
      a.out[tok * a.num_heads * D + h * D + c] = f32_to_bf16_bits(o);
    } else {
      const int64_t r = (static_cast<int64_t>(s) * a.num_heads + h) * p.num_splits + split;
      p.partial_o[r * D + c] = o;
      if (c == 0) p.partial_lse[r] = mx == -INFINITY ? -INFINITY : mx + log2f(sum_l);
    }
  }
  if (num_active == 1) return;

  // The last active split block of this (sequence, head chunk) to finish merges all splits (log-sum-exp), so
  // no second kernel launch is needed. The counter goes back to 0 for the next launch.
  __shared__ bool is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = p.counters + static_cast<int64_t>(s) * gridDim.y + blockIdx.y;
    is_last = atomicAdd(counter, 1) == num_active - 1;
    if (is_last) *counter = 0;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // Split weights: warp g normalizes head g's lse values in parallel (every active split holds at least one
  // valid key, so each lse is finite).
  __shared__ float weight[G][kDecodeMaxSplits];
  const int64_t r0 = (static_cast<int64_t>(s) * a.num_heads + h0) * p.num_splits;
  if (warp < G) {
    const float* lse = p.partial_lse + r0 + static_cast<int64_t>(warp) * p.num_splits;
    float mx = -INFINITY;
    for (int i = lane; i < num_active; i += 32) {
      weight[warp][i] = __ldcg(lse + i);
      mx = fmaxf(mx, weight[warp][i]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int i = lane; i < num_active; i += 32) {
      weight[warp][i] = exp2f(weight[warp][i] - mx);
      sum += weight[warp][i];
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int i = lane; i < num_active; i += 32) weight[warp][i] *= inv;
  }
  __syncthreads();
  // Each thread merges 4 consecutive output columns with 16-byte loads, several splits in flight at once.
  for (int i = threadIdx.x; i < G * D / 4; i += blockDim.x) {
    const int g = i / (D / 4), c4 = i % (D / 4);
    const float4* po = reinterpret_cast<const float4*>(p.partial_o + (r0 + static_cast<int64_t>(g) * p.num_splits) * D) + c4;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int sp = 0; sp < num_active; ++sp) {
      const float4 v = __ldcg(po + sp * (D / 4));
      const float w = weight[g][sp];
      o.x = fmaf(w, v.x, o.x);
      o.y = fmaf(w, v.y, o.y);
      o.z = fmaf(w, v.z, o.z);
      o.w = fmaf(w, v.w, o.w);
    }
    uint16_t* dst = a.out + tok * a.num_heads * D + (h0 + g) * D + c4 * 4;
    *reinterpret_cast<uint2*>(dst) = make_uint2(uint32_t(f32_to_bf16_bits(o.x)) | (uint32_t(f32_to_bf16_bits(o.y)) << 16),
                                                uint32_t(f32_to_bf16_bits(o.z)) | (uint32_t(f32_to_bf16_bits(o.w)) << 16));
  }
}

template <int D, int G>
void launch_dg(const DecodeParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_splits, static_cast<unsigned int>(p.a.num_kv_heads * p.num_chunks),
                  static_cast<unsigned int>(p.a.num_seqs));
  launch_pdl(decode_attention_kernel<D, G>, grid, dim3(kDecodeWarps * 32), 0, stream, p);
}

template <int D>
void launch_d(const DecodeParams& p, int g, cudaStream_t stream) {
  if (g == 4) {
    launch_dg<D, 4>(p, stream);
  } else if (g == 2) {
    launch_dg<D, 2>(p, stream);
  } else {
    launch_dg<D, 1>(p, stream);
  }
}

template <int D>
const void* kernel_for(int g) {
  return g == 4   ? reinterpret_cast<const void*>(decode_attention_kernel<D, 4>)
         : g == 2 ? reinterpret_cast<const void*>(decode_attention_kernel<D, 2>)
                  : reinterpret_cast<const void*>(decode_attention_kernel<D, 1>);
}

// Resident blocks per SM of the <D, G> instance (registers bound it), queried once per instance.
int blocks_per_sm(int64_t d, int g) {
  static int cached[3][3] = {};
  const int di = d == 64 ? 0 : d == 128 ? 1 : 2, gi = g == 4 ? 2 : g == 2 ? 1 : 0;
  int& n = cached[di][gi];
  if (n == 0) {
    const void* fn = d == 64 ? kernel_for<64>(g) : d == 128 ? kernel_for<128>(g) : kernel_for<256>(g);
    RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, kDecodeWarps * 32, 0));
    n = std::max(n, 1);
  }
  return n;
}

}  // namespace

bool decode_attention_supported(const AttentionArgs& a) {
  return a.block_size == kDecodePageSize && (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256) &&
         a.max_seqlen_q == 1 &&
         a.num_tokens == a.num_seqs;
}

void launch_decode_attention(const AttentionArgs& a, const DecodeWorkspace& ws, int num_sms, cudaStream_t stream,
                             int64_t num_splits_override, int min_pages_override) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int g = group % 4 == 0 ? 4 : (group % 2 == 0 ? 2 : 1);
  DecodeParams p{a, ws.partial_o, ws.partial_lse, ws.counters, 1, static_cast<int>(group / g),
                 min_pages_override > 0 ? min_pages_override : kDecodeWarps};
  int64_t splits = num_splits_override > 0
                       ? std::min<int64_t>(num_splits_override, kDecodeMaxSplits)
                       : decode_num_splits(a.num_seqs, a.num_kv_heads * p.num_chunks, a.max_seqlen_k, a.num_heads,
                                           a.head_dim, static_cast<int64_t>(blocks_per_sm(a.head_dim, g)) * num_sms);
  // ws.capacity_rows counts partial rows of head_dim 128 (a wider row takes the room of several).
  const int64_t capacity = ws.capacity_rows * 128 / std::max<int64_t>(a.head_dim, 128);
  if (a.num_seqs * a.num_heads * splits > capacity) splits = 1;
  p.num_splits = static_cast<int>(splits);
  if (a.head_dim == 64) {
    launch_d<64>(p, g, stream);
  } else if (a.head_dim == 128) {
    launch_d<128>(p, g, stream);
  } else {
    launch_d<256>(p, g, stream);
  }
  RL_CUDA_CHECK_LAUNCH();
}

}  // namespace rl::cuda
