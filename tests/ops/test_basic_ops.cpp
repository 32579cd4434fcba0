// CUDA vs CPU for every non-attention op, on fresh random inputs with poisoned outputs.
#include <cstring>
#include <numeric>
#include <utility>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/gemm_lt.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(CudaOps, EmbeddingCopiesRowsExactly) {
  const int64_t vocab = 300, hidden = 264, n = 37;
  auto table = random_bf16_values(vocab * hidden);
  std::vector<int32_t> ids(n);
  for (auto& i : ids) i = static_cast<int32_t>(rng()() % vocab);
  auto c_table = make_bf16(cuda(), table, {vocab, hidden});
  auto c_ids = make_i32(cuda(), ids, {n});
  auto c_out = make(cuda(), DType::kBF16, {n, hidden});
  poison(c_out.t);
  cuda().embedding(c_ids.t, c_table.t, c_out.t);
  auto out = read_f32(cuda(), c_out.t);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < hidden; ++j) ASSERT_EQ(out[i * hidden + j], table[ids[i] * hidden + j]);
}

void check_norm(int64_t rows, int64_t hidden, DType w_dt, bool with_residual) {
  auto x = random_bf16_values(rows * hidden, -2, 2), res = random_bf16_values(rows * hidden, -2, 2);
  auto w = random_bf16_values(hidden, 0.5f, 1.5f);
  NormParams p{1e-5f};
  auto g_x = make_f32(cpu(), x, {rows, hidden}), g_res = make_f32(cpu(), res, {rows, hidden});
  auto g_w = make_f32(cpu(), w, {hidden});
  auto g_out = make(cpu(), DType::kF32, {rows, hidden});
  auto c_x = make_bf16(cuda(), x, {rows, hidden}), c_res = make_bf16(cuda(), res, {rows, hidden});
  auto c_w = w_dt == DType::kF32 ? make_f32(cuda(), w, {hidden}) : make_bf16(cuda(), w, {hidden});
  auto c_out = make(cuda(), DType::kBF16, {rows, hidden});
  poison(c_out.t);
  if (with_residual) {
    cpu().add_rms_norm(g_res.t, g_x.t, g_w.t, g_out.t, p);
    cuda().add_rms_norm(c_res.t, c_x.t, c_w.t, c_out.t, p);
    EXPECT_LT(rel_err(read_f32(cuda(), c_res.t), read_f32(cpu(), g_res.t)), 4e-3);
  } else {
    cpu().rms_norm(g_x.t, g_w.t, g_out.t, p);
    cuda().rms_norm(c_x.t, c_w.t, c_out.t, p);
  }
  EXPECT_LT(rel_err(read_f32(cuda(), c_out.t), read_f32(cpu(), g_out.t)), kBf16Tol);
}

TEST(CudaOps, RmsNorm) {
  check_norm(7, 4096, DType::kBF16, false);
  check_norm(3, 100, DType::kF32, false);  // not a multiple of 8: scalar path
}

TEST(CudaOps, AddRmsNorm) {
  check_norm(9, 2048, DType::kBF16, true);
  check_norm(2, 36, DType::kF32, true);
}

void check_qk_norm_rope(int64_t t, int64_t nh, int64_t nkv, int64_t d, bool norms) {
  QkvLayout l{nh, nkv, d};
  const auto [qkv, inv, qn, kn, pos] = random_rope_inputs(t, l.row(), d);
  NormParams np{1e-6f};
  auto g_qkv = make_f32(cpu(), qkv, {t, l.row()}), g_pos = make_i32(cpu(), pos, {t});
  auto g_inv = make_f32(cpu(), inv, {d / 2});
  auto g_qn = make_f32(cpu(), qn, {d}), g_kn = make_f32(cpu(), kn, {d});
  auto c_qkv = make_bf16(cuda(), qkv, {t, l.row()}), c_pos = make_i32(cuda(), pos, {t});
  auto c_inv = make_f32(cuda(), inv, {d / 2});
  auto c_qn = make_bf16(cuda(), qn, {d}), c_kn = make_bf16(cuda(), kn, {d});
  cpu().qk_norm_rope(g_qkv.t, norms ? g_qn.t : Tensor(), norms ? g_kn.t : Tensor(), g_pos.t,
                     RopeParams{l, g_inv.t.f32()}, np);
  cuda().qk_norm_rope(c_qkv.t, norms ? c_qn.t : Tensor(), norms ? c_kn.t : Tensor(), c_pos.t,
                      RopeParams{l, c_inv.t.f32()}, np);
  auto out = read_f32(cuda(), c_qkv.t), ref = read_f32(cpu(), g_qkv.t);
  EXPECT_LT(rel_err(out, ref), kBf16Tol);
  // v is untouched.
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = l.v_offset(); i < l.row(); ++i) ASSERT_EQ(out[r * l.row() + i], qkv[r * l.row() + i]);
}

TEST(CudaOps, QkNormRope) {
  check_qk_norm_rope(13, 16, 8, 128, true);
  check_qk_norm_rope(5, 8, 8, 64, false);
  check_qk_norm_rope(4, 6, 2, 80, true);  // head_dim not a power of two
  check_qk_norm_rope(700, 16, 8, 128, true);  // prefill-sized grids
  check_qk_norm_rope(3001, 5, 1, 64, true);
}

TEST(CudaOps, KvWriteThroughSlotMapping) {
  QkvLayout l{8, 2, 64};
  const int64_t t = 21, num_blocks = 6, bs = 16, kv_row = l.num_kv_heads * l.head_dim;
  auto qkv = random_bf16_values(t * l.row());
  auto kc = random_bf16_values(num_blocks * bs * kv_row), vc = random_bf16_values(num_blocks * bs * kv_row);
  std::vector<int32_t> slots = shuffled_slots(num_blocks * bs, t);
  slots[3] = -1;
  slots[10] = -1;
  auto g_qkv = make_f32(cpu(), qkv, {t, l.row()}), g_slots = make_i32(cpu(), slots, {t});
  auto g_k = make_f32(cpu(), kc, {num_blocks, bs, 2, 64}), g_v = make_f32(cpu(), vc, {num_blocks, bs, 2, 64});
  auto c_qkv = make_bf16(cuda(), qkv, {t, l.row()}), c_slots = make_i32(cuda(), slots, {t});
  auto c_k = make_bf16(cuda(), kc, {num_blocks, bs, 2, 64}), c_v = make_bf16(cuda(), vc, {num_blocks, bs, 2, 64});
  cpu().kv_write(g_qkv.t, l, g_slots.t, KvLayer{g_k.t, g_v.t});
  cuda().kv_write(c_qkv.t, l, c_slots.t, KvLayer{c_k.t, c_v.t});
  EXPECT_EQ(read_f32(cuda(), c_k.t), read_f32(cpu(), g_k.t));
  EXPECT_EQ(read_f32(cuda(), c_v.t), read_f32(cpu(), g_v.t));
}

// kv_write into an FP8 e4m3 cache: the same bytes as the CPU's (f32_to_fp8_e4m3 of each bf16 value: nearest even,
// ±448 saturation), through the 8-element path and the one-element path (a row that is not whole 16-byte vectors);
// skipped slots keep their bytes.
TEST(CudaOps, KvWriteIntoFp8Cache) {
  for (const QkvLayout l : {QkvLayout{8, 2, 64}, QkvLayout{3, 1, 12}}) {
    const int64_t t = 21, num_blocks = 6, bs = 16, kv_row = l.num_kv_heads * l.head_dim;
    auto qkv = random_bf16_values(t * l.row(), -3, 3);
    // Past ±448 too, and subnormal codes; kept bf16 values (the CUDA side holds bf16, the CPU side these floats).
    for (int64_t i = 0; i < t * l.row(); i += 7) qkv[i] = bf16_to_f32(f32_to_bf16(qkv[i] * 300.0f));
    for (int64_t i = 3; i < t * l.row(); i += 11) qkv[i] = bf16_to_f32(f32_to_bf16(qkv[i] * 1e-3f));
    std::vector<uint8_t> init(static_cast<size_t>(num_blocks * bs * kv_row));
    for (auto& b : init) b = static_cast<uint8_t>(rng()());
    std::vector<int32_t> slots = shuffled_slots(num_blocks * bs, t);
    slots[3] = -1;
    slots[10] = -1;
    const auto shape = {num_blocks, bs, l.num_kv_heads, l.head_dim};
    auto g_qkv = make_f32(cpu(), qkv, {t, l.row()}), g_slots = make_i32(cpu(), slots, {t});
    auto c_qkv = make_bf16(cuda(), qkv, {t, l.row()}), c_slots = make_i32(cuda(), slots, {t});
    auto g_k = make(cpu(), DType::kFP8E4M3, shape), g_v = make(cpu(), DType::kFP8E4M3, shape);
    auto c_k = make(cuda(), DType::kFP8E4M3, shape), c_v = make(cuda(), DType::kFP8E4M3, shape);
    for (const Owned* o : {&g_k, &g_v}) std::memcpy(o->t.data, init.data(), init.size());
    for (const Owned* o : {&c_k, &c_v}) cuda().upload(o->t.data, init.data(), init.size());
    cpu().kv_write(g_qkv.t, l, g_slots.t, KvLayer{g_k.t, g_v.t});
    cuda().kv_write(c_qkv.t, l, c_slots.t, KvLayer{c_k.t, c_v.t});
    for (const auto& [g, c] : {std::pair{&g_k, &c_k}, std::pair{&g_v, &c_v}}) {
      std::vector<uint8_t> got(init.size()), want(init.size());
      cuda().download(got.data(), c->t.data, got.size());
      std::memcpy(want.data(), g->t.data, want.size());
      EXPECT_EQ(got, want) << "head_dim " << l.head_dim;
    }
  }
}

TEST(CudaOps, SiluMul) {
  // Row lengths across the vector kernel's blocks (512 chunks of 8 a block: 1536 one, 5000 two with a part-empty
  // second, 14336 four) and a row that is no multiple of 8 (the element kernel).
  for (int64_t inter : {1536, 5000, 14336, 99}) {
    const int64_t rows = 11;
    auto gu = random_bf16_values(rows * 2 * inter, -6, 6);
    auto g_gu = make_f32(cpu(), gu, {rows, 2 * inter});
    auto g_out = make(cpu(), DType::kF32, {rows, inter});
    auto c_gu = make_bf16(cuda(), gu, {rows, 2 * inter});
    auto c_out = make(cuda(), DType::kBF16, {rows, inter});
    poison(c_out.t);
    cpu().silu_mul(g_gu.t, g_out.t);
    cuda().silu_mul(c_gu.t, c_out.t);
    EXPECT_LT(rel_err(read_f32(cuda(), c_out.t), read_f32(cpu(), g_out.t)), kBf16Tol) << inter;
  }
}

TEST(CudaOps, GatherRows) {
  for (int64_t h : {512, 13}) {
    const int64_t rows = 40, n = 9;
    auto x = random_bf16_values(rows * h);
    std::vector<int32_t> idx(n);
    for (auto& i : idx) i = static_cast<int32_t>(rng()() % rows);
    auto c_x = make_bf16(cuda(), x, {rows, h});
    auto c_idx = make_i32(cuda(), idx, {n});
    auto c_out = make(cuda(), DType::kBF16, {n, h});
    poison(c_out.t);
    cuda().gather_rows(c_x.t, c_idx.t, c_out.t);
    auto out = read_f32(cuda(), c_out.t);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < h; ++j) ASSERT_EQ(out[i * h + j], x[idx[i] * h + j]);
  }
}

TEST(CudaOps, CastRoundsLikeTheHost) {
  const int64_t n = 10007;
  std::vector<float> x(n);
  std::normal_distribution<float> d(0, 100);
  for (auto& v : x) v = d(rng());
  auto c_x = make_f32(cuda(), x, {n});
  auto c_b = make(cuda(), DType::kBF16, {n});
  auto c_back = make(cuda(), DType::kF32, {n});
  poison(c_b.t);
  cuda().cast(c_x.t, c_b.t);
  cuda().cast(c_b.t, c_back.t);
  std::vector<uint16_t> bits(n);
  cuda().download(bits.data(), c_b.t.data, n * 2);
  auto back = read_f32(cuda(), c_back.t);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bits[i], f32_to_bf16(x[i])) << x[i];
    ASSERT_EQ(back[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
}

TEST(CudaOps, FillUniformMatchesCpuExactly) {
  const uint64_t seed = rng()();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t n = 100003;
    auto g = make(cpu(), dt, {n});
    auto c = make(cuda(), dt, {n});
    poison(c.t);
    cpu().fill_uniform(g.t, seed, -0.02f, 0.05f);
    cuda().fill_uniform(c.t, seed, -0.02f, 0.05f);
    std::vector<uint8_t> a(g.t.nbytes()), b(c.t.nbytes());
    cpu().download(a.data(), g.t.data, a.size());
    cuda().download(b.data(), c.t.data, b.size());
    EXPECT_EQ(a, b) << dtype_name(dt);
  }
}

void check_linear(int64_t m, int64_t n, int64_t k, DType bias_dt, bool with_bias, DType y_dt) {
  auto x = random_bf16_values(m * k), w = random_bf16_values(n * k, -0.1f, 0.1f), b = random_bf16_values(n);
  auto g_x = make_f32(cpu(), x, {m, k}), g_b = make_f32(cpu(), b, {n});
  auto g_w = make_bf16(cpu(), w, {n, k});
  auto g_y = make(cpu(), DType::kF32, {m, n});
  auto c_x = make_bf16(cuda(), x, {m, k}), c_w = make_bf16(cuda(), w, {n, k});
  auto c_b = bias_dt == DType::kF32 ? make_f32(cuda(), b, {n}) : make_bf16(cuda(), b, {n});
  auto c_y = make(cuda(), y_dt, {m, n});
  poison(c_y.t);
  cpu().linear(g_x.t, g_w.t, with_bias ? g_b.t : Tensor(), g_y.t);
  cuda().linear(c_x.t, c_w.t, with_bias ? c_b.t : Tensor(), c_y.t);
  EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), read_f32(cpu(), g_y.t)), kBf16Tol)
      << "m=" << m << " n=" << n << " k=" << k << " bias=" << with_bias;
}

TEST(CudaOps, LinearSmallM) {
  for (int64_t m : {1, 2, 3, 5, 8, 11, 16}) check_linear(m, 1000, 768, DType::kBF16, m % 2 == 1, DType::kBF16);
  check_linear(4, 96, 100, DType::kF32, true, DType::kBF16);  // K not a multiple of 8: scalar path
  check_linear(1, 520, 4096, DType::kBF16, false, DType::kF32);
}

// Every GEMV kernel and lab configuration (launch_gemv variants: v2 1-3, streaming 10-19) against the CPU:
// split-K clusters with a partial chunk per split (N = 1024 at K = 3072), row tails (N = 37, 200, 8200), K tails
// inside a chunk (K = 1000, 136), bias and f32 out.
TEST(CudaOps, LinearGemvVariants) {
  struct Shape {
    int64_t n, k;
  };
  for (const Shape& s : {Shape{1024, 3072}, Shape{37, 1000}, Shape{4096, 1024}, Shape{200, 136}, Shape{8200, 520}}) {
    for (int64_t m : {1, 5, 16, 33, 64}) {
      auto x = random_bf16_values(m * s.k), w = random_bf16_values(s.n * s.k, -0.1f, 0.1f), b = random_bf16_values(s.n);
      auto g_x = make_f32(cpu(), x, {m, s.k}), g_w = make_bf16(cpu(), w, {s.n, s.k}), g_b = make_f32(cpu(), b, {s.n});
      auto g_y = make(cpu(), DType::kF32, {m, s.n});
      cpu().linear(g_x.t, g_w.t, g_b.t, g_y.t);
      auto c_x = make_bf16(cuda(), x, {m, s.k}), c_w = make_bf16(cuda(), w, {s.n, s.k});
      auto c_b = make_bf16(cuda(), b, {s.n});
      const auto ref = read_f32(cpu(), g_y.t);
      for (int variant : {0, 1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
        if (variant >= 1 && variant <= 3 && m > 16) continue;  // v2 lab variants serve M <= 16
        for (DType y_dt : {DType::kBF16, DType::kF32}) {
          auto c_y = make(cuda(), y_dt, {m, s.n});
          poison(c_y.t);
          cuda::launch_gemv_lab(static_cast<const uint16_t*>(c_x.t.data), static_cast<const uint16_t*>(c_w.t.data),
                                c_b.t.data, DType::kBF16, c_y.t.data, y_dt, m, s.n, s.k, cuda().stream(), variant);
          EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), ref), kBf16Tol)
              << "variant=" << variant << " m=" << m << " n=" << s.n << " k=" << s.k;
        }
      }
    }
  }
}

// linear_widened (the LM head: f32 logits of bf16 values) is linear into bf16 and a cast, bit for bit: through the
// GEMV's rounding store (launch_gemv_widened) for M up to kGemvMaxM, and through the default (linear and cast) for
// larger M and unaligned K.
TEST(CudaOps, LinearWidenedIsLinearThenCast) {
  struct Shape {
    int64_t n, k;
  };
  for (const Shape& s : {Shape{8200, 1024}, Shape{151936, 64}, Shape{37, 1000}, Shape{300, 1001}}) {
    for (int64_t m : {int64_t{1}, int64_t{3}, cuda::kGemvMaxM, cuda::kGemvMaxM + 1}) {
      auto x = random_bf16_values(m * s.k), w = random_bf16_values(s.n * s.k, -0.1f, 0.1f);
      auto c_x = make_bf16(cuda(), x, {m, s.k}), c_w = make_bf16(cuda(), w, {s.n, s.k});
      auto scratch = make(cuda(), DType::kBF16, {m, s.n});
      auto want = make(cuda(), DType::kF32, {m, s.n}), got = make(cuda(), DType::kF32, {m, s.n});
      cuda().linear(c_x.t, c_w.t, Tensor(), scratch.t);
      cuda().cast(scratch.t, want.t);
      poison(got.t);
      cuda().linear_widened(c_x.t, c_w.t, scratch.t, got.t);
      const std::vector<float> a = read_f32(cuda(), got.t), b = read_f32(cuda(), want.t);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "m=" << m << " n=" << s.n << " k=" << s.k;
    }
  }
}

// The fused gate_up projection + SiLU·mul (launch_gemv_silu_mul) against the CPU's linear then silu_mul.
TEST(CudaOps, LinearSiluMulFused) {
  struct Shape {
    int64_t inter, k;
  };
  for (const Shape& s : {Shape{3072, 1024}, Shape{37, 1000}, Shape{520, 2048}}) {
    for (int64_t m : {1, 3, 16}) {
      auto x = random_bf16_values(m * s.k), w = random_bf16_values(2 * s.inter * s.k, -0.1f, 0.1f);
      auto b = random_bf16_values(2 * s.inter);
      auto g_x = make_f32(cpu(), x, {m, s.k}), g_w = make_bf16(cpu(), w, {2 * s.inter, s.k});
      auto g_b = make_f32(cpu(), b, {2 * s.inter});
      auto g_gu = make(cpu(), DType::kF32, {m, 2 * s.inter}), g_y = make(cpu(), DType::kF32, {m, s.inter});
      cpu().linear(g_x.t, g_w.t, m % 2 ? g_b.t : Tensor(), g_gu.t);
      cpu().silu_mul(g_gu.t, g_y.t);
      auto c_x = make_bf16(cuda(), x, {m, s.k}), c_w = make_bf16(cuda(), w, {2 * s.inter, s.k});
      auto c_b = make_bf16(cuda(), b, {2 * s.inter});
      auto c_y = make(cuda(), DType::kBF16, {m, s.inter});
      poison(c_y.t);
      ASSERT_TRUE(cuda::launch_gemv_silu_mul(static_cast<const uint16_t *>(c_x.t.data),
                                             static_cast<const uint16_t *>(c_w.t.data), m % 2 ? c_b.t.data : nullptr,
                                             DType::kBF16, c_y.t.data, DType::kBF16, m, s.inter, s.k, cuda().stream()));
      EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), read_f32(cpu(), g_y.t)), kBf16Tol)
          << "m=" << m << " inter=" << s.inter << " k=" << s.k;
    }
  }
}

// The skinny GEMM (gemm_skinny_sm90.cu: opt-in linear for 16 < M <= 64 on compute capability 9.0) against the CPU: both
// stage counts and the lab's split counts (clamped to a chunk per split; 6 splits of N = 8200 make blocks walk
// several tiles), row tails (N = 37, 200, 8200), K tails inside a 64-wide chunk (K = 136, 520, 1000), M from 1 to
// 64, bias bf16 / f32 / none, y bf16 / f32. Split-K sums in a fixed order: a second run gives the same bits. Then
// linear with the skinny GEMM taking every shape it serves, and only the long-K / wide-N ones (SkinnyGemmUse::kLong).
TEST(CudaOps, LinearSkinnyGemm) {
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cuda().device_index()), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cuda().device_index()), cudaSuccess);
  const bool hopper = major == 9 && minor == 0;
  const auto* aligned = reinterpret_cast<const uint16_t*>(uintptr_t{256});
  EXPECT_EQ(cuda::skinny_gemm_supported(aligned, aligned, 64, 4096, 4096), hopper);
  EXPECT_FALSE(cuda::skinny_gemm_supported(aligned, aligned, 65, 4096, 4096));
  EXPECT_FALSE(cuda::skinny_gemm_supported(aligned, aligned, 32, 4096, 100));  // k % 8 != 0
  EXPECT_FALSE(cuda::skinny_gemm_supported(aligned + 1, aligned, 32, 4096, 4096));
  // Which linears each use takes (n, k): the 8B down_proj and LM head under kLong, not its qkv or gate_up.
  using Use = cuda::SkinnyGemmUse;
  EXPECT_TRUE(cuda::skinny_gemm_serves(Use::kLong, 4096, 14336));
  EXPECT_TRUE(cuda::skinny_gemm_serves(Use::kLong, 128256, 4096));
  EXPECT_FALSE(cuda::skinny_gemm_serves(Use::kLong, 28672, 4096));
  EXPECT_FALSE(cuda::skinny_gemm_serves(Use::kLong, 6144, 4096));
  EXPECT_TRUE(cuda::skinny_gemm_serves(Use::kAll, 6144, 4096));
  EXPECT_FALSE(cuda::skinny_gemm_serves(Use::kOff, 128256, 4096));
  if (hopper) {
    struct Shape {
      int64_t n, k;
    };
    for (const Shape& s : {Shape{1000, 768}, Shape{37, 1000}, Shape{4096, 1024}, Shape{200, 136}, Shape{8200, 520}}) {
      for (int64_t m : {1, 17, 40, 64}) {
        auto x = random_bf16_values(m * s.k), w = random_bf16_values(s.n * s.k, -0.1f, 0.1f);
        auto b = random_bf16_values(s.n);
        auto g_x = make_f32(cpu(), x, {m, s.k}), g_w = make_bf16(cpu(), w, {s.n, s.k}), g_b = make_f32(cpu(), b, {s.n});
        auto c_x = make_bf16(cuda(), x, {m, s.k}), c_w = make_bf16(cuda(), w, {s.n, s.k});
        auto c_b16 = make_bf16(cuda(), b, {s.n}), c_b32 = make_f32(cuda(), b, {s.n});
        auto g_y = make(cpu(), DType::kF32, {m, s.n}), g_y0 = make(cpu(), DType::kF32, {m, s.n});
        cpu().linear(g_x.t, g_w.t, g_b.t, g_y.t);
        cpu().linear(g_x.t, g_w.t, Tensor(), g_y0.t);
        const auto ref = read_f32(cpu(), g_y.t), ref0 = read_f32(cpu(), g_y0.t);
        for (int stages : {4, 8}) {
          for (int splits : {1, 3, 6, 8}) {
            const int bias_kind = (stages + splits + static_cast<int>(m)) % 3;  // 0 none, 1 bf16, 2 f32
            const void* bias = bias_kind == 0 ? nullptr : bias_kind == 1 ? c_b16.t.data : c_b32.t.data;
            const DType bias_dt = bias_kind == 2 ? DType::kF32 : DType::kBF16;
            for (DType y_dt : {DType::kBF16, DType::kF32}) {
              auto c_y = make(cuda(), y_dt, {m, s.n}), c_y2 = make(cuda(), y_dt, {m, s.n});
              poison(c_y.t);
              for (Owned* out : {&c_y, &c_y2}) {
                cuda::launch_skinny_gemm_lab(static_cast<const uint16_t*>(c_x.t.data),
                                             static_cast<const uint16_t*>(c_w.t.data), bias, bias_dt, out->t.data,
                                             y_dt, m, s.n, s.k, cuda().skinny_workspace(), cuda().num_sms(),
                                             cuda().stream(), cuda::SkinnyLab{stages, splits});
              }
              const auto got = read_f32(cuda(), c_y.t);
              EXPECT_LT(rel_err(got, bias ? ref : ref0), kBf16Tol)
                  << "stages=" << stages << " splits=" << splits << " m=" << m << " n=" << s.n << " k=" << s.k;
              EXPECT_EQ(got, read_f32(cuda(), c_y2.t)) << "stages=" << stages << " splits=" << splits << " m=" << m;
            }
          }
        }
      }
    }
  }
  // linear itself with the skinny GEMM switched on (it is opt-in) at the batches it serves (cuBLASLt elsewhere).
  cuda().set_skinny_gemm_use(cuda::SkinnyGemmUse::kAll);
  for (int64_t m : {17, 33, 64}) check_linear(m, 4096, 1024, DType::kBF16, m != 33, DType::kBF16);
  check_linear(24, 1000, 768, DType::kF32, true, DType::kF32);
  // Only the long-K / wide-N shapes: one of each, and one it leaves to cuBLASLt.
  cuda().set_skinny_gemm_use(cuda::SkinnyGemmUse::kLong);
  check_linear(40, 512, 8192, DType::kBF16, true, DType::kBF16);
  check_linear(64, 65536, 256, DType::kBF16, false, DType::kF32);
  check_linear(48, 1000, 768, DType::kF32, true, DType::kBF16);
  cuda().set_skinny_gemm_use(cuda::SkinnyGemmUse::kOff);
}

TEST(CudaOps, LinearCublasLt) {
  check_linear(17, 1000, 768, DType::kBF16, true, DType::kBF16);
  check_linear(300, 512, 1024, DType::kF32, true, DType::kBF16);
  check_linear(64, 256, 512, DType::kBF16, false, DType::kF32);
}

// cuBLASLt tuning (gemm_lt.cpp): with tuning on, a shape's first call times the heuristic's candidates and keeps
// one; the result still matches the CPU, the tuned plan is reported, and later calls (the kept algorithm, no
// tuning) give the same bits. Real decode shapes: Llama-3.1-8B qkv and o_proj at batch 64 and 48, y in f32 too.
TEST(CudaOps, LinearCublasLtTuned) {
  struct Shape {
    int64_t m, n, k;
    DType y_dt;
  };
  for (const Shape s : {Shape{64, 6144, 4096, DType::kBF16}, Shape{48, 4096, 4096, DType::kBF16},
                        Shape{32, 1000, 768, DType::kF32}}) {
    cuda().lt_gemm().set_tuning(true);
    check_linear(s.m, s.n, s.k, DType::kBF16, false, s.y_dt);
    cuda().lt_gemm().set_tuning(false);
    const auto r = cuda().lt_gemm().report(s.m, s.n, s.k, s.y_dt);
    ASSERT_GE(r.chosen, 0) << "m=" << s.m << " n=" << s.n;
    ASSERT_LT(static_cast<size_t>(r.chosen), r.median_us.size());
    EXPECT_GT(r.median_us[static_cast<size_t>(r.chosen)], 0.0f);
    for (float us : r.median_us) EXPECT_TRUE(us > 0.0f || us == -1.0f) << us;
    // The kept algorithm, twice more: identical bits.
    auto x = random_bf16_values(s.m * s.k), w = random_bf16_values(s.n * s.k, -0.1f, 0.1f);
    auto c_x = make_bf16(cuda(), x, {s.m, s.k}), c_w = make_bf16(cuda(), w, {s.n, s.k});
    auto y1 = make(cuda(), s.y_dt, {s.m, s.n}), y2 = make(cuda(), s.y_dt, {s.m, s.n});
    cuda().linear(c_x.t, c_w.t, Tensor(), y1.t);
    cuda().linear(c_x.t, c_w.t, Tensor(), y2.t);
    EXPECT_EQ(read_f32(cuda(), y1.t), read_f32(cuda(), y2.t));
    EXPECT_EQ(cuda().lt_gemm().report(s.m, s.n, s.k, s.y_dt).chosen, r.chosen);
  }
}

}  // namespace
}  // namespace rl::ops_test

namespace rl::ops_test {
namespace {

TEST(CudaOps, ArgmaxRowsMatchesCpuWithTiesAndNaN) {
  const int64_t rows = 37, vocab = 151936;
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  std::normal_distribution<float> d(0, 3);
  for (auto& v : x) v = d(rng());
  // Row 1: a tie between two maxima (the lower id must win); row 2: NaNs around the maximum (a broken row:
  // -1); row 3: +Inf (broken); row 4: all -inf (broken).
  x[1 * vocab + 500] = 100.0f;
  x[1 * vocab + 90000] = 100.0f;
  x[2 * vocab + 7] = NAN;
  x[2 * vocab + 8] = 50.0f;
  x[2 * vocab + 9] = NAN;
  x[3 * vocab + 11] = INFINITY;
  for (int64_t i = 0; i < vocab; ++i) x[static_cast<size_t>(4 * vocab + i)] = -INFINITY;
  auto c_x = make_f32(cuda(), x, {rows, vocab});
  auto h_x = make_f32(cpu(), x, {rows, vocab});
  auto c_out = make(cuda(), DType::kI32, {rows});
  auto h_out = make(cpu(), DType::kI32, {rows});
  cuda().argmax_rows(c_x.t, c_out.t);
  cpu().argmax_rows(h_x.t, h_out.t);
  std::vector<int32_t> got(static_cast<size_t>(rows));
  cuda().download(got.data(), c_out.t.data, got.size() * 4);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], h_out.t.i32()[r]) << r;
  EXPECT_EQ(got[1], 500);
  EXPECT_EQ(got[2], -1);
  EXPECT_EQ(got[3], -1);
  EXPECT_EQ(got[4], -1);
  EXPECT_EQ(got[5], h_out.t.i32()[5]);
  EXPECT_GE(got[5], 0);
}

}  // namespace
}  // namespace rl::ops_test
