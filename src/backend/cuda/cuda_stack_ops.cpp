// CudaBackend's dense stack (backend.h dense_stack_decode): a batch-1 decode step's Llama-style layers as one
// persistent kernel (decode_stack.cu).
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/decode_stack.h"

namespace rl {

namespace {

cuda::StackShape shape_of(const DenseStack& s) {
  cuda::StackShape sh;
  sh.num_layers = static_cast<int64_t>(s.layers.size());
  sh.hidden = s.hidden;
  sh.num_heads = s.layout.num_heads;
  sh.num_kv_heads = s.layout.num_kv_heads;
  sh.head_dim = s.layout.head_dim;
  sh.inter = s.inter;
  sh.kv_fp8 = s.kv_fp8;
  return sh;
}

// A linear weight the kernel streams: bf16 [rows, cols], rows starting 16-byte aligned.
bool streamable(const Tensor& w, int64_t rows, int64_t cols) {
  return w.data && w.dtype == DType::kBF16 && w.ndim == 2 && w.dim(0) == rows && w.dim(1) == cols &&
         cuda::aligned16(w.data);
}

bool param_dtype(const Tensor& t) { return t.dtype == DType::kBF16 || t.dtype == DType::kF32; }

}  // namespace

std::string CudaBackend::dense_stack_unsupported(const DenseStack& s) const {
  if (!dense_stack_) return "turned off (RIDGELINE_CUDA_DECODE_STACK=0)";
  if (s.layers.empty() || !s.inv_freq) return "no layers, or no RoPE frequencies";
  const QkvLayout& l = s.layout;
  const DenseStackLayer& first = s.layers[0];
  const DType norm_dt = first.attn_norm.dtype;
  const bool qk_norm = first.q_norm.data != nullptr;
  const DType qk_dt = first.q_norm.dtype;
  const Tensor& first_bias = first.qkv_bias.data ? first.qkv_bias : first.o_bias;
  for (const DenseStackLayer& L : s.layers) {
    if (!streamable(L.qkv, l.row(), s.hidden) || !streamable(L.o, s.hidden, l.num_heads * l.head_dim) ||
        !streamable(L.gate_up, 2 * s.inter, s.hidden) || !streamable(L.down, s.hidden, s.inter)) {
      return "a projection is not a 16-byte-aligned bf16 matrix of the stack's shape";
    }
    if (!param_dtype(L.attn_norm) || L.attn_norm.dtype != norm_dt || L.ffn_norm.dtype != norm_dt ||
        L.attn_norm.numel() != s.hidden || L.ffn_norm.numel() != s.hidden) {
      return "the layers' norm weights differ in dtype or size";
    }
    if ((L.q_norm.data != nullptr) != qk_norm || (L.k_norm.data != nullptr) != qk_norm ||
        (qk_norm && (!param_dtype(L.q_norm) || L.q_norm.dtype != qk_dt || L.k_norm.dtype != qk_dt ||
                     L.q_norm.numel() != l.head_dim || L.k_norm.numel() != l.head_dim))) {
      return "the layers' q/k norms differ";
    }
    for (const Tensor* b : {&L.qkv_bias, &L.o_bias}) {
      if (b->data && (!param_dtype(*b) || b->dtype != first_bias.dtype)) return "the layers' biases differ in dtype";
    }
    if ((L.qkv_bias.data && L.qkv_bias.numel() != l.row()) || (L.o_bias.data && L.o_bias.numel() != s.hidden)) {
      return "a bias does not match its projection";
    }
  }
  std::string why;
  if (!cuda::stack_supported(shape_of(s), &why)) return why;
  return "";
}

size_t CudaBackend::dense_stack_scratch_bytes(const DenseStack& s) const {
  return cuda::stack_scratch_bytes(shape_of(s));
}

int64_t CudaBackend::dense_stack_max_context() const {
  return stack_max_context_ > 0 ? stack_max_context_ : cuda::kStackMaxContext;
}

void CudaBackend::dense_stack_decode(const DenseStack& s, const DenseStackStep& step) {
  const QkvLayout& l = s.layout;
  RL_CHECK(step.kv && step.scratch);
  RL_CHECK(step.residual.dtype == DType::kBF16 && step.residual.numel() == s.hidden);
  for (const Tensor* t : {&step.positions, &step.slots, &step.seq_lens}) {
    RL_CHECK(t->dtype == DType::kI32 && t->numel() >= 1);
  }
  RL_CHECK(step.block_table.dtype == DType::kI32 && step.block_table.ndim == 2 && step.block_table.dim(0) >= 1);
  RL_CHECK(cuda::aligned16(step.residual.data) && cuda::aligned16(step.scratch));
  cuda::StackParams p;
  RL_CHECK(s.layers.size() <= static_cast<size_t>(cuda::kStackMaxLayers));
  p.num_layers = static_cast<int>(s.layers.size());
  p.hidden = static_cast<int>(s.hidden);
  p.num_heads = static_cast<int>(l.num_heads);
  p.num_kv_heads = static_cast<int>(l.num_kv_heads);
  p.head_dim = static_cast<int>(l.head_dim);
  p.inter = static_cast<int>(s.inter);
  const DenseStackLayer& first = s.layers[0];
  p.norm_f32 = first.attn_norm.dtype == DType::kF32;
  p.qk_norm_f32 = first.q_norm.dtype == DType::kF32;
  p.bias_f32 = (first.qkv_bias.data ? first.qkv_bias : first.o_bias).dtype == DType::kF32;
  p.qk_eps = s.qk_eps;
  p.scale_log2 = s.scale * 1.4426950408889634f;
  p.inv_freq = s.inv_freq;
  p.residual = static_cast<uint16_t*>(step.residual.data);
  p.scratch = step.scratch;
  p.positions = step.positions.i32();
  p.slots = step.slots.i32();
  p.seq_lens = step.seq_lens.i32();
  p.block_table = step.block_table.i32();
  p.max_blocks = static_cast<int>(step.block_table.dim(1));
  const KvLayer& kv0 = step.kv[0];
  const DType kv_dt = kv0.k.dtype;
  RL_CHECK_MSG(kv_dt == DType::kBF16 || kv_dt == DType::kFP8E4M3, "dense stack: a KV cache of %s",
               std::string(dtype_name(kv_dt)).c_str());
  p.kv_fp8 = kv_dt == DType::kFP8E4M3;
  p.block_size = static_cast<int>(kv0.block_size());
  p.num_slots = kv0.k.dim(0) * kv0.block_size();
  for (int i = 0; i < p.num_layers; ++i) {
    const DenseStackLayer& L = s.layers[static_cast<size_t>(i)];
    const KvLayer& kv = step.kv[i];
    RL_CHECK_MSG(kv.group == 0 && kv.k.dtype == kv_dt && kv.v.dtype == kv_dt &&
                     kv.block_size() == p.block_size && kv.k.dim(0) * kv.block_size() == p.num_slots &&
                     kv.num_kv_heads() == l.num_kv_heads && kv.head_dim() == l.head_dim,
                 "dense stack: layer %d's KV cache is not the [blocks, %d, %lld, %lld] of layer 0's dtype", i,
                 p.block_size, static_cast<long long>(l.num_kv_heads), static_cast<long long>(l.head_dim));
    cuda::StackLayer& d = p.layers[i];
    d.attn_norm = L.attn_norm.data;
    d.qkv = static_cast<const uint16_t*>(L.qkv.data);
    d.qkv_bias = L.qkv_bias.data;
    d.q_norm = L.q_norm.data;
    d.k_norm = L.k_norm.data;
    d.o = static_cast<const uint16_t*>(L.o.data);
    d.o_bias = L.o_bias.data;
    d.ffn_norm = L.ffn_norm.data;
    d.gate_up = static_cast<const uint16_t*>(L.gate_up.data);
    d.down = static_cast<const uint16_t*>(L.down.data);
    d.k_cache = static_cast<uint16_t*>(kv.k.data);
    d.v_cache = static_cast<uint16_t*>(kv.v.data);
    d.attn_eps = L.attn_eps;
    d.ffn_eps = L.ffn_eps;
  }
  p.lab = stack_lab_;
  cuda::launch_decode_stack(p, stream_);
  ++dense_stack_launches_;
}

}  // namespace rl
