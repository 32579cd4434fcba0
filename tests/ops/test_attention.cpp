// CUDA paged attention vs the CPU backend's f32 reference (run on f32 copies of the same bf16 values), over
// ragged lengths, page boundaries, GQA ratios, head dims, prefix-in-cache chunks, mixed batches and shuffled
// (non-contiguous) block tables. Unused cache slots hold NaN on the GPU and unused block-table entries are -1,
// so a kernel reading past a sequence fails the comparison (or compute-sanitizer's memcheck).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/cuda/cuda_kernels.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

struct SeqSpec {
  int64_t q_len;    // new tokens this step
  int64_t ctx_len;  // context including them
};

// Runs one batch on both backends with the given CUDA kernel choice; returns the relative error.
// max_seqlen_k_override > 0 replaces the host-side max_seqlen_k (as a CUDA graph captured for max_model_len
// passes it); the kernels must take each sequence's real length from device memory.
// window > 0 / sinks: the GPT-OSS variant (keys of the last `window` positions, a learned logit per head in
// the softmax); blocks wholly before every query's window read kNullBlock in the table and their slots hold NaN,
// as after the KV manager released them. block_size: tokens per KV page. fp8: the CUDA cache holds FP8 e4m3 codes
// (unused slots the NaN code) and the CPU reference the f32 values they stand for.
// q_range: the new rows' values (queries among them) lie in [-q_range, q_range); keys and values in [-2, 2).
double run_case(const std::vector<SeqSpec>& seqs, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                CudaBackend::AttentionImpl impl, int64_t max_seqlen_k_override = 0, int64_t window = 0,
                bool sinks = false, int64_t block_size = 16, int64_t leading_decodes = 0, bool fp8 = false,
                std::vector<float>* cuda_out = nullptr, float q_range = 2.0f) {
  const QkvLayout l{num_heads, num_kv_heads, head_dim};
  const int64_t num_seqs = static_cast<int64_t>(seqs.size());
  int64_t num_tokens = 0, max_q = 0, max_k = 0, max_blocks = 0, total_blocks = 0;
  for (const auto& s : seqs) {
    num_tokens += s.q_len;
    max_q = std::max(max_q, s.q_len);
    max_k = std::max(max_k, s.ctx_len);
    const int64_t nb = (s.ctx_len + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, nb);
    total_blocks += nb;
  }
  max_blocks += 2;  // spare table columns stay -1
  const int64_t num_blocks = total_blocks + 3;  // block 0 and a few never used
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng());
  std::vector<int32_t> cu(num_seqs + 1, 0), lens(num_seqs), table(num_seqs * max_blocks, -1);
  const int64_t kv_row = num_kv_heads * head_dim;
  auto k = random_bf16_values(num_blocks * block_size * kv_row, -2, 2);
  auto v = random_bf16_values(num_blocks * block_size * kv_row, -2, 2);
  std::vector<uint16_t> k_dev = to_bf16(k), v_dev = to_bf16(v);
  std::vector<uint8_t> k_fp8(fp8 ? k.size() : 0), v_fp8(k_fp8.size());
  for (size_t i = 0; i < k_fp8.size(); ++i) {
    k_fp8[i] = f32_to_fp8_e4m3(k[i]);
    v_fp8[i] = f32_to_fp8_e4m3(v[i]);
    k[i] = fp8_e4m3_to_f32(k_fp8[i]);
    v[i] = fp8_e4m3_to_f32(v_fp8[i]);
  }
  std::vector<bool> used(static_cast<size_t>(num_blocks * block_size), false);
  size_t next = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    cu[s + 1] = cu[s] + static_cast<int32_t>(seqs[s].q_len);
    lens[s] = static_cast<int32_t>(seqs[s].ctx_len);
    for (int64_t j = 0; j * block_size < seqs[s].ctx_len; ++j) table[s * max_blocks + j] = ids[next++];
    // The first query sits at ctx_len - q_len and sees nothing before first_key.
    const int64_t first_key = window > 0 ? std::max<int64_t>(0, seqs[s].ctx_len - seqs[s].q_len - window + 1) : 0;
    for (int64_t j = 0; (j + 1) * block_size <= first_key; ++j) table[s * max_blocks + j] = 0;
    for (int64_t p = first_key; p < seqs[s].ctx_len; ++p) {
      used[table[s * max_blocks + p / block_size] * block_size + p % block_size] = true;
    }
  }
  for (size_t slot = 0; slot < used.size(); ++slot) {
    if (used[slot]) continue;
    for (int64_t i = 0; i < kv_row; ++i) {
      k_dev[slot * kv_row + i] = v_dev[slot * kv_row + i] = 0xffff;  // NaN on the GPU
      if (fp8) k_fp8[slot * kv_row + i] = v_fp8[slot * kv_row + i] = 0x7f;
      k[slot * kv_row + i] = v[slot * kv_row + i] = 0.0f;
    }
  }
  auto qkv = random_bf16_values(num_tokens * l.row(), -q_range, q_range);

  auto make_meta = [&](Backend& be, std::vector<Owned>& keep) {
    keep.push_back(make_i32(be, cu, {num_seqs + 1}));
    keep.push_back(make_i32(be, lens, {num_seqs}));
    keep.push_back(make_i32(be, table, {num_seqs, max_blocks}));
    AttentionMetadata m;
    m.cu_seqlens_q = keep[0].t;
    m.seq_lens_k = keep[1].t;
    m.block_tables = keep[2].t;
    m.num_seqs = num_seqs;
    m.max_seqlen_q = max_q;
    m.max_seqlen_k = max_seqlen_k_override > 0 ? max_seqlen_k_override : max_k;
    m.all_decode = max_q == 1;
    m.num_leading_decodes = leading_decodes;
    m.layout = l;
    m.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    m.sliding_window = window;
    return m;
  };
  std::vector<Owned> g_keep, c_keep;
  AttentionMetadata g_meta = make_meta(cpu(), g_keep), c_meta = make_meta(cuda(), c_keep);
  const std::vector<float> sink_values = random_bf16_values(static_cast<size_t>(num_heads), -1, 3);
  Owned g_sinks = make_f32(cpu(), sink_values, {num_heads}), c_sinks = make_f32(cuda(), sink_values, {num_heads});
  if (sinks) {
    g_meta.sinks = g_sinks.t.f32();
    c_meta.sinks = c_sinks.t.f32();
  }
  auto g_qkv = make_f32(cpu(), qkv, {num_tokens, l.row()});
  auto g_k = make_f32(cpu(), k, {num_blocks, block_size, num_kv_heads, head_dim});
  auto g_v = make_f32(cpu(), v, {num_blocks, block_size, num_kv_heads, head_dim});
  auto g_out = make(cpu(), DType::kF32, {num_tokens, num_heads * head_dim});
  auto c_qkv = make_bf16(cuda(), qkv, {num_tokens, l.row()});
  const DType kv_dt = fp8 ? DType::kFP8E4M3 : DType::kBF16;
  auto c_k = make(cuda(), kv_dt, {num_blocks, block_size, num_kv_heads, head_dim});
  auto c_v = make(cuda(), kv_dt, {num_blocks, block_size, num_kv_heads, head_dim});
  if (fp8) {
    cuda().upload(c_k.t.data, k_fp8.data(), k_fp8.size());
    cuda().upload(c_v.t.data, v_fp8.data(), v_fp8.size());
  } else {
    cuda().upload(c_k.t.data, k_dev.data(), k_dev.size() * 2);
    cuda().upload(c_v.t.data, v_dev.data(), v_dev.size() * 2);
  }
  auto c_out = make(cuda(), DType::kBF16, {num_tokens, num_heads * head_dim});
  poison(c_out.t);
  cpu().attention(g_qkv.t, KvLayer{g_k.t, g_v.t}, g_meta, g_out.t);
  cuda().set_attention_impl(impl);
  cuda().attention(c_qkv.t, KvLayer{c_k.t, c_v.t}, c_meta, c_out.t);
  cuda().set_attention_impl(CudaBackend::AttentionImpl::kAuto);
  const std::vector<float> out = read_f32(cuda(), c_out.t);
  if (cuda_out) *cuda_out = out;
  return rel_err(out, read_f32(cpu(), g_out.t));
}

struct Shape {
  int64_t num_heads, num_kv_heads, head_dim;
};
// GQA groups 1, 2, 3, 4, 7, 8 and 16 (two chunks of 8 in the tensor-core decode kernel).
const Shape kShapes[] = {{4, 4, 128}, {8, 4, 64},  {16, 4, 128}, {16, 2, 64}, {12, 4, 128},
                         {8, 1, 128}, {8, 2, 256}, {14, 2, 64},  {32, 2, 128}};

using Impl = CudaBackend::AttentionImpl;
const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::kNaive: return "naive";
    case Impl::kDecodeSimt: return "decode simt";
    case Impl::kDecodeMma: return "decode mma";
    case Impl::kDecodeMmaPrefetch: return "decode mma prefetch";
    case Impl::kDecodeMmaEarly: return "decode mma early first page";
    case Impl::kDecodeStaged: return "decode staged (TMA page buffers)";
    case Impl::kDecodeStagedCluster: return "decode staged, splits merged in a cluster";
    case Impl::kFlash2: return "flash2";
    default: return "auto";
  }
}

// Every decode kernel (each where the shape allows it; the others fall back to what kAuto runs) and the naive one.
void check_all_impls(const std::vector<SeqSpec>& seqs, const char* what) {
  for (const Shape& s : kShapes) {
    for (auto impl : {Impl::kAuto, Impl::kNaive, Impl::kDecodeSimt, Impl::kDecodeMma, Impl::kDecodeMmaPrefetch,
                      Impl::kDecodeMmaEarly, Impl::kDecodeStaged, Impl::kDecodeStagedCluster}) {
      const double e = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim, impl);
      EXPECT_LT(e, kBf16Tol) << what << ": heads " << s.num_heads << "/" << s.num_kv_heads << " d=" << s.head_dim
                             << " " << impl_name(impl);
    }
  }
}

TEST(CudaAttention, DecodePageBoundaries) {
  check_all_impls({{1, 1}, {1, 15}, {1, 16}, {1, 17}, {1, 255}, {1, 33}, {1, 1000}}, "decode ragged");
}

TEST(CudaAttention, DecodeLongContextSplits) {
  check_all_impls({{1, 4097}}, "decode 1 x 4097");
  check_all_impls({{1, 2000}, {1, 3}, {1, 1500}}, "decode long + short");
}

TEST(CudaAttention, DecodeGridSizedForLongerContext) {
  const std::vector<SeqSpec> seqs = {{1, 1}, {1, 17}, {1, 384}, {1, 4097}, {1, 64}};
  for (const Shape& s : kShapes) {
    for (int64_t max_k : {int64_t(8192), int64_t(131072)}) {
      for (auto impl : {Impl::kAuto, Impl::kDecodeSimt, Impl::kDecodeMma, Impl::kDecodeMmaPrefetch,
                        Impl::kDecodeMmaEarly, Impl::kDecodeStaged, Impl::kDecodeStagedCluster}) {
        const double e = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim, impl, max_k);
        EXPECT_LT(e, kBf16Tol) << "heads " << s.num_heads << "/" << s.num_kv_heads << " d=" << s.head_dim
                               << " grid for " << max_k << " " << impl_name(impl);
      }
    }
  }
}

// The staged kernel's global merge and the cluster merge (kStagedCluster) on the same data: both within the
// tolerance of the CPU, and the same bits (they sum the same partials in the same order). The shared generator is
// seeded for the two runs and put back afterwards.
void expect_cluster_merge_bits(const std::vector<SeqSpec>& seqs, const Shape& s, int64_t max_k, bool fp8) {
  const std::mt19937 saved = rng();
  std::vector<float> global, cluster;
  rng().seed(0x5eed);
  const double e1 = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim, Impl::kDecodeStaged, max_k, 0, false, 16,
                             0, fp8, &global);
  rng().seed(0x5eed);
  const double e2 = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim, Impl::kDecodeStagedCluster, max_k, 0,
                             false, 16, 0, fp8, &cluster);
  rng() = saved;
  const std::string what = "heads " + std::to_string(s.num_heads) + "/" + std::to_string(s.num_kv_heads) + " d=" +
                           std::to_string(s.head_dim) + " seqs " + std::to_string(seqs.size()) + " first " +
                           std::to_string(seqs[0].ctx_len) + " max_k " + std::to_string(max_k) + (fp8 ? " fp8" : "");
  EXPECT_LT(e1, kBf16Tol) << what;
  EXPECT_LT(e2, kBf16Tol) << what;
  ASSERT_EQ(global.size(), cluster.size()) << what;
  EXPECT_EQ(0, std::memcmp(global.data(), cluster.data(), global.size() * sizeof(float))) << what;
}

// Over 2 to 8 active splits (4k keys at batch 1 take 8), sequences of one split beside longer ones in one launch (a
// cluster's other blocks exit), grids sized for a longer context, and an fp8 cache.
TEST(CudaAttention, DecodeClusterMergeHasTheGlobalMergeBits) {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{1, 4096}}, {{1, 4097}}, {{1, 700}}, {{1, 2000}, {1, 3}, {1, 1500}}, {{1, 100}, {1, 16}, {1, 1023}, {1, 1}}};
  for (const auto& seqs : batches) {
    for (const Shape& s : kShapes) {
      for (int64_t max_k : {int64_t(0), int64_t(131072)}) {
        for (bool fp8 : {false, true}) expect_cluster_merge_bits(seqs, s, max_k, fp8);
      }
    }
  }
}

// Batch 1 (8 splits of 8 KV heads; 2 at 300 keys) on the Llama-3.1-8B head shape and at head_dim 64: small enough
// for racecheck.
TEST(CudaAttention, DecodeClusterMergeAtBatchOne) {
  for (const Shape& s : {Shape{32, 8, 128}, Shape{16, 8, 64}}) {
    for (int64_t keys : {4097, 300}) expect_cluster_merge_bits({{1, keys}}, s, 0, false);
  }
}

TEST(CudaAttention, PrefillFromEmptyCache) {
  check_all_impls({{1, 1}, {15, 15}, {16, 16}, {17, 17}, {130, 130}}, "prefill ragged");
  check_all_impls({{255, 255}}, "prefill 255");
}

TEST(CudaAttention, ChunkedPrefillWithPrefixInCache) {
  check_all_impls({{40, 200}, {64, 64 + 16}, {7, 300}}, "prefix chunks");
}

TEST(CudaAttention, MixedPrefillAndDecode) {
  check_all_impls({{1, 50}, {70, 70}, {1, 17}, {33, 129}, {1, 1}}, "mixed");
}

// Mixed steps as the model runner stages them: the decode rows first (num_leading_decodes), then prefill chunks,
// some with a prefix in the cache. With the split on (CudaBackend::set_split_mixed), the leading decode rows run
// through the decode kernel and the rest through the prefill kernel (from the first of them on: offset tables,
// absolute rows); with it off, every row through the prefill kernel. Both against the CPU, at the GQA shapes, with
// the count of leading decodes from one to all but one.
TEST(CudaAttention, MixedBatchLeadingDecodeRowsSplit) {
  const std::vector<SeqSpec> seqs = {{1, 300}, {1, 17}, {1, 4097}, {1, 1}, {40, 200}, {130, 130}, {1, 50}, {7, 7}};
  const bool split_default = cuda().split_mixed();
  for (bool split : {true, false}) {
    cuda().set_split_mixed(split);
    for (const Shape& s : kShapes) {
      for (int64_t lead : {1, 4}) {
        const double e = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim, Impl::kAuto, 0, 0, false, 16, lead);
        EXPECT_LT(e, kBf16Tol) << "heads " << s.num_heads << "/" << s.num_kv_heads << " d=" << s.head_dim
                               << " leading decodes " << lead << (split ? " split" : "");
      }
    }
    const std::vector<SeqSpec> one_prefill = {{1, 33}, {1, 2000}, {1, 16}, {1, 129}, {64, 64 + 100}};
    const double e = run_case(one_prefill, 32, 8, 128, Impl::kAuto, 0, 0, false, 16, 4);
    EXPECT_LT(e, kBf16Tol) << "all but one sequence decoding" << (split ? " split" : "");
  }
  cuda().set_split_mixed(split_default);
}

TEST(CudaAttention, LargeRandomBatch) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 12; ++i) {
    const int64_t ctx = 1 + static_cast<int64_t>(rng()() % 700);
    const int64_t q = i % 3 == 0 ? 1 : 1 + static_cast<int64_t>(rng()() % ctx);
    seqs.push_back({q, ctx});
  }
  const double e = run_case(seqs, 32, 8, 128, CudaBackend::AttentionImpl::kAuto);
  EXPECT_LT(e, kBf16Tol);
}

// The Hopper prefill (TMA + wgmma; compute capability 9.0, head_dim 128) in both block layouts (one query head per
// block, and GQA-packed) against the FA2 kernel's reference role: ragged lengths around the 128-key tiles and the
// 64-row consumer halves, prefixes in the cache, decode rows mixed in, page sizes from 8 to 256 tokens (one TMA
// box per page, or per 128-key tile inside a page), GQA groups that do and do not divide 64 (7: the packed launch
// falls back to one block per head). NaN in every unused cache slot checks that the tail tile's stale V rows are
// zeroed before P V. Both turn orders of the consumers (a barrier after each work item, and turns running on across
// items) with 2 and 3 V stages (one Q buffer); the last batch's many short sequences give each block of the
// persistent grid a long run of short items, some of them empty for one consumer.
TEST(CudaAttention, HopperPrefillLayoutsAndPageSizes) {
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cuda().device_index()), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cuda().device_index()), cudaSuccess);
  cuda::AttentionArgs probe;
  probe.head_dim = 128;
  probe.num_heads = 32;
  probe.num_kv_heads = 8;
  probe.row = 48 * 128;
  probe.block_size = 16;
  probe.kv_slots = 1024;
  // On compute capability 9.0 the kernel under test must be the one that runs (else this tests FA2 again).
  EXPECT_EQ(cuda::prefill_attention_sm90_supported(probe), major == 9 && minor == 0);
  const std::vector<SeqSpec> batches[] = {{{1, 1}, {127, 127}, {128, 128}, {129, 129}, {300, 300}},
                                          {{40, 200}, {64, 64 + 16}, {7, 300}, {1, 513}, {200, 457}},
                                          {{1000, 1000}},
                                          {{65, 65},   {1, 90},   {130, 130}, {3, 3},     {64, 64},  {200, 260},
                                           {17, 17},   {1, 1},    {129, 140}, {66, 66},   {9, 300},  {128, 128},
                                           {190, 190}, {31, 31},  {1, 64},    {100, 100}, {2, 2},    {150, 170}}};
  const Shape shapes[] = {{32, 8, 128}, {16, 16, 128}, {14, 2, 128}, {8, 1, 128}};
  const cuda::PrefillSm90Options production_form = cuda().prefill_sm90_form();
  const int snake_default = cuda().prefill_snake_mode();
  const int diag_half_default = cuda().prefill_diag_half_mode();
  const int q_ring_default = cuda().prefill_q_ring_mode();
  const bool q_ring_here = cuda().prefill_q_ring(1000);  // production's choice at these batches' longest key row
  // Bits 1 and 2: continuous turns and 3 V stages. Bit 4: the lazy rescale (production since session 20: 7 is the full
  // sweep). Bit 32: snake-ordered rounds of work items forced on (production turns them on from
  // kPrefillSm90SnakeMinKeyTiles key tiles, past these batches' longest row). The diagonal's half tiles (a consumer's
  // last tile on its first 64 keys where the rest are past its rows) are production's at these batches' lengths
  // (prefill_sm90_diag_half; they reach it as the first tile, as the second after a full one, and after several), with
  // the lazy rescale; bit 256 turns them off (production's form above kPrefillSm90DiagHalfMaxKeyTiles key tiles, with
  // the exponentials first where production has them: 263). Bit 512 turns production's choice of the exponentials
  // first over (built without the half tiles: 775 is the form without them). Bit 1024 turns production's choice of Q in
  // the K stages' ring over (on at these lengths since session 39, prefill_sm90_q_ring; built with production's two
  // forms: 0 and 263 run it, 1031 and 1287 the half tiles and the exponentials first without it).
  for (const int lab : {0, 1, 2, 3, 7, 39, 263, 775, 1031, 1287}) {
    cuda::PrefillSm90Options form;
    form.continuous_turns = lab & 1;
    form.v_stages = lab & 2 ? 3 : 2;
    form.lazy_rescale = lab & 4;
    form.exp_first = production_form.exp_first != static_cast<bool>(lab & 512);
    const bool snake = lab & 32, no_diag_half = lab & 256, q_ring = q_ring_here != static_cast<bool>(lab & 1024);
    cuda().set_prefill_sm90_form(form);
    cuda().set_prefill_snake_mode(snake ? 1 : snake_default);
    cuda().set_prefill_diag_half_mode(no_diag_half ? 0 : diag_half_default);
    cuda().set_prefill_q_ring_mode(lab & 1024 ? static_cast<int>(q_ring) : q_ring_default);
    const bool production =
        form.continuous_turns == production_form.continuous_turns && form.v_stages == production_form.v_stages &&
        form.lazy_rescale == production_form.lazy_rescale && form.exp_first == production_form.exp_first &&
        !snake && !no_diag_half && !(lab & 1024);
    for (const auto impl : {CudaBackend::AttentionImpl::kAuto, CudaBackend::AttentionImpl::kHopperPacked}) {
      for (int64_t bs : {int64_t{8}, int64_t{16}, int64_t{32}, int64_t{256}}) {
        // The production form on every case; the others on the page sizes at both ends (one box per page, one box
        // per tile) and two GQA shapes (one that packs, one that falls back): every case takes a CPU reference.
        if (!production && (bs == 8 || bs == 32)) continue;
        for (size_t b = 0; b < std::size(batches); ++b) {
          for (const Shape& s : shapes) {
            if (!production && s.num_heads != 32 && s.num_heads != 14) continue;
            const double e = run_case(batches[b], s.num_heads, s.num_kv_heads, s.head_dim, impl, 0, 0, false, bs);
            EXPECT_LT(e, kBf16Tol) << "block size " << bs << " batch " << b << " heads " << s.num_heads << "/"
                                   << s.num_kv_heads << (impl == CudaBackend::AttentionImpl::kAuto ? "" : " packed")
                                   << (form.continuous_turns ? " continuous turns" : "") << " V stages "
                                   << form.v_stages << (form.lazy_rescale ? " lazy rescale" : "")
                                   << (snake ? " snake" : "")
                                   << (no_diag_half ? " no diagonal half tiles" : "")
                                   << (form.exp_first ? " exponentials first" : "")
                                   << (q_ring ? " Q ring" : "");
          }
        }
      }
    }
  }
  cuda().set_prefill_sm90_form(production_form);
  cuda().set_prefill_snake_mode(snake_default);
  cuda().set_prefill_diag_half_mode(diag_half_default);
  cuda().set_prefill_q_ring_mode(q_ring_default);
}

// Queries in [-16, 16), scores 8 times as wide as the other cases': later key tiles often pass a row's running max by
// more than 2^8, so the Hopper prefill's lazy rescale moves it. Production's form up to 2k keys (the diagonal's half
// tiles), and without the half tiles both without and with the exponentials first (production's form above 2k keys:
// a tile's exponentials against the running max past a row's first tile, the max only in warps where a row's sum
// reaches 2^8), whose rows here take both paths.
TEST(CudaAttention, HopperPrefillWideScores) {
  const std::vector<SeqSpec> batches[] = {{{40, 1000}, {1, 513}, {200, 457}}, {{700, 700}}};
  const Shape shapes[] = {{32, 8, 128}, {8, 1, 128}};
  const cuda::PrefillSm90Options production_form = cuda().prefill_sm90_form();
  const int diag_half_default = cuda().prefill_diag_half_mode();
  for (int form = 0; form < 3; ++form) {
    cuda::PrefillSm90Options o = production_form;
    o.exp_first = form == 2;
    cuda().set_prefill_sm90_form(o);
    cuda().set_prefill_diag_half_mode(form == 0 ? diag_half_default : 0);
    for (size_t b = 0; b < std::size(batches); ++b) {
      for (const Shape& s : shapes) {
        const double e = run_case(batches[b], s.num_heads, s.num_kv_heads, s.head_dim,
                                  CudaBackend::AttentionImpl::kAuto, 0, 0, false, 16, 0, false, nullptr, 16.0f);
        EXPECT_LT(e, kBf16Tol) << "batch " << b << " heads " << s.num_heads << "/" << s.num_kv_heads
                               << (form == 0 ? "" : form == 1 ? " without the half tiles" : " exponentials first");
      }
    }
  }
  cuda().set_prefill_sm90_form(production_form);
  cuda().set_prefill_diag_half_mode(diag_half_default);
}

// An FP8 e4m3 cache through every kernel that reads one: the decode kernels (tensor-core kernel at head_dim 64 /
// 128, CUDA-core kernel at 256 and for groups the MMA kernel does not take; the lab modes run the plain walk), the
// FA2 prefill kernel (kAuto: the Hopper prefill does not take fp8), the mixed-step split, the naive kernel, and
// the sliding window with sinks. Against the CPU over the f32 values the codes stand for; NaN codes in every unused
// slot.
TEST(CudaAttention, Fp8CacheEveryKernel) {
  const std::vector<SeqSpec> batches[] = {{{1, 1}, {1, 15}, {1, 16}, {1, 17}, {1, 255}, {1, 33}, {1, 1000}},
                                          {{1, 4097}},
                                          {{1, 1}, {15, 15}, {16, 16}, {17, 17}, {130, 130}},
                                          {{40, 200}, {64, 64 + 16}, {7, 300}},
                                          {{1, 50}, {70, 70}, {1, 17}, {33, 129}, {1, 1}}};
  for (size_t b = 0; b < std::size(batches); ++b) {
    for (const Shape& s : kShapes) {
      for (auto impl : {Impl::kAuto, Impl::kNaive, Impl::kDecodeSimt, Impl::kDecodeMma, Impl::kDecodeMmaPrefetch,
                        Impl::kDecodeStaged, Impl::kDecodeStagedCluster, Impl::kFlash2}) {
        const double e = run_case(batches[b], s.num_heads, s.num_kv_heads, s.head_dim, impl, 0, 0, false, 16, 0,
                                  /*fp8=*/true);
        EXPECT_LT(e, kBf16Tol) << "fp8 batch " << b << ": heads " << s.num_heads << "/" << s.num_kv_heads
                               << " d=" << s.head_dim << " " << impl_name(impl);
      }
      // A CUDA graph captured for a longer context (the decode grid sized for it).
      const double g = run_case({{1, 1}, {1, 17}, {1, 384}, {1, 4097}}, s.num_heads, s.num_kv_heads, s.head_dim,
                                Impl::kAuto, 131072, 0, false, 16, 0, true);
      EXPECT_LT(g, kBf16Tol) << "fp8 decode grid for 131072: heads " << s.num_heads << "/" << s.num_kv_heads
                             << " d=" << s.head_dim;
    }
  }
  const std::vector<SeqSpec> mixed = {{1, 300}, {1, 17}, {1, 4097}, {1, 1}, {40, 200}, {130, 130}, {1, 50}, {7, 7}};
  const bool split_default = cuda().split_mixed();
  for (bool split : {true, false}) {
    cuda().set_split_mixed(split);
    for (const Shape& s : kShapes) {
      const double e = run_case(mixed, s.num_heads, s.num_kv_heads, s.head_dim, Impl::kAuto, 0, 0, false, 16, 4, true);
      EXPECT_LT(e, kBf16Tol) << "fp8 mixed, 4 leading decodes" << (split ? " split" : "") << ": heads "
                             << s.num_heads << "/" << s.num_kv_heads << " d=" << s.head_dim;
    }
  }
  cuda().set_split_mixed(split_default);
  for (int64_t window : {int64_t{0}, int64_t{40}}) {
    const double e = run_case({{1, 77}, {64, 64}, {1, 1}, {20, 151}}, 8, 2, 64, Impl::kAuto, 0, window, true, 16, 0,
                              true);
    EXPECT_LT(e, kBf16Tol) << "fp8 window " << window << " with sinks";
  }
}

// GPT-OSS attention: sliding windows (shorter and longer than the contexts, across page boundaries) and sinks,
// in prefill chunks with a prefix in the cache, decode, and mixed batches.
TEST(CudaAttention, SlidingWindowAndSinks) {
  const std::vector<SeqSpec> batches[] = {{{1, 300}, {1, 17}, {1, 128}, {1, 129}},
                                          {{40, 40}, {33, 200}, {7, 95}},
                                          {{1, 77}, {64, 64}, {1, 1}, {20, 151}}};
  for (const auto& seqs : batches) {
    for (int64_t window : {int64_t{0}, int64_t{8}, int64_t{40}, int64_t{128}}) {
      for (bool sinks : {false, true}) {
        if (window == 0 && !sinks) continue;
        for (const Shape& s : {Shape{8, 2, 64}, Shape{4, 4, 128}}) {
          const double e = run_case(seqs, s.num_heads, s.num_kv_heads, s.head_dim,
                                    CudaBackend::AttentionImpl::kAuto, 0, window, sinks);
          EXPECT_LT(e, kBf16Tol) << "window " << window << (sinks ? " sinks" : "") << " heads " << s.num_heads
                                 << "/" << s.num_kv_heads << " d=" << s.head_dim << " seqs " << seqs.size();
        }
      }
    }
  }
}

}  // namespace
}  // namespace rl::ops_test
