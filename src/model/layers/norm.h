// Norms of the layer library: RMSNorm (Llama family, GPT-OSS, Qwen) and LayerNorm with bias (GPT-2).
#pragma once

#include <string>

#include "backend/backend.h"
#include "model/weights.h"

namespace rl {

struct Norm {
  enum class Kind { kRms, kLayer };
  Kind kind = Kind::kRms;
  Tensor weight, bias;  // [n]; bias only for LayerNorm
  NormParams params;

  // Loads `<prefix>weight` (and `<prefix>bias` for LayerNorm).
  Status load(WeightLoader& w, const std::string& prefix, int64_t n, Kind k, float eps);
  // out = norm(x)
  void apply(Backend& be, const Tensor& x, const Tensor& out) const;
  // residual += x; out = norm(residual)
  void add_apply(Backend& be, const Tensor& residual, const Tensor& x, const Tensor& out) const;
};

// How a layer meets the residual stream on the fused decode path (Backend::fuses_norm_linear), or at prefill sizes
// with residual only (Backend::fuses_linear_add). in_norm set: the
// layer's input x is the residual stream itself and in_norm (an RMSNorm) is folded into the layer's first
// projection (normed: [T, hidden] scratch for a backend that composes it). residual set: the layer's last
// projection is added into it (Backend::linear_add) and the layer's out is scratch. Default: neither.
struct ResidualFusion {
  const Norm* in_norm = nullptr;
  Tensor normed;
  Tensor residual;
};

}  // namespace rl
