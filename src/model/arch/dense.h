// The dense Llama-style decoder's parser and builder, shared by llama.cpp, mistral.cpp, qwen2.cpp, qwen3.cpp.
#pragma once

#include "model/model.h"

namespace rl {

enum class DenseFlavor { kLlama, kMistral, kQwen2, kQwen3 };
Result<ModelConfig> parse_dense(const Json& j, const std::string& what, DenseFlavor flavor);
Result<std::unique_ptr<Model>> build_dense(const ModelConfig& c, const std::string& dir, Backend* be,
                                           const LoadOptions& opts);

}  // namespace rl
