#include "backend/cuda/tma_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace rl::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    RL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    RL_CHECK_MSG(q == cudaDriverEntryPointSuccess && f, "cuTensorMapEncodeTiled is not available from the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

bool device_is_sm90() {
  static const bool yes = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;  // the sm_90a machine code runs on compute capability 9.0 only
  }();
  return yes;
}

namespace {

CUtensorMap encode(CUtensorMapDataType type, const void* base, int rank, const uint64_t* dims,
                   const uint64_t* byte_strides, const uint32_t* box) {
  RL_CHECK(rank == 2 || rank == 3);
  CUtensorMap m;
  cuuint64_t d[3], st[2];
  cuuint32_t b[3], es[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
  }
  for (int i = 0; i + 1 < rank; ++i) st[i] = byte_strides[i];
  const CUresult r = tensor_map_encoder()(&m, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), d, st, b,
                                          es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  RL_CHECK_MSG(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (%d)", static_cast<int>(r));
  return m;
}

}  // namespace

CUtensorMap make_bf16_tensor_map(const void* base, int rank, const uint64_t* dims, const uint64_t* byte_strides,
                                 const uint32_t* box) {
  return encode(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rank, dims, byte_strides, box);
}

CUtensorMap make_u8_tensor_map(const void* base, int rank, const uint64_t* dims, const uint64_t* byte_strides,
                               const uint32_t* box) {
  return encode(CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rank, dims, byte_strides, box);
}

}  // namespace rl::cuda
