// The CUDA backend's tensor-parallel ops (vocab-parallel embedding, strided column copy) and the rank threads'
// device binding and peer hand-off (tp_support.h).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/tp_kernels.h"
#include "backend/cuda/tp_support.h"
#include "core/check.h"

namespace rl {

void CudaBackend::embedding_shard(const Tensor& ids, const Tensor& table, int64_t vocab_begin, const Tensor& out) {
  RL_CHECK(table.dtype == DType::kBF16 || table.dtype == DType::kF32);
  RL_CHECK(ids.dtype == DType::kI32 && out.dtype == DType::kBF16 && out.dim(-1) == table.dim(1) &&
           out.rows() == ids.numel());
  cuda::launch_embedding_shard(ids.as<int32_t>(), ids.numel(), table.data, table.dtype, table.dim(0), table.dim(1),
                               vocab_begin, static_cast<uint16_t*>(out.data), stream_);
}

void CudaBackend::copy_columns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                               int64_t cols) {
  RL_CHECK(src.ndim == 2 && dst.ndim == 2 && src.dtype == dst.dtype && src.dim(0) == dst.dim(0));
  RL_CHECK(src_col >= 0 && dst_col >= 0 && src_col + cols <= src.dim(1) && dst_col + cols <= dst.dim(1));
  if (src.dim(0) == 0 || cols == 0) return;
  const size_t es = dtype_size(src.dtype);
  RL_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst.data) + static_cast<size_t>(dst_col) * es,
                                  static_cast<size_t>(dst.dim(1)) * es,
                                  static_cast<const char*>(src.data) + static_cast<size_t>(src_col) * es,
                                  static_cast<size_t>(src.dim(1)) * es, static_cast<size_t>(cols) * es,
                                  static_cast<size_t>(src.dim(0)), cudaMemcpyDeviceToDevice, stream_));
}

namespace cuda {

void bind_thread(const CudaBackend& be) { RL_CUDA_CHECK(cudaSetDevice(be.device_index())); }

PeerHandoff::PeerHandoff(const CudaBackend& src) : src_(src) {
  int current = 0;
  RL_CUDA_CHECK(cudaGetDevice(&current));
  RL_CUDA_CHECK(cudaSetDevice(src.device_index()));  // an event belongs to the device current at its creation
  RL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  RL_CUDA_CHECK(cudaSetDevice(current));
}

PeerHandoff::~PeerHandoff() {
  if (event_) cudaEventDestroy(event_);
}

void PeerHandoff::record() { RL_CUDA_CHECK(cudaEventRecord(event_, src_.stream())); }

void PeerHandoff::copy_after(const CudaBackend& dst, void* dst_ptr, const void* src_ptr, size_t bytes) const {
  RL_CUDA_CHECK(cudaStreamWaitEvent(dst.stream(), event_, 0));
  RL_CUDA_CHECK(cudaMemcpyPeerAsync(dst_ptr, dst.device_index(), src_ptr, src_.device_index(), bytes, dst.stream()));
}

}  // namespace cuda
}  // namespace rl
