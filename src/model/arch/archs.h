// The architectures (one file each) and the helpers the Llama-style ones share (llama_style.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/layers/decoder.h"
#include "model/model.h"

namespace rl {

extern const Arch kDeepseekV2Arch;
extern const Arch kDeepseekV3Arch;
extern const Arch kGpt2Arch;
extern const Arch kGptOssArch;
extern const Arch kLlamaArch;
extern const Arch kMistralArch;
extern const Arch kQwen2Arch;
extern const Arch kQwen3Arch;
extern const Arch kQwen3MoeArch;

// Dummy weights: uniform with std ≈ 0.02 (as initializer_range).
constexpr float kDummyScale = 0.034641016f;  // 0.02 * sqrt(3)

// Attention parameters of a Llama-style config (q, k, v, o; biases; q/k norm; sinks) per layer, and its matmul
// weights alone.
int64_t llama_attention_params(const ModelConfig& c, bool sinks);
int64_t llama_attention_linear(const ModelConfig& c);
// Fills what every Llama-style config shares: ParamCounts for embeddings, lm_head, attention and norms, the
// attention FLOPs and the KV spec (windows[i] > 0: layer i slides); the caller adds the feed-forward.
void llama_base_counts(ModelConfig& c, const std::vector<int64_t>& windows, bool sinks);
// hidden_act must be SiLU.
Status require_silu(const Json& j, const std::string& what);

// Builds a Llama-style decoder (model.embed_tokens, model.layers.{i}.{input,post_attention}_layernorm,
// self_attn.{q,k,v,o}_proj, model.norm, lm_head): attention per attn_spec(i); `extra` loads per-layer extras
// (sinks); the feed-forward by the loader make_ffn returns.
using AttnSpecFn = std::function<AttentionSpec(int64_t layer)>;
using FfnLoadFn = std::function<Status(int64_t layer, const std::string& prefix, DecoderBlock& block)>;
using ExtraLoadFn =
    std::function<Status(int64_t layer, const std::string& prefix, DecoderBlock& block, WeightLoader& w)>;
Result<std::unique_ptr<Model>> build_llama_style(const ModelConfig& c, const std::string& model_dir, Backend* be,
                                                 const LoadOptions& opts, const AttnSpecFn& attn_spec,
                                                 const std::function<FfnLoadFn(WeightLoader&)>& make_ffn,
                                                 const ExtraLoadFn& extra = nullptr);

}  // namespace rl
