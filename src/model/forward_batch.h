// ForwardBatch: one engine step's flattened input (design.md §4), as views in the backend's memory.
// Prefill chunks and decode tokens of many sequences mix in one batch.
#pragma once

#include <array>
#include <cstdint>

#include "backend/ops.h"
#include "loader/kv_groups.h"

namespace rl {

struct ForwardBatch {
  int64_t num_tokens = 0;
  int64_t num_logits = 0;   // rows whose logits are computed (usually the last token of each sequence)
  Tensor input_ids;         // i32 [num_tokens]
  Tensor positions;         // i32 [num_tokens]
  Tensor slot_mapping;      // i32 [num_tokens]: KV write slot of each token
  Tensor logits_indices;    // i32 [num_logits]: token rows whose logits are wanted, strictly increasing
  AttentionMetadata attn;   // cu_seqlens_q, seq_lens_k, block_tables (+ host mirrors)
  // The logits rows as attention queries, for a model that runs its last layer's attention on them alone. A
  // sequence's logits rows are a suffix of its rows (its last row, all of them, or none), so causal attention over
  // them takes these in place of attn's cu_seqlens_q / max_seqlen_q / all_decode / num_leading_decodes.
  struct LogitsQueries {
    Tensor cu_seqlens_q;              // i32 [num_seqs + 1]: sequence s's logits rows are [cu[s], cu[s+1])
    int64_t max_seqlen_q = 0;
    bool all_decode = false;          // every sequence has exactly one
    int64_t num_leading_decodes = 0;  // sequences 0 .. k-1 have one each
  };
  LogitsQueries logits_q;
  // Hybrid KV: KV group g >= 1's slot mapping [num_tokens] and block tables [num_seqs, >= max_blocks_per_seq]
  // at index g - 1; group 0's are slot_mapping and attn.block_tables. Each layer uses its KvLayer::group's.
  std::array<Tensor, kMaxKvGroups - 1> window_slot_mapping, window_block_tables;

  const Tensor& slots(int32_t group) const {
    return group == 0 ? slot_mapping : window_slot_mapping[static_cast<size_t>(group - 1)];
  }
  const Tensor& block_tables(int32_t group) const {
    return group == 0 ? attn.block_tables : window_block_tables[static_cast<size_t>(group - 1)];
  }
};

}  // namespace rl
