// CpuBackend::linear: y [M, N] = x [M, K] · wᵀ + bias through the backend's kernel tier
// (cpu_kernels.h). The activations are prepared once per call, in parallel over rows: rounded to
// bf16 for the vdpbf16ps tier, quantised per row to int8 for int8 weights (rows zero-padded to a
// multiple of 64). The pool then splits the output columns N, each thread streaming its own slice
// of the weight rows once.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/quant.h"

namespace rl {

namespace {

constexpr int64_t kActAlign = 64;
// Output columns per scheduling grain: a multiple of every kernel's NR, and 16 f32 = one cache line
// of y.
constexpr int64_t kColumnGrain = 16;

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && y.dim(-1) == n && y.rows() == m);
  const int64_t ld = (k + kActAlign - 1) / kActAlign * kActAlign;
  LinearActs a;
  a.x = x.f32();
  a.ld = ld;
  float* ys = y.f32();
  const CpuKernels& kern = *kern_;
  auto for_rows = [&](auto&& fn) {
    pool_.parallel_for(
        m,
        [&](int64_t b, int64_t e, int) {
          for (int64_t r = b; r < e; ++r) fn(r);
        },
        std::max<int64_t>(1, 8192 / k));
  };

  if (w.dtype == DType::kF32) {
    const float* wp = w.as<float>();
    pool_.parallel_for(
        n, [&](int64_t b, int64_t e, int) { kern.linear_f32(a, wp, ys, m, n, k, b, e); },
        kColumnGrain);
  } else if (w.dtype == DType::kBF16) {
    if (kern.bf16_acts) {
      if (act_bf16_.size() < static_cast<size_t>(m * ld))
        act_bf16_.resize(static_cast<size_t>(m * ld));
      uint16_t* xb = act_bf16_.data();
      for_rows([&](int64_t r) {
        for (int64_t i = 0; i < k; ++i) xb[r * ld + i] = f32_to_bf16(a.x[r * k + i]);
        std::fill(xb + r * ld + k, xb + (r + 1) * ld, static_cast<uint16_t>(0));
      });
      a.x_bf16 = xb;
    }
    const uint16_t* wp = w.as<uint16_t>();
    pool_.parallel_for(
        n, [&](int64_t b, int64_t e, int) { kern.linear_bf16(a, wp, ys, m, n, k, b, e); },
        kColumnGrain);
  } else {
    RL_CHECK_MSG(w.dtype == DType::kI8, "linear: unsupported weight dtype %s",
                 std::string(dtype_name(w.dtype)).c_str());
    if (act_i8_.size() < static_cast<size_t>(m * ld)) act_i8_.resize(static_cast<size_t>(m * ld));
    if (act_scale_.size() < static_cast<size_t>(m)) act_scale_.resize(static_cast<size_t>(m));
    int8_t* xq = act_i8_.data();
    float* xs = act_scale_.data();
    for_rows([&](int64_t r) {
      xs[r] = quantize_act_row_i8(a.x + r * k, k, xq + r * ld);
      std::fill(xq + r * ld + k, xq + (r + 1) * ld, static_cast<int8_t>(0));
    });
    a.x_i8 = xq;
    a.x_scale = xs;
    const I8WeightView wv = i8_weight_view(w.data, n, k);
    pool_.parallel_for(
        n, [&](int64_t b, int64_t e, int) { kern.linear_i8(a, wv, ys, m, n, k, b, e); },
        kColumnGrain);
  }

  if (bias.data) {
    RL_CHECK(bias.numel() == n && (bias.dtype == DType::kF32 || bias.dtype == DType::kBF16));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        ys[r * n + j] +=
            bias.dtype == DType::kF32 ? bias.as<float>()[j] : bf16_to_f32(bias.as<uint16_t>()[j]);
      }
    }
  }
}

}  // namespace rl
