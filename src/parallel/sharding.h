// Tensor-parallel sharding rules (Megatron style, design.md §8 "Parallelism is a rank"): which slice of which
// weight each of N ranks holds. Plain integer arithmetic, no tensors, so the rules are unit-tested on the CPU.
//
//   q/k/v projections, gate/up projections   column-parallel: output rows split (by whole heads for q/k/v)
//   o_proj, down_proj                        row-parallel: input columns split; one all-reduce follows each
//   embedding, lm_head                       vocab-parallel: vocabulary rows split (padded to a multiple of N)
//   norms, o_proj/down_proj biases           replicated (row-parallel biases are added once, by rank 0)
//
// GQA: when N > num_kv_heads, each KV head is replicated on N / num_kv_heads consecutive ranks, so that every
// query head finds its KV head on its own rank. Weight layout is the HF one: [out_features, in_features].
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace rl::parallel {

// The dimensions the rules need (from the model's config).
struct ShardDims {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
};

struct TpPlan {
  int32_t tp_size = 1;
  int32_t rank = 0;
  int64_t num_heads = 0;        // query heads on this rank
  int64_t head_begin = 0;       // first query head
  int64_t num_kv_heads = 0;     // KV heads on this rank (>= 1)
  int64_t kv_head_begin = 0;    // first KV head
  int32_t kv_replicas = 1;      // ranks holding each KV head (N / num_kv_heads when N > num_kv_heads, else 1)
  int64_t intermediate = 0;     // MLP columns on this rank
  int64_t intermediate_begin = 0;
  int64_t padded_vocab = 0;     // vocab_size rounded up to a multiple of N
  int64_t vocab_per_rank = 0;   // padded_vocab / N (rows past vocab_size are zero weights, -inf logits)
  int64_t vocab_begin = 0;
  int64_t head_dim = 0;
  // K and V elements per token and layer in this rank's KV cache (its KV heads only), for KV sizing.
  int64_t kv_elems_per_token_per_layer() const { return 2 * num_kv_heads * head_dim; }
};

// Checks that the model divides over N ranks (names the dimension that does not) and returns rank's plan.
Result<TpPlan> make_tp_plan(const ShardDims& dims, int32_t tp_size, int32_t rank);

enum class WeightRole {
  kQProj, kKProj, kVProj, kQBias, kKBias, kVBias,  // column-parallel by heads
  kOProj,                                          // row-parallel by heads
  kGateProj, kUpProj,                              // column-parallel by intermediate
  kDownProj,                                       // row-parallel by intermediate
  kEmbedding, kLmHead,                             // vocab-parallel
  kReplicated,                                     // norms, row-parallel biases
};

// The part of a weight a rank holds: rows [row_begin, row_begin + num_rows) and columns
// [col_begin, col_begin + num_cols) of the full [rows, cols] tensor (a 1-D tensor has cols = 1).
// For vocab-parallel weights the slice may reach past the real vocabulary: rows at or past `valid_rows`
// (relative to row_begin) are padding the rank fills with zeros.
struct Slice {
  int64_t row_begin = 0, num_rows = 0;
  int64_t col_begin = 0, num_cols = 0;
  int64_t valid_rows = 0;
};

Slice shard_slice(const TpPlan& plan, const ShardDims& dims, WeightRole role, int64_t rows, int64_t cols);

// True for the roles whose output is a partial sum that must be all-reduced across ranks.
bool needs_all_reduce(WeightRole role);

}  // namespace rl::parallel
