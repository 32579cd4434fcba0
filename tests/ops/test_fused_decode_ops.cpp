// The fused decode ops (Backend: rms_norm_linear, rms_norm_linear_silu_mul, linear_add, qk_norm_rope_kv_write,
// rope_kv_write_attention) on CUDA, at the real widths of Qwen3-0.6B (hidden 1024, GQA 16/8) and Llama-3.1-8B
// (hidden 4096, GQA 32/8), head_dim 128: bitwise against the unfused CUDA ops (the fused kernels keep the unfused
// summation orders and roundings), within the bf16 tolerance against the CPU reference, and a row's bits the same
// alone and in a batch.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "backend/cuda/kernel_config.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

// The fused kernels are opt-in on the backend (CudaBackend::set_fused_decode); each test turns them on for its
// duration, so the unfused ops it compares against are the composed path's.
struct FusedDecodeOn {
  FusedDecodeOn() { cuda().set_fused_decode(true); }
  ~FusedDecodeOn() { cuda().set_fused_decode(false); }
};

// Rows [r, r + 1) of a [rows, cols] host matrix.
std::vector<float> row_of(const std::vector<float>& m, int64_t cols, int64_t r) {
  return std::vector<float>(m.begin() + r * cols, m.begin() + (r + 1) * cols);
}

// Every row of `batch` equals the same op run on that row alone (`alone(r)`), bit for bit.
template <typename Alone>
void expect_rows_batch_invariant(const std::vector<float>& batch, int64_t rows, int64_t cols, Alone alone,
                                 const char* what) {
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(alone(r), row_of(batch, cols, r)) << what << ": row " << r << " of " << rows;
  }
}

struct NormLinearCase {
  int64_t k, n;
  DType norm_dt;
  bool bias;
};

// y = rms_norm(x) · wᵀ: fused on CUDA against rms_norm then linear on CUDA (bitwise) and on the CPU.
void check_rms_norm_linear(const NormLinearCase& c, int64_t m) {
  auto x = random_bf16_values(m * c.k, -2, 2), nw = random_bf16_values(c.k, 0.5f, 1.5f);
  auto w = random_bf16_values(c.n * c.k, -0.1f, 0.1f), b = random_bf16_values(c.n);
  const NormParams np{1e-6f};
  auto g_x = make_f32(cpu(), x, {m, c.k}), g_nw = make_f32(cpu(), nw, {c.k});
  auto g_w = make_bf16(cpu(), w, {c.n, c.k}), g_b = make_f32(cpu(), b, {c.n});
  auto g_normed = make(cpu(), DType::kF32, {m, c.k}), g_y = make(cpu(), DType::kF32, {m, c.n});
  cpu().rms_norm_linear(g_x.t, g_nw.t, np, g_w.t, c.bias ? g_b.t : Tensor(), g_normed.t, g_y.t);

  auto c_x = make_bf16(cuda(), x, {m, c.k});
  auto c_nw = c.norm_dt == DType::kF32 ? make_f32(cuda(), nw, {c.k}) : make_bf16(cuda(), nw, {c.k});
  auto c_w = make_bf16(cuda(), w, {c.n, c.k}), c_b = make_bf16(cuda(), b, {c.n});
  auto c_normed = make(cuda(), DType::kBF16, {m, c.k}), c_y = make(cuda(), DType::kBF16, {m, c.n});
  auto c_ref = make(cuda(), DType::kBF16, {m, c.n});
  poison(c_y.t);
  const Tensor bias = c.bias ? c_b.t : Tensor();
  cuda().rms_norm_linear(c_x.t, c_nw.t, np, c_w.t, bias, c_normed.t, c_y.t);
  cuda().rms_norm(c_x.t, c_nw.t, c_normed.t, np);
  cuda().linear(c_normed.t, c_w.t, bias, c_ref.t);
  const auto out = read_f32(cuda(), c_y.t);
  EXPECT_EQ(out, read_f32(cuda(), c_ref.t)) << "m=" << m << " k=" << c.k << " n=" << c.n;
  EXPECT_LT(rel_err(out, read_f32(cpu(), g_y.t)), kBf16Tol) << "m=" << m << " k=" << c.k << " n=" << c.n;
  if (m > 1 && m <= 16) {
    expect_rows_batch_invariant(out, m, c.n, [&](int64_t r) {
      auto x1 = make_bf16(cuda(), row_of(x, c.k, r), {1, c.k});
      auto y1 = make(cuda(), DType::kBF16, {1, c.n});
      poison(y1.t);
      cuda().rms_norm_linear(x1.t, c_nw.t, np, c_w.t, bias, c_normed.t, y1.t);
      return read_f32(cuda(), y1.t);
    }, "rms_norm_linear");
  }
}

// qkv of Qwen3-0.6B (1024 → (16 + 2·8)·128) and Llama-3.1-8B (4096 → (32 + 2·8)·128), a K tail (1000), f32 norm
// weights, a bias; M up to the GEMV's 16 and past it (24: the composition through cuBLASLt).
TEST(CudaFusedOps, RmsNormLinear) {
  const FusedDecodeOn fused;
  for (const NormLinearCase& c : {NormLinearCase{1024, 4096, DType::kBF16, false},
                                  NormLinearCase{4096, 6144, DType::kBF16, true},
                                  NormLinearCase{1000, 200, DType::kF32, true}}) {
    for (int64_t m : {1, 3, 8, 16, 24}) check_rms_norm_linear(c, m);
  }
}

// out = silu(gate) · up of rms_norm(x) · wᵀ against rms_norm then linear_silu_mul (CUDA, bitwise) and the CPU.
TEST(CudaFusedOps, RmsNormLinearSiluMul) {
  const FusedDecodeOn fused;
  struct Case {
    int64_t k, inter;
  };
  for (const Case& c : {Case{1024, 3072}, Case{4096, 2048}}) {
    for (int64_t m : {1, 4, 16, 20}) {
      auto x = random_bf16_values(m * c.k, -2, 2), nw = random_bf16_values(c.k, 0.5f, 1.5f);
      auto w = random_bf16_values(2 * c.inter * c.k, -0.1f, 0.1f);
      const NormParams np{1e-6f};
      auto g_x = make_f32(cpu(), x, {m, c.k}), g_nw = make_f32(cpu(), nw, {c.k});
      auto g_w = make_bf16(cpu(), w, {2 * c.inter, c.k});
      auto g_normed = make(cpu(), DType::kF32, {m, c.k}), g_gu = make(cpu(), DType::kF32, {m, 2 * c.inter});
      auto g_y = make(cpu(), DType::kF32, {m, c.inter});
      cpu().rms_norm_linear_silu_mul(g_x.t, g_nw.t, np, g_w.t, Tensor(), g_normed.t, g_gu.t, g_y.t);

      auto c_x = make_bf16(cuda(), x, {m, c.k}), c_nw = make_bf16(cuda(), nw, {c.k});
      auto c_w = make_bf16(cuda(), w, {2 * c.inter, c.k});
      auto c_normed = make(cuda(), DType::kBF16, {m, c.k}), c_gu = make(cuda(), DType::kBF16, {m, 2 * c.inter});
      auto c_y = make(cuda(), DType::kBF16, {m, c.inter}), c_ref = make(cuda(), DType::kBF16, {m, c.inter});
      poison(c_y.t);
      cuda().rms_norm_linear_silu_mul(c_x.t, c_nw.t, np, c_w.t, Tensor(), c_normed.t, c_gu.t, c_y.t);
      cuda().rms_norm(c_x.t, c_nw.t, c_normed.t, np);
      cuda().linear_silu_mul(c_normed.t, c_w.t, Tensor(), c_gu.t, c_ref.t);
      const auto out = read_f32(cuda(), c_y.t);
      EXPECT_EQ(out, read_f32(cuda(), c_ref.t)) << "m=" << m << " k=" << c.k;
      EXPECT_LT(rel_err(out, read_f32(cpu(), g_y.t)), kBf16Tol) << "m=" << m << " k=" << c.k;
      if (m > 1 && m <= 16) {
        expect_rows_batch_invariant(out, m, c.inter, [&](int64_t r) {
          auto x1 = make_bf16(cuda(), row_of(x, c.k, r), {1, c.k});
          auto y1 = make(cuda(), DType::kBF16, {1, c.inter});
          poison(y1.t);
          cuda().rms_norm_linear_silu_mul(x1.t, c_nw.t, np, c_w.t, Tensor(), c_normed.t, c_gu.t, y1.t);
          return read_f32(cuda(), y1.t);
        }, "rms_norm_linear_silu_mul");
      }
    }
  }
}

// Inputs of residual += x · wᵀ (+ b) with [m, k] x and [n, k] w (bf16 values), and the CPU's residual after it.
struct LinearAddData {
  std::vector<float> x, w, res, b, want;
};
LinearAddData linear_add_data(int64_t m, int64_t k, int64_t n, bool bias) {
  LinearAddData d{random_bf16_values(m * k), random_bf16_values(n * k, -0.1f, 0.1f), random_bf16_values(m * n, -4, 4),
                  random_bf16_values(n), {}};
  auto g_x = make_f32(cpu(), d.x, {m, k}), g_w = make_bf16(cpu(), d.w, {n, k});
  auto g_b = make_f32(cpu(), d.b, {n}), g_res = make_f32(cpu(), d.res, {m, n});
  auto g_scratch = make(cpu(), DType::kF32, {m, n});
  cpu().linear_add(g_x.t, g_w.t, bias ? g_b.t : Tensor(), g_scratch.t, g_res.t);
  d.want = read_f32(cpu(), g_res.t);
  return d;
}

// residual += x · wᵀ: o_proj and down_proj of Qwen3-0.6B (2048 → 1024, 3072 → 1024, split-K clusters) and
// Llama-3.1-8B (4096 → 4096), against linear then add (CUDA, bitwise) and the CPU.
TEST(CudaFusedOps, LinearAdd) {
  const FusedDecodeOn fused;
  struct Case {
    int64_t k, n;
    bool bias;
  };
  for (const Case& c : {Case{2048, 1024, false}, Case{3072, 1024, true}, Case{4096, 4096, false}}) {
    for (int64_t m : {1, 5, 16}) {  // past 16: LinearAddInTheGemmEpilogue
      const LinearAddData d = linear_add_data(m, c.k, c.n, c.bias);
      const std::vector<float>& x = d.x, &res = d.res;
      auto c_x = make_bf16(cuda(), x, {m, c.k}), c_w = make_bf16(cuda(), d.w, {c.n, c.k});
      auto c_b = make_bf16(cuda(), d.b, {c.n});
      const Tensor bias = c.bias ? c_b.t : Tensor();
      auto c_res = make_bf16(cuda(), res, {m, c.n}), c_ref = make_bf16(cuda(), res, {m, c.n});
      auto c_scratch = make(cuda(), DType::kBF16, {m, c.n});
      cuda().linear_add(c_x.t, c_w.t, bias, c_scratch.t, c_res.t);
      cuda().linear(c_x.t, c_w.t, bias, c_scratch.t);
      cuda().add(c_ref.t, c_scratch.t);
      const auto out = read_f32(cuda(), c_res.t);
      EXPECT_EQ(out, read_f32(cuda(), c_ref.t)) << "m=" << m << " k=" << c.k << " n=" << c.n;
      EXPECT_LT(rel_err(out, d.want), kBf16Tol) << "m=" << m << " k=" << c.k;
      if (m > 1 && m <= 16) {
        expect_rows_batch_invariant(out, m, c.n, [&](int64_t r) {
          auto x1 = make_bf16(cuda(), row_of(x, c.k, r), {1, c.k});
          auto r1 = make_bf16(cuda(), row_of(res, c.n, r), {1, c.n});
          cuda().linear_add(x1.t, c_w.t, bias, c_scratch.t, r1.t);
          return read_f32(cuda(), r1.t);
        }, "linear_add");
      }
    }
  }
}

// Past the GEMV's rows (M > kGemvMaxM, cuBLASLt): linear_add without a bias adds the residual in cuBLASLt's epilogue
// (fuses_linear_add). Its kernels may round the product before the add or not (on the H100, 4096 → 4096 gave the
// composition's bits, 14336 → 4096 at M ≤ 64 did not). Against the CPU (f32) within the bf16 tolerance, and each
// element within the composition's rounding of the product (half a bf16 step of it) plus half a step of each result;
// with a bias, and with the epilogue switched off, bitwise the composition.
TEST(CudaFusedOps, LinearAddInTheGemmEpilogue) {
  CudaBackend& be = cuda();
  struct Case {
    int64_t k, n;
    bool bias;
  };
  for (const Case& c : {Case{4096, 4096, false}, Case{14336, 4096, false}, Case{1000, 200, true}}) {
    for (int64_t m : {cuda::kGemvMaxM + 1, cuda::kSkinnyGemmMaxM, int64_t{300}}) {
      ASSERT_TRUE(be.fuses_linear_add(m));
      const LinearAddData d = linear_add_data(m, c.k, c.n, c.bias);
      const std::vector<float>& x = d.x, &res = d.res;
      auto c_x = make_bf16(cuda(), x, {m, c.k}), c_w = make_bf16(cuda(), d.w, {c.n, c.k});
      auto c_b = make_bf16(cuda(), d.b, {c.n});
      const Tensor bias = c.bias ? c_b.t : Tensor();
      auto c_res = make_bf16(cuda(), res, {m, c.n}), c_ref = make_bf16(cuda(), res, {m, c.n});
      auto c_off = make_bf16(cuda(), res, {m, c.n}), c_scratch = make(cuda(), DType::kBF16, {m, c.n});
      const std::string what = "m=" + std::to_string(m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n);
      be.linear_add(c_x.t, c_w.t, bias, c_scratch.t, c_res.t);
      be.set_gemm_residual(false);
      EXPECT_FALSE(be.fuses_linear_add(m));
      be.linear_add(c_x.t, c_w.t, bias, c_scratch.t, c_off.t);
      be.set_gemm_residual(true);
      be.linear(c_x.t, c_w.t, bias, c_scratch.t);
      be.add(c_ref.t, c_scratch.t);
      const auto out = read_f32(cuda(), c_res.t), ref = read_f32(cuda(), c_ref.t);
      const auto product = read_f32(cuda(), c_scratch.t);
      EXPECT_EQ(read_f32(cuda(), c_off.t), ref) << what;
      EXPECT_LT(rel_err(out, d.want), kBf16Tol) << what;
      if (c.bias) {
        EXPECT_EQ(out, ref) << what;
        continue;
      }
      size_t outside = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        const float big = std::max(std::fabs(out[i]), std::fabs(ref[i]));
        const float bound = 1.001f * (std::ldexp(std::fabs(product[i]), -8) + std::ldexp(big, -7));
        outside += std::fabs(out[i] - ref[i]) > bound;
      }
      EXPECT_EQ(outside, 0u) << what;
    }
  }
}

TEST(CudaFusedOps, AddMatchesCpu) {
  const FusedDecodeOn fused;
  for (int64_t n : {4096, 1001}) {
    auto a = random_bf16_values(n, -4, 4), x = random_bf16_values(n, -4, 4);
    auto g_a = make_f32(cpu(), a, {n}), g_x = make_f32(cpu(), x, {n});
    auto c_a = make_bf16(cuda(), a, {n}), c_x = make_bf16(cuda(), x, {n});
    cpu().add(g_a.t, g_x.t);
    cuda().add(c_a.t, c_x.t);
    // Both inputs are bf16 values: the f32 sum rounded once.
    std::vector<float> want = read_f32(cpu(), g_a.t);
    for (float& v : want) v = bf16_to_f32(f32_to_bf16(v));
    EXPECT_EQ(read_f32(cuda(), c_a.t), want) << "n=" << n;
  }
}

// RoPE (with and without Qwen3's q/k norm) and the KV write in one kernel against qk_norm_rope then kv_write
// (CUDA, bitwise: qkv and both caches) and the CPU, with skipped (negative) slots.
void check_rope_kv(int64_t t, int64_t nh, int64_t nkv, bool norms) {
  const int64_t d = 128, bs = 16, num_blocks = std::max<int64_t>(8, t / bs + 2), kv_row = nkv * d;
  QkvLayout l{nh, nkv, d};
  const auto [qkv, inv, qn, kn, pos] = random_rope_inputs(t, l.row(), d);
  auto kc = random_bf16_values(num_blocks * bs * kv_row), vc = random_bf16_values(num_blocks * bs * kv_row);
  std::vector<int32_t> slots = shuffled_slots(num_blocks * bs, t);
  if (t > 3) slots[2] = -1;
  const NormParams np{1e-6f};

  auto g_qkv = make_f32(cpu(), qkv, {t, l.row()}), g_pos = make_i32(cpu(), pos, {t});
  auto g_inv = make_f32(cpu(), inv, {d / 2}), g_qn = make_f32(cpu(), qn, {d}), g_kn = make_f32(cpu(), kn, {d});
  auto g_slots = make_i32(cpu(), slots, {t});
  auto g_k = make_f32(cpu(), kc, {num_blocks, bs, nkv, d}), g_v = make_f32(cpu(), vc, {num_blocks, bs, nkv, d});
  cpu().qk_norm_rope_kv_write(g_qkv.t, norms ? g_qn.t : Tensor(), norms ? g_kn.t : Tensor(), g_pos.t,
                              RopeParams{l, g_inv.t.f32()}, np, g_slots.t, KvLayer{g_k.t, g_v.t});

  auto c_pos = make_i32(cuda(), pos, {t}), c_inv = make_f32(cuda(), inv, {d / 2});
  auto c_qn = make_bf16(cuda(), qn, {d}), c_kn = make_bf16(cuda(), kn, {d}), c_slots = make_i32(cuda(), slots, {t});
  const Tensor qnt = norms ? c_qn.t : Tensor(), knt = norms ? c_kn.t : Tensor();
  const RopeParams rope{l, c_inv.t.f32()};
  // Fused, then the two unfused ops on copies.
  auto c_qkv = make_bf16(cuda(), qkv, {t, l.row()});
  auto c_k = make_bf16(cuda(), kc, {num_blocks, bs, nkv, d}), c_v = make_bf16(cuda(), vc, {num_blocks, bs, nkv, d});
  cuda().qk_norm_rope_kv_write(c_qkv.t, qnt, knt, c_pos.t, rope, np, c_slots.t, KvLayer{c_k.t, c_v.t});
  auto r_qkv = make_bf16(cuda(), qkv, {t, l.row()});
  auto r_k = make_bf16(cuda(), kc, {num_blocks, bs, nkv, d}), r_v = make_bf16(cuda(), vc, {num_blocks, bs, nkv, d});
  cuda().qk_norm_rope(r_qkv.t, qnt, knt, c_pos.t, rope, np);
  cuda().kv_write(r_qkv.t, l, c_slots.t, KvLayer{r_k.t, r_v.t});

  const auto out_qkv = read_f32(cuda(), c_qkv.t), out_k = read_f32(cuda(), c_k.t);
  const auto out_v = read_f32(cuda(), c_v.t);
  EXPECT_EQ(out_qkv, read_f32(cuda(), r_qkv.t)) << "t=" << t << " gqa " << nh << "/" << nkv;
  EXPECT_EQ(out_k, read_f32(cuda(), r_k.t)) << "t=" << t << " gqa " << nh << "/" << nkv;
  EXPECT_EQ(out_v, read_f32(cuda(), r_v.t)) << "t=" << t << " gqa " << nh << "/" << nkv;
  EXPECT_LT(rel_err(out_qkv, read_f32(cpu(), g_qkv.t)), kBf16Tol);
  EXPECT_LT(rel_err(out_k, read_f32(cpu(), g_k.t)), kBf16Tol);
  EXPECT_EQ(out_v, read_f32(cpu(), g_v.t));  // v is copied, not computed
  // Each token alone (its own slot) writes the same bits (short batches: one launch a token).
  if (t > 1 && t <= 64) {
    for (int64_t r = 0; r < t; ++r) {
      auto q1 = make_bf16(cuda(), row_of(qkv, l.row(), r), {1, l.row()});
      auto p1 = make_i32(cuda(), {pos[r]}, {1}), s1 = make_i32(cuda(), {slots[r]}, {1});
      auto k1 = make_bf16(cuda(), kc, {num_blocks, bs, nkv, d}), v1 = make_bf16(cuda(), vc, {num_blocks, bs, nkv, d});
      cuda().qk_norm_rope_kv_write(q1.t, qnt, knt, p1.t, rope, np, s1.t, KvLayer{k1.t, v1.t});
      EXPECT_EQ(read_f32(cuda(), q1.t), row_of(out_qkv, l.row(), r)) << "token " << r << " alone";
      if (slots[r] >= 0) {
        const auto k_alone = read_f32(cuda(), k1.t);
        EXPECT_EQ(row_of(k_alone, kv_row, slots[r]), row_of(out_k, kv_row, slots[r])) << "token " << r << " alone";
      }
    }
  }
}

TEST(CudaFusedOps, QkNormRopeKvWrite) {
  const FusedDecodeOn fused;
  for (int64_t t : {1, 7, 33}) {
    check_rope_kv(t, 16, 8, true);    // Qwen3-0.6B
    check_rope_kv(t, 32, 8, false);   // Llama-3.1-8B
  }
  check_rope_kv(5, 32, 8, true);
  check_rope_kv(5, 16, 8, false);
  check_rope_kv(700, 16, 8, true);  // a prefill chunk
}

// A [num_blocks, bs, nkv, d] KV cache of dt holding the bytes init, and a cache's bytes read back.
Owned cache_of_bytes(DType dt, int64_t num_blocks, int64_t bs, int64_t nkv, int64_t d,
                     const std::vector<uint8_t>& init) {
  Owned o = make(cuda(), dt, {num_blocks, bs, nkv, d});
  cuda().upload(o.t.data, init.data(), init.size());
  return o;
}
std::vector<uint8_t> bytes_of(const Owned& o) {
  std::vector<uint8_t> v(o.t.nbytes());
  cuda().download(v.data(), o.t.data, v.size());
  return v;
}

// The same kernel writing an FP8 e4m3 cache: qkv and both caches' bytes equal the composed ops' (qk_norm_rope, then
// kv_write into the fp8 cache), with a skipped slot; head_dim 128 and 80 (a half that is not whole warps: the k row
// read back crosses lanes).
void check_rope_kv_fp8(int64_t t, int64_t nh, int64_t nkv, int64_t d, bool norms) {
  const int64_t bs = 16, num_blocks = std::max<int64_t>(8, t / bs + 2), kv_row = nkv * d;
  QkvLayout l{nh, nkv, d};
  const auto [qkv, inv, qn, kn, pos] = random_rope_inputs(t, l.row(), d);
  std::vector<uint8_t> init(static_cast<size_t>(num_blocks * bs * kv_row));
  for (auto& b : init) b = static_cast<uint8_t>(rng()() % 0x7e);
  std::vector<int32_t> slots = shuffled_slots(num_blocks * bs, t);
  if (t > 3) slots[2] = -1;
  auto c_pos = make_i32(cuda(), pos, {t}), c_inv = make_f32(cuda(), inv, {d / 2});
  auto c_qn = make_bf16(cuda(), qn, {d}), c_kn = make_bf16(cuda(), kn, {d}), c_slots = make_i32(cuda(), slots, {t});
  const Tensor qnt = norms ? c_qn.t : Tensor(), knt = norms ? c_kn.t : Tensor();
  const RopeParams rope{l, c_inv.t.f32()};
  const NormParams np{1e-6f};
  const auto cache = [&]() { return cache_of_bytes(DType::kFP8E4M3, num_blocks, bs, nkv, d, init); };
  auto c_qkv = make_bf16(cuda(), qkv, {t, l.row()});
  Owned c_k = cache(), c_v = cache();
  cuda().qk_norm_rope_kv_write(c_qkv.t, qnt, knt, c_pos.t, rope, np, c_slots.t, KvLayer{c_k.t, c_v.t});
  auto r_qkv = make_bf16(cuda(), qkv, {t, l.row()});
  Owned r_k = cache(), r_v = cache();
  cuda().qk_norm_rope(r_qkv.t, qnt, knt, c_pos.t, rope, np);
  cuda().kv_write(r_qkv.t, l, c_slots.t, KvLayer{r_k.t, r_v.t});
  const std::string what = "t=" + std::to_string(t) + " gqa " + std::to_string(nh) + "/" + std::to_string(nkv) +
                           " d=" + std::to_string(d);
  EXPECT_EQ(read_f32(cuda(), c_qkv.t), read_f32(cuda(), r_qkv.t)) << what;
  EXPECT_EQ(bytes_of(c_k), bytes_of(r_k)) << what;
  EXPECT_EQ(bytes_of(c_v), bytes_of(r_v)) << what;
  EXPECT_NE(bytes_of(c_k), init) << what;  // it wrote
}

TEST(CudaFusedOps, QkNormRopeKvWriteIntoFp8Cache) {
  for (int64_t t : {1, 7, 33}) {
    check_rope_kv_fp8(t, 16, 8, 128, true);   // Qwen3-0.6B
    check_rope_kv_fp8(t, 32, 8, 128, false);  // Llama-3.1-8B
  }
  check_rope_kv_fp8(5, 6, 2, 80, true);
  check_rope_kv_fp8(1701, 6, 2, 80, true);  // a prefill chunk
}

// A token's bits do not depend on how many tokens share its launch: the q/k norm + RoPE kernel (and with the KV write)
// runs one warp a head below kQkNormRopeRowsMinTokens tokens, one block of 256 threads a token from there and of 128
// from kQkNormRopeRowsSmallBlockMinTokens (kernel_config.h). One prefill-sized launch against the same tokens in
// launches of `chunk`: qkv, and the caches' bytes (bf16 or FP8), with skipped slots. cache: 0 none (qk_norm_rope),
// 1 bf16, 2 FP8.
void check_rope_forms(int64_t t, int64_t chunk, int64_t nh, int64_t nkv, int64_t d, bool norms, int cache) {
  ASSERT_GT(t, chunk);
  const int64_t bs = 16, num_blocks = t / bs + 2, kv_row = nkv * d;
  const QkvLayout l{nh, nkv, d};
  const RopeInputs in = random_rope_inputs(t, l.row(), d);
  const std::vector<float>& qkv = in.qkv;
  const std::vector<int32_t>& pos = in.pos;
  std::vector<int32_t> slots = shuffled_slots(num_blocks * bs, t);
  slots[2] = -1;
  slots[static_cast<size_t>(t - 1)] = -1;
  const DType cache_dt = cache == 2 ? DType::kFP8E4M3 : DType::kBF16;
  std::vector<uint8_t> init(static_cast<size_t>(num_blocks * bs * kv_row * (cache == 2 ? 1 : 2)));
  for (auto& b : init) b = static_cast<uint8_t>(rng()() % 0x7e);
  const auto new_cache = [&]() { return cache_of_bytes(cache_dt, num_blocks, bs, nkv, d, init); };
  auto c_inv = make_f32(cuda(), in.inv, {d / 2}), c_qn = make_bf16(cuda(), in.qn, {d});
  auto c_kn = make_bf16(cuda(), in.kn, {d});
  const Tensor qnt = norms ? c_qn.t : Tensor(), knt = norms ? c_kn.t : Tensor();
  const RopeParams rope{l, c_inv.t.f32()};
  const NormParams np{1e-6f};
  Owned k_all = new_cache(), v_all = new_cache(), k_parts = new_cache(), v_parts = new_cache();
  // Tokens [r0, r0 + n) in one launch; returns their qkv rows after it.
  const auto run = [&](int64_t r0, int64_t n, const Owned& k, const Owned& v) {
    const auto b = static_cast<size_t>(r0), e = static_cast<size_t>(r0 + n);
    auto q = make_bf16(cuda(), std::vector<float>(qkv.begin() + b * l.row(), qkv.begin() + e * l.row()), {n, l.row()});
    auto p = make_i32(cuda(), std::vector<int32_t>(pos.begin() + b, pos.begin() + e), {n});
    if (cache == 0) {
      cuda().qk_norm_rope(q.t, qnt, knt, p.t, rope, np);
    } else {
      auto sl = make_i32(cuda(), std::vector<int32_t>(slots.begin() + b, slots.begin() + e), {n});
      cuda().qk_norm_rope_kv_write(q.t, qnt, knt, p.t, rope, np, sl.t, KvLayer{k.t, v.t});
    }
    return read_f32(cuda(), q.t);
  };
  const std::vector<float> all = run(0, t, k_all, v_all);
  std::vector<float> parts;
  for (int64_t r0 = 0; r0 < t; r0 += chunk) {
    const std::vector<float> part = run(r0, std::min(chunk, t - r0), k_parts, v_parts);
    parts.insert(parts.end(), part.begin(), part.end());
  }
  const std::string what = "t=" + std::to_string(t) + " in " + std::to_string(chunk) + "s gqa " + std::to_string(nh) +
                           "/" + std::to_string(nkv) + " d=" + std::to_string(d) + " cache " + std::to_string(cache);
  EXPECT_EQ(all, parts) << what;
  EXPECT_NE(all, qkv) << what;  // it rotated
  if (cache != 0) {
    EXPECT_EQ(bytes_of(k_all), bytes_of(k_parts)) << what;
    EXPECT_EQ(bytes_of(v_all), bytes_of(v_parts)) << what;
    EXPECT_NE(bytes_of(k_all), init) << what;  // it wrote
  }
}

TEST(CudaFusedOps, QkNormRopeBitsIndependentOfLaunchSize) {
  cuda().set_fused_rope_kv_write(true);
  const int64_t warp = cuda::kQkNormRopeRowsMinTokens - 1, b256 = cuda::kQkNormRopeRowsSmallBlockMinTokens - 1;
  static_assert(cuda::kQkNormRopeRowsSmallBlockMinTokens - 1 >= cuda::kQkNormRopeRowsMinTokens);
  for (int cache : {0, 1, 2}) check_rope_forms(1000, warp, 16, 8, 128, true, cache);  // Qwen3-0.6B
  check_rope_forms(600, warp, 32, 8, 128, false, 1);                                 // Llama-3.1-8B
  check_rope_forms(700, warp, 6, 2, 80, true, 2);  // a half of 40: lanes without elements
  check_rope_forms(600, warp, 8, 8, 256, true, 1);
  check_rope_forms(1100, warp, 5, 1, 64, true, 0);
  // The 128-thread blocks against the warp form and the 256-thread blocks.
  for (int64_t chunk : {warp, b256}) {
    for (int cache : {0, 1, 2}) check_rope_forms(2100, chunk, 16, 8, 128, true, cache);
    check_rope_forms(2100, chunk, 32, 8, 128, false, 1);
    check_rope_forms(2100, chunk, 6, 2, 80, true, 2);
    check_rope_forms(2100, chunk, 8, 8, 256, true, 1);
    check_rope_forms(2100, chunk, 5, 1, 64, true, 0);
  }
}

// The RoPE + KV write kernel is on by default without the rest of the fused decode path (CudaBackend's
// fused_rope_kv_write_); the same checks with the backend as created, and with the switch off (the composed ops).
TEST(CudaFusedOps, QkNormRopeKvWriteByDefault) {
  ASSERT_FALSE(cuda().fused_decode());
  for (bool on : {true, false}) {
    cuda().set_fused_rope_kv_write(on);
    check_rope_kv(7, 16, 8, true);
    check_rope_kv(1, 32, 8, false);
  }
  cuda().set_fused_rope_kv_write(true);
}

// rope_kv_write_attention with the decode attention kernel doing the q/k norm + RoPE and the KV write itself
// (CudaBackend::set_fused_rope_attention) against the same op composed (qk_norm_rope_kv_write, then attention):
// bitwise the output and both caches. Qwen3-0.6B (16/8, q/k norm) and Llama-3.1-8B (32/8) widths, head_dim 64, GQA 16
// (two head chunks per KV head), batches of 1, 7 and 64 with contexts across page boundaries, and a padded row with
// no slot (nothing written; its last key read as it is). The fused path leaves qkv unrotated, which shows it ran.
struct RopeAttnCase {
  int64_t nh, nkv, d;
  bool norms;
};
void check_rope_attention(const RopeAttnCase& c, const std::vector<int32_t>& ctx) {
  const int64_t b = static_cast<int64_t>(ctx.size()), bs = 16, kv_row = c.nkv * c.d;
  const QkvLayout l{c.nh, c.nkv, c.d};
  std::vector<int64_t> pages(b);
  int64_t total_pages = 0, max_blocks = 1;
  for (int64_t i = 0; i < b; ++i) {
    pages[i] = (ctx[i] + bs - 1) / bs;
    total_pages += pages[i];
    max_blocks = std::max(max_blocks, pages[i]);
  }
  const int64_t num_blocks = total_pages + 1;
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng());
  std::vector<int32_t> table(b * max_blocks, 0), slots(b), pos(b), cu(b + 1), lens(ctx);
  int64_t next = 0;
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t p = 0; p < pages[i]; ++p) table[i * max_blocks + p] = perm[next++];
    pos[i] = ctx[i] - 1;
    slots[i] = static_cast<int32_t>(table[i * max_blocks + (ctx[i] - 1) / bs] * bs + (ctx[i] - 1) % bs);
    cu[i + 1] = static_cast<int32_t>(i + 1);
  }
  if (b > 3) slots[1] = -1;
  const auto qkv = random_bf16_values(b * l.row(), -3, 3);
  const auto kc = random_bf16_values(num_blocks * bs * kv_row), vc = random_bf16_values(num_blocks * bs * kv_row);
  std::vector<float> inv(c.d / 2);
  for (int64_t i = 0; i < c.d / 2; ++i) inv[i] = std::pow(1e6f, -2.0f * i / c.d);
  auto qn = make_bf16(cuda(), random_bf16_values(c.d, 0.5f, 1.5f), {c.d});
  auto kn = make_bf16(cuda(), random_bf16_values(c.d, 0.5f, 1.5f), {c.d});
  auto c_inv = make_f32(cuda(), inv, {c.d / 2}), c_pos = make_i32(cuda(), pos, {b});
  auto c_slots = make_i32(cuda(), slots, {b}), c_cu = make_i32(cuda(), cu, {b + 1});
  auto c_lens = make_i32(cuda(), lens, {b}), c_table = make_i32(cuda(), table, {b, max_blocks});
  AttentionMetadata meta =
      decode_metadata(c_cu.t, c_lens.t, c_table.t, b, *std::max_element(ctx.begin(), ctx.end()));
  meta.layout = l;
  meta.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const RopeParams rope{l, c_inv.t.f32()};
  const Tensor qnt = c.norms ? qn.t : Tensor(), knt = c.norms ? kn.t : Tensor();
  struct Run {
    std::vector<float> qkv, k, v, out;
  };
  // The composed ops' attention through the tensor-core walk the fused kernel takes (production at small batches is
  // the staged kernel, whose split count and page order give other bits).
  auto run = [&](bool fused) {
    cuda().set_fused_rope_attention(fused);
    cuda().set_attention_impl(fused ? CudaBackend::AttentionImpl::kAuto : CudaBackend::AttentionImpl::kDecodeMma);
    auto q = make_bf16(cuda(), qkv, {b, l.row()});
    auto k = make_bf16(cuda(), kc, {num_blocks, bs, c.nkv, c.d});
    auto v = make_bf16(cuda(), vc, {num_blocks, bs, c.nkv, c.d});
    auto out = make(cuda(), DType::kBF16, {b, c.nh * c.d});
    poison(out.t);
    cuda().rope_kv_write_attention(q.t, qnt, knt, c_pos.t, rope, NormParams{1e-6f}, c_slots.t, KvLayer{k.t, v.t},
                                   meta, out.t);
    cuda().set_attention_impl(CudaBackend::AttentionImpl::kAuto);
    return Run{read_f32(cuda(), q.t), read_f32(cuda(), k.t), read_f32(cuda(), v.t), read_f32(cuda(), out.t)};
  };
  const bool before = cuda().fused_rope_attention();
  const Run composed = run(false), fused = run(true);
  cuda().set_fused_rope_attention(before);
  const std::string what = "gqa " + std::to_string(c.nh) + "/" + std::to_string(c.nkv) + " d" +
                           std::to_string(c.d) + (c.norms ? " q/k norm" : "") + " batch " + std::to_string(b);
  EXPECT_EQ(fused.out, composed.out) << what;
  EXPECT_EQ(fused.k, composed.k) << what;
  EXPECT_EQ(fused.v, composed.v) << what;
  EXPECT_EQ(fused.qkv, qkv) << what << ": the fused kernel leaves qkv as the projection wrote it";
  // (At position 0 without q/k norm the rotation is the identity: nothing to tell apart.)
  if (c.norms || *std::max_element(pos.begin(), pos.end()) > 0) {
    EXPECT_NE(composed.qkv, qkv) << what << ": the composed ops rotate qkv in place";
  }
}

TEST(CudaFusedOps, RopeKvWriteAttentionInTheDecodeKernel) {
  std::vector<int32_t> b64(64);
  for (auto& n : b64) n = 1 + static_cast<int32_t>(rng()() % 600);
  const std::vector<std::vector<int32_t>> batches = {{1}, {17}, {4097}, {1, 16, 17, 300, 33, 2, 128}, b64};
  for (const RopeAttnCase& c : {RopeAttnCase{16, 8, 128, true}, RopeAttnCase{32, 8, 128, false},
                                RopeAttnCase{8, 2, 64, true}, RopeAttnCase{64, 4, 128, true}}) {
    for (const auto& ctx : batches) check_rope_attention(c, ctx);
  }
}

}  // namespace
}  // namespace rl::ops_test
