#include "core/dtype.h"

#include <array>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace rl {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kFP8E4M3: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "fp8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kI8: return "i8";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  if (name == "f32" || name == "float32" || name == "float") { *out = DType::kF32; return true; }
  if (name == "bf16" || name == "bfloat16") { *out = DType::kBF16; return true; }
  if (name == "f16" || name == "float16" || name == "half") { *out = DType::kF16; return true; }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

namespace {

// One e4m3fn code's value, as a constant expression: man / 8 * 2^-6 (subnormal) or (1 + man / 8) * 2^(exp - 7).
constexpr float fp8_e4m3_decode(int v) {
  const int exp = (v >> 3) & 0xF, man = v & 7;
  if (exp == 0xF && man == 7) return std::numeric_limits<float>::quiet_NaN();
  float f = exp == 0 ? static_cast<float>(man) / 8.0f : 1.0f + static_cast<float>(man) / 8.0f;
  for (int e = exp == 0 ? -6 : exp - 7; e > 0; --e) f *= 2.0f;
  for (int e = exp == 0 ? -6 : exp - 7; e < 0; ++e) f *= 0.5f;
  return (v & 0x80) ? -f : f;
}

constexpr std::array<float, 256> fp8_e4m3_table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = fp8_e4m3_decode(i);
  return t;
}

constexpr std::array<float, 256> kFp8Table = fp8_e4m3_table();

}  // namespace

const float* const kFp8E4M3ToF32 = kFp8Table.data();

uint8_t f32_to_fp8_e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7f;  // NaN
  const float a = std::fabs(f);
  if (a == 0.0f) return sign;
  if (!(a < 448.0f)) return sign | 0x7e;  // 448 itself, past it, inf: satfinite
  // Scale so that the last representable step is 1, then round to nearest even: the subnormal step is 2^-9, and
  // a normal value 2^e (e >= -6) has steps of 2^(e - 3). The code is then (e + 6) * 8 + q for the rounded
  // q in [8, 16] (q = 16 carries into the next exponent's code), or q itself for a subnormal (q = 8 is 2^-6's code).
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit's weight is 2^(e - 1)
  const int lead = e - 1;
  if (lead < -6) return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  const int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - lead)));
  return sign | static_cast<uint8_t>((lead + 6) * 8 + q);
}

void convert_to_f32(const void* src, DType from, float* dst, size_t n) {
  switch (from) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kFP8E4M3: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    default: RL_CHECK_MSG(false, "convert_to_f32: unsupported dtype %s", std::string(dtype_name(from)).c_str());
  }
}

void convert_from_f32(const float* src, void* dst, DType to, size_t n) {
  switch (to) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::kFP8E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_fp8_e4m3(src[i]);
      return;
    }
    default: RL_CHECK_MSG(false, "convert_from_f32: unsupported dtype %s", std::string(dtype_name(to)).c_str());
  }
}

}  // namespace rl
