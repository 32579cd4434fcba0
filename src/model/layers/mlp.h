// Dense feed-forward of the layer library: gated (SiLU; gate and up fused into one GEMM) or plain (GELU tanh,
// GPT-2), with optional biases.
#pragma once

#include <string>

#include "backend/backend.h"
#include "model/layers/norm.h"
#include "model/weights.h"

namespace rl {

class Mlp {
 public:
  int64_t hidden = 0, inter = 0;
  ActParams act;
  Tensor gate_up, gate_up_bias;  // [(gated ? 2 : 1) I, hidden], bias or empty
  Tensor down, down_bias;        // [hidden, I], [hidden]

  // <prefix>{gate,up,down}_proj.{weight,bias}
  Status load_gated_hf(WeightLoader& w, const std::string& prefix, int64_t hidden, int64_t inter, bool bias,
                       float dummy_scale);
  int64_t workspace_per_token() const { return (act.gated() ? 3 : 2) * inter; }
  // x: [T, hidden] → out [T, hidden]; gu_buf: [T, width of gate_up], inter_buf: [T, I]. With fusion (norm.h):
  // x un-normed and fusion.in_norm folded into the gate_up projection (gated MLPs only), and/or the down
  // projection added into fusion.residual.
  void forward(Backend& be, const Tensor& x, const Tensor& gu_buf, const Tensor& inter_buf, const Tensor& out,
               const ResidualFusion& fusion = {}) const;
  int64_t num_params() const {
    return (act.gated() ? 3 : 2) * hidden * inter + (gate_up_bias.data ? gate_up_bias.numel() : 0) +
           (down_bias.data ? hidden : 0);
  }
};

}  // namespace rl
