// The batch-1 decode step's dense layers as one persistent kernel (issue 12: a small model's step was ~230 dependent
// kernels of 3-7 µs each around 0.3 ms of weight streaming; between kernels the weight stream stopped).
//
// One block per SM, all resident. Per block, one producer warp streams weight tiles (8 rows × up to 1024 columns,
// 16 KB; a bulk copy per row, or per run of rows where they lie back to back) into a ring of kStages shared-memory
// stages, in the order the block's consumers will use them, across every phase of every layer: a tile's stage is
// refilled as soon as the consumers release it, never waiting for activations. Eight consumer warps run the phases
// of each layer. No grid-wide barrier separates the phases: each output element is written as a tagged word (bf16
// value + a 16-bit tag naming the launch, layer and output), and a phase starts by polling the words of its input
// until each carries the tag it waits for (see Tagged), so a block starts as soon as the elements it reads are
// there:
//   1. x = RMSNorm(residual) into shared memory; qkv = W_qkv x (+ bias)
//   2. attention, one (KV head, key split) unit per block: the group's q heads normed and rotated, the new K/V
//      normed, rotated and written to the cache by the split holding the new position, then each warp's keys (4 at
//      a time, loaded from the paged cache; the first batch's cached rows loaded before waiting for q/k/v) under an
//      online softmax, the warps merged in order; with several splits every split stores its partials as tagged
//      64-bit words and the split holding the new position polls them all into shared memory and merges them in
//      split order (the result does not depend on which block finishes last)
//   3. x = attention output; residual += W_o x (+ bias)
//   4. x = RMSNorm(residual); inter = silu(W_gate x) · (W_up x)
//   5. x = inter; residual += W_down x
// Every rounding is the unfused path's: bf16 normed inputs, projections rounded before the residual add, q and k
// rounded after RoPE, the K/V cache bf16. Block b takes a phase's row groups g ≡ b + rotation (mod grid), the
// rotation moving by one every phase so the blocks with one group more change from phase to phase.
// The attention phase is latency-bound (past its first batch, a split's keys are loaded after q/k/v), so the
// model runs the stack only up to kStackMaxContext keys (decode_stack.h; the runner keeps separate graphs for such
// steps).
#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/decode_stack.h"
#include "backend/cuda/sm90.cuh"
#include "backend/cuda/tma_map.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

constexpr int kWarps = 8;  // consumer warps; the producer is warp kWarps
constexpr int kConsumers = kWarps * 32;
constexpr int kThreads = kConsumers + 32;
constexpr int kRows = kWarps;  // weight rows per tile, one per consumer warp
constexpr int kChunk = 1024;   // columns per tile row
constexpr int kRowBytes = kChunk * 2;
constexpr int kStageBytes = kRows * kRowBytes;
constexpr int kStages = 11;
constexpr int kMaxVec = 16384;       // longest input vector (hidden, H D, I) held in shared memory
constexpr int kMaxGroupDims = 1024;  // query heads per KV head × head_dim
constexpr int kMaxSplits = 64;
// Shared memory: the stages, then one region that holds the phase's input vector (bf16) or, during attention, the
// warps' softmax states, then the query heads (f32), the reduction slots and the mbarriers.
constexpr int kStateFloats = kWarps * kMaxGroupDims + kWarps * 16 * 2;
constexpr int kUnionBytes = kMaxVec * 2 > kStateFloats * 4 ? kMaxVec * 2 : kStateFloats * 4;
constexpr int kUnionOffset = kStages * kStageBytes;
constexpr int kQOffset = kUnionOffset + kUnionBytes;
constexpr int kRedOffset = kQOffset + kMaxGroupDims * 4;
constexpr int kBarOffset = kRedOffset + 64 * 4;
// The step's RoPE cosines and sines, (cos, sin) per frequency, at most 128 frequencies (see norm_rope).
constexpr int kTrigOffset = kBarOffset + 2 * kStages * 8 + 16;
constexpr int kTrigBytes = 2 * 128 * 4;
constexpr int kSmemBytes = kTrigOffset + kTrigBytes;
static_assert(kSmemBytes <= 227 * 1024, "one block per SM must fit");

// Byte offsets in the scratch (host and device compute the same layout): the counters, the tagged words (16-byte
// aligned for vector loads), the tagged split partials.
struct ScratchLayout {
  size_t counters = 0, qkv, attn, res_o, res_d, inter, part64, total;
  __host__ __device__ ScratchLayout(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t hidden, int64_t inter_n,
                                    int64_t max_splits) {
    auto align = [](size_t b) { return (b + 255) & ~static_cast<size_t>(255); };
    qkv = align(counters + 2 * sizeof(uint32_t));
    attn = align(qkv + static_cast<size_t>((heads + 2 * kv_heads) * head_dim) * 4);
    res_o = align(attn + static_cast<size_t>(heads * head_dim) * 4);
    res_d = align(res_o + static_cast<size_t>(hidden) * 4);
    inter = align(res_d + static_cast<size_t>(hidden) * 4);
    part64 = align(inter + static_cast<size_t>(inter_n) * 4);
    total = align(part64 + static_cast<size_t>(heads * max_splits * (head_dim + 2)) * 8);
  }
};

// The tagged activations (see the comment on kTagsPerLayer) and the counters, in the scratch.
struct Tagged {
  uint32_t* qkv;       // [(H + 2 KVH) D]
  uint32_t* attn;      // [H D]
  uint32_t* res_o;     // [hidden]: the residual after o_proj
  uint32_t* res_d;     // [hidden]: the residual after down_proj (the last layer writes StackParams::residual instead)
  uint32_t* inter;     // [I]
  uint32_t* counters;  // see Sync
  uint64_t* part;      // [H][max_splits][D + 2]: the split partials (o, then max and sum), tagged (merge_splits)
};

// The kernel's parameters: the model's (decode_stack.h) and, set at launch from the scratch, the tagged
// activations (in the constant bank like the rest, so they take no registers).
struct KernelArgs {
  StackParams p;
  Tagged tg;
};

// The device code exists for sm_90a only (dispatched there by stack_supported); other targets get a trapping kernel.
#if RL_SM90_ENABLED

// Named barrier 1: the consumer warps (the producer never joins).
__device__ __forceinline__ void consumers_sync() {
  sm90::named_sync(1, kConsumers);
}

// The scratch's counters: [0] the launch count (the tags' epoch), [1] blocks done.
struct Sync {
  uint32_t* epoch;
  uint32_t* done;
};

// Tagged activations: every element a phase hands to the next is one 32-bit word, its bf16 bits in the low half and
// a tag in the high half, stored with one relaxed store. A reader polls the words it needs until each carries the
// tag of the (launch, layer, output) it waits for; a word is single-copy atomic, so a word with the right tag holds
// its value, with no fence or barrier between writer and reader. Tags never repeat on a word between two writes to
// it (each output's words are rewritten for every layer, and consecutive tags of one output differ by
// kTagsPerLayer), and 0 is never a tag, so the zeroed scratch of the first launch reads as not ready.
// Per layer: qkv, attention output, residual after o_proj, SwiGLU output, residual after down_proj.
constexpr uint32_t kTagsPerLayer = 5;
enum TagSlot { kTagQkv = 0, kTagAttn = 1, kTagResO = 2, kTagInter = 3, kTagResDown = 4 };

// The tag of an output of a layer; base: the launch's first tag - 1 (from the launch count).
__device__ __forceinline__ uint32_t tag_of(uint32_t base, int layer, int slot) {
  return (base + static_cast<uint32_t>(layer) * kTagsPerLayer + static_cast<uint32_t>(slot)) % 65535u + 1u;
}

// kN (2, 4 or 8) tagged words from L2 (relaxed loads at GPU scope: single-copy atomic per word).
template <int kN>
__device__ __forceinline__ void load_words(uint32_t (&w)[kN], const uint32_t* p) {
  if constexpr (kN == 2) {
    asm volatile("ld.relaxed.gpu.global.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p) : "memory");
  } else {
#pragma unroll
    for (int j = 0; j < kN; j += 4) {
      asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(w[j]), "=r"(w[j + 1]), "=r"(w[j + 2]), "=r"(w[j + 3])
                   : "l"(p + j)
                   : "memory");
    }
  }
}
template <int kN>
__device__ __forceinline__ bool all_tagged(const uint32_t (&w)[kN], uint32_t tag) {
  bool ok = true;
#pragma unroll
  for (int i = 0; i < kN; ++i) ok &= (w[i] >> 16) == tag;
  return ok;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __noinline__ void stuck(uint32_t tag) {
  printf("decode_stack: block %d waited 20 s for tag %u\n", blockIdx.x, tag);
  __trap();
}
// Calls reload() until ready() (after a first load the caller made) says the words carry tag. A block that waits 20 s
// means another block never became resident or never wrote: trap rather than hang.
// Between polls the thread sleeps (fewer loads on the lines other blocks are writing): 32 ns first, doubling up to
// backoff_ns; 0 polls back to back.
template <class Reload, class Ready>
__device__ __forceinline__ void poll_until(Reload reload, Ready ready, uint32_t tag, int backoff_ns) {
  if (ready()) return;
  const uint64_t t0 = global_ns();
  unsigned ns = 32;
  do {
    if (global_ns() - t0 > 20000000000ull) stuck(tag);
    if (backoff_ns > 0) {
      __nanosleep(ns);
      if (ns < static_cast<unsigned>(backoff_ns)) ns *= 2;
    }
    reload();
  } while (!ready());
}
// Reloads w from p until every word carries tag (w: a first load).
template <int kN>
__device__ __forceinline__ void wait_words(uint32_t (&w)[kN], const uint32_t* p, uint32_t tag, int backoff_ns) {
  poll_until([&] { load_words(w, p); }, [&] { return all_tagged(w, tag); }, tag, backoff_ns);
}
// The wait_words backoff of this launch, or -1 (lab: read inputs without waiting).
__device__ __forceinline__ int poll_backoff(const StackParams& p) {
  return (p.lab & kStackLabNoWait) ? -1 : p.poll_backoff_ns;
}
__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_tagged(uint32_t* p, uint16_t bits, uint32_t tag) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"((tag << 16) | bits) : "memory");
}


// The phase input (n elements, n % 8 == 0) into shared memory as bf16: from tagged words, each waited for until it
// carries `tag`, or from a plain bf16 vector (`plain`: the embedding before layer 0). kRound: 8-element chunks a
// thread has in flight (every load of a round is issued before the first wait). The consumers meet once before the
// first store (xs may still be read by the previous phase's warps). Returns this thread's sum of squares of what it
// stored.
template <int kRound>
__device__ float gather_input(uint16_t* xs, const uint32_t* tagged, const uint16_t* plain, uint32_t tag, int n,
                              int backoff_ns) {
  float ss = 0.0f;
  const int chunks = n / 8;  // ≥ 1: every thread runs the same rounds, so the barrier below is warp-uniform
  for (int base = 0; base < chunks; base += kRound * kConsumers) {
    uint32_t w[kRound][8];
    uint4 x[kRound];
#pragma unroll
    for (int i = 0; i < kRound; ++i) {
      const int c = base + i * kConsumers + static_cast<int>(threadIdx.x);
      if (c < chunks && plain) x[i] = __ldcg(reinterpret_cast<const uint4*>(plain) + c);
      if (c < chunks && !plain) load_words(w[i], tagged + 8 * c);
    }
    if (base == 0) consumers_sync();
#pragma unroll
    for (int i = 0; i < kRound; ++i) {
      const int c = base + i * kConsumers + static_cast<int>(threadIdx.x);
      if (c >= chunks) break;
      if (!plain) {
        if (backoff_ns >= 0) wait_words(w[i], tagged + 8 * c, tag, backoff_ns);
        x[i] = make_uint4(__byte_perm(w[i][0], w[i][1], 0x5410), __byte_perm(w[i][2], w[i][3], 0x5410),
                          __byte_perm(w[i][4], w[i][5], 0x5410), __byte_perm(w[i][6], w[i][7], 0x5410));
      }
      float f[8];
      unpack8(x[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
      reinterpret_cast<uint4*>(xs)[c] = x[i];
    }
  }
  return ss;
}

// Sum over the consumer threads; every consumer gets it. red: 8 floats; the caller syncs before red is reused.
__device__ float consumers_sum(float v, float* red) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  consumers_sync();
  float t = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t += red[w];
  return t;
}

// x (n elements) into shared memory (see gather_input).
template <int kRound>
__device__ void load_vec(uint16_t* xs, const uint32_t* tagged, uint32_t tag, int n, const StackParams& p,
                         bool wait = true) {
  if (!(p.lab & kStackLabNoPrologue)) gather_input<kRound>(xs, tagged, nullptr, tag, n, wait ? poll_backoff(p) : -1);
  consumers_sync();
}

// xs = bf16(w · (x · rsqrt(mean(x²) + eps))), as rms_norm_kernel; x from tagged words or plain (see gather_input).
template <int kRound>
__device__ void load_normed(uint16_t* xs, const uint32_t* tagged, const uint16_t* plain, uint32_t tag, const void* w,
                            bool w_f32, int n, float eps, float* red, const StackParams& p) {
  if (p.lab & kStackLabNoPrologue) {
    consumers_sync();
    return;
  }
  const float ss = gather_input<kRound>(xs, tagged, plain, tag, n, poll_backoff(p));
  const float inv = rsqrtf(consumers_sum(ss, red) / static_cast<float>(n) + eps);
  for (int c = threadIdx.x; c < n / 8; c += kConsumers) {  // each thread rewrites the chunks it stored
    float v[8];
    unpack8(reinterpret_cast<const uint4*>(xs)[c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = load_param(w, w_f32, c * 8 + i) * (v[i] * inv);
    reinterpret_cast<uint4*>(xs)[c] = pack8(v);
  }
  consumers_sync();
}

// The weight phases of a layer, in the order both roles walk them.
enum Phase { kQkv = 0, kOut = 1, kGateUp = 2, kDown = 3, kNumPhases = 4 };

struct Gemv {
  const uint16_t* w;
  int64_t k;
  int64_t rows;  // output rows (gated: I, each from a gate row and an up row)
  bool gated;
  __device__ int64_t groups() const {
    return gated ? (rows + kRows / 2 - 1) / (kRows / 2) : (rows + kRows - 1) / kRows;
  }
  __device__ int64_t chunks() const { return (k + kChunk - 1) / kChunk; }
  // Weight row of tile row r in group g, or -1 past the end.
  __device__ int64_t weight_row(int64_t g, int r) const {
    if (gated) {
      const int64_t i = g * (kRows / 2) + (r % (kRows / 2));
      return i < rows ? i + (r < kRows / 2 ? 0 : rows) : -1;
    }
    const int64_t i = g * kRows + r;
    return i < rows ? i : -1;
  }
};

__device__ Gemv phase_gemv(const StackParams& p, const StackLayer& L, int ph) {
  const int64_t q = static_cast<int64_t>(p.num_heads) * p.head_dim;
  const int64_t kv = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  switch (ph) {
    case kQkv:
      return {L.qkv, p.hidden, q + 2 * kv, false};
    case kOut:
      return {L.o, q, p.hidden, false};
    case kGateUp:
      return {L.gate_up, p.hidden, p.inter, true};
    default:
      return {L.down, p.inter, p.hidden, false};
  }
}

// First group of block b in a phase (groups g ≡ b + rotation mod grid).
__device__ __forceinline__ int64_t first_group(int layer, int ph) {
  const int rot = (layer * kNumPhases + ph) % gridDim.x;
  return (blockIdx.x + gridDim.x - rot) % gridDim.x;
}

struct Ring {
  uint8_t* stages;
  uint32_t full0, empty0;  // shared addresses of the first full / empty mbarrier (8 bytes apart)
};

// The producer warp: every tile of every phase of every layer this block will consume, in order.
__device__ void produce(const StackParams& p, const Ring& ring) {
  const int lane = threadIdx.x & 31;
  uint32_t t = 0;
  for (int layer = 0; layer < p.num_layers; ++layer) {
    for (int ph = 0; ph < kNumPhases; ++ph) {
      const Gemv g = phase_gemv(p, p.layers[layer], ph);
      const int64_t groups = g.groups(), chunks = g.chunks();
      for (int64_t grp = first_group(layer, ph); grp < groups; grp += gridDim.x) {
        const int64_t row = lane < kRows ? g.weight_row(grp, lane) : -1;
        const int valid = __popc(__ballot_sync(0xffffffffu, row >= 0));
        // A phase of one full chunk (k = kChunk): consecutive weight rows lie back to back, as the stage's rows do,
        // so each run of rows (the tile, or its gate and its up halves) is one bulk copy from the run's first lane.
        const bool runs = g.k == kChunk && !(p.lab & kStackLabRowCopies);
        const int run_lanes = g.gated ? kRows / 2 : kRows;
        const int run_rows = g.gated ? valid / 2 : valid;  // a gated tile's halves hold the same count
        for (int64_t c = 0; c < chunks; ++c, ++t) {
          const uint32_t s = t % kStages, n = t / kStages;
          if (n > 0) {
            sm90::mbar_wait(ring.empty0 + 8 * s, (n - 1) & 1);
            // The consumers read the stage with generic loads; the bulk copy below writes it in the async proxy.
            sm90::fence_proxy_async();
          }
          const int64_t k0 = c * kChunk;
          const uint32_t bytes = static_cast<uint32_t>((g.k - k0 < kChunk ? g.k - k0 : kChunk) * 2);
          if (lane == 0) sm90::mbar_arrive_expect_tx(ring.full0 + 8 * s, bytes * valid);
          __syncwarp();
          if (runs) {
            if (lane % run_lanes == 0 && row >= 0) {
              sm90::bulk_load(sm90::smem_addr(ring.stages + s * kStageBytes + lane * kRowBytes), g.w + row * g.k,
                              bytes * run_rows, ring.full0 + 8 * s);
            }
          } else if (row >= 0) {
            sm90::bulk_load(sm90::smem_addr(ring.stages + s * kStageBytes + lane * kRowBytes), g.w + row * g.k + k0,
                            bytes, ring.full0 + 8 * s);
          }
        }
      }
    }
  }
}

// A consumer phase's GEMV: warp w takes tile row w of every tile; the row's dot product over its chunks, then the
// epilogue. x: the phase's input in shared memory.
template <int kPh>
__device__ void consume(const StackParams& p, const StackLayer& L, int layer, const Ring& ring, const uint16_t* xs,
                        float* red, const Tagged& tg, uint32_t base, uint32_t& t) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Gemv g = phase_gemv(p, L, kPh);
  const int64_t groups = g.groups(), chunks = g.chunks();
  int parity_buf = 0;
  for (int64_t grp = first_group(layer, kPh); grp < groups; grp += gridDim.x) {
    float acc = 0.0f;
    for (int64_t c = 0; c < chunks; ++c, ++t) {
      const uint32_t s = t % kStages;
      sm90::mbar_wait(ring.full0 + 8 * s, (t / kStages) & 1);
      const int64_t k0 = c * kChunk;
      const int len = static_cast<int>(g.k - k0 < kChunk ? g.k - k0 : kChunk);
      const uint16_t* wr = reinterpret_cast<const uint16_t*>(ring.stages + s * kStageBytes + warp * kRowBytes);
#pragma unroll
      for (int j = 0; j < kChunk / 256; ++j) {
        const int e = lane * 8 + 256 * j;
        if (e < len && !(p.lab & kStackLabNoGemvMath)) {
          float a[8], b[8];
          unpack8(*reinterpret_cast<const uint4*>(wr + e), a);
          unpack8(*reinterpret_cast<const uint4*>(xs + k0 + e), b);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc = fmaf(a[i], b[i], acc);
        }
      }
      // Every consumer thread hands the stage back itself: its own arrival orders its reads of the stage before the
      // producer's next bulk copy into it (racecheck flags a lane-0 hand-back after __syncwarp(); the ring probe).
      sm90::mbar_arrive(ring.empty0 + 8 * s);
    }
    acc = warp_sum(acc);
    if constexpr (kPh == kGateUp) {
      // Warps 0-3 hold gate rows, 4-7 the matching up rows; two slot sets alternate so a fast warp's next write
      // never meets warp 0's read of this group.
      float* slot = red + 16 + 8 * parity_buf;
      if (lane == 0) slot[warp] = acc;
      consumers_sync();
      if (warp == 0 && lane < kRows / 2) {
        const int64_t i = grp * (kRows / 2) + lane;
        if (i < g.rows) {
          const float gv = slot[lane], uv = slot[lane + kRows / 2];
          st_tagged(tg.inter + i, f32_to_bf16_bits(gv / (1.0f + __expf(-gv)) * uv), tag_of(base, layer, kTagInter));
        }
      }
      parity_buf ^= 1;
    } else {
      const int64_t row = grp * kRows + warp;
      if (lane == 0 && row < g.rows) {
        if constexpr (kPh == kQkv) {
          const float v = acc + (L.qkv_bias ? load_param(L.qkv_bias, p.bias_f32, row) : 0.0f);
          st_tagged(tg.qkv + row, f32_to_bf16_bits(v), tag_of(base, layer, kTagQkv));
        } else {
          // The residual row before this projection: waited for by this phase's or the previous one's input norm.
          const void* bias = kPh == kOut ? L.o_bias : nullptr;
          const float v = acc + (bias ? load_param(bias, p.bias_f32, row) : 0.0f);
          const uint32_t old = kPh == kOut ? (layer == 0 ? __ldcg(p.residual + row) : ld_relaxed(tg.res_d + row))
                                           : ld_relaxed(tg.res_o + row);
          const uint16_t sum = f32_to_bf16_bits(bf16_bits_to_f32(static_cast<uint16_t>(old)) +
                                                bf16_bits_to_f32(f32_to_bf16_bits(v)));
          if (kPh == kOut) {
            st_tagged(tg.res_o + row, sum, tag_of(base, layer, kTagResO));
          } else if (layer + 1 < p.num_layers) {
            st_tagged(tg.res_d + row, sum, tag_of(base, layer, kTagResDown));
          } else {
            p.residual[row] = sum;  // the stack's output, read by the next kernel
          }
        }
      }
    }
  }
}

// RMSNorm (optional) and neox RoPE of one head held as kDpl consecutive elements per lane (lane l: elements
// [l kDpl, (l + 1) kDpl); the rotation partner of lane l is lane l ^ 16). Rounded to bf16 as the unfused path stores
// it.
// trig: the step's (cos, sin) per frequency in shared memory, sincosf(pos · inv_freq) computed once a launch (the
// kernel, before its first layer) instead of by the lanes of every q and k head in every layer. Measured (H100,
// session 42, Qwen3-0.6B batch 1, two rounds, one lab instance): 1,064.5 / 1,063.7 tok/s against 1,044.6 / 1,046.5.
template <int kDpl>
__device__ void norm_rope(float (&x)[kDpl], const void* nw, bool nw_f32, float eps, const float* trig) {
  const int lane = threadIdx.x & 31;
  constexpr int kD = kDpl * 32;
  if (nw) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) ss += x[i] * x[i];
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(kD) + eps);
#pragma unroll
    for (int i = 0; i < kDpl; ++i) x[i] = load_param(nw, nw_f32, lane * kDpl + i) * (x[i] * inv);
  }
  const bool lo = lane < 16;
#pragma unroll
  for (int i = 0; i < kDpl; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, x[i], 16);
    const int f = (lane & 15) * kDpl + i;
    const float cs = trig[2 * f], sn = trig[2 * f + 1];
    const float r = lo ? x[i] * cs - partner * sn : x[i] * cs + partner * sn;
    x[i] = bf16_bits_to_f32(f32_to_bf16_bits(r));
  }
}

// A lane's kDpl elements of a KV cache row, as loaded (converted later by unpack_row): bf16 (kFp8 false) or FP8 e4m3
// codes (kFp8 true: one byte an element, the same element offsets).
template <int kDpl, bool kFp8>
struct RawRow {
  uint32_t w[kFp8 ? (kDpl + 3) / 4 : kDpl / 2];
};
template <int kDpl, bool kFp8>
__device__ __forceinline__ RawRow<kDpl, kFp8> load_raw(const uint16_t* cache, int64_t off) {
  RawRow<kDpl, kFp8> r;
  if constexpr (kFp8) {
    const uint8_t* src = reinterpret_cast<const uint8_t*>(cache) + off;
    if constexpr (kDpl == 8) {
      const uint2 v = __ldcg(reinterpret_cast<const uint2*>(src));
      r.w[0] = v.x, r.w[1] = v.y;
    } else if constexpr (kDpl == 4) {
      r.w[0] = __ldcg(reinterpret_cast<const unsigned int*>(src));
    } else {
      r.w[0] = __ldcg(reinterpret_cast<const unsigned short*>(src));
    }
  } else {
    const uint16_t* src = cache + off;
    if constexpr (kDpl == 8) {
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(src));
      r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
    } else if constexpr (kDpl == 4) {
      const uint2 v = __ldcg(reinterpret_cast<const uint2*>(src));
      r.w[0] = v.x, r.w[1] = v.y;
    } else {
      r.w[0] = __ldcg(reinterpret_cast<const unsigned int*>(src));
    }
  }
  return r;
}
template <int kDpl, bool kFp8>
__device__ __forceinline__ void unpack_row(float (&x)[kDpl], const RawRow<kDpl, kFp8>& r) {
  if constexpr (kFp8) {
#pragma unroll
    for (int i = 0; i < kDpl / 2; ++i) unpack2_fp8(r.w[i / 2] >> (16 * (i % 2)), x + 2 * i);  // a word's halves
  } else {
#pragma unroll
    for (int i = 0; i < kDpl / 2; ++i) {
      x[2 * i] = __uint_as_float(r.w[i] << 16);
      x[2 * i + 1] = __uint_as_float(r.w[i] & 0xffff0000u);
    }
  }
}
template <int kDpl, bool kFp8>
__device__ __forceinline__ void load_row(float (&x)[kDpl], const uint16_t* cache, int64_t off) {
  unpack_row<kDpl, kFp8>(x, load_raw<kDpl, kFp8>(cache, off));
}

// A split partial's tagged 64-bit words (f32 bits below, the tag above), stored and loaded relaxed at GPU scope
// (single-copy atomic per word, as Tagged's 32-bit words).
__device__ __forceinline__ void st_tagged64(uint64_t* p, float v, uint32_t tag) {
  const uint64_t w = (static_cast<uint64_t>(tag) << 32) | __float_as_uint(v);
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ void load_pair64(uint64_t (&w)[2], const uint64_t* p) {
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(w[0]), "=l"(w[1]) : "l"(p) : "memory");
}
__device__ __forceinline__ bool pair64_tagged(const uint64_t (&w)[2], uint32_t tag) {
  return static_cast<uint32_t>(w[0] >> 32) == tag && static_cast<uint32_t>(w[1] >> 32) == tag;
}
// Reloads w from p until both words carry tag (w: a first load).
__device__ __forceinline__ void wait_pair64(uint64_t (&w)[2], const uint64_t* p, uint32_t tag, int backoff_ns) {
  poll_until([&] { load_pair64(w, p); }, [&] { return pair64_tagged(w, tag); }, tag, backoff_ns);
}

// A lane's kDpl elements of a row of tagged words, waited for until they carry tag.
template <int kDpl>
__device__ __forceinline__ void load_row_tagged(float (&x)[kDpl], const uint32_t* src, uint32_t tag, int backoff_ns) {
  uint32_t w[kDpl];
  load_words(w, src);
  if (backoff_ns >= 0) wait_words(w, src, tag, backoff_ns);
#pragma unroll
  for (int i = 0; i < kDpl; ++i) x[i] = __uint_as_float(w[i] << 16);
}

// A lane's kDpl elements into a KV cache row: bf16, or FP8 e4m3 codes rounded as kv_write_kernel<uint8_t> rounds
// them (f32_to_fp8_bits of the bf16 value).
template <int kDpl, bool kFp8>
__device__ __forceinline__ void store_row(uint16_t* cache, int64_t off, const float (&x)[kDpl]) {
  if constexpr (kFp8) {
    uint8_t* dst = reinterpret_cast<uint8_t*>(cache) + off;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) dst[i] = f32_to_fp8_bits(x[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kDpl; ++i) cache[off + i] = f32_to_bf16_bits(x[i]);
  }
}

// One online-softmax step of a warp over kN keys (scores already scaled to log2; masked keys at -inf with zero
// values) for the group's query heads.
template <int kDpl, int kG, int kN>
__device__ __forceinline__ void softmax_step(const float (&q)[kG][kDpl], const float (&kf)[kN][kDpl],
                                             const float (&vf)[kN][kDpl], const bool (&ok)[kN], int gq, float scale,
                                             float (&m)[kG], float (&l)[kG], float (&acc)[kG][kDpl]) {
#pragma unroll
  for (int h = 0; h < kG; ++h) {
    if (h >= gq) break;
    float sc[kN];
    float mx = m[h];
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      float d = 0.0f;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) d = fmaf(q[h][i], kf[j][i], d);
      sc[j] = ok[j] ? warp_sum(d) * scale : -INFINITY;
      mx = fmaxf(mx, sc[j]);
    }
    if (mx == -INFINITY) continue;  // no key yet
    const float corr = exp2f(m[h] - mx);
    float psum = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) acc[h][i] *= corr;
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float pj = exp2f(sc[j] - mx);
      psum += pj;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) acc[h][i] = fmaf(pj, vf[j][i], acc[h][i]);
    }
    l[h] = l[h] * corr + psum;
    m[h] = mx;
  }
}

// Offset of key `key`'s row of KV head kvh in a layer's cache (elements).
__device__ __forceinline__ int64_t kv_offset(const StackParams& p, int key, int kvh) {
  const int64_t page = p.block_table[key / p.block_size];
  return ((page * p.block_size + key % p.block_size) * p.num_kv_heads + kvh) * p.head_dim;
}

// The fewest keys a split holds (key_splits). Measured (H100, session 42, Qwen3-0.6B / Llama-3.1-8B batch 1 at
// 128 + 256, two rounds, tok/s, the merge polled, on a lab instance whose extra code cost it 4 / 1 %): 16 keys
// 1,077.9 / 1,074.7 and 181.3 / 181.4, 32 keys 1,096.9 / 1,098.3 and 182.7 / 182.7, 64 keys 1,027.0 / 1,025.1 and
// 179.4 / 179.5. At 128-384 keys 32 is one 4-key batch a warp: every warp folds its keys, loaded before the wait for
// q/k/v, and half as many splits merge.
constexpr int kMinKeysPerSplit = 32;

// Key split of the step: the most splits that keep one unit per block, at least kMinKeysPerSplit keys each and at most
// max_splits; every split holds at least one key. Unit u: KV head u % KVH, split u / KVH.
struct Splits {
  int count, per;
};
__device__ Splits key_splits(int len, int num_kv_heads, int max_splits) {
  int want = static_cast<int>(gridDim.x) / num_kv_heads;
  want = want < 1 ? 1 : (want > max_splits ? max_splits : want);
  const int cap = (len + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  if (want > cap) want = cap;
  const int per = (len + want - 1) / want;
  return {(len + per - 1) / per, per};
}

// The split merge of a KV head (with several splits). Every split stores its partials (o, then max and sum per query
// head) as tagged 64-bit words; the split holding the new position, which also writes the new key and value and so
// usually finishes last, polls every split's words (its own among them) into shared memory (stage: the warps'
// accumulators, free once every warp has merged them) and merges them in split order. One round trip (the last
// partial's words reaching it) on the attention phase's path, where the last finisher of an arrival count took two
// (the count's atomic, then the partials' loads) and the barriers around them. Measured (H100, session 42, Qwen3-0.6B
// batch 1 at 128 + 256, two rounds, both forms in one lab instance): 1,062.7 / 1,062.8 tok/s against the count's
// 1,044.6 / 1,046.5; with the RoPE table and 32 keys a split, production against 31100e4's kernel: 1,142.3 / 1,142.3 /
// 1,141.1 against 1,086.6 / 1,089.0 / 1,083.3, Llama-3.1-8B 185.3-185.4 against 184.2 (docs/benchmarks.md).
// The words carry the layer's q/k/v tag, distinct between a launch's layers; at the launch's last layer the merger
// zeroes the words it read (every split of that layer has stored them, and nothing writes them again before the
// launch ends), so every launch starts from words no tag matches, however many launches ago a word was last written.
template <int kDpl, int kG>
__device__ __noinline__ void merge_splits(const StackParams& p, const Tagged& tg, int layer, int kvh, int gq, int count,
                                          uint32_t part_tag, uint32_t attn_tag, float* stage) {
  constexpr int kD = kDpl * 32;
  const int stride = kD + 2, per_head = count * stride;
  const int pairs = gq * per_head / 2;  // stride is even, so a head's partials are whole 16-byte pairs of words
  constexpr int kPer = kDpl * kG <= 16 ? 4 : 2;  // loads in flight a thread
  const int backoff = poll_backoff(p);
  auto words = [&](int c) {
    const int h = (2 * c) / per_head, r = 2 * c - h * per_head;
    return tg.part + (static_cast<int64_t>(kvh) * gq + h) * p.max_splits * stride + r;
  };
  for (int c0 = 0; c0 < pairs; c0 += kPer * kConsumers) {
    uint64_t w[kPer][2];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = c0 + i * kConsumers + threadIdx.x;
      if (c < pairs) load_pair64(w[i], words(c));
    }
    if (c0 == 0) consumers_sync();  // every warp has read its accumulators out of stage
    unsigned pending = 0;  // the pairs not yet tagged, polled below one at a time (one copy of the wait loop)
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = c0 + i * kConsumers + threadIdx.x;
      if (c < pairs) {
        if (backoff < 0 || pair64_tagged(w[i], part_tag)) {
          stage[2 * c] = __uint_as_float(static_cast<uint32_t>(w[i][0]));
          stage[2 * c + 1] = __uint_as_float(static_cast<uint32_t>(w[i][1]));
        } else {
          pending |= 1u << i;
        }
      }
    }
    while (pending) {
      const int i = __ffs(pending) - 1;
      pending &= pending - 1;
      const int c = c0 + i * kConsumers + threadIdx.x;
      uint64_t x[2];
      load_pair64(x, words(c));
      wait_pair64(x, words(c), part_tag, backoff);
      stage[2 * c] = __uint_as_float(static_cast<uint32_t>(x[0]));
      stage[2 * c + 1] = __uint_as_float(static_cast<uint32_t>(x[1]));
    }
  }
  consumers_sync();
  for (int e = threadIdx.x; e < gq * kD; e += kConsumers) {
    const int h = e / kD, d = e % kD;
    const float* src = stage + h * per_head;
    float mx = -INFINITY;
    for (int j = 0; j < count; ++j) mx = fmaxf(mx, src[j * stride + kD]);
    float sum = 0.0f, o = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float f = exp2f(src[j * stride + kD] - mx);
      sum += src[j * stride + kD + 1] * f;
      o += src[j * stride + d] * f;
    }
    st_tagged(tg.attn + (static_cast<int64_t>(kvh) * gq + h) * kD + d, f32_to_bf16_bits(o / sum), attn_tag);
  }
  if (layer == p.num_layers - 1) {
    for (int c = threadIdx.x; c < pairs; c += kConsumers) {
      *reinterpret_cast<ulonglong2*>(words(c)) = make_ulonglong2(0, 0);
    }
  }
}

// The attention phase (see the file comment). kG: most query heads per KV head for this head_dim. A block has one
// unit at most (key_splits). Each warp first loads its first batch of cached keys and values (positions before the
// new one, written by earlier steps), so that load overlaps the wait for the step's q/k/v instead of following it.
// Measured and dropped (H100, session 42, Qwen3-0.6B batch 1 at 128 + 256, two rounds): the split holding the new
// position reading its new key and value rows back from shared memory, where it kept them beside its cache stores,
// instead of from the cache: 1,045.9 / 1,046.2 tok/s against 1,044.6 / 1,046.5 (the same bits). Those lab forms ran in
// a second instance of the kernel, whose extra code cost it 4 % (Qwen3-0.6B) and 1 % (Llama-3.1-8B) against
// production's instance with the same forms off (64 bytes of spills against none).
template <int kDpl, int kG, bool kFp8>
__device__ void attend(const StackParams& p, const StackLayer& L, int layer, const Tagged& tg, uint32_t base,
                       uint8_t* smem, int len, int slot, const Splits& sp) {
  constexpr int kD = kDpl * 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kvh_n = p.num_kv_heads, gq = p.num_heads / kvh_n;
  const int64_t q_size = static_cast<int64_t>(p.num_heads) * kD, kv_row = static_cast<int64_t>(kvh_n) * kD;
  float* state = reinterpret_cast<float*>(smem + kUnionOffset);  // [kWarps][gq][kD] accumulators
  float* ml = state + kWarps * kMaxGroupDims;                    // [kWarps][16][2] max and sum
  float* qs = reinterpret_cast<float*>(smem + kQOffset);         // [gq][kD]
  const float* trig = reinterpret_cast<const float*>(smem + kTrigOffset);
  const uint32_t qkv_tag = tag_of(base, layer, kTagQkv);
  const int units = (p.lab & kStackLabNoAttention) ? 0 : kvh_n * sp.count;
  const int u = blockIdx.x;
  const int kvh = u % kvh_n, s = u / kvh_n;
  const int k0 = s * sp.per, k1 = min(len, k0 + sp.per);
  const int kb0 = k0 + 4 * warp;
  // At head_dim 256 the preloaded rows would not fit beside the key loop's registers (168 a thread): no preload.
  constexpr bool kPreload = kDpl <= 4;
  RawRow<kDpl, kFp8> pre_k[4], pre_v[4];
  if (kPreload && u < units) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (kb0 + j < k1 && kb0 + j < len - 1) {
        const int64_t off = kv_offset(p, kb0 + j, kvh) + lane * kDpl;
        pre_k[j] = load_raw<kDpl, kFp8>(L.k_cache, off);
        pre_v[j] = load_raw<kDpl, kFp8>(L.v_cache, off);
      }
    }
  }
  if (u < units) {
    // The group's query heads, and (the split holding the new position) the new key and value into the cache.
    for (int task = warp; task <= gq; task += kWarps) {
      float x[kDpl];
      if (task < gq) {
        const int64_t h = static_cast<int64_t>(kvh) * gq + task;
        load_row_tagged<kDpl>(x, tg.qkv + h * kD + lane * kDpl, qkv_tag, poll_backoff(p));
        norm_rope<kDpl>(x, L.q_norm, p.qk_norm_f32, p.qk_eps, trig);
#pragma unroll
        for (int i = 0; i < kDpl; ++i) qs[task * kD + lane * kDpl + i] = x[i];
      } else if (k1 == len) {
        const int64_t kd = static_cast<int64_t>(slot) * kv_row + kvh * kD + lane * kDpl;
        load_row_tagged<kDpl>(x, tg.qkv + q_size + kvh * kD + lane * kDpl, qkv_tag, poll_backoff(p));
        norm_rope<kDpl>(x, L.k_norm, p.qk_norm_f32, p.qk_eps, trig);
        store_row<kDpl, kFp8>(L.k_cache, kd, x);
        load_row_tagged<kDpl>(x, tg.qkv + q_size + kv_row + kvh * kD + lane * kDpl, qkv_tag,
                                poll_backoff(p));
        store_row<kDpl, kFp8>(L.v_cache, kd, x);
      }
    }
    consumers_sync();  // q in shared memory; the new K/V row in the cache (read back below by this block)
    float q[kG][kDpl], acc[kG][kDpl], m[kG], l[kG];
#pragma unroll
    for (int h = 0; h < kG; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) {
        q[h][i] = h < gq ? qs[h * kD + lane * kDpl + i] : 0.0f;
        acc[h][i] = 0.0f;
      }
    }
    if (kPreload && kb0 < k1) {  // the first batch: preloaded, except the new position's row (written above)
      float kf[4][kDpl], vf[4][kDpl];
      bool ok[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        ok[j] = kb0 + j < k1;
        if (!ok[j]) {  // past the split: masked, zero values
#pragma unroll
          for (int i = 0; i < kDpl; ++i) kf[j][i] = vf[j][i] = 0.0f;
        } else if (kb0 + j < len - 1) {
          unpack_row<kDpl, kFp8>(kf[j], pre_k[j]);
          unpack_row<kDpl, kFp8>(vf[j], pre_v[j]);
        } else {
          const int64_t off = kv_offset(p, kb0 + j, kvh) + lane * kDpl;
          load_row<kDpl, kFp8>(kf[j], L.k_cache, off);
          load_row<kDpl, kFp8>(vf[j], L.v_cache, off);
        }
      }
      softmax_step<kDpl, kG, 4>(q, kf, vf, ok, gq, p.scale_log2, m, l, acc);
    }
    for (int kb = kPreload ? kb0 + 4 * kWarps : kb0; kb < k1; kb += 4 * kWarps) {
      float kf[4][kDpl], vf[4][kDpl];
      bool ok[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        ok[j] = kb + j < k1;
        const int64_t off = kv_offset(p, ok[j] ? kb + j : kb, kvh) + lane * kDpl;  // past the split: a valid row
        load_row<kDpl, kFp8>(kf[j], L.k_cache, off);
        load_row<kDpl, kFp8>(vf[j], L.v_cache, off);
      }
      softmax_step<kDpl, kG, 4>(q, kf, vf, ok, gq, p.scale_log2, m, l, acc);
    }
#pragma unroll
    for (int h = 0; h < kG; ++h) {
      if (h >= gq) break;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) state[(warp * gq + h) * kD + lane * kDpl + i] = acc[h][i];
      if (lane == 0) {
        ml[(warp * 16 + h) * 2] = m[h];
        ml[(warp * 16 + h) * 2 + 1] = l[h];
      }
    }
    consumers_sync();
    // The warps merged in warp order: unnormalised output, its maximum and its sum per (head, element); with several
    // splits these are the split's partials (merge_splits).
    const int stride = kD + 2;
    for (int e = threadIdx.x; e < gq * kD; e += kConsumers) {
      const int h = e / kD, d = e % kD;
      float mx = -INFINITY;
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ml[(w * 16 + h) * 2]);
      float sum = 0.0f, o = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float f = ml[(w * 16 + h) * 2] == -INFINITY ? 0.0f : exp2f(ml[(w * 16 + h) * 2] - mx);
        sum += ml[(w * 16 + h) * 2 + 1] * f;
        o += state[(w * gq + h) * kD + d] * f;
      }
      const int64_t head = static_cast<int64_t>(kvh) * gq + h;
      if (sp.count == 1) {
        st_tagged(tg.attn + head * kD + d, f32_to_bf16_bits(o / sum), tag_of(base, layer, kTagAttn));
      } else {
        uint64_t* dst = tg.part + (head * p.max_splits + s) * stride;
        st_tagged64(dst + d, o, qkv_tag);
        if (d == 0) {
          st_tagged64(dst + kD, mx, qkv_tag);
          st_tagged64(dst + kD + 1, sum, qkv_tag);
        }
      }
    }
    if (sp.count > 1 && s == sp.count - 1) {
      merge_splits<kDpl, kG>(p, tg, layer, kvh, gq, sp.count, qkv_tag, tag_of(base, layer, kTagAttn), state);
    }
  }
}

#endif  // RL_SM90_ENABLED

// One kernel per attention shape (kDpl = head_dim / 32; kG: most query heads per KV head; kFp8: an FP8 e4m3 KV
// cache), so that each gets the registers its own attention phase needs (a thread has 168 at most: see kThreads).
template <int kDpl, int kG, bool kFp8>
__global__ void __launch_bounds__(kThreads, 1) decode_stack_kernel(const __grid_constant__ KernelArgs a) {
#if RL_SM90_ENABLED
  const StackParams& p = a.p;
  const Tagged& tg = a.tg;
  extern __shared__ __align__(1024) uint8_t smem[];
  Ring ring;
  ring.stages = smem;
  ring.full0 = sm90::smem_addr(smem + kBarOffset);
  ring.empty0 = ring.full0 + 8 * kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(ring.full0 + 8 * s, 1);
      sm90::mbar_init(ring.empty0 + 8 * s, kConsumers);  // every consumer thread arrives
    }
    sm90::mbar_init_fence();
  }
  __syncthreads();  // the last block-wide barrier: the roles split here
  if (threadIdx.x >= kConsumers) {
    produce(p, ring);  // weights only: no pdl_wait needed
    return;
  }
  pdl_wait();  // the residual stream (embedding) and the step's inputs
  // Key splits: at most one a block (max_splits), and no more than the merger's shared memory stages.
  const int fit = kStateFloats / ((p.num_heads / p.num_kv_heads) * (p.head_dim + 2));
  const int split_cap = static_cast<int>(p.max_splits) < fit ? static_cast<int>(p.max_splits) : fit;
  const Sync sync{tg.counters, tg.counters + 1};
  // This launch's tags follow the previous launch's (the launch count is advanced by the last block to finish).
  const uint64_t launch = ld_relaxed(sync.epoch);
  const uint32_t base = static_cast<uint32_t>(launch * kTagsPerLayer * static_cast<uint64_t>(p.num_layers) % 65535u);
  const int len = p.seq_lens[0], pos = p.positions[0], slot = p.slots[0];
  if (pos != len - 1 || slot < 0 || slot >= p.num_slots || (len - 1) / p.block_size >= p.max_blocks) __trap();
  const Splits sp = key_splits(len, p.num_kv_heads, split_cap);
  uint16_t* xs = reinterpret_cast<uint16_t*>(smem + kUnionOffset);
  float* red = reinterpret_cast<float*>(smem + kRedOffset);
  const int q_dim = p.num_heads * p.head_dim;
  // Input chunks in flight a thread: 2 where the attention phase leaves the registers (no spills), else 1.
  constexpr int kRound = kDpl * kG <= 16 ? 2 : 1;
  {  // The step's RoPE table (norm_rope), read after the first layer's input barriers.
    float* trig = reinterpret_cast<float*>(smem + kTrigOffset);
    for (int f = threadIdx.x; f < p.head_dim / 2; f += kConsumers) {
      sincosf(static_cast<float>(pos) * p.inv_freq[f], &trig[2 * f + 1], &trig[2 * f]);
    }
  }
  uint32_t t = 0;
  for (int layer = 0; layer < p.num_layers; ++layer) {
    const StackLayer& L = p.layers[layer];
    if (layer == p.num_layers - 1) pdl_launch_dependents();
    // Each phase starts by waiting for the words of its input (tagged by the phase before; layer 0 reads the
    // embedding, complete at launch).
    const uint32_t prev_res = layer == 0 ? 0u : tag_of(base, layer - 1, kTagResDown);
    load_normed<kRound>(xs, tg.res_d, layer == 0 ? p.residual : nullptr, prev_res, L.attn_norm, p.norm_f32, p.hidden,
                        L.attn_eps, red, p);
    consume<kQkv>(p, L, layer, ring, xs, red, tg, base, t);
    attend<kDpl, kG, kFp8>(p, L, layer, tg, base, smem, len, slot, sp);
    // (Lab: with no attention work nothing writes the attention output, so nothing waits for it.)
    load_vec<kRound>(xs, tg.attn, tag_of(base, layer, kTagAttn), q_dim, p, !(p.lab & kStackLabNoAttention));
    consume<kOut>(p, L, layer, ring, xs, red, tg, base, t);
    load_normed<kRound>(xs, tg.res_o, nullptr, tag_of(base, layer, kTagResO), L.ffn_norm, p.norm_f32, p.hidden,
                        L.ffn_eps, red, p);
    consume<kGateUp>(p, L, layer, ring, xs, red, tg, base, t);
    load_vec<kRound>(xs, tg.inter, tag_of(base, layer, kTagInter), p.inter, p);
    consume<kDown>(p, L, layer, ring, xs, red, tg, base, t);
  }
  // The last block to finish (every block has read the launch count) advances it for the next launch's tags.
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync.done, 1u) == gridDim.x - 1) {
      atomicExch(sync.done, 0u);
      atomicAdd(sync.epoch, 1u);
    }
  }
#else
  __trap();  // dispatched only on sm_90 (stack_supported)
#endif
}

int device_sms() {
  int dev = 0, sms = 0;
  RL_CUDA_CHECK(cudaGetDevice(&dev));
  RL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Key splits per KV head the scratch holds: one unit per block at most (key_splits caps at the same).
int max_splits_for(int64_t num_kv_heads, int sms) {
  int m = sms / static_cast<int>(num_kv_heads);
  return m < 1 ? 1 : (m > kMaxSplits ? kMaxSplits : m);
}

using StackKernel = void (*)(KernelArgs);

// The instantiation for a head_dim, a query-head group size and a cache dtype (stack_supported has checked them).
// No FP8 instance at head_dim 256: its registers would spill (stack_supported refuses that shape).
template <bool kFp8>
StackKernel kernel_for(int64_t head_dim, int64_t gq) {
  if (head_dim == 64) return gq <= 4 ? decode_stack_kernel<2, 4, kFp8> : decode_stack_kernel<2, 8, kFp8>;
  if (head_dim == 128) return gq <= 4 ? decode_stack_kernel<4, 4, kFp8> : decode_stack_kernel<4, 8, kFp8>;
  if constexpr (kFp8) {
    return nullptr;
  } else {
    return decode_stack_kernel<8, 4, false>;
  }
}
StackKernel kernel_for(int64_t head_dim, int64_t gq, bool fp8) {
  return fp8 ? kernel_for<true>(head_dim, gq) : kernel_for<false>(head_dim, gq);
}

}  // namespace

bool stack_supported(const StackShape& s, std::string* why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (!device_is_sm90()) return no("needs compute capability 9.0 (sm_90a)");
  if (s.num_layers < 1 || s.num_layers > kStackMaxLayers) return no("more layers than the kernel's table holds");
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256) return no("head_dim is not 64, 128 or 256");
  if (s.num_kv_heads < 1 || s.num_heads % s.num_kv_heads != 0) return no("query heads are not a multiple of KV heads");
  // attend() gives each block one (KV head, split) unit at most.
  if (s.num_kv_heads > device_sms()) return no("more KV heads than the device has SMs");
  const int64_t gq = s.num_heads / s.num_kv_heads;
  if (gq > (s.head_dim == 256 ? 4 : 8)) return no("more than 8 query heads per KV head (4 at head_dim 256)");
  if (s.kv_fp8 && s.head_dim == 256) return no("an FP8 KV cache at head_dim 256");
  const int64_t q = s.num_heads * s.head_dim;
  for (int64_t n : {s.hidden, q, s.inter}) {
    if (n < 8 || n % 8 != 0 || n > kMaxVec) return no("a projection's input is not a multiple of 8 up to 16384");
  }
  // Per device (the attribute belongs to the current device's context): set each time a model checks its stack.
  const StackKernel kernel = kernel_for(s.head_dim, gq, s.kv_fp8);
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for a later launch check to report
    return no("the device cannot give a block the kernel's shared memory");
  }
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kSmemBytes) !=
          cudaSuccess ||
      per_sm < 1) {
    (void)cudaGetLastError();
    return no("a block of the kernel does not fit on an SM");
  }
  return true;
}

size_t stack_scratch_bytes(const StackShape& s) {
  const int64_t splits = max_splits_for(s.num_kv_heads, device_sms());
  return ScratchLayout(s.num_heads, s.num_kv_heads, s.head_dim, s.hidden, s.inter, splits).total;
}

void launch_decode_stack(StackParams p, cudaStream_t stream) {
  int sms = device_sms();
  if (const int lab_grid = (p.lab >> kStackLabGridShift) & 255; lab_grid > 0) {
    sms = std::min(sms, std::max(lab_grid, static_cast<int>(p.num_kv_heads)));
  }
  p.max_splits = max_splits_for(p.num_kv_heads, sms);
  const int lab_backoff = (p.lab >> kStackLabBackoffShift) & 255;
  p.poll_backoff_ns = lab_backoff ? 16 * lab_backoff : kStackPollBackoffNs;
  const ScratchLayout lay(p.num_heads, p.num_kv_heads, p.head_dim, p.hidden, p.inter, p.max_splits);
  char* scratch = static_cast<char*>(p.scratch);
  auto words = [&](size_t off) { return reinterpret_cast<uint32_t*>(scratch + off); };
  const KernelArgs a{p, Tagged{words(lay.qkv), words(lay.attn), words(lay.res_o), words(lay.res_d), words(lay.inter),
                               words(lay.counters), reinterpret_cast<uint64_t*>(scratch + lay.part64)}};
  const StackKernel kernel = kernel_for(p.head_dim, p.num_heads / p.num_kv_heads, p.kv_fp8);
  RL_CHECK_MSG(kernel != nullptr, "dense stack: no kernel for head_dim %d over this cache", p.head_dim);
  launch_pdl(kernel, dim3(sms), dim3(kThreads), kSmemBytes, stream, a);
}

}  // namespace rl::cuda
