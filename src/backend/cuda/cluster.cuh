// Thread-block clusters (sm_90): the block's rank and the cluster's size, the cluster barrier, another block's copy
// of a __shared__ variable (distributed shared memory). On older targets a cluster is one block: rank 0, size 1, the
// barrier a block barrier. The launch: launch_pdl_cluster (cuda_launch.cuh).
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_launch.cuh"

namespace rl::cuda {

__device__ __forceinline__ unsigned cl_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  return 0;
#endif
}
__device__ __forceinline__ unsigned cl_size() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}
// Every block of the cluster has arrived; the shared-memory writes each made before are visible to all.
__device__ __forceinline__ void cl_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();
#endif
}
// Block r's copy of a __shared__ variable.
template <typename T>
__device__ __forceinline__ T* cl_map(T* p, unsigned r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, r);
#else
  (void)r;
  return p;
#endif
}

}  // namespace rl::cuda
