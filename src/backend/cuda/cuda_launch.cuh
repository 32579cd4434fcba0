// Kernel launches with programmatic dependent launch (PDL, sm_90). A decode step is ~300 small dependent kernels
// in one CUDA graph; launched this way, each one is scheduled while its predecessor still runs, so the launch
// latency between them overlaps (and the GEMV streams its weights before its input is ready: gemv_stream.cu).
// Contract of a kernel launched through launch_pdl: it calls pdl_wait() (cuda_common.cuh) before it touches any
// memory an earlier kernel of the stream writes; before that it may only read data no step kernel writes.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace rl::cuda {

// Whether the current device honours programmatic stream serialization (compute capability 9.0 or newer).
inline bool pdl_supported() {
  static int cached[16] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  RL_CUDA_CHECK(cudaGetDevice(&dev));
  int& c = cached[dev & 15];
  if (c == 0) {
    int major = 0;
    RL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    c = major >= 9 ? 2 : 1;
  }
  return c == 2;
}

// kernel<<<grid, block, smem, stream>>>(args...) through cudaLaunchKernelEx with the PDL attribute and, for
// cluster > 0, the cluster shape (cluster blocks along x), where the device has both (compute capability 9.0 or
// newer); elsewhere a plain launch, which is only right without a cluster or with one block a cluster.
template <typename... KernelArgs, typename... Args>
void launch_ex(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
               unsigned cluster, Args&&... args) {
  const bool sm90 = pdl_supported();
  RL_CHECK_MSG(cluster <= 8 && (sm90 || cluster <= 1), "launch: clusters of %u blocks (portable sizes: 1-8)", cluster);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = !sm90 ? 0 : cluster > 0 ? 2 : 1;
  RL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute where the device supports it.
template <typename... KernelArgs, typename... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  launch_ex(kernel, grid, block, smem, stream, 0u, std::forward<Args>(args)...);
}

// The same in clusters of `cluster` blocks (1-8) along x (cluster.cuh has the device side): the sampler.
template <typename... KernelArgs, typename... Args>
void launch_pdl_cluster(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        unsigned cluster, Args&&... args) {
  RL_CHECK_MSG(cluster >= 1, "launch: a cluster of 0 blocks");
  launch_ex(kernel, grid, block, smem, stream, cluster, std::forward<Args>(args)...);
}

}  // namespace rl::cuda
