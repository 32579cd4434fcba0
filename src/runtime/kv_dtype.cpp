#include "runtime/kv_dtype.h"

#include <string>

namespace rl {

bool parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out) {
  if (name == "auto") {
    *out = KvCacheDtype::kAuto;
  } else if (name == "f32" || name == "float32") {
    *out = KvCacheDtype::kF32;
  } else if (name == "bf16" || name == "bfloat16") {
    *out = KvCacheDtype::kBF16;
  } else if (name == "fp8" || name == "fp8_e4m3") {
    *out = KvCacheDtype::kFP8;
  } else {
    return false;
  }
  return true;
}

std::string_view kv_cache_dtype_name(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kAuto: return "auto";
    case KvCacheDtype::kF32: return "f32";
    case KvCacheDtype::kBF16: return "bf16";
    case KvCacheDtype::kFP8: return "fp8";
  }
  return "auto";
}

Result<DType> select_kv_dtype(DeviceKind device, DType weight_dtype, bool quantize_int8, KvCacheDtype requested) {
  if (device == DeviceKind::kCuda) {
    if (requested == KvCacheDtype::kF32) {
      return Status::error("--kv-cache-dtype f32 is not supported on CUDA (its attention kernels read a bf16 cache); "
                           "use auto or bf16");
    }
    if (requested == KvCacheDtype::kFP8) {
      return Status::error("--kv-cache-dtype fp8 is not supported on CUDA yet (its attention kernels read a bf16 "
                           "cache; the CPU backend reads fp8); use auto or bf16");
    }
    return DType::kBF16;
  }
  switch (requested) {
    case KvCacheDtype::kF32: return DType::kF32;
    case KvCacheDtype::kBF16: return DType::kBF16;
    case KvCacheDtype::kFP8: return DType::kFP8E4M3;
    case KvCacheDtype::kAuto: break;
  }
  return weight_dtype == DType::kF32 && !quantize_int8 ? DType::kF32 : DType::kBF16;
}

}  // namespace rl
