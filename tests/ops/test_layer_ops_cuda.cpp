// The layer library's ops on CUDA against the CPU reference: LayerNorm with bias (plain and with the residual
// add), learned position embeddings, and the element-wise activations (GELU tanh of GPT-2, SiLU-gated, GPT-OSS's
// clamped SwiGLU with the clamp hit), on fresh random inputs with poisoned outputs.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

void check_layer_norm(int64_t rows, int64_t hidden, bool with_residual) {
  auto x = random_bf16_values(rows * hidden, -2, 2), res = random_bf16_values(rows * hidden, 1, 3);
  auto w = random_bf16_values(hidden, 0.5f, 1.5f), b = random_bf16_values(hidden, -0.5f, 0.5f);
  const NormParams p{1e-5f};
  auto g_x = make_f32(cpu(), x, {rows, hidden}), g_res = make_f32(cpu(), res, {rows, hidden});
  auto g_w = make_f32(cpu(), w, {hidden}), g_b = make_f32(cpu(), b, {hidden});
  auto g_out = make(cpu(), DType::kF32, {rows, hidden});
  auto c_x = make_bf16(cuda(), x, {rows, hidden}), c_res = make_bf16(cuda(), res, {rows, hidden});
  auto c_w = make_bf16(cuda(), w, {hidden}), c_b = make_bf16(cuda(), b, {hidden});
  auto c_out = make(cuda(), DType::kBF16, {rows, hidden});
  poison(c_out.t);
  if (with_residual) {
    cpu().add_layer_norm(g_res.t, g_x.t, g_w.t, g_b.t, g_out.t, p);
    cuda().add_layer_norm(c_res.t, c_x.t, c_w.t, c_b.t, c_out.t, p);
    EXPECT_LT(rel_err(read_f32(cuda(), c_res.t), read_f32(cpu(), g_res.t)), 4e-3);
  } else {
    cpu().layer_norm(g_x.t, g_w.t, g_b.t, g_out.t, p);
    cuda().layer_norm(c_x.t, c_w.t, c_b.t, c_out.t, p);
  }
  EXPECT_LT(rel_err(read_f32(cuda(), c_out.t), read_f32(cpu(), g_out.t)), kBf16Tol)
      << rows << "x" << hidden << (with_residual ? " with residual" : "");
}

TEST(CudaLayerOps, LayerNormWithBias) {
  check_layer_norm(7, 768, false);
  check_layer_norm(3, 100, false);  // not a multiple of 8
  check_layer_norm(9, 1024, true);
  check_layer_norm(2, 36, true);
}

TEST(CudaLayerOps, AddPositionEmbedding) {
  const int64_t max_pos = 300, hidden = 264, n = 41;
  auto table = random_bf16_values(max_pos * hidden), x = random_bf16_values(n * hidden);
  std::vector<int32_t> pos(n);
  for (auto& p : pos) p = static_cast<int32_t>(rng()() % max_pos);
  pos[0] = 0;
  pos[1] = max_pos - 1;
  auto g_table = make_f32(cpu(), table, {max_pos, hidden}), g_pos = make_i32(cpu(), pos, {n});
  auto g_out = make_f32(cpu(), x, {n, hidden});
  auto c_table = make_bf16(cuda(), table, {max_pos, hidden}), c_pos = make_i32(cuda(), pos, {n});
  auto c_out = make_bf16(cuda(), x, {n, hidden});
  cpu().add_position_embedding(g_pos.t, g_table.t, g_out.t);
  cuda().add_position_embedding(c_pos.t, c_table.t, c_out.t);
  EXPECT_LT(rel_err(read_f32(cuda(), c_out.t), read_f32(cpu(), g_out.t)), 4e-3);
}

void check_activation(Activation kind, int64_t rows, int64_t inter, float lo, float hi) {
  const ActParams p{kind, 7.0f, 1.702f};
  const int64_t in_cols = p.gated() ? 2 * inter : inter;
  auto in = random_bf16_values(rows * in_cols, lo, hi);
  auto g_in = make_f32(cpu(), in, {rows, in_cols}), g_out = make(cpu(), DType::kF32, {rows, inter});
  auto c_in = make_bf16(cuda(), in, {rows, in_cols}), c_out = make(cuda(), DType::kBF16, {rows, inter});
  poison(c_out.t);
  cpu().activation(g_in.t, g_out.t, p);
  cuda().activation(c_in.t, c_out.t, p);
  EXPECT_LT(rel_err(read_f32(cuda(), c_out.t), read_f32(cpu(), g_out.t)), kBf16Tol)
      << "activation " << static_cast<int>(kind) << " " << rows << "x" << inter;
}

TEST(CudaLayerOps, Activations) {
  for (int64_t rows : {1, 5, 77}) {
    check_activation(Activation::kGeluTanh, rows, 3072, -4, 4);
    check_activation(Activation::kSiluGated, rows, 1000, -4, 4);
    check_activation(Activation::kSwigluOss, rows, 96, -12, 12);  // |x| > 7: the clamps are hit
  }
}

}  // namespace
}  // namespace rl::ops_test
