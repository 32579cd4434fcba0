// Mixture-of-experts feed-forward of the layer library: a linear router (optional bias), top-k routing
// (MoeRouting), experts as stacked weights [E, 2I, H] / [E, H, I] computed by the backend's moe_experts
// (grouped over the active experts, no per-expert launches); shared experts (DeepSeek) are extra experts every
// token takes with weight 1.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/layers/mlp.h"
#include "model/weights.h"

namespace rl {

class Moe {
 public:
  MoeParams params;
  MoeRouteParams route;
  Tensor router, router_bias;    // [E, H], [E] or empty
  Tensor gate_up, gate_up_bias;  // [E, 2I, H] (gate rows then up rows), [E, 2I] or empty
  Tensor down, down_bias;        // [E, H, I], [E, H] or empty
  Tensor correction_bias;        // f32 [routed E] (DeepSeek e_score_correction_bias) or empty

  void init(int64_t num_experts, int64_t top_k, int64_t hidden, int64_t inter, const ActParams& act,
            const MoeRouteParams& r);
  // The published per-expert layout: <prefix>experts.{e}.{gate,up,down}_proj.weight, router <router_name>.
  Status load_per_expert_hf(WeightLoader& w, const std::string& prefix, const std::string& router_name,
                            float dummy_scale);

  // DeepSeek's e_score_correction_bias [routed E], kept in f32 whatever the weight dtype (the router adds it in
  // f32); zeros with dummy weights. Sets route.correction_bias.
  Status load_correction_bias(WeightLoader& w, Backend& be, const std::string& name);

  // Activation bytes per token of workspace (router logits, ids, weights, scratch) at act_bytes per value.
  size_t workspace_bytes(int64_t max_tokens, size_t act_bytes) const;
  // x: [T, H] → out [T, H]. ws: workspace_bytes(T) bytes.
  void forward(Backend& be, const Tensor& x, void* ws, const Tensor& out) const;
  // Experts the router scores (params.num_experts counts the shared experts too).
  int64_t num_routed() const { return params.num_experts - route.num_shared; }
  int64_t expert_params() const { return params.num_experts * 3 * params.hidden * params.intermediate; }
  int64_t num_params() const;

 private:
  DeviceBuffer correction_bias_f32_;
};

}  // namespace rl
