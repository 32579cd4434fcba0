// The dense decoder-only transformer shared by Llama, Mistral, Qwen2 and Qwen3 (differences are config flags:
// q/k/v and o biases, Qwen3's per-head q/k RMSNorm, tied embeddings, llama3 RoPE scaling).
#pragma once

#include "model/model.h"

namespace rl {

Result<std::unique_ptr<Model>> build_dense_decoder(const ModelConfig& config, const std::string& model_dir,
                                                   Backend* backend, const LoadOptions& opts);

}  // namespace rl
