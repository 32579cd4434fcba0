#include "runtime/cuda_graphs.h"

#include <algorithm>

#include "core/check.h"

#if RIDGELINE_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace rl {

std::vector<int64_t> DecodeGraphs::make_buckets(int64_t max_num_seqs) {
  std::vector<int64_t> b;
  for (int64_t v = 1; v <= std::min<int64_t>(8, max_num_seqs); v *= 2) b.push_back(v);
  for (int64_t v = 16; v <= max_num_seqs; v += 8) b.push_back(v);
  if (max_num_seqs > 0 && b.back() != max_num_seqs) b.push_back(max_num_seqs);
  return b;
}

int64_t DecodeGraphs::bucket_for(int64_t num_seqs) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), num_seqs);
  return it == buckets_.end() ? 0 : *it;
}

#if RIDGELINE_CUDA

struct DecodeGraphs::Impl {
  cudaStream_t stream = nullptr;
  // Indexed like buckets_; null until captured.
  std::vector<cudaGraphExec_t> execs;
};

std::unique_ptr<DecodeGraphs> DecodeGraphs::create(Backend* backend, int64_t max_num_seqs) {
  auto* cuda = dynamic_cast<CudaBackend*>(backend);
  if (cuda == nullptr || max_num_seqs <= 0) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->stream = cuda->stream();
  std::vector<int64_t> buckets = make_buckets(max_num_seqs);
  impl->execs.assign(buckets.size(), nullptr);
  return std::unique_ptr<DecodeGraphs>(new DecodeGraphs(std::move(impl), std::move(buckets)));
}

DecodeGraphs::~DecodeGraphs() {
  if (!impl_) return;
  for (cudaGraphExec_t e : impl_->execs) {
    if (e) cudaGraphExecDestroy(e);
  }
}

bool DecodeGraphs::captured(int64_t bucket) const {
  auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  return it != buckets_.end() && impl_->execs[static_cast<size_t>(it - buckets_.begin())] != nullptr;
}

Status DecodeGraphs::capture(int64_t bucket, const std::function<void()>& forward) {
  auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  if (it == buckets_.end()) return Status::error("no CUDA-graph bucket of size " + std::to_string(bucket));
  const size_t i = static_cast<size_t>(it - buckets_.begin());
  // Relaxed: other threads (an HTTP worker allocating, say) may make CUDA calls while this one captures.
  cudaError_t err = cudaStreamBeginCapture(impl_->stream, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) return Status::error(std::string("CUDA graph capture: ") + cudaGetErrorString(err));
  forward();
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(impl_->stream, &graph);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky launch error of the failed capture
    return Status::error(std::string("CUDA graph capture: ") + cudaGetErrorString(err));
  }
  size_t num_nodes = 0;
  int64_t kernels = 0;
  if (cudaGraphGetNodes(graph, nullptr, &num_nodes) == cudaSuccess && num_nodes > 0) {
    std::vector<cudaGraphNode_t> nodes(num_nodes);
    if (cudaGraphGetNodes(graph, nodes.data(), &num_nodes) == cudaSuccess) {
      for (size_t n = 0; n < num_nodes; ++n) {
        cudaGraphNodeType type{};
        if (cudaGraphNodeGetType(nodes[n], &type) == cudaSuccess && type == cudaGraphNodeTypeKernel) ++kernels;
      }
    }
  }
  num_kernels_[i] = kernels;
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) return Status::error(std::string("CUDA graph instantiate: ") + cudaGetErrorString(err));
  impl_->execs[i] = exec;
  return Status::ok();
}

void DecodeGraphs::replay(int64_t bucket) {
  auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  RL_CHECK(it != buckets_.end());
  cudaGraphExec_t exec = impl_->execs[static_cast<size_t>(it - buckets_.begin())];
  RL_CHECK(exec != nullptr);
  const cudaError_t err = cudaGraphLaunch(exec, impl_->stream);
  RL_CHECK_MSG(err == cudaSuccess, "cudaGraphLaunch: %s", cudaGetErrorString(err));
}

#else  // no CUDA in this build: graphs are never created

struct DecodeGraphs::Impl {};

std::unique_ptr<DecodeGraphs> DecodeGraphs::create(Backend*, int64_t) { return nullptr; }
DecodeGraphs::~DecodeGraphs() = default;
bool DecodeGraphs::captured(int64_t) const { return false; }
Status DecodeGraphs::capture(int64_t, const std::function<void()>&) {
  return Status::error("this build has no CUDA graphs");
}
void DecodeGraphs::replay(int64_t) { RL_CHECK_MSG(false, "this build has no CUDA graphs"); }

#endif

DecodeGraphs::DecodeGraphs(std::unique_ptr<Impl> impl, std::vector<int64_t> buckets)
    : impl_(std::move(impl)), buckets_(std::move(buckets)), num_kernels_(buckets_.size(), 0) {}

int64_t DecodeGraphs::num_kernels(int64_t bucket) const {
  auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  return it == buckets_.end() ? 0 : num_kernels_[static_cast<size_t>(it - buckets_.begin())];
}

}  // namespace rl
