// What a tensor-parallel rank thread needs of CUDA beyond the Backend interface (runtime/tp_model.h): binding a
// thread to its rank's device, and handing the step's staged batch from rank 0's device to another rank's, in
// stream order on both sides.
#pragma once

#include <cstddef>

#include "backend/cuda/cuda_backend.h"

namespace rl::cuda {

// Makes be's device the calling thread's current device (every CUDA call of a rank runs on its own thread).
void bind_thread(const CudaBackend& be);

// An event on `src`'s device: record() marks everything src's stream has enqueued so far; copy_after() makes
// dst's stream wait for the last record, then copies bytes from src's memory into dst's (a peer copy on dst's
// stream). record() runs on a thread bound to src's device, copy_after() on one bound to dst's.
class PeerHandoff {
 public:
  explicit PeerHandoff(const CudaBackend& src);
  ~PeerHandoff();
  PeerHandoff(const PeerHandoff&) = delete;
  PeerHandoff& operator=(const PeerHandoff&) = delete;
  void record();
  void copy_after(const CudaBackend& dst, void* dst_ptr, const void* src_ptr, size_t bytes) const;

 private:
  const CudaBackend& src_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace rl::cuda
