// Host side of the Hopper (sm_90a) kernels (prefill_attention_sm90.cu, gemm_skinny_sm90.cu): the device check and
// TMA tensor maps (cuTensorMapEncodeTiled through the runtime's driver entry point: no link against libcuda).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace rl::cuda {

// Whether the current device runs sm_90a machine code (compute capability 9.0 exactly).
bool device_is_sm90();

// A bf16 tensor map of rank 2 or 3 with 128-byte swizzle: dims innermost first, the byte strides of dims 1..rank-1,
// the box copied per load. Elements outside the tensor read as zero.
CUtensorMap make_bf16_tensor_map(const void* base, int rank, const uint64_t* dims, const uint64_t* byte_strides,
                                 const uint32_t* box);
// The same over bytes (an FP8 e4m3 KV cache).
CUtensorMap make_u8_tensor_map(const void* base, int rank, const uint64_t* dims, const uint64_t* byte_strides,
                               const uint32_t* box);

}  // namespace rl::cuda
