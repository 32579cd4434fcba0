// The bf16 KV cache on every CPU kernel tier this machine supports (cpu_isa.h). A bf16 cache is read by widening
// each element exactly to f32, so attention over it computes what the f32 path computes over an f32 cache holding
// the same (widened) values. The intrinsic kernels (the grouped AVX-512 kernel, the AVX2/AVX-512 dot and axpy)
// run the same instructions in the same order on both, and must agree to the bit; the plain C++ loops (the scalar
// tier, the sliding-window path) are vectorised by the compiler, which may split a sum differently for 16-bit
// elements, so there the two agree to f32 rounding. Every path is also checked against a float64 softmax over the
// widened values. Paged attention (the grouped kernel, the reference loop of the scalar and AVX2 tiers and of head
// dims the kernel does not take), the sliding-window path with sinks, MLA, and kv_write's rounding. An fp8 (e4m3)
// cache is read the same way (each row widened exactly into f32, then the f32 dot / axpy; the reference loop) and
// checked the same way (the span kernel widens it through a table lookup); kv_write's saturation too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"

namespace rl {
namespace {

std::vector<float> random_f32(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  convert_from_f32(v.data(), r.data(), DType::kBF16, v.size());
  return r;
}

std::vector<float> widened(const std::vector<uint16_t>& v) {
  std::vector<float> r(v.size());
  convert_to_f32(v.data(), DType::kBF16, r.data(), v.size());
  return r;
}

// A narrow cache's raw bytes (bf16 or fp8 e4m3) and their exact widening.
std::vector<uint8_t> narrowed(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> r(v.size() * dtype_size(dt));
  convert_from_f32(v.data(), r.data(), dt, v.size());
  return r;
}
std::vector<float> widened(const std::vector<uint8_t>& bytes, DType dt) {
  std::vector<float> r(bytes.size() / dtype_size(dt));
  convert_to_f32(bytes.data(), dt, r.data(), r.size());
  return r;
}

template <typename T>
double rel_err(const std::vector<float>& a, const std::vector<T>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(static_cast<double>(b[i]))) return std::numeric_limits<double>::infinity();
    const double diff = a[i] - static_cast<double>(b[i]);
    num += diff * diff;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct SeqSpec {
  int64_t q_len;    // query tokens this step (1: decode)
  int64_t ctx_len;  // context including them
};

// A batch of sequences over a paged cache with a shuffled block table: the narrow cache (bf16, or fp8 e4m3) and
// an f32 cache holding the same values widened.
struct Batch {
  QkvLayout l;
  int64_t bs = 16, num_blocks = 0, max_blocks = 0, num_tokens = 0, max_q = 0, max_k = 0;
  DType narrow = DType::kBF16;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> cu, lens, table;
  std::vector<float> qkv, k32, v32;
  std::vector<uint8_t> kn, vn;  // the narrow cache's bytes

  Batch(const QkvLayout& layout, int64_t block_size, const std::vector<SeqSpec>& specs, uint32_t seed,
        DType narrow_dtype = DType::kBF16)
      : l(layout), bs(block_size), narrow(narrow_dtype), seqs(specs) {
    cu.push_back(0);
    for (const SeqSpec& s : seqs) {
      num_tokens += s.q_len;
      max_q = std::max(max_q, s.q_len);
      max_k = std::max(max_k, s.ctx_len);
      max_blocks = std::max(max_blocks, (s.ctx_len + bs - 1) / bs);
      num_blocks += (s.ctx_len + bs - 1) / bs;
      cu.push_back(cu.back() + static_cast<int32_t>(s.q_len));
      lens.push_back(static_cast<int32_t>(s.ctx_len));
    }
    num_blocks += 1;  // block 0, never handed out
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    table.assign(seqs.size() * static_cast<size_t>(max_blocks), 0);
    size_t next = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int64_t b = 0; b * bs < seqs[s].ctx_len; ++b) table[s * static_cast<size_t>(max_blocks) + b] = ids[next++];
    }
    const size_t cache = static_cast<size_t>(num_blocks * bs * l.num_kv_heads * l.head_dim);
    kn = narrowed(random_f32(cache, seed + 1), narrow);
    vn = narrowed(random_f32(cache, seed + 2), narrow);
    k32 = widened(kn, narrow);
    v32 = widened(vn, narrow);
    qkv = random_f32(static_cast<size_t>(num_tokens * l.row()), seed + 3, 4.0f);  // peaked softmaxes too
  }

  AttentionMetadata meta() const {
    AttentionMetadata m;
    const int64_t ns = static_cast<int64_t>(seqs.size());
    m.cu_seqlens_q = Tensor(const_cast<int32_t*>(cu.data()), DType::kI32, {ns + 1});
    m.seq_lens_k = Tensor(const_cast<int32_t*>(lens.data()), DType::kI32, {ns});
    m.block_tables = Tensor(const_cast<int32_t*>(table.data()), DType::kI32, {ns, max_blocks});
    m.num_seqs = ns;
    m.max_seqlen_q = max_q;
    m.max_seqlen_k = max_k;
    m.all_decode = max_q == 1;
    m.layout = l;
    m.scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim));
    return m;
  }
  template <typename T>
  KvLayer cache(std::vector<T>& k, std::vector<T>& v, DType dt) const {
    return KvLayer{Tensor(k.data(), dt, {num_blocks, bs, l.num_kv_heads, l.head_dim}),
                   Tensor(v.data(), dt, {num_blocks, bs, l.num_kv_heads, l.head_dim})};
  }

  // float64 softmax over the widened values: query token i of sequence s at position ctx - q_len + (i - cu[s])
  // sees keys (pos - window, pos] (window 0: all); a sink adds exp(sink) to the denominator.
  std::vector<double> reference(const AttentionMetadata& m) const {
    const int64_t d = l.head_dim, group = l.num_heads / l.num_kv_heads, kv_row = l.num_kv_heads * d;
    std::vector<double> out(static_cast<size_t>(num_tokens * l.num_heads * d));
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int64_t i = cu[s]; i < cu[s + 1]; ++i) {
        const int64_t pos = seqs[s].ctx_len - seqs[s].q_len + (i - cu[s]);
        const int64_t first = m.sliding_window > 0 ? std::max<int64_t>(0, pos - m.sliding_window + 1) : 0;
        for (int64_t h = 0; h < l.num_heads; ++h) {
          const int64_t kvh = h / group;
          const float* q = qkv.data() + i * l.row() + h * d;
          std::vector<double> p;
          double mx = m.sinks ? m.sinks[h] : -INFINITY;
          for (int64_t j = first; j <= pos; ++j) {
            const int64_t slot = table[s * static_cast<size_t>(max_blocks) + j / bs] * bs + j % bs;
            double dot = 0;
            for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k32[slot * kv_row + kvh * d + c];
            p.push_back(dot * m.scale);
            mx = std::max(mx, p.back());
          }
          double sum = m.sinks ? std::exp(m.sinks[h] - mx) : 0.0;
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (int64_t c = 0; c < d; ++c) {
            double o = 0;
            for (int64_t j = first; j <= pos; ++j) {
              const int64_t slot = table[s * static_cast<size_t>(max_blocks) + j / bs] * bs + j % bs;
              o += p[static_cast<size_t>(j - first)] * v32[slot * kv_row + kvh * d + c];
            }
            out[static_cast<size_t>((i * l.num_heads + h) * d + c)] = o / sum;
          }
        }
      }
    }
    return out;
  }
};

// Runs the batch through be.attention over both caches: the narrow cache's result agrees with the f32 one to f32
// rounding (to the bit where the same intrinsic kernel runs for both, GroupedKernelOverBf16EqualsF32ToTheBit; fp8
// has no grouped kernel, so there the reference loop meets the f32 cache's kernel) and with the float64 softmax.
void check_batch(CpuBackend& be, Batch& b, int64_t window = 0, const std::vector<float>* sinks = nullptr) {
  AttentionMetadata m = b.meta();
  m.sliding_window = window;
  if (sinks) m.sinks = sinks->data();
  const size_t n = static_cast<size_t>(b.num_tokens * b.l.num_heads * b.l.head_dim);
  std::vector<float> out_n(n, std::numeric_limits<float>::quiet_NaN()), out32 = out_n;
  Tensor qkv(b.qkv.data(), DType::kF32, {b.num_tokens, b.l.row()});
  be.attention(qkv, b.cache(b.kn, b.vn, b.narrow), m,
               Tensor(out_n.data(), DType::kF32, {b.num_tokens, b.l.num_heads * b.l.head_dim}));
  be.attention(qkv, b.cache(b.k32, b.v32, DType::kF32), m,
               Tensor(out32.data(), DType::kF32, {b.num_tokens, b.l.num_heads * b.l.head_dim}));
  EXPECT_LT(rel_err(out_n, out32), 1e-6) << "a " << dtype_name(b.narrow)
                                         << " cache computes what an f32 cache of the widened values computes";
  EXPECT_LT(rel_err(out_n, b.reference(m)), 1e-5);
}

struct HeadShape {
  int64_t num_heads, num_kv_heads, head_dim;
};
// GQA groups of 1, 2 (Qwen3-0.6B: 16/8 x 128), 4 and 8; head dims of whole vectors (the grouped kernel) and 72
// (the reference loop on every tier), and 256 (the kernel's largest).
const HeadShape kHeadShapes[] = {{4, 4, 64}, {16, 8, 128}, {8, 2, 64}, {16, 2, 128}, {6, 2, 72}, {4, 1, 256}};

class CpuKvBf16Tiers : public ::testing::TestWithParam<CpuIsa> {};

// Decode at context lengths around the 16-key chunks and the blocks, a batch mixing prefill chunks (with keys
// already in the cache) and decode rows, over blocks of 16 and of 5 (blocks smaller than a chunk); a bf16 cache
// and an fp8 one.
TEST_P(CpuKvBf16Tiers, PagedAttentionMatchesF32CacheOfTheWidenedValues) {
  CpuBackend be(2, GetParam());
  uint32_t seed = 100;
  for (const DType narrow : {DType::kBF16, DType::kFP8E4M3}) {
    for (const HeadShape& hs : kHeadShapes) {
      for (const int64_t bs : {16, 5}) {
        SCOPED_TRACE(std::string(dtype_name(narrow))
                         .append(" heads ")
                         .append(std::to_string(hs.num_heads))
                         .append("/")
                         .append(std::to_string(hs.num_kv_heads))
                         .append(" d=")
                         .append(std::to_string(hs.head_dim))
                         .append(" bs=")
                         .append(std::to_string(bs)));
        const QkvLayout l{hs.num_heads, hs.num_kv_heads, hs.head_dim};
        Batch decode(l, bs, {{1, 1}, {1, 15}, {1, 16}, {1, 17}, {1, 33}, {1, 100}, {1, 250}}, seed++, narrow);
        check_batch(be, decode);
        Batch mixed(l, bs, {{5, 5}, {1, 31}, {17, 40}, {3, 64}}, seed++, narrow);
        check_batch(be, mixed);
        Batch single(l, bs, {{1, 300}}, seed++, narrow);  // one decode token: its keys split over the threads
        check_batch(be, single);
      }
    }
  }
}

// The sliding-window path (GPT-OSS) with and without sinks reads a bf16 or fp8 cache the same way.
TEST_P(CpuKvBf16Tiers, WindowAttentionMatchesF32CacheOfTheWidenedValues) {
  CpuBackend be(2, GetParam());
  for (const DType narrow : {DType::kBF16, DType::kFP8E4M3}) {
    for (const HeadShape& hs : {HeadShape{8, 2, 64}, HeadShape{6, 2, 72}}) {
      SCOPED_TRACE(std::string(dtype_name(narrow)));
      const QkvLayout l{hs.num_heads, hs.num_kv_heads, hs.head_dim};
      Batch b(l, 16, {{1, 7}, {1, 40}, {12, 50}}, 7, narrow);
      const std::vector<float> sinks = random_f32(static_cast<size_t>(hs.num_heads), 9, 2.0f);
      check_batch(be, b, /*window=*/20);
      check_batch(be, b, /*window=*/20, &sinks);
      check_batch(be, b, /*window=*/0, &sinks);
    }
  }
}

// The grouped kernel of the AVX-512 tiers reads a bf16 row with the same instructions as an f32 row after one
// widening step: equal to the bit, for every group size, head dim it takes, chunk tail and block size.
TEST_P(CpuKvBf16Tiers, GroupedKernelOverBf16EqualsF32ToTheBit) {
  const CpuKernels& k = cpu_kernels(GetParam());
  if (k.attn_group_bf16 == nullptr) {  // the scalar and AVX2 tiers run the reference loop only
    EXPECT_LT(GetParam(), CpuIsa::kAvx512) << "every AVX-512 tier has the grouped kernel";
    EXPECT_EQ(k.attn_group_f32, nullptr);
    return;
  }
  const int64_t num_kv_heads = 3, num_blocks = 40, kvh = 1;
  for (const int64_t d : {64, 128, 256}) {
    for (const int64_t bs : {16, 5}) {
      for (const int64_t group : {1, 2, 4, 8}) {
        for (const int64_t nk : {1, 15, 16, 17, 100}) {
          SCOPED_TRACE(std::string("d=")
                           .append(std::to_string(d))
                           .append(" bs=")
                           .append(std::to_string(bs))
                           .append(" group=")
                           .append(std::to_string(group))
                           .append(" nk=")
                           .append(std::to_string(nk)));
          const size_t cache = static_cast<size_t>(num_blocks * bs * num_kv_heads * d);
          const std::vector<uint16_t> k16 = to_bf16(random_f32(cache, 51)), v16 = to_bf16(random_f32(cache, 52));
          const std::vector<float> k32 = widened(k16), v32 = widened(v16);
          const std::vector<float> q = random_f32(static_cast<size_t>(group * d), 53, 4.0f);
          std::vector<int32_t> table(static_cast<size_t>(num_blocks));
          for (int64_t b = 0; b < num_blocks; ++b) {
            table[static_cast<size_t>(b)] = static_cast<int32_t>((b * 7 + 3) % num_blocks);
          }
          std::vector<float> out16(static_cast<size_t>(group * d), std::numeric_limits<float>::quiet_NaN());
          std::vector<float> out32 = out16;
          AttnGroupArgsBf16 a16;
          a16.q = q.data();
          a16.out = out16.data();
          a16.k = k16.data() + kvh * d;
          a16.v = v16.data() + kvh * d;
          a16.table = table.data();
          a16.group = group;
          a16.d = d;
          a16.bs = bs;
          a16.nk = nk;
          a16.slot_stride = num_kv_heads * d;
          a16.scale = 1.0f / std::sqrt(static_cast<float>(d));
          AttnGroupArgs a32;
          a32.q = a16.q;
          a32.out = out32.data();
          a32.k = k32.data() + kvh * d;
          a32.v = v32.data() + kvh * d;
          a32.table = a16.table;
          a32.group = group;
          a32.d = d;
          a32.bs = bs;
          a32.nk = nk;
          a32.slot_stride = a16.slot_stride;
          a32.scale = a16.scale;
          ASSERT_TRUE(k.attn_group_bf16(a16));
          ASSERT_TRUE(k.attn_group_f32(a32));
          EXPECT_EQ(out16, out32);
        }
      }
    }
  }
  AttnGroupArgsBf16 odd;
  odd.d = 72;  // not whole vectors: the caller falls back to the reference loop
  odd.group = 1;
  odd.nk = 1;
  EXPECT_FALSE(k.attn_group_bf16(odd));
}

// dot_bf16 / axpy_bf16 against the same tier's f32 functions on the widened rows: to the bit in the intrinsic
// tiers, to f32 rounding in the scalar tier's plain loops; and against a float64 sum.
TEST_P(CpuKvBf16Tiers, DotAndAxpyOverBf16RowsMatchF32OverTheWidenedRows) {
  const CpuKernels& k = cpu_kernels(GetParam());
  const bool intrinsics = GetParam() != CpuIsa::kScalar;
  for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 100, 128, 576}) {
    SCOPED_TRACE(std::string("n=").append(std::to_string(n)));
    const std::vector<float> a = random_f32(static_cast<size_t>(n), 21);
    const std::vector<uint16_t> b16 = to_bf16(random_f32(static_cast<size_t>(n), 22));
    const std::vector<float> b32 = widened(b16);
    double want = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(a[static_cast<size_t>(i)]) * b32[static_cast<size_t>(i)];
      norm += std::abs(static_cast<double>(a[static_cast<size_t>(i)]) * b32[static_cast<size_t>(i)]);
    }
    const float dot16 = k.dot_bf16(a.data(), b16.data(), n), dot32 = k.dot_f32(a.data(), b32.data(), n);
    if (intrinsics) {
      EXPECT_EQ(dot16, dot32);
    } else {
      EXPECT_NEAR(dot16, dot32, 2e-7 * norm);
    }
    EXPECT_NEAR(dot16, want, 1e-6 * norm);
    std::vector<float> y16 = a, y32 = a;
    k.axpy_bf16(0.37f, b16.data(), y16.data(), n);
    k.axpy_f32(0.37f, b32.data(), y32.data(), n);
    if (intrinsics) {
      EXPECT_EQ(y16, y32);
    } else {
      EXPECT_LT(rel_err(y16, y32), 1e-6);
    }
  }
}

// kv_write rounds each element to nearest even (f32_to_bf16) into its slot; negative slots are skipped.
TEST_P(CpuKvBf16Tiers, KvWriteRoundsToNearestEven) {
  CpuBackend be(2, GetParam());
  const QkvLayout l{4, 2, 64};
  const int64_t num_blocks = 3, bs = 4, t = 3, kv_row = l.num_kv_heads * l.head_dim;
  std::vector<float> qkv = random_f32(static_cast<size_t>(t * l.row()), 31, 3.0f);
  std::vector<int32_t> slots = {5, -1, 11};
  std::vector<uint16_t> k(static_cast<size_t>(num_blocks * bs * kv_row)), v(k.size());
  be.kv_write(Tensor(qkv.data(), DType::kF32, {t, l.row()}), l, Tensor(slots.data(), DType::kI32, {t}),
              KvLayer{Tensor(k.data(), DType::kBF16, {num_blocks, bs, l.num_kv_heads, l.head_dim}),
                      Tensor(v.data(), DType::kBF16, {num_blocks, bs, l.num_kv_heads, l.head_dim})});
  for (int64_t slot = 0; slot < num_blocks * bs; ++slot) {
    const int64_t i = slot == 5 ? 0 : slot == 11 ? 2 : -1;
    for (int64_t c = 0; c < kv_row; ++c) {
      const size_t at = static_cast<size_t>(slot * kv_row + c);
      const uint16_t want_k = i < 0 ? 0 : f32_to_bf16(qkv[static_cast<size_t>(i * l.row() + l.k_offset() + c)]);
      const uint16_t want_v = i < 0 ? 0 : f32_to_bf16(qkv[static_cast<size_t>(i * l.row() + l.v_offset() + c)]);
      ASSERT_EQ(k[at], want_k) << "slot " << slot << " element " << c;
      ASSERT_EQ(v[at], want_v) << "slot " << slot << " element " << c;
    }
  }
}

// The span kernel widens fp8 rows arithmetically (no table): over rows holding every finite code, in both signs and
// both halves of its lane pairs, it computes bitwise what it computes over an f32 cache of the table's values.
TEST_P(CpuKvBf16Tiers, SpanKernelWidensEveryFp8CodeExactly) {
  const CpuKernels& k = cpu_kernels(GetParam());
  if (k.attn_span_fp8 == nullptr) {
    EXPECT_EQ(k.attn_span_f32, nullptr) << "a tier with the f32 span kernel has the fp8 one";
    return;
  }
  const int64_t d = 128, keys = 32, num_heads = 2;
  std::vector<uint8_t> k8(static_cast<size_t>(keys * d)), v8(k8.size());
  for (size_t i = 0; i < k8.size(); ++i) {
    int code = static_cast<int>((i * 37) % 254);  // 0x00 .. 0xfd: every code but 0x7f (NaN), 0xfe, 0xff
    if (code >= 0x7f) ++code;                     // skip 0x7f: 0x80 .. 0xfe
    k8[i] = static_cast<uint8_t>(code);
    v8[i] = static_cast<uint8_t>(code ^ 0x80);
  }
  const std::vector<float> k32 = widened(k8, DType::kFP8E4M3), v32 = widened(v8, DType::kFP8E4M3);
  const std::vector<float> q = random_f32(static_cast<size_t>(num_heads * d), 61);
  std::vector<int32_t> table = {1, 0};  // two blocks of 16, out of order
  std::vector<float> out8(static_cast<size_t>(num_heads * (d + 2))), out32(out8.size());
  AttnSpanArgsFp8 a8;
  a8.q = q.data();
  a8.k = k8.data();
  a8.v = v8.data();
  a8.table = table.data();
  a8.num_heads = num_heads;
  a8.num_kv_heads = 1;
  a8.d = d;
  a8.bs = 16;
  a8.j0 = 0;
  a8.j1 = keys;
  a8.scale = 1e-3f;  // scores of order 1 over values up to 448
  a8.o = out8.data();
  a8.m = a8.o + num_heads * d;
  a8.l = a8.m + num_heads;
  AttnSpanArgs a32;
  a32.q = a8.q;
  a32.k = k32.data();
  a32.v = v32.data();
  a32.table = a8.table;
  a32.num_heads = num_heads;
  a32.num_kv_heads = 1;
  a32.d = d;
  a32.bs = 16;
  a32.j0 = 0;
  a32.j1 = keys;
  a32.scale = a8.scale;
  a32.o = out32.data();
  a32.m = a32.o + num_heads * d;
  a32.l = a32.m + num_heads;
  ASSERT_TRUE(k.attn_span_fp8(a8));
  ASSERT_TRUE(k.attn_span_f32(a32));
  EXPECT_EQ(out8, out32);
  for (const float x : out8) ASSERT_TRUE(std::isfinite(x));
}

// kv_write into an fp8 cache: each element rounded by f32_to_fp8_e4m3 (nearest even, saturated at ±448).
TEST_P(CpuKvBf16Tiers, KvWriteIntoFp8RoundsAndSaturates) {
  CpuBackend be(2, GetParam());
  const QkvLayout l{4, 2, 64};
  const int64_t num_blocks = 3, bs = 4, t = 3, kv_row = l.num_kv_heads * l.head_dim;
  std::vector<float> qkv = random_f32(static_cast<size_t>(t * l.row()), 32, 3.0f);
  qkv[static_cast<size_t>(l.k_offset())] = 1000.0f;  // past 448: saturates
  qkv[static_cast<size_t>(l.v_offset() + 1)] = -500.0f;
  qkv[static_cast<size_t>(l.k_offset() + 2)] = 1e-4f;  // below the smallest subnormal's half: zero
  std::vector<int32_t> slots = {2, 9, -1};
  std::vector<uint8_t> k(static_cast<size_t>(num_blocks * bs * kv_row), 0xAA), v(k.size(), 0xAA);
  be.kv_write(Tensor(qkv.data(), DType::kF32, {t, l.row()}), l, Tensor(slots.data(), DType::kI32, {t}),
              KvLayer{Tensor(k.data(), DType::kFP8E4M3, {num_blocks, bs, l.num_kv_heads, l.head_dim}),
                      Tensor(v.data(), DType::kFP8E4M3, {num_blocks, bs, l.num_kv_heads, l.head_dim})});
  EXPECT_EQ(k[static_cast<size_t>(2 * kv_row)], 0x7e);
  EXPECT_EQ(v[static_cast<size_t>(2 * kv_row + 1)], 0xfe);
  EXPECT_EQ(k[static_cast<size_t>(2 * kv_row + 2)], 0x00);
  for (int64_t slot = 0; slot < num_blocks * bs; ++slot) {
    const int64_t i = slot == 2 ? 0 : slot == 9 ? 1 : -1;
    for (int64_t c = 0; c < kv_row; ++c) {
      const size_t at = static_cast<size_t>(slot * kv_row + c);
      const uint8_t want_k = i < 0 ? 0xAA : f32_to_fp8_e4m3(qkv[static_cast<size_t>(i * l.row() + l.k_offset() + c)]);
      const uint8_t want_v = i < 0 ? 0xAA : f32_to_fp8_e4m3(qkv[static_cast<size_t>(i * l.row() + l.v_offset() + c)]);
      ASSERT_EQ(k[at], want_k) << "slot " << slot << " element " << c;
      ASSERT_EQ(v[at], want_v) << "slot " << slot << " element " << c;
    }
  }
}

// MLA: the latent row written to a bf16 or fp8 cache is the f32 row rounded; attention over it equals attention over
// an f32 cache of the widened rows.
TEST_P(CpuKvBf16Tiers, MlaLatentCacheInBf16AndFp8) {
  CpuBackend be(2, GetParam());
  for (const DType narrow : {DType::kBF16, DType::kFP8E4M3}) {
    SCOPED_TRACE(std::string(dtype_name(narrow)));
    MlaLayout ml;
    ml.num_heads = 4;
    ml.nope_dim = 32;
    ml.rope_dim = 16;
    ml.kv_lora_rank = 64;
    const int64_t lat = ml.latent(), bs = 16, num_blocks = 5, t = 40;
    std::vector<float> q = random_f32(static_cast<size_t>(t * ml.num_heads * ml.q_head()), 41);
    std::vector<float> ckv = random_f32(static_cast<size_t>(t * lat), 42);
    std::vector<float> kv_norm = random_f32(static_cast<size_t>(ml.kv_lora_rank), 43);
    std::vector<float> inv_freq(static_cast<size_t>(ml.rope_dim / 2));
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / ml.rope_dim);
    std::vector<int32_t> positions(static_cast<size_t>(t)), slots(static_cast<size_t>(t));
    std::vector<int32_t> table = {3, 1, 4};  // block ids of the one sequence
    for (int64_t i = 0; i < t; ++i) {
      positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      slots[static_cast<size_t>(i)] = static_cast<int32_t>(table[static_cast<size_t>(i / bs)] * bs + i % bs);
    }
    MlaRopeParams rp;
    rp.layout = ml;
    rp.inv_freq = inv_freq.data();
    // q_lat's first kv_lora_rank columns per head come from head_linear in the model; here random.
    std::vector<float> q_lat = random_f32(static_cast<size_t>(t * ml.num_heads * lat), 44);
    std::vector<float> c32(static_cast<size_t>(num_blocks * bs * lat), 0.0f);
    std::vector<uint8_t> cn(c32.size() * dtype_size(narrow), 0);
    const Tensor q_t(q.data(), DType::kF32, {t, ml.num_heads * ml.q_head()}), ckv_t(ckv.data(), DType::kF32, {t, lat});
    const Tensor norm_t(kv_norm.data(), DType::kF32, {ml.kv_lora_rank});
    const Tensor pos_t(positions.data(), DType::kI32, {t}), slot_t(slots.data(), DType::kI32, {t});
    const Tensor q_lat_t(q_lat.data(), DType::kF32, {t, ml.num_heads * lat});
    const KvLayer cache32{Tensor(c32.data(), DType::kF32, {num_blocks, bs, 1, lat}), Tensor()};
    const KvLayer cache_n{Tensor(cn.data(), narrow, {num_blocks, bs, 1, lat}), Tensor()};
    be.mla_prepare(q_t, ckv_t, norm_t, pos_t, slot_t, rp, q_lat_t, cache32);
    be.mla_prepare(q_t, ckv_t, norm_t, pos_t, slot_t, rp, q_lat_t, cache_n);
    EXPECT_EQ(cn, narrowed(c32, narrow));

    std::vector<float> c32w = widened(cn, narrow);
    const KvLayer cache32w{Tensor(c32w.data(), DType::kF32, {num_blocks, bs, 1, lat}), Tensor()};
    std::vector<int32_t> cu = {0, static_cast<int32_t>(t)}, lens = {static_cast<int32_t>(t)};
    AttentionMetadata m;
    m.cu_seqlens_q = Tensor(cu.data(), DType::kI32, {2});
    m.seq_lens_k = Tensor(lens.data(), DType::kI32, {1});
    m.block_tables = Tensor(table.data(), DType::kI32, {1, 3});
    m.num_seqs = 1;
    m.max_seqlen_q = t;
    m.max_seqlen_k = t;
    m.scale = 0.125f;
    std::vector<float> o_n(static_cast<size_t>(t * ml.num_heads * ml.kv_lora_rank), 0.0f), o32 = o_n;
    be.mla_attention(q_lat_t, cache_n, m, ml, Tensor(o_n.data(), DType::kF32, {t, ml.num_heads * ml.kv_lora_rank}));
    be.mla_attention(q_lat_t, cache32w, m, ml, Tensor(o32.data(), DType::kF32, {t, ml.num_heads * ml.kv_lora_rank}));
    if (GetParam() == CpuIsa::kScalar) {  // plain loops: the compiler's vectorisation may round differently
      EXPECT_LT(rel_err(o_n, o32), 1e-6);
    } else {  // the tier's dot/axpy: the same instructions after the widening
      EXPECT_EQ(o_n, o32);
    }
  }
}

std::string tier_name(const ::testing::TestParamInfo<CpuIsa>& info) { return std::string(cpu_isa_name(info.param)); }

INSTANTIATE_TEST_SUITE_P(Supported, CpuKvBf16Tiers, ::testing::ValuesIn(supported_cpu_isas()), tier_name);

}  // namespace
}  // namespace rl
