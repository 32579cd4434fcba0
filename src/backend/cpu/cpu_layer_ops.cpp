// CPU reference of the layer-library ops: LayerNorm (GPT-2), learned positions, activations (GELU tanh, SiLU
// gate, GPT-OSS clamped SwiGLU), MoE routing and experts, in f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace rl {

namespace {

// Element i of a f32 or bf16 vector.
inline float at(const Tensor& t, int64_t i) {
  return t.dtype == DType::kF32 ? t.as<float>()[i] : bf16_to_f32(t.as<uint16_t>()[i]);
}

void layer_norm_row(const float* x, const Tensor& w, const Tensor& b, float* out, int64_t h, float eps) {
  // transformers' LayerNorm: biased variance, eps inside the square root.
  double mean = 0;
  for (int64_t i = 0; i < h; ++i) mean += x[i];
  mean /= static_cast<double>(h);
  double var = 0;
  for (int64_t i = 0; i < h; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(h);
  const float inv = 1.0f / std::sqrt(static_cast<float>(var) + eps);
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < h; ++i) {
    out[i] = (x[i] - m) * inv * at(w, i) + (b.data ? at(b, i) : 0.0f);
  }
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                            const NormParams& p) {
  const int64_t h = x.dim(-1);
  pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) layer_norm_row(x.f32() + r * h, weight, bias, out.f32() + r * h, h, p.eps);
  });
}

void CpuBackend::add_layer_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                const Tensor& out, const NormParams& p) {
  const int64_t h = x.dim(-1);
  pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      float* res = residual.f32() + r * h;
      const float* xs = x.f32() + r * h;
      for (int64_t i = 0; i < h; ++i) res[i] += xs[i];
      layer_norm_row(res, weight, bias, out.f32() + r * h, h, p.eps);
    }
  });
}

void CpuBackend::add_position_embedding(const Tensor& positions, const Tensor& table, const Tensor& out) {
  const int64_t n = positions.numel(), h = table.dim(1), max_pos = table.dim(0);
  const int32_t* pos = positions.i32();
  for (int64_t t = 0; t < n; ++t) {
    RL_CHECK_MSG(pos[t] >= 0 && pos[t] < max_pos, "position %d outside the position table", pos[t]);
    float* o = out.f32() + t * h;
    for (int64_t i = 0; i < h; ++i) o[i] += at(table, pos[t] * h + i);
  }
}

void cpu_activation_rows(const float* in, float* out, int64_t rows, int64_t inter, const ActParams& p) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * inter;
    if (p.kind == Activation::kGeluTanh) {
      const float* x = in + r * inter;
      const float c = std::sqrt(2.0f / 3.14159265358979323846f);
      for (int64_t i = 0; i < inter; ++i) {
        float v = x[i];
        o[i] = 0.5f * v * (1.0f + std::tanh(c * (v + 0.044715f * v * v * v)));
      }
      continue;
    }
    const float* g = in + r * 2 * inter;
    const float* u = g + inter;
    if (p.kind == Activation::kSiluGated) {
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    } else {
      for (int64_t i = 0; i < inter; ++i) {
        float gate = std::min(g[i], p.limit);
        float up = std::clamp(u[i], -p.limit, p.limit);
        float glu = gate / (1.0f + std::exp(-gate * p.alpha));
        o[i] = (up + 1.0f) * glu;
      }
    }
  }
}

void CpuBackend::activation(const Tensor& in, const Tensor& out, const ActParams& p) {
  const int64_t inter = out.dim(-1), rows = out.rows();
  RL_CHECK(in.dim(-1) == (p.gated() ? 2 : 1) * inter);
  pool_.parallel_for(rows, [&](int64_t b, int64_t e, int) {
    const int64_t w = in.dim(-1);
    cpu_activation_rows(in.f32() + b * w, out.f32() + b * inter, e - b, inter, p);
  });
}

namespace {

// kSigmoidGroupTopK (ops.h), in transformers' order of operations; ties go to the lower group / expert id.
void route_sigmoid_group(const float* logits, int64_t num_experts, const MoeRouteParams& p, int32_t* ids,
                         float* w) {
  const int64_t k = p.top_k, groups = p.n_group, per_group = num_experts / groups;
  std::vector<float> s(static_cast<size_t>(num_experts)), choice(s.size());
  for (int64_t e = 0; e < num_experts; ++e) {
    s[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-logits[e]));
    choice[static_cast<size_t>(e)] = s[static_cast<size_t>(e)] + (p.correction_bias ? p.correction_bias[e] : 0.0f);
  }
  // Group score: the sum of its two best biased scores.
  std::vector<float> gscore(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      const float v = choice[static_cast<size_t>(e)];
      if (v > b1) {
        b2 = b1;
        b1 = v;
      } else if (v > b2) {
        b2 = v;
      }
    }
    gscore[static_cast<size_t>(g)] = b1 + b2;
  }
  std::vector<int32_t> order(static_cast<size_t>(groups));
  std::iota(order.begin(), order.end(), 0);
  auto desc = [](const std::vector<float>& v) {
    return [&v](int32_t a, int32_t b) {
      return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)] ||
             (v[static_cast<size_t>(a)] == v[static_cast<size_t>(b)] && a < b);
    };
  };
  std::partial_sort(order.begin(), order.begin() + p.topk_group, order.end(), desc(gscore));
  std::vector<char> keep(static_cast<size_t>(groups), 0);
  for (int64_t g = 0; g < p.topk_group; ++g) keep[static_cast<size_t>(order[static_cast<size_t>(g)])] = 1;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (!keep[static_cast<size_t>(e / per_group)]) choice[static_cast<size_t>(e)] = 0.0f;
  }
  std::vector<int32_t> eorder(static_cast<size_t>(num_experts));
  std::iota(eorder.begin(), eorder.end(), 0);
  std::partial_sort(eorder.begin(), eorder.begin() + k, eorder.end(), desc(choice));
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    ids[j] = eorder[static_cast<size_t>(j)];
    w[j] = s[static_cast<size_t>(ids[j])];
    sum += w[j];
  }
  const float denom = p.norm_topk_prob ? sum + 1e-20f : 1.0f;
  for (int64_t j = 0; j < k; ++j) w[j] = w[j] / denom * p.routed_scaling_factor;
}

}  // namespace

void cpu_route_row(const float* logits, int64_t num_experts, const MoeRouteParams& p, int32_t* ids, float* w) {
  const int64_t k = p.top_k;
  for (int64_t j = 0; j < p.num_shared; ++j) {
    ids[k + j] = static_cast<int32_t>(num_experts + j);
    w[k + j] = 1.0f;
  }
  if (p.routing == MoeRouting::kSigmoidGroupTopK) {
    route_sigmoid_group(logits, num_experts, p, ids, w);
    return;
  }
  std::vector<float> probs(logits, logits + num_experts);
  if (p.routing == MoeRouting::kSoftmaxTopK) {
    float mx = *std::max_element(probs.begin(), probs.end());
    double sum = 0;
    for (float& v : probs) {
      v = std::exp(v - mx);
      sum += v;
    }
    for (float& v : probs) v = static_cast<float>(v / sum);
  }
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)] ||
           (probs[static_cast<size_t>(a)] == probs[static_cast<size_t>(b)] && a < b);
  });
  for (int64_t j = 0; j < k; ++j) {
    ids[j] = order[static_cast<size_t>(j)];
    w[j] = probs[static_cast<size_t>(ids[j])];
  }
  if (p.routing == MoeRouting::kTopKSoftmax) {
    float mx = w[0], sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += (w[j] = std::exp(w[j] - mx));
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  } else if (p.norm_topk_prob) {
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += w[j];
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  }
  if (p.routed_scaling_factor != 1.0f) {
    for (int64_t j = 0; j < k; ++j) w[j] *= p.routed_scaling_factor;
  }
}

void CpuBackend::moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) {
  const int64_t t = logits.dim(0), e = logits.dim(1), n = p.slots();
  RL_CHECK(p.top_k >= 1 && p.top_k <= e && ids.dim(1) == n);
  RL_CHECK(p.routing != MoeRouting::kSigmoidGroupTopK ||
           (p.n_group >= 1 && e % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group));
  for (int64_t r = 0; r < t; ++r) {
    cpu_route_row(logits.f32() + r * e, e, p, ids.i32() + r * n, weights.f32() + r * n);
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                             const Tensor& gate_up_bias, const Tensor& down, const Tensor& down_bias,
                             const MoeParams& p, void* /*scratch*/, const Tensor& out) {
  const int64_t t = x.dim(0), h = p.hidden, inter = p.intermediate, k = p.top_k, ne = p.num_experts;
  const int64_t gu = (p.act.gated() ? 2 : 1) * inter;
  const int32_t* id = ids.i32();
  // Rows of each expert in (token, slot) order: the permutation the CUDA backend builds on the device.
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(ne));
  for (int64_t r = 0; r < t * k; ++r) {
    RL_CHECK_MSG(id[r] >= 0 && id[r] < ne, "expert id %d out of range", id[r]);
    rows_of[static_cast<size_t>(id[r])].push_back(r);
  }
  std::vector<float> y(static_cast<size_t>(t * k * h));  // expert output of every (token, slot)
  std::vector<float> xs, hs, is, ys;
  for (int64_t e = 0; e < ne; ++e) {
    const auto& rows = rows_of[static_cast<size_t>(e)];
    const int64_t m = static_cast<int64_t>(rows.size());
    if (m == 0) continue;
    xs.resize(static_cast<size_t>(m * h));
    hs.resize(static_cast<size_t>(m * gu));
    is.resize(static_cast<size_t>(m * inter));
    ys.resize(static_cast<size_t>(m * h));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(xs.data() + i * h, x.f32() + (rows[static_cast<size_t>(i)] / k) * h, static_cast<size_t>(h) * 4);
    }
    const size_t es = dtype_size(gate_up.dtype);
    Tensor w1(static_cast<char*>(gate_up.data) + static_cast<size_t>(e * gu * h) * es, gate_up.dtype, {gu, h});
    Tensor w2(static_cast<char*>(down.data) + static_cast<size_t>(e * h * inter) * es, down.dtype, {h, inter});
    Tensor b1, b2;
    if (gate_up_bias.data) {
      b1 = Tensor(static_cast<char*>(gate_up_bias.data) + static_cast<size_t>(e * gu) * dtype_size(gate_up_bias.dtype),
                  gate_up_bias.dtype, {gu});
    }
    if (down_bias.data) {
      b2 = Tensor(static_cast<char*>(down_bias.data) + static_cast<size_t>(e * h) * dtype_size(down_bias.dtype),
                  down_bias.dtype, {h});
    }
    linear(Tensor(xs.data(), DType::kF32, {m, h}), w1, b1, Tensor(hs.data(), DType::kF32, {m, gu}));
    activation(Tensor(hs.data(), DType::kF32, {m, gu}), Tensor(is.data(), DType::kF32, {m, inter}), p.act);
    linear(Tensor(is.data(), DType::kF32, {m, inter}), w2, b2, Tensor(ys.data(), DType::kF32, {m, h}));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(y.data() + rows[static_cast<size_t>(i)] * h, ys.data() + i * h, static_cast<size_t>(h) * 4);
    }
  }
  // Combine in slot order, so a token's sum never depends on the other tokens.
  const float* w = weights.f32();
  for (int64_t r = 0; r < t; ++r) {
    float* o = out.f32() + r * h;
    std::fill(o, o + h, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float* yr = y.data() + (r * k + j) * h;
      const float wj = w[r * k + j];
      for (int64_t i = 0; i < h; ++i) o[i] += wj * yr[i];
    }
  }
}

}  // namespace rl
