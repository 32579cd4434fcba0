#include "model/layers/moe.h"

namespace rl {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void Moe::init(int64_t num_experts, int64_t top_k, int64_t hidden, int64_t inter, const ActParams& act,
               const MoeRouteParams& r) {
  // Shared experts are extra experts after the routed ones that every token takes (MoeRouteParams::num_shared).
  params.num_experts = num_experts + r.num_shared;
  params.top_k = top_k + r.num_shared;
  params.hidden = hidden;
  params.intermediate = inter;
  params.act = act;
  route = r;
  route.top_k = top_k;
}

Status Moe::load_per_expert_hf(WeightLoader& w, const std::string& p, const std::string& router_name, float s) {
  const int64_t e = params.num_experts, h = params.hidden, i = params.intermediate;
  RL_ASSIGN_OR_RETURN(router, w.load({router_name}, {{e, h}}, s));
  std::vector<std::string> gu_names, down_names;
  std::vector<std::vector<int64_t>> gu_shapes, down_shapes;
  for (int64_t x = 0; x < e; ++x) {
    const std::string ep = p + "experts." + std::to_string(x) + ".";
    gu_names.push_back(ep + "gate_proj.weight");
    gu_names.push_back(ep + "up_proj.weight");
    gu_shapes.push_back({i, h});
    gu_shapes.push_back({i, h});
    down_names.push_back(ep + "down_proj.weight");
    down_shapes.push_back({h, i});
  }
  // Concatenated along rows: expert x's gate rows, then its up rows — i.e. [E, 2I, H].
  RL_ASSIGN_OR_RETURN(gate_up, w.load_unquantized(gu_names, gu_shapes, s));
  RL_ASSIGN_OR_RETURN(down, w.load_unquantized(down_names, down_shapes, s));
  gate_up = gate_up.reshaped({e, 2 * i, h});
  down = down.reshaped({e, h, i});
  return Status::ok();
}

Status Moe::load_correction_bias(WeightLoader& w, Backend& be, const std::string& name) {
  const int64_t n = num_routed();
  std::vector<float> host(static_cast<size_t>(n), 0.0f);
  if (!w.dummy()) {
    RL_ASSIGN_OR_RETURN(host, w.read_f32(name, {n}));
  }
  correction_bias_f32_ = DeviceBuffer(&be, host.size() * 4);
  be.upload(correction_bias_f32_.data(), host.data(), host.size() * 4);
  correction_bias = Tensor(correction_bias_f32_.data(), DType::kF32, {n});
  route.correction_bias = static_cast<const float*>(correction_bias.data);
  return Status::ok();
}

size_t Moe::workspace_bytes(int64_t max_tokens, size_t act_bytes) const {
  const size_t t = static_cast<size_t>(max_tokens), k = static_cast<size_t>(params.top_k);
  return align256(t * static_cast<size_t>(params.num_experts) * act_bytes) + align256(t * k * 4) * 2 +
         align256(moe_scratch_bytes(params, max_tokens, act_bytes));
}

void Moe::forward(Backend& be, const Tensor& x, void* ws, const Tensor& out) const {
  const int64_t t = x.dim(0), k = params.top_k, routed = num_routed();
  const size_t act_bytes = dtype_size(be.act_dtype());
  char* p = static_cast<char*>(ws);
  Tensor logits(p, be.act_dtype(), {t, routed});
  p += align256(static_cast<size_t>(t * routed) * act_bytes);
  Tensor ids(p, DType::kI32, {t, k});
  p += align256(static_cast<size_t>(t * k) * 4);
  Tensor weights(p, DType::kF32, {t, k});
  p += align256(static_cast<size_t>(t * k) * 4);
  be.linear(x, router, router_bias, logits);
  be.moe_route(logits, route, ids, weights);
  be.moe_experts(x, ids, weights, gate_up, gate_up_bias, down, down_bias, params, p, out);
}

int64_t Moe::num_params() const {
  int64_t n = router.numel() + (router_bias.data ? router_bias.numel() : 0) + expert_params() +
             (correction_bias.data ? correction_bias.numel() : 0);
  if (gate_up_bias.data) n += gate_up_bias.numel();
  if (down_bias.data) n += down_bias.numel();
  return n;
}

}  // namespace rl
