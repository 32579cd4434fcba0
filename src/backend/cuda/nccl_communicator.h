// Tensor-parallel collectives over NCCL (issue 19, docs/distributed.md): one communicator per GPU of this
// process, made together by ncclCommInitAll; rank r's collectives are enqueued on ranks[r]'s stream, so they
// order with its kernels and can be captured in its CUDA graphs. NVLink multicast (NVLS) stays off
// (NCCL_NVLS_ENABLE=0 unless the environment says otherwise).
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/status.h"
#include "parallel/communicator.h"

namespace rl::cuda {

// ranks[r] is rank r's backend; each must be on its own device (NCCL runs one rank per GPU). Fails with a clear
// message when two ranks share a device or NCCL cannot start.
Result<std::vector<std::unique_ptr<parallel::Communicator>>> make_nccl_group(const std::vector<CudaBackend*>& ranks);

}  // namespace rl::cuda
