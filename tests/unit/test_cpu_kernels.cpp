// Every CPU kernel tier this machine supports (cpu_isa.h) against the scalar reference tier: linear
// layers with f32, bf16 and int8 weights at shapes that hit every tile remainder and vector tail (m
// = 1..5, 17, 64; n not a multiple of 4; k not a multiple of the vector width), and attention's
// dot/axpy. Outputs start as NaN, so an element a kernel forgets to write fails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/quant.h"

namespace rl {
namespace {

struct Shape {
  int64_t m, n, k;
};
const Shape kShapes[] = {{1, 1, 1},    {1, 7, 31},    {1, 37, 64},  {2, 9, 33},
                         {3, 13, 100}, {4, 16, 1024}, {5, 21, 17},  {17, 5, 65},
                         {64, 48, 96}, {64, 67, 257}, {1, 256, 768}, {1, 40, 1000}, {1, 17, 4100}};

std::vector<float> random_f32(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// y = x · wᵀ on `be`, w in dtype `dt` (f32 values given; bf16 rounds them, int8 quantises them per
// row).
std::vector<float> run_linear(CpuBackend& be, const Shape& s, const std::vector<float>& x,
                              const std::vector<float>& w32, DType dt) {
  std::vector<char> wbuf;
  if (dt == DType::kF32) {
    wbuf.resize(w32.size() * 4);
    std::memcpy(wbuf.data(), w32.data(), wbuf.size());
  } else if (dt == DType::kBF16) {
    wbuf.resize(w32.size() * 2);
    convert_from_f32(w32.data(), wbuf.data(), DType::kBF16, w32.size());
  } else {
    wbuf.assign(i8_weight_bytes(s.n, s.k), 0);
    for (int64_t r = 0; r < s.n; ++r) {
      quantize_row_i8(w32.data() + r * s.k, s.k, reinterpret_cast<int8_t*>(wbuf.data()) + r * s.k,
                      reinterpret_cast<float*>(wbuf.data() + i8_scale_offset(s.n, s.k)) + r,
                      reinterpret_cast<int32_t*>(wbuf.data() + i8_row_sum_offset(s.n, s.k)) + r);
    }
  }
  std::vector<float> y(static_cast<size_t>(s.m * s.n), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> xc = x;
  be.linear(Tensor(xc.data(), DType::kF32, {s.m, s.k}), Tensor(wbuf.data(), dt, {s.n, s.k}),
            Tensor(), Tensor(y.data(), DType::kF32, {s.m, s.n}));
  return y;
}

class CpuKernelTiers : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuKernelTiers, LinearMatchesScalarReference) {
  CpuBackend ref(2, CpuIsa::kScalar), fast(2, GetParam());
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                 " k=" + std::to_string(s.k));
    std::vector<float> x = random_f32(static_cast<size_t>(s.m * s.k), seed++);
    std::vector<float> w = random_f32(static_cast<size_t>(s.n * s.k), seed++);
    // f32 weights: only the summation order differs.
    EXPECT_LT(
        rel_err(run_linear(fast, s, x, w, DType::kF32), run_linear(ref, s, x, w, DType::kF32)),
        1e-5);
    // bf16 weights: tiers with vdpbf16ps round the activations to bf16 too; against the reference
    // fed the same rounded activations they agree to f32 summation order.
    std::vector<float> xr = x;
    if (fast.kernels().bf16_acts) {
      for (auto& v : xr) v = bf16_to_f32(f32_to_bf16(v));
    }
    EXPECT_LT(
        rel_err(run_linear(fast, s, x, w, DType::kBF16), run_linear(ref, s, xr, w, DType::kBF16)),
        1e-5);
    EXPECT_LT(
        rel_err(run_linear(fast, s, x, w, DType::kBF16), run_linear(ref, s, x, w, DType::kBF16)),
        1e-2);
    // int8: integer dot products are exact; only the final scaling rounds.
    EXPECT_LT(rel_err(run_linear(fast, s, x, w, DType::kI8), run_linear(ref, s, x, w, DType::kI8)),
              1e-6);
    // and int8 stays near the f32 result (8-bit weights and activations).
    EXPECT_LT(rel_err(run_linear(ref, s, x, w, DType::kI8), run_linear(ref, s, x, w, DType::kF32)),
              3e-2);
  }
}

TEST_P(CpuKernelTiers, DotAndAxpyMatchScalarReference) {
  const CpuKernels& ref = cpu_kernels(CpuIsa::kScalar);
  const CpuKernels& fast = cpu_kernels(GetParam());
  for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 100, 128}) {
    std::vector<float> a = random_f32(static_cast<size_t>(n), 7),
                       b = random_f32(static_cast<size_t>(n), 8);
    EXPECT_NEAR(fast.dot_f32(a.data(), b.data(), n), ref.dot_f32(a.data(), b.data(), n), 1e-5 * n);
    std::vector<float> y1 = b, y2 = b;
    fast.axpy_f32(0.37f, a.data(), y1.data(), n);
    ref.axpy_f32(0.37f, a.data(), y2.data(), n);
    EXPECT_LT(rel_err(y1, y2), 1e-6) << n;
  }
}

// The grouped attention kernel (fast tiers) against a float64 softmax over the same keys, through a shuffled
// block table: chunk tails (nk not a multiple of 16), blocks smaller than a chunk, every GQA group size.
TEST_P(CpuKernelTiers, GroupedAttentionMatchesFloat64Softmax) {
  const CpuKernels& fast = cpu_kernels(GetParam());
  if (fast.attn_group_f32 == nullptr) {  // the scalar and AVX2 tiers run the reference attention only
    EXPECT_LT(GetParam(), CpuIsa::kAvx512) << "every AVX-512 tier has the grouped kernel";
    return;
  }
  const int64_t num_kv_heads = 3, num_blocks = 40;
  for (const int64_t d : {64, 128}) {
    for (const int64_t bs : {16, 5}) {
      for (const int64_t group : {1, 2, 4, 8}) {
        for (const int64_t nk : {1, 15, 16, 17, 100}) {
          SCOPED_TRACE("d=" + std::to_string(d) + " bs=" + std::to_string(bs) + " group=" + std::to_string(group) +
                       " nk=" + std::to_string(nk));
          const int64_t slot_stride = num_kv_heads * d, kvh = 1;
          const std::vector<float> k = random_f32(static_cast<size_t>(num_blocks * bs * slot_stride), 11);
          const std::vector<float> v = random_f32(static_cast<size_t>(num_blocks * bs * slot_stride), 12);
          std::vector<float> q = random_f32(static_cast<size_t>(group * d), 13);
          for (float& x : q) x *= 4.0f;  // peaked softmaxes too
          std::vector<int32_t> table(static_cast<size_t>(num_blocks));
          for (int64_t b = 0; b < num_blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>((b * 7 + 3) % num_blocks);
          std::vector<float> out(static_cast<size_t>(group * d), std::numeric_limits<float>::quiet_NaN());
          AttnGroupArgs a;
          a.q = q.data();
          a.out = out.data();
          a.k = k.data() + kvh * d;
          a.v = v.data() + kvh * d;
          a.table = table.data();
          a.group = group;
          a.d = d;
          a.bs = bs;
          a.nk = nk;
          a.slot_stride = slot_stride;
          a.scale = 1.0f / std::sqrt(static_cast<float>(d));
          ASSERT_TRUE(fast.attn_group_f32(a));
          std::vector<float> want(out.size());
          for (int64_t g = 0; g < group; ++g) {
            std::vector<double> sc(static_cast<size_t>(nk));
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < nk; ++j) {
              const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(j / bs)]) * bs + j % bs;
              double dot = 0;
              for (int64_t c = 0; c < d; ++c) {
                dot += static_cast<double>(q[static_cast<size_t>(g * d + c)]) *
                       k[static_cast<size_t>(slot * slot_stride + kvh * d + c)];
              }
              sc[static_cast<size_t>(j)] = dot * a.scale;
              mx = std::max(mx, sc[static_cast<size_t>(j)]);
            }
            for (double& x : sc) sum += (x = std::exp(x - mx));
            for (int64_t c = 0; c < d; ++c) {
              double o = 0;
              for (int64_t j = 0; j < nk; ++j) {
                const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(j / bs)]) * bs + j % bs;
                o += sc[static_cast<size_t>(j)] * v[static_cast<size_t>(slot * slot_stride + kvh * d + c)];
              }
              want[static_cast<size_t>(g * d + c)] = static_cast<float>(o / sum);
            }
          }
          EXPECT_LT(rel_err(out, want), 1e-5);
        }
      }
    }
  }
  AttnGroupArgs odd;
  odd.d = 72;  // not whole vectors: the caller falls back to the reference
  odd.group = 1;
  odd.nk = 1;
  EXPECT_FALSE(fast.attn_group_f32(odd));
}

// SwiGLU (silu_mul) of every tier against the scalar tier's std::exp formula: vector tails, and gates far out on
// both sides (the vector exp clamps its argument: silu(-1000) must stay 0, silu(1000) = 1000).
TEST_P(CpuKernelTiers, SiluMulMatchesScalarReference) {
  const CpuKernels& ref = cpu_kernels(CpuIsa::kScalar);
  const CpuKernels& fast = cpu_kernels(GetParam());
  for (const int64_t n : {1, 15, 16, 17, 100, 3072}) {
    std::vector<float> g = random_f32(static_cast<size_t>(n), 31), u = random_f32(static_cast<size_t>(n), 32);
    for (size_t i = 0; i < g.size(); ++i) g[i] *= (i % 7 == 0) ? 1000.0f : (i % 5 == 0 ? 90.0f : 8.0f);
    std::vector<float> want(g.size()), got(g.size() + 1, std::numeric_limits<float>::quiet_NaN());
    ref.silu_mul(g.data(), u.data(), want.data(), n);
    fast.silu_mul(g.data(), u.data(), got.data(), n);
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(n)])) << "wrote past n";
    for (int64_t i = 0; i < n; ++i) {
      const float w = want[static_cast<size_t>(i)], x = got[static_cast<size_t>(i)];
      EXPECT_LE(std::fabs(x - w), 1e-6f * std::fabs(w) + 1e-30f) << "n=" << n << " i=" << i << " gate=" << g[i];
    }
  }
}

// The span kernel (fast tiers): one token, every head, keys split into spans whose partial softmaxes are merged as
// cpu_attention.cpp merges them, against a float64 softmax, through a shuffled block table; spans of 16, 48 and all
// keys, blocks of 16 and 5, GQA groups of 1, 2, 4 and 8.
TEST_P(CpuKernelTiers, SpanAttentionMatchesFloat64Softmax) {
  const CpuKernels& fast = cpu_kernels(GetParam());
  if (fast.attn_span_f32 == nullptr) {
    EXPECT_LT(GetParam(), CpuIsa::kAvx512) << "every AVX-512 tier has the span kernel";
    return;
  }
  const int64_t num_blocks = 40;
  struct Heads {
    int64_t num_heads, num_kv_heads, d;
  };
  for (const Heads hs :
       {Heads{4, 4, 64}, Heads{16, 8, 128}, Heads{16, 2, 128}, Heads{8, 1, 256}, Heads{3, 3, 32}}) {
    for (const int64_t bs : {16, 5}) {
      for (const int64_t nk : {1, 16, 17, 100, 190}) {
        for (const int64_t span : {16, 48, 1 << 20}) {
          SCOPED_TRACE(std::to_string(hs.num_heads) + "/" + std::to_string(hs.num_kv_heads) +
                       " d=" + std::to_string(hs.d) + " bs=" + std::to_string(bs) + " nk=" + std::to_string(nk) +
                       " span=" + std::to_string(span));
          const int64_t d = hs.d, stride = hs.num_kv_heads * d, group = hs.num_heads / hs.num_kv_heads;
          const std::vector<float> k = random_f32(static_cast<size_t>(num_blocks * bs * stride), 21);
          const std::vector<float> v = random_f32(static_cast<size_t>(num_blocks * bs * stride), 22);
          std::vector<float> q = random_f32(static_cast<size_t>(hs.num_heads * d), 23);
          for (float& x : q) x *= 4.0f;
          std::vector<int32_t> table(static_cast<size_t>(num_blocks));
          for (int64_t b = 0; b < num_blocks; ++b) {
            table[static_cast<size_t>(b)] = static_cast<int32_t>((b * 7 + 3) % num_blocks);
          }
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          // Spans, each computed into its own partial (NaN-filled: an element the kernel skips shows).
          std::vector<std::vector<float>> o, m, l;
          for (int64_t j0 = 0; j0 < nk; j0 += span) {
            o.emplace_back(static_cast<size_t>(hs.num_heads * d), std::numeric_limits<float>::quiet_NaN());
            m.emplace_back(static_cast<size_t>(hs.num_heads), std::numeric_limits<float>::quiet_NaN());
            l.emplace_back(static_cast<size_t>(hs.num_heads), std::numeric_limits<float>::quiet_NaN());
            AttnSpanArgs a;
            a.q = q.data();
            a.k = k.data();
            a.v = v.data();
            a.table = table.data();
            a.num_heads = hs.num_heads;
            a.num_kv_heads = hs.num_kv_heads;
            a.d = d;
            a.bs = bs;
            a.j0 = j0;
            a.j1 = std::min(nk, j0 + span);
            a.scale = scale;
            a.o = o.back().data();
            a.m = m.back().data();
            a.l = l.back().data();
            ASSERT_TRUE(fast.attn_span_f32(a));
          }
          std::vector<float> out(static_cast<size_t>(hs.num_heads * d));
          std::vector<float> want(out.size());
          for (int64_t h = 0; h < hs.num_heads; ++h) {
            float mx = -INFINITY, sum = 0.0f;
            for (size_t s = 0; s < m.size(); ++s) mx = std::max(mx, m[s][static_cast<size_t>(h)]);
            for (int64_t c = 0; c < d; ++c) out[static_cast<size_t>(h * d + c)] = 0.0f;
            for (size_t s = 0; s < m.size(); ++s) {
              const float w = std::exp(m[s][static_cast<size_t>(h)] - mx);
              sum += l[s][static_cast<size_t>(h)] * w;
              for (int64_t c = 0; c < d; ++c) {
                out[static_cast<size_t>(h * d + c)] += o[s][static_cast<size_t>(h * d + c)] * w;
              }
            }
            for (int64_t c = 0; c < d; ++c) out[static_cast<size_t>(h * d + c)] /= sum;
            const int64_t kvh = h / group;
            std::vector<double> sc(static_cast<size_t>(nk));
            double dmx = -INFINITY, dsum = 0;
            for (int64_t j = 0; j < nk; ++j) {
              const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(j / bs)]) * bs + j % bs;
              double dot = 0;
              for (int64_t c = 0; c < d; ++c) {
                dot += static_cast<double>(q[static_cast<size_t>(h * d + c)]) *
                       k[static_cast<size_t>(slot * stride + kvh * d + c)];
              }
              sc[static_cast<size_t>(j)] = dot * scale;
              dmx = std::max(dmx, sc[static_cast<size_t>(j)]);
            }
            for (double& x : sc) dsum += (x = std::exp(x - dmx));
            for (int64_t c = 0; c < d; ++c) {
              double acc = 0;
              for (int64_t j = 0; j < nk; ++j) {
                const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(j / bs)]) * bs + j % bs;
                acc += sc[static_cast<size_t>(j)] * v[static_cast<size_t>(slot * stride + kvh * d + c)];
              }
              want[static_cast<size_t>(h * d + c)] = static_cast<float>(acc / dsum);
            }
          }
          EXPECT_LT(rel_err(out, want), 1e-5);
        }
      }
    }
  }
  AttnSpanArgs probe;  // j1 == j0: the shape probe
  probe.num_heads = 16;
  probe.num_kv_heads = 8;
  probe.d = 128;
  EXPECT_TRUE(fast.attn_span_f32(probe));
  probe.d = 72;  // not whole pairs of vectors: the caller takes another path
  EXPECT_FALSE(fast.attn_span_f32(probe));
  probe.d = 128;
  probe.j0 = 8;  // spans start at a chunk boundary
  probe.j1 = 24;
  EXPECT_FALSE(fast.attn_span_f32(probe));
}

TEST(CpuIsaTest, NamesRoundTripAndTiersAreOrdered) {
  for (CpuIsa isa : supported_cpu_isas()) {
    CpuIsa back;
    ASSERT_TRUE(parse_cpu_isa(cpu_isa_name(isa), &back));
    EXPECT_EQ(back, isa);
    EXPECT_LE(isa, detect_cpu_isa());
  }
  CpuIsa out;
  EXPECT_FALSE(parse_cpu_isa("avx1024", &out));
  EXPECT_LE(selected_cpu_isa(), detect_cpu_isa());
}

std::string tier_name(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(cpu_isa_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(Supported, CpuKernelTiers, ::testing::ValuesIn(supported_cpu_isas()),
                         tier_name);

// The int8 activation scale: max |x| / 127 with q = round(x / s) for finite rows, 0 for an all-zero row, and a NaN
// scale (q all zero) for a row holding a NaN or an Inf, wherever it sits, so the int8 projection's outputs are NaN.
TEST(QuantizeActRowI8, ScaleZeroRowAndNonFiniteRows) {
  const std::vector<float> x = {0.5f, -2.0f, 1.0f, 0.0f, -0.25f};
  std::vector<int8_t> q(x.size());
  const float s = quantize_act_row_i8(x.data(), static_cast<int64_t>(x.size()), q.data());
  EXPECT_FLOAT_EQ(s, 2.0f / 127.0f);
  const std::vector<int8_t> want = {32, -127, 64, 0, -16};
  EXPECT_EQ(q, want);
  const std::vector<float> zeros(7, 0.0f);
  std::vector<int8_t> qz(zeros.size(), 5);
  EXPECT_EQ(quantize_act_row_i8(zeros.data(), 7, qz.data()), 0.0f);
  EXPECT_EQ(qz, std::vector<int8_t>(7, 0));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    for (size_t at : {size_t(0), size_t(2), x.size() - 1}) {
      std::vector<float> y = x;
      y[at] = bad;
      std::vector<int8_t> qb(y.size(), 5);
      EXPECT_TRUE(std::isnan(quantize_act_row_i8(y.data(), static_cast<int64_t>(y.size()), qb.data())))
          << "bad value " << bad << " at " << at;
      EXPECT_EQ(qb, std::vector<int8_t>(y.size(), 0));
    }
  }
}

}  // namespace
}  // namespace rl
