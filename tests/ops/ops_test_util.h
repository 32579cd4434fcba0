// Shared helpers of the CUDA-vs-CPU op tests: both backends, bf16-rounded random inputs (so both backends see
// identical values), poisoned outputs (bf16 NaN: an element a kernel forgets to write fails the comparison) and
// the relative error ‖out − ref‖ / ‖ref‖.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace rl::ops_test {

struct Backends {
  std::unique_ptr<CpuBackend> cpu;
  std::unique_ptr<Backend> cuda;
};

inline Backends& backends() {
  static Backends b = [] {
    Backends r;
    r.cpu = std::make_unique<CpuBackend>(0);
    auto c = create_cuda_backend(0);
    RL_CHECK_MSG(c.is_ok(), "%s", c.message().c_str());
    r.cuda = std::move(c).value();
    return r;
  }();
  return b;
}
inline CudaBackend& cuda() { return static_cast<CudaBackend&>(*backends().cuda); }
inline CpuBackend& cpu() { return *backends().cpu; }

inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

// Uniform values in [lo, hi), rounded to bf16 so that the f32 and bf16 copies are the same numbers.
inline std::vector<float> random_bf16_values(size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng())));
  return v;
}

// t distinct KV slots out of num_slots, in random order.
inline std::vector<int32_t> shuffled_slots(int64_t num_slots, int64_t t) {
  std::vector<int32_t> all(static_cast<size_t>(num_slots));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  std::shuffle(all.begin(), all.end(), rng());
  return std::vector<int32_t>(all.begin(), all.begin() + t);
}

// Random inputs of a q/k norm + RoPE over t tokens of layout l (head_dim d): qkv in [-3, 3), positions below
// 40,000, inverse frequencies of base 1e6, norm weights in [0.5, 1.5).
struct RopeInputs {
  std::vector<float> qkv, inv, qn, kn;
  std::vector<int32_t> pos;
};
inline RopeInputs random_rope_inputs(int64_t t, int64_t row, int64_t d) {
  RopeInputs r;
  r.qkv = random_bf16_values(static_cast<size_t>(t * row), -3, 3);
  r.pos.resize(static_cast<size_t>(t));
  for (auto& p : r.pos) p = static_cast<int32_t>(rng()() % 40000);
  r.inv.resize(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) r.inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.0f * i / d);
  r.qn = random_bf16_values(static_cast<size_t>(d), 0.5f, 1.5f);
  r.kn = random_bf16_values(static_cast<size_t>(d), 0.5f, 1.5f);
  return r;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = f32_to_bf16(v[i]);
  return r;
}

// A tensor owned together with its allocation.
struct Owned {
  DeviceBuffer buf;
  Tensor t;
};

inline Owned make(Backend& be, DType dt, std::initializer_list<int64_t> dims) {
  Owned o;
  Tensor shape(nullptr, dt, dims);
  o.buf = DeviceBuffer(&be, shape.nbytes());
  o.t = Tensor(o.buf.data(), dt, dims);
  return o;
}
inline Owned make_f32(Backend& be, const std::vector<float>& v, std::initializer_list<int64_t> dims) {
  Owned o = make(be, DType::kF32, dims);
  be.upload(o.t.data, v.data(), v.size() * 4);
  return o;
}
inline Owned make_bf16(Backend& be, const std::vector<float>& v, std::initializer_list<int64_t> dims) {
  Owned o = make(be, DType::kBF16, dims);
  auto h = to_bf16(v);
  be.upload(o.t.data, h.data(), h.size() * 2);
  return o;
}
inline Owned make_i32(Backend& be, const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  Owned o = make(be, DType::kI32, dims);
  be.upload(o.t.data, v.data(), v.size() * 4);
  return o;
}
// The metadata of an all-decode batch (one query token per sequence): cu_seqlens_q [num_seqs + 1], seq_lens_k
// [num_seqs] and block_tables [num_seqs, max_blocks] as device tensors; layout and scale left to the caller.
inline AttentionMetadata decode_metadata(const Tensor& cu, const Tensor& lens, const Tensor& table, int64_t num_seqs,
                                         int64_t max_seqlen_k) {
  AttentionMetadata m;
  m.cu_seqlens_q = cu;
  m.seq_lens_k = lens;
  m.block_tables = table;
  m.num_seqs = num_seqs;
  m.max_seqlen_q = 1;
  m.max_seqlen_k = max_seqlen_k;
  m.all_decode = true;
  return m;
}
// Fills a CUDA bf16/f32 tensor with NaN.
inline void poison(const Tensor& t) {
  std::vector<uint8_t> nan(t.nbytes(), 0xff);
  cuda().upload(t.data, nan.data(), nan.size());
}
inline std::vector<float> read_f32(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    be.download(v.data(), t.data, v.size() * 4);
  } else {
    std::vector<uint16_t> h(v.size());
    be.download(h.data(), t.data, h.size() * 2);
    convert_to_f32(h.data(), t.dtype, v.data(), v.size());
  }
  return v;
}

// ‖out − ref‖ / ‖ref‖; NaN anywhere gives NaN (which fails every EXPECT_LT).
inline double rel_err(const std::vector<float>& out, const std::vector<float>& ref) {
  EXPECT_EQ(out.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  for (float x : out)
    if (std::isnan(x)) return NAN;
  return std::sqrt(num / std::max(den, 1e-30));
}

// bf16 storage rounds each output to ~2^-9 relative: 1e-2 leaves room for f32 accumulation-order noise.
constexpr double kBf16Tol = 1e-2;

}  // namespace rl::ops_test
