// The roofline of tensor parallelism (issue 19, docs/distributed.md): one rank's share of a model's per-token
// costs when its weights and KV heads are split over N GPUs, and the all-reduces a decode step adds (two per
// layer of batch × hidden bf16 values, plus the embedding's, and an all-gather of the logits), each timed as
// latency + 2 (N - 1) / N · bytes / bus bandwidth (NCCL's ring; the bus bandwidth is what nccl-tests and
// scripts/device/tp.sh report).
#pragma once

#include <cstdint>

#include "loader/model_config.h"
#include "perf/cost_model.h"

namespace rl::perf {

struct AllReduceLink {
  double bus_bytes_per_s = 0;
  double latency_s = 0;
  // Seconds of one all-reduce of `bytes` over n ranks (0 for one rank).
  double all_reduce_s(double bytes, int32_t n) const;
  // Seconds of an all-gather whose output is `bytes` (half an all-reduce's traffic).
  double all_gather_s(double bytes, int32_t n) const;
};

// Rank 0's share at tensor parallel size n: matmul weights, FLOPs and attention split n ways; KV bytes per token
// those of its KV heads (num_kv_heads / n, or one replicated head when n > num_kv_heads); norms replicated.
// Requires n to divide the heads (the engine's rule).
ModelCost tp_rank_cost(const ModelCost& whole, const ModelConfig& c, int32_t n);

struct TpStepCost {
  StepCost rank;            // one rank's compute and memory roofline
  double collective_s = 0;  // the step's all-reduces and the logits all-gather
  double time_s = 0;        // rank.time_s + collective_s (they do not overlap: each all-reduce waits for its GEMM)
  double tokens_per_s = 0;
  int64_t num_all_reduces = 0;
  double all_reduce_bytes = 0;  // of each
};
TpStepCost tp_decode_step(const ModelCost& rank_cost, const ModelConfig& c, const Roof& roof, int32_t n,
                          const AllReduceLink& link, int64_t batch, int64_t context);

}  // namespace rl::perf
