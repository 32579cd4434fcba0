// Element types and conversions. bf16 and f16 are stored as raw 16-bit patterns and computed in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rl {

// kI8: int8 weights with one f32 scale per output row, in the layout of core/quant.h (CPU backend only).
enum class DType : uint8_t { kF32, kF16, kBF16, kFP8E4M3, kI32, kI64, kU8, kI8 };

size_t dtype_size(DType dt);
std::string_view dtype_name(DType dt);  // "f32", "bf16", ...
bool parse_dtype(std::string_view name, DType* out);  // accepts "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16"

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// FP8 e4m3fn (safetensors "F8_E4M3", the FP8 KV cache): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no
// infinities, S.1111.111 is NaN; the largest finite magnitude is 448, the smallest subnormal 2^-9.
// Widening is exact (a table of the 256 codes).
extern const float* const kFp8E4M3ToF32;  // [256], constant-initialised
inline float fp8_e4m3_to_f32(uint8_t v) { return kFp8E4M3ToF32[v]; }
// Round to nearest even, saturating to ±448 (what CUDA's __nv_cvt_float_to_fp8 does with __NV_SATFINITE, and
// cvt.rn.satfinite.e4m3x2.f32): ±inf and magnitudes past 448 become ±448, NaN becomes 0x7f.
uint8_t f32_to_fp8_e4m3(float f);

// Converts n elements of src (dtype `from`) into f32.
void convert_to_f32(const void* src, DType from, float* dst, size_t n);
// Converts n f32 elements into dst (dtype `to`, f32/f16/bf16/fp8 e4m3).
void convert_from_f32(const float* src, void* dst, DType to, size_t n);

}  // namespace rl
