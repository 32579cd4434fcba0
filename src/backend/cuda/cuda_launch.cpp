// Host side of cuda_launch.cuh.
#include "backend/cuda/cuda_launch.cuh"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace rl::cuda {

// Once per kernel and device: the attribute belongs to the device's context.
void allow_nonportable_cluster(const void* kernel) {
  static std::mutex mu;
  static std::vector<std::pair<int, const void*>> done;
  int dev = 0;
  RL_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (std::find(done.begin(), done.end(), std::make_pair(dev, kernel)) != done.end()) return;
  RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  done.emplace_back(dev, kernel);
}

}  // namespace rl::cuda
