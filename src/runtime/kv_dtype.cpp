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
    return requested == KvCacheDtype::kFP8 ? DType::kFP8E4M3 : DType::kBF16;
  }
  switch (requested) {
    case KvCacheDtype::kF32: return DType::kF32;
    case KvCacheDtype::kBF16: return DType::kBF16;
    case KvCacheDtype::kFP8: return DType::kFP8E4M3;
    case KvCacheDtype::kAuto: break;
  }
  return weight_dtype == DType::kF32 && !quantize_int8 ? DType::kF32 : DType::kBF16;
}

Status check_kv_dtype(DeviceKind device, DType kv, const ModelConfig& mc, bool deterministic) {
  if (device != DeviceKind::kCuda || kv != DType::kFP8E4M3) return Status::ok();
  if (deterministic) {
    return Status::error("--kv-cache-dtype fp8 does not take --deterministic on CUDA (its batch-invariant attention "
                         "kernels read a bf16 cache); use bf16");
  }
  for (const KvLayerSpec& spec : mc.kv_spec) {
    if (spec.kind == KvKind::kLatent) {
      return Status::error("--kv-cache-dtype fp8 does not take " + mc.architecture +
                           "'s latent (MLA) cache on CUDA; use bf16");
    }
  }
  return Status::ok();
}

}  // namespace rl
