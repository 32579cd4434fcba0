// Int8 weights with per-output-channel (per-row) scales, quantised at load time from bf16/f32
// checkpoints. A [rows, cols] int8 weight occupies one allocation of i8_weight_bytes(rows, cols)
// bytes:
//   q        int8 [rows, cols]      round(w / scale), in [-127, 127] (symmetric; -128 is never
//   produced) scale    f32  [rows]            max |w| of the row / 127 (1 for an all-zero row),
//   64-byte aligned row_sum  i32  [rows]            sum of the row's q (kernels that compute u8 x
//   s8 with a +128 offset on the
//                                   activations subtract 128 * row_sum), 64-byte aligned
// plus 64 bytes of zero padding after q, so a vector load that runs past the last row's end stays
// inside. A Tensor of dtype kI8 and shape [rows, cols] points at q; the other arrays follow at
// fixed offsets, so such a tensor must never be sliced by rows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rl {

inline size_t i8_align64(size_t n) { return (n + 63) / 64 * 64; }
inline size_t i8_scale_offset(int64_t rows, int64_t cols) {
  return i8_align64(static_cast<size_t>(rows * cols) + 64);
}
inline size_t i8_row_sum_offset(int64_t rows, int64_t cols) {
  return i8_scale_offset(rows, cols) + i8_align64(static_cast<size_t>(rows) * 4);
}
inline size_t i8_weight_bytes(int64_t rows, int64_t cols) {
  return i8_row_sum_offset(rows, cols) + i8_align64(static_cast<size_t>(rows) * 4);
}

// A read-only view of the three arrays.
struct I8WeightView {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const int32_t* row_sum = nullptr;
};
inline I8WeightView i8_weight_view(const void* base, int64_t rows, int64_t cols) {
  const char* b = static_cast<const char*>(base);
  return {reinterpret_cast<const int8_t*>(b),
          reinterpret_cast<const float*>(b + i8_scale_offset(rows, cols)),
          reinterpret_cast<const int32_t*>(b + i8_row_sum_offset(rows, cols))};
}

// Quantises one f32 row of `cols` values: q[cols], *scale, *row_sum.
void quantize_row_i8(const float* w, int64_t cols, int8_t* q, float* scale, int32_t* row_sum);
// Quantises an f32 activation row symmetrically: q[i] = round(x[i] / s), s = max|x| / 127; returns
// s (0 for an all-zero row, whose q is all zero; NaN, with q all zero, for a row holding an Inf or NaN, so the
// projection's outputs are NaN). Used per token by the int8 linear.
float quantize_act_row_i8(const float* x, int64_t cols, int8_t* q);

}  // namespace rl
