// GptOssForCausalLM: Llama-style attention with q/k/v/o biases, YaRN RoPE and a learned sink logit per head,
// alternating sliding-window and full layers (layer_types), and a mixture of experts on every layer: a router
// with bias, top-k of the logits with a softmax over the chosen k, experts with biases and the clamped SwiGLU
// (gate clamped above at swiglu_limit, up to ±limit, (up + 1) * gate * sigmoid(1.702 gate)).
// Expert weights come as transformers saves them (mlp.experts.gate_up_proj [E, H, 2I] with gate and up
// interleaved, down_proj [E, I, H]) or as published, MXFP4 (gate_up_proj_blocks [E, 2I, H/32, 16] +
// _scales [E, 2I, H/32], down likewise): both are brought to [E, 2I, H] (gate rows, then up) / [E, H, I] at
// load; MXFP4 is dequantised there to the weight dtype (bf16 on GPUs), so the 4-bit format is not kept.
#include <cmath>

#include "loader/config_fields.h"
#include "model/arch/archs.h"
#include "model/rope.h"

namespace rl {

namespace {

struct GptOssHParams : ArchHParams {
  int64_t num_experts = 0, top_k = 0;
  std::vector<int64_t> windows;  // per layer, 0 = full attention
  float swiglu_limit = 7.0f;
  bool mxfp4 = false;
};

Result<ModelConfig> parse(const Json& j, const std::string& what) {
  RL_ASSIGN_OR_RETURN(ModelConfig c, parse_common_config(j, what));
  auto hp = std::make_shared<GptOssHParams>();
  const Presence req = Presence::kRequired;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "intermediate_size", 1, config_limits::kMaxIntermediate,
                                       &c.intermediate_size, what, req));
  RL_RETURN_IF_ERROR(
      read_int_in_range(j, "num_local_experts", 1, config_limits::kMaxExperts, &hp->num_experts, what, req));
  RL_RETURN_IF_ERROR(read_int_in_range(j, "num_experts_per_tok", 1, hp->num_experts, &hp->top_k, what, req));
  double limit = 7.0;
  RL_RETURN_IF_ERROR(read_positive_double(j, "swiglu_limit", 1e4, &limit, what));
  hp->swiglu_limit = static_cast<float>(limit);
  bool attention_bias = true;
  RL_RETURN_IF_ERROR(read_bool(j, "attention_bias", &attention_bias, what));
  c.qkv_bias = c.o_bias = attention_bias;
  int64_t window = 128;
  RL_RETURN_IF_ERROR(read_int_in_range(j, "sliding_window", 1, config_limits::kMaxPositions, &window, what));
  // layer_types: "sliding_attention" | "full_attention"; transformers' default alternates, sliding first.
  auto lt = j.find("layer_types");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    bool sliding = i % 2 == 0;
    if (lt != j.end() && !lt->is_null()) {
      if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.num_hidden_layers) {
        return Status::error(what + ": \"layer_types\" must list one type per layer");
      }
      const Json& v = (*lt)[static_cast<size_t>(i)];
      if (!v.is_string() || (v != "sliding_attention" && v != "full_attention")) {
        return Status::error(what + ": layer_types[" + std::to_string(i) +
                             "] must be \"sliding_attention\" or \"full_attention\"");
      }
      sliding = v == "sliding_attention";
    }
    hp->windows.push_back(sliding ? window : 0);
  }
  auto q = j.find("quantization_config");
  if (q != j.end() && !q->is_null()) {
    std::string method;
    if (q->is_object()) RL_RETURN_IF_ERROR(read_string(*q, "quant_method", &method, what + ": quantization_config"));
    if (method != "mxfp4") {
      return Status::error(what + ": quantization_config quant_method \"" + method +
                           "\" is not supported (supported: mxfp4)");
    }
    hp->mxfp4 = true;
    c.notes.push_back(
        "MXFP4 expert weights (*_blocks/*_scales) are dequantised to the weight dtype at load "
        "(bf16 on GPUs): the 4-bit format is not kept in memory");
  }
  llama_base_counts(c, hp->windows, true);
  const int64_t h = c.hidden_size, e = hp->num_experts, in = c.intermediate_size;
  const int64_t experts = e * 3 * h * in;
  const int64_t per_layer = e * h + e + experts + e * (2 * in + h);
  c.params.total += c.num_hidden_layers * per_layer;
  c.params.layer_linear += c.num_hidden_layers * (e * h + experts);
  c.params.active_matmul += c.num_hidden_layers * (e * h + hp->top_k * 3 * h * in);
  c.params.last_rows_matmul += e * h + hp->top_k * 3 * h * in;
  c.params.expert_params = c.num_hidden_layers * experts;
  c.params.num_moe_layers = c.num_hidden_layers;
  c.params.num_experts = e;
  c.params.experts_per_tok = hp->top_k;
  c.hparams = hp;
  return c;
}

constexpr float kFp4Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// MXFP4 [E, R, C/32, 16] nibbles (low nibble first) with e8m0 scales [E, R, C/32] → f32 [E, R, C].
Result<std::vector<float>> dequant_mxfp4(const WeightLoader& w, const std::string& base, int64_t e, int64_t r,
                                         int64_t cols) {
  const TensorInfo* blocks = w.find(base + "_blocks");
  const TensorInfo* scales = w.find(base + "_scales");
  if (!blocks || !scales) return Status::error("weights: MXFP4 tensors \"" + base + "_blocks/_scales\" not found");
  const std::vector<int64_t> bs = {e, r, cols / 32, 16}, ss = {e, r, cols / 32};
  if (cols % 32 != 0 || blocks->shape != bs || scales->shape != ss || blocks->dtype != DType::kU8 ||
      scales->dtype != DType::kU8) {
    return Status::error(blocks->file + ": \"" + base + "_blocks\" " + blocks->shape_str() + " / \"_scales\" " +
                         scales->shape_str() + " do not match the config's MXFP4 layout");
  }
  std::vector<float> out(static_cast<size_t>(e * r * cols));
  const int64_t groups = e * r * (cols / 32);
  for (int64_t g = 0; g < groups; ++g) {
    const float scale = std::ldexp(1.0f, static_cast<int>(scales->data[g]) - 127);
    const uint8_t* b = blocks->data + g * 16;
    float* o = out.data() + g * 32;
    for (int i = 0; i < 16; ++i) {
      o[2 * i] = kFp4Values[b[i] & 0x0F] * scale;
      o[2 * i + 1] = kFp4Values[b[i] >> 4] * scale;
    }
  }
  return out;
}

// Rows interleaved (gate 0, up 0, gate 1, ...) → gate rows then up rows, for each of `e` [2I, cols] matrices.
void deinterleave_rows(const float* src, float* dst, int64_t e, int64_t inter, int64_t cols) {
  for (int64_t x = 0; x < e; ++x)
    for (int64_t r = 0; r < 2 * inter; ++r) {
      const int64_t from = r < inter ? 2 * r : 2 * (r - inter) + 1;
      std::copy_n(src + (x * 2 * inter + from) * cols, cols, dst + (x * 2 * inter + r) * cols);
    }
}

Status load_experts(WeightLoader& w, const GptOssHParams& hp, const std::string& p, int64_t h, int64_t in, Moe& moe) {
  const int64_t e = hp.num_experts;
  const std::string x = p + "experts.";
  RL_ASSIGN_OR_RETURN(moe.gate_up, w.load_computed({e, 2 * in, h}, kDummyScale, [&](float* dst) -> Status {
    std::vector<float> rows;  // [E, 2I, H], interleaved
    if (hp.mxfp4) {
      RL_ASSIGN_OR_RETURN(rows, dequant_mxfp4(w, x + "gate_up_proj", e, 2 * in, h));
    } else {
      RL_ASSIGN_OR_RETURN(std::vector<float> src, w.read_f32(x + "gate_up_proj", {e, h, 2 * in}));
      rows.resize(src.size());
      for (int64_t k = 0; k < e; ++k)
        for (int64_t c = 0; c < h; ++c)
          for (int64_t r = 0; r < 2 * in; ++r) rows[(k * 2 * in + r) * h + c] = src[(k * h + c) * 2 * in + r];
    }
    deinterleave_rows(rows.data(), dst, e, in, h);
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(moe.down, w.load_computed({e, h, in}, kDummyScale, [&](float* dst) -> Status {
    if (hp.mxfp4) {
      RL_ASSIGN_OR_RETURN(std::vector<float> v, dequant_mxfp4(w, x + "down_proj", e, h, in));
      std::copy(v.begin(), v.end(), dst);
      return Status::ok();
    }
    RL_ASSIGN_OR_RETURN(std::vector<float> src, w.read_f32(x + "down_proj", {e, in, h}));
    for (int64_t k = 0; k < e; ++k)
      for (int64_t r = 0; r < in; ++r)
        for (int64_t c = 0; c < h; ++c) dst[(k * h + c) * in + r] = src[(k * in + r) * h + c];
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(moe.gate_up_bias, w.load_computed({e, 2 * in}, kDummyScale, [&](float* dst) -> Status {
    RL_ASSIGN_OR_RETURN(std::vector<float> src, w.read_f32(x + "gate_up_proj_bias", {e, 2 * in}));
    deinterleave_rows(src.data(), dst, e, in, 1);
    return Status::ok();
  }));
  RL_ASSIGN_OR_RETURN(moe.down_bias, w.load_unquantized({x + "down_proj_bias"}, {{e, h}}, kDummyScale));
  moe.down_bias = moe.down_bias.reshaped({e, h});
  return Status::ok();
}

Result<std::unique_ptr<Model>> build(const ModelConfig& c, const std::string& dir, Backend* be,
                                     const LoadOptions& opts) {
  const auto& hp = c.arch<GptOssHParams>();
  // YaRN scales cos and sin by the attention factor, i.e. q·k by its square: folded into the softmax scale.
  const float af = rope_attention_factor(c);
  const float scale = af * af / std::sqrt(static_cast<float>(c.head_dim));
  auto spec = [&c, &hp, scale](int64_t i) {
    AttentionSpec s;
    s.hidden = c.hidden_size;
    s.num_heads = c.num_attention_heads;
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.qkv_bias = c.qkv_bias;
    s.o_bias = c.o_bias;
    s.window = hp.windows[static_cast<size_t>(i)];
    s.sinks = true;
    s.scale = scale;
    return s;
  };
  auto ffn = [&c, &hp](WeightLoader& w) -> FfnLoadFn {
    return [&c, &hp, &w](int64_t, const std::string& p, DecoderBlock& b) -> Status {
      b.moe = std::make_unique<Moe>();
      MoeRouteParams r;
      r.routing = MoeRouting::kTopKSoftmax;
      ActParams act;
      act.kind = Activation::kSwigluOss;
      act.limit = hp.swiglu_limit;
      b.moe->init(hp.num_experts, hp.top_k, c.hidden_size, c.intermediate_size, act, r);
      RL_ASSIGN_OR_RETURN(b.moe->router, w.load({p + "router.weight"}, {{hp.num_experts, c.hidden_size}}, kDummyScale));
      RL_ASSIGN_OR_RETURN(b.moe->router_bias, w.load({p + "router.bias"}, {{hp.num_experts}}, kDummyScale));
      return load_experts(w, hp, p, c.hidden_size, c.intermediate_size, *b.moe);
    };
  };
  auto sinks = [be](int64_t, const std::string& p, DecoderBlock& b, WeightLoader& w) {
    return b.attn.load_sinks(w, *be, p + "self_attn.sinks");
  };
  return build_llama_style(c, dir, be, opts, spec, ffn, sinks);
}

}  // namespace

const Arch kGptOssArch = {parse, build};

}  // namespace rl
