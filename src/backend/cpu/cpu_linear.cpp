// CpuBackend::linear: y [M, N] = x [M, K] · wᵀ + bias through the backend's kernel tier
// (cpu_kernels.h). The activations are prepared once per call, in parallel over rows: rounded to
// bf16 for the vdpbf16ps tier, quantised per row to int8 for int8 weights (rows zero-padded to a
// multiple of 64). The pool's threads then claim chunks of the output columns N (guided
// scheduling, for_column_chunks), each streaming its chunk's weight rows once. linear_silu_mul
// (the gated MLP's gate_up projection) is the same with SwiGLU applied by each thread to its own
// columns.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/quant.h"

namespace rl {

namespace {

constexpr int64_t kActAlign = 64;
// Output columns per scheduling grain: a multiple of every kernel's NR, and 16 f32 = one cache line
// of y.
constexpr int64_t kColumnGrain = 16;
// Guided scheduling of the output columns: each thread, as it comes free, claims a 1 / (kGuidedShare * threads)
// share of the columns still unclaimed (at least kColumnGrain). The first claims are long contiguous runs of
// weight rows, which the hardware prefetchers stream at full speed (a fresh stream ramps up: chunks of 32-128 KiB
// read at 27-30 GB/s where halves read at 50 on the same machine); the claims shrink toward the end, so a thread
// that got less of the memory bandwidth, or lost its vCPU for a while, leaves little work behind. Decode on the
// 2-vCPU EPYC (Qwen3-0.6B bf16, 8 alternating rounds, medians): a static split in halves 14.3 tok/s, 32 fixed
// chunks 20.8, guided 21.6; the static split is the one a stolen vCPU stalls.
constexpr int64_t kGuidedShare = 2;

// fn(n0, n1) over chunks of [0, n) (multiples of kColumnGrain but the last), on the pool's threads as they come
// free (guided: see kGuidedShare).
template <typename F>
void for_column_chunks(ThreadPool& pool, int64_t n, F&& fn) {
  if (pool.num_threads() == 1) {
    fn(0, n);
    return;
  }
  const int64_t share = kGuidedShare * pool.num_threads();
  std::atomic<int64_t> next{0};
  pool.run_on_all([&](int) {
    int64_t b = next.load(std::memory_order_relaxed), e;
    for (;;) {
      do {  // claim [b, e): b is what this thread last saw of `next`
        if (b >= n) return;
        const int64_t size = ((n - b) / share + kColumnGrain - 1) / kColumnGrain * kColumnGrain;
        e = std::min(n, b + std::max(kColumnGrain, size));
      } while (!next.compare_exchange_weak(b, e, std::memory_order_relaxed));
      fn(b, e);
      b = next.load(std::memory_order_relaxed);
    }
  });
}

}  // namespace

LinearActs CpuBackend::prepare_acts(const Tensor& x, DType wdt) {
  const int64_t m = x.rows(), k = x.dim(-1);
  const int64_t ld = (k + kActAlign - 1) / kActAlign * kActAlign;
  LinearActs a;
  a.x = x.f32();
  a.ld = ld;
  auto for_rows = [&](auto&& fn) {
    pool_.parallel_for(
        m,
        [&](int64_t b, int64_t e, int) {
          for (int64_t r = b; r < e; ++r) fn(r);
        },
        std::max<int64_t>(1, 8192 / k));
  };
  if (wdt == DType::kBF16 && kern_->bf16_acts) {
    if (act_bf16_.size() < static_cast<size_t>(m * ld)) act_bf16_.resize(static_cast<size_t>(m * ld));
    uint16_t* xb = act_bf16_.data();
    for_rows([&](int64_t r) {
      for (int64_t i = 0; i < k; ++i) xb[r * ld + i] = f32_to_bf16(a.x[r * k + i]);
      std::fill(xb + r * ld + k, xb + (r + 1) * ld, static_cast<uint16_t>(0));
    });
    a.x_bf16 = xb;
  } else if (wdt == DType::kI8) {
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
  }
  return a;
}

void CpuBackend::linear_columns(const LinearActs& a, const Tensor& w, float* y, int64_t m, int64_t n0,
                                int64_t n1) const {
  const int64_t n = w.dim(0), k = w.dim(1);
  switch (w.dtype) {
    case DType::kF32:
      return kern_->linear_f32(a, w.as<float>(), y, m, n, k, n0, n1);
    case DType::kBF16:
      return kern_->linear_bf16(a, w.as<uint16_t>(), y, m, n, k, n0, n1);
    default:
      return kern_->linear_i8(a, i8_weight_view(w.data, n, k), y, m, n, k, n0, n1);
  }
}

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0);
  RL_CHECK(w.dim(1) == k && y.dim(-1) == n && y.rows() == m);
  RL_CHECK_MSG(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kI8,
               "linear: unsupported weight dtype %s", std::string(dtype_name(w.dtype)).c_str());
  const LinearActs a = prepare_acts(x, w.dtype);
  float* ys = y.f32();
  for_column_chunks(pool_, n, [&](int64_t b, int64_t e) { linear_columns(a, w, ys, m, b, e); });
  if (bias.data) add_bias(bias, ys, m, n, 0, n);
}

void CpuBackend::add_bias(const Tensor& bias, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) const {
  RL_CHECK(bias.numel() == n && (bias.dtype == DType::kF32 || bias.dtype == DType::kBF16));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = n0; j < n1; ++j) {
      y[r * n + j] += bias.dtype == DType::kF32 ? bias.as<float>()[j] : bf16_to_f32(bias.as<uint16_t>()[j]);
    }
  }
}

// The gate and up rows of the same intermediate columns go to the same thread, which applies silu(gate) * up to
// them at once: one parallel region instead of the projection and then silu_mul on one thread (at decode the
// activation of 3072 columns costs as much as a quarter of the projection's weight stream). Bitwise linear then
// silu_mul: the same kernels on the same columns, the same SwiGLU kernel.
void CpuBackend::linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                                 const Tensor& out) {
  const int64_t m = x.rows(), k = x.dim(-1), n = w.dim(0), inter = out.dim(-1);
  RL_CHECK(w.dim(1) == k && n == 2 * inter && scratch.dim(-1) == n && scratch.rows() == m && out.rows() == m);
  RL_CHECK_MSG(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kI8,
               "linear_silu_mul: unsupported weight dtype %s", std::string(dtype_name(w.dtype)).c_str());
  const LinearActs a = prepare_acts(x, w.dtype);
  float* gu = scratch.f32();
  float* o = out.f32();
  for_column_chunks(pool_, inter, [&](int64_t b, int64_t e) {
    linear_columns(a, w, gu, m, b, e);
    linear_columns(a, w, gu, m, inter + b, inter + e);
    if (bias.data) {
      add_bias(bias, gu, m, n, b, e);
      add_bias(bias, gu, m, n, inter + b, inter + e);
    }
    for (int64_t r = 0; r < m; ++r) kern_->silu_mul(gu + r * n + b, gu + r * n + inter + b, o + r * inter + b, e - b);
  });
}

}  // namespace rl
