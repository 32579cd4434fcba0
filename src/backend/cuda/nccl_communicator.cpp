#include "backend/cuda/nccl_communicator.h"

#include <nccl.h>

#include <cstdlib>
#include <string>

namespace rl::cuda {
namespace {

Status nccl_status(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  return Status::error(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

Result<ncclDataType_t> nccl_type(DType dt) {
  switch (dt) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    default: return Status::error("NCCL collectives take f32 or bf16 tensors, got " + std::string(dtype_name(dt)));
  }
}

class NcclCommunicator final : public parallel::Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, CudaBackend* be, int rank, int size)
      : comm_(comm), be_(be), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override {
    return "NCCL " + std::to_string(NCCL_VERSION_CODE) + " group of " + std::to_string(size_);
  }

  Status all_reduce_sum(const Tensor& x) override {
    RL_ASSIGN_OR_RETURN(ncclDataType_t dt, nccl_type(x.dtype));
    const size_t count = static_cast<size_t>(x.numel());
    return nccl_status(ncclAllReduce(x.data, x.data, count, dt, ncclSum, comm_, be_->stream()), "all-reduce");
  }
  Status all_gather(const Tensor& in, const Tensor& out) override {
    RL_ASSIGN_OR_RETURN(ncclDataType_t dt, nccl_type(in.dtype));
    if (out.dtype != in.dtype || out.numel() != in.numel() * size_) {
      return Status::error("all_gather: output of " + std::to_string(out.numel()) + " elements for " +
                           std::to_string(size_) + " inputs of " + std::to_string(in.numel()));
    }
    return nccl_status(ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), dt, comm_, be_->stream()),
                       "all-gather");
  }

 private:
  ncclComm_t comm_;
  CudaBackend* be_;
  int rank_, size_;
};

}  // namespace

Result<std::vector<std::unique_ptr<parallel::Communicator>>> make_nccl_group(const std::vector<CudaBackend*>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (n < 1) return Status::error("a tensor-parallel group needs at least one rank");
  std::vector<int> devices;
  for (int r = 0; r < n; ++r) {
    const int d = ranks[static_cast<size_t>(r)]->device_index();
    for (int q = 0; q < r; ++q) {
      if (devices[static_cast<size_t>(q)] == d) {
        return Status::error("tensor parallelism runs one rank per GPU: ranks " + std::to_string(q) + " and " +
                             std::to_string(r) + " are both on CUDA device " + std::to_string(d));
      }
    }
    devices.push_back(d);
  }
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  RL_RETURN_IF_ERROR(nccl_status(ncclCommInitAll(comms.data(), n, devices.data()), "init"));
  std::vector<std::unique_ptr<parallel::Communicator>> out;
  for (int r = 0; r < n; ++r) {
    const size_t i = static_cast<size_t>(r);
    out.push_back(std::make_unique<NcclCommunicator>(comms[i], ranks[i], r, n));
  }
  return out;
}

}  // namespace rl::cuda
