// RoPE inverse frequencies as transformers computes them (f32), with llama3 scaling applied.
#pragma once

#include <vector>

#include "loader/model_config.h"

namespace rl {

// inv_freq[head_dim / 2]
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace rl
