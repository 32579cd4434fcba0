// CudaBackend's layer-library ops (kernels in layer_ops.cu, moe.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/layer_kernels.h"

namespace rl {

namespace {

uint16_t* bf16(const Tensor& t) {
  RL_CHECK(t.dtype == DType::kBF16);
  return static_cast<uint16_t*>(t.data);
}

}  // namespace

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                             const NormParams& p) {
  RL_CHECK(!bias.data || bias.dtype == weight.dtype);
  cuda::launch_layer_norm(nullptr, bf16(x), weight.data, bias.data, weight.dtype, bf16(out), x.rows(), x.dim(-1), p.eps,
                          stream_);
}

void CudaBackend::add_layer_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Tensor& out, const NormParams& p) {
  RL_CHECK(!bias.data || bias.dtype == weight.dtype);
  cuda::launch_layer_norm(bf16(residual), bf16(x), weight.data, bias.data, weight.dtype, bf16(out), x.rows(), x.dim(-1),
                          p.eps, stream_);
}

void CudaBackend::add_position_embedding(const Tensor& positions, const Tensor& table, const Tensor& out) {
  RL_CHECK(positions.dtype == DType::kI32 && out.rows() == positions.numel());
  cuda::launch_add_position_embedding(positions.as<int32_t>(), table.data, table.dtype, out.rows(), out.dim(-1),
                                      bf16(out), stream_);
}

void CudaBackend::activation(const Tensor& in, const Tensor& out, const ActParams& p) {
  RL_CHECK(in.dim(-1) == (p.gated() ? 2 : 1) * out.dim(-1) && in.rows() == out.rows());
  cuda::launch_activation(bf16(in), bf16(out), out.rows(), out.dim(-1), p, stream_);
}

void CudaBackend::moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) {
  RL_CHECK_MSG(logits.dim(1) <= 256, "CUDA MoE routing supports at most 256 experts");
  RL_CHECK(ids.dtype == DType::kI32 && weights.dtype == DType::kF32 && ids.dim(1) == p.slots());
  RL_CHECK(p.top_k >= 1 && p.top_k <= logits.dim(1) && weights.dim(1) == p.slots());
  RL_CHECK_MSG(p.routing != MoeRouting::kSigmoidGroupTopK ||
                   (p.n_group >= 1 && p.n_group <= 32 && logits.dim(1) % p.n_group == 0 && p.topk_group >= 1 &&
                    p.topk_group <= p.n_group),
               "CUDA group-limited routing needs 1..32 equal groups");
  cuda::launch_moe_route(bf16(logits), logits.dim(0), logits.dim(1), p, ids.as<int32_t>(), weights.as<float>(),
                         stream_);
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                              const Tensor& gate_up_bias, const Tensor& down, const Tensor& down_bias,
                              const MoeParams& p, void* scratch, const Tensor& out) {
  RL_CHECK(!gate_up_bias.data || !down_bias.data || gate_up_bias.dtype == down_bias.dtype);
  cuda::MoeArgs a;
  a.x = bf16(x);
  a.ids = ids.as<int32_t>();
  a.weights = weights.as<float>();
  a.gate_up = bf16(gate_up);
  a.down = bf16(down);
  a.gate_up_bias = gate_up_bias.data;
  a.down_bias = down_bias.data;
  a.bias_dt = gate_up_bias.data ? gate_up_bias.dtype : down_bias.data ? down_bias.dtype : DType::kBF16;
  a.out = bf16(out);
  a.num_tokens = x.dim(0);
  a.p = p;
  a.scratch = scratch;
  cuda::launch_moe(a, stream_);
}

}  // namespace rl
