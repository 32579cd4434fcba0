// Collectives of one tensor-parallel group (issue 19, docs/distributed.md). A group has N ranks; rank r runs its
// shard of the model on its own backend, from its own thread, and calls the same collectives in the same order as
// every other rank with same-shaped tensors. On the GPU the calls are enqueued on the rank backend's stream
// (NCCL, backend/cuda/nccl_communicator.h); on the CPU they run at once over host memory (make_host_group).
//
// A collective that finds the ranks disagreeing (shape or dtype) fails on every rank with the same message, so no
// rank is left waiting. A rank that stops calling collectives while the others go on hangs the group: the engine
// drives all ranks from one step loop, so they either all run a step or none does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace rl::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // x (f32 or bf16, contiguous) ← the element-wise sum of x over the ranks; every rank gets the same bits.
  virtual Status all_reduce_sum(const Tensor& x) = 0;
  // out [size · n] ← in [n] of rank 0, then rank 1, ... (same dtype; vocab-parallel logits).
  virtual Status all_gather(const Tensor& in, const Tensor& out) = 0;
  virtual std::string name() const = 0;
};

// N communicators of one in-process group over host memory (the CPU backend's ranks, one thread each). Sums are
// taken in f32 in rank order 0, 1, ..., N-1 and rounded once to the tensor's dtype, so the result does not depend
// on thread timing and equals a one-rank sum of the same partials in that order. The ranks split each reduction
// into N slices and reduce one slice each, then copy the whole result back.
std::vector<std::unique_ptr<Communicator>> make_host_group(int n);

}  // namespace rl::parallel
