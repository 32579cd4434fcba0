// DecodeGraphs: CUDA graphs of the model's forward pass for all-decode steps, one per batch-size bucket
// (1, 2, 4, 8, 16, 24, 32, ... in steps of 8 up to max_num_seqs). A step with B sequences runs the graph of the
// smallest bucket ≥ B, its batch padded with harmless rows (see ModelRunner). A graph is captured the first
// time its bucket is used, after one eager run of the same shapes, and replayed on the backend's stream with
// the runner's fixed device buffers, so a replay launches the whole step at once and allocates nothing.
//
// Invariants: a captured graph bakes in every device pointer and host-side shape of its step (num_tokens,
// num_seqs, num_logits = bucket, max_seqlen_k = max_model_len); nothing it reads may move while it lives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace rl {

class DecodeGraphs {
 public:
  // Null when graphs are unavailable: a backend other than CUDA, or a build without CUDA.
  static std::unique_ptr<DecodeGraphs> create(Backend* backend, int64_t max_num_seqs);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // The smallest bucket holding num_seqs sequences; 0 when num_seqs exceeds every bucket.
  int64_t bucket_for(int64_t num_seqs) const;
  const std::vector<int64_t>& buckets() const { return buckets_; }
  bool captured(int64_t bucket) const;
  // Captures `forward` (enqueues on the backend's stream, nothing else) as the graph of `bucket`. An error
  // (an op that cannot be captured) leaves the bucket uncaptured; the caller keeps running eagerly.
  Status capture(int64_t bucket, const std::function<void()>& forward);
  // Enqueues the graph of a captured bucket on the backend's stream.
  void replay(int64_t bucket);
  // Kernel nodes of the captured graph of `bucket` (the kernels one decode step launches); 0 if not captured.
  int64_t num_kernels(int64_t bucket) const;

  // Bucket sizes for max_num_seqs: powers of two up to 8, then multiples of 8, then max_num_seqs itself.
  static std::vector<int64_t> make_buckets(int64_t max_num_seqs);

 private:
  struct Impl;
  explicit DecodeGraphs(std::unique_ptr<Impl> impl, std::vector<int64_t> buckets);
  std::unique_ptr<Impl> impl_;
  std::vector<int64_t> buckets_;
  std::vector<int64_t> num_kernels_;  // indexed like buckets_, set at capture
};

}  // namespace rl
