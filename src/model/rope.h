// RoPE inverse frequencies as transformers computes them (f32), with llama3 or YaRN scaling applied.
#pragma once

#include <vector>

#include "loader/model_config.h"

namespace rl {

// inv_freq[rotary_dim / 2] for rotary_dim (default: head_dim).
std::vector<float> rope_inv_freq(const ModelConfig& config, int64_t rotary_dim = 0);
// YaRN's attention factor (transformers multiplies cos and sin by it, so q·k grows by its square); 1 otherwise.
float rope_attention_factor(const ModelConfig& config);

}  // namespace rl
