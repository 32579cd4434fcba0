#include "model/layers/mlp.h"

namespace rl {

Status Mlp::load_gated_hf(WeightLoader& w, const std::string& m, int64_t h, int64_t i, bool bias, float s) {
  hidden = h;
  inter = i;
  act.kind = Activation::kSiluGated;
  using R = parallel::WeightRole;  // tensor parallelism: each rank loads its intermediate columns
  RL_ASSIGN_OR_RETURN(gate_up, w.load_sharded({m + "gate_proj.weight", m + "up_proj.weight"}, {{i, h}, {i, h}},
                                              {R::kGateProj, R::kUpProj}, s));
  RL_ASSIGN_OR_RETURN(down, w.load_sharded({m + "down_proj.weight"}, {{h, i}}, {R::kDownProj}, s));
  if (bias) {
    RL_ASSIGN_OR_RETURN(gate_up_bias, w.load_sharded({m + "gate_proj.bias", m + "up_proj.bias"}, {{i}, {i}},
                                                     {R::kGateProj, R::kUpProj}, s));
    RL_ASSIGN_OR_RETURN(down_bias, w.load({m + "down_proj.bias"}, {{h}}, s));
    if (w.tp_rank() > 0) down_bias = Tensor();  // row-parallel: rank 0 alone adds the bias
  }
  if (const parallel::TpPlan* tp = w.tp()) inter = tp->intermediate;
  return Status::ok();
}

void Mlp::forward(Backend& be, const Tensor& x, const Tensor& gu_buf, const Tensor& inter_buf, const Tensor& out,
                  const ResidualFusion& fusion) const {
  if (fusion.in_norm) {
    RL_CHECK(fusion.in_norm->kind == Norm::Kind::kRms && act.kind == Activation::kSiluGated);
    be.rms_norm_linear_silu_mul(x, fusion.in_norm->weight, fusion.in_norm->params, gate_up, gate_up_bias,
                                fusion.normed, gu_buf, inter_buf);
  } else if (act.kind == Activation::kSiluGated) {
    be.linear_silu_mul(x, gate_up, gate_up_bias, gu_buf, inter_buf);
  } else {
    be.linear(x, gate_up, gate_up_bias, gu_buf);
    be.activation(gu_buf, inter_buf, act);
  }
  if (fusion.residual.data) {
    be.linear_add(inter_buf, down, down_bias, out, fusion.residual);
  } else {
    be.linear(inter_buf, down, down_bias, out);
  }
}

}  // namespace rl
