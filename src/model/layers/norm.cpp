#include "model/layers/norm.h"

namespace rl {

Status Norm::load(WeightLoader& w, const std::string& prefix, int64_t n, Kind k, float eps) {
  kind = k;
  params.eps = eps;
  RL_ASSIGN_OR_RETURN(weight, w.load({prefix + "weight"}, {{n}}, 0, 1.0f));
  if (kind == Kind::kLayer) {
    RL_ASSIGN_OR_RETURN(bias, w.load({prefix + "bias"}, {{n}}, 0, 0.0f));
  }
  return Status::ok();
}

void Norm::apply(Backend& be, const Tensor& x, const Tensor& out) const {
  if (kind == Kind::kRms) {
    be.rms_norm(x, weight, out, params);
  } else {
    be.layer_norm(x, weight, bias, out, params);
  }
}

void Norm::add_apply(Backend& be, const Tensor& residual, const Tensor& x, const Tensor& out) const {
  if (kind == Kind::kRms) {
    be.add_rms_norm(residual, x, weight, out, params);
  } else {
    be.add_layer_norm(residual, x, weight, bias, out, params);
  }
}

}  // namespace rl
