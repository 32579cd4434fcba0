// ForwardBatch: one engine step's flattened input (design.md §4), as views in the backend's memory.
// Prefill chunks and decode tokens of many sequences mix in one batch.
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace rl {

struct ForwardBatch {
  int64_t num_tokens = 0;
  int64_t num_logits = 0;   // rows whose logits are computed (usually the last token of each sequence)
  Tensor input_ids;         // i32 [num_tokens]
  Tensor positions;         // i32 [num_tokens]
  Tensor slot_mapping;      // i32 [num_tokens]: KV write slot of each token
  Tensor logits_indices;    // i32 [num_logits]: token rows whose logits are wanted
  AttentionMetadata attn;   // cu_seqlens_q, seq_lens_k, block_tables (+ host mirrors)
};

}  // namespace rl
