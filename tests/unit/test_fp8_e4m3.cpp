// FP8 e4m3fn conversions (core/dtype.h), the FP8 KV cache's element type: the 256 codes' values, and rounding f32
// to the nearest code with ties to the even code, saturating at ±448, checked against a brute-force search over
// every finite code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace rl {
namespace {

// The value of code c from the format's definition, in double.
double code_value(int c) {
  const int exp = (c >> 3) & 0xF, man = c & 7;
  const double mag = exp == 0 ? man / 8.0 * std::ldexp(1.0, -6) : (1.0 + man / 8.0) * std::ldexp(1.0, exp - 7);
  return (c & 0x80) ? -mag : mag;
}

bool is_nan_code(int c) { return (c & 0x7f) == 0x7f; }

// The nearest finite code to x, ties to the code with an even mantissa (its last bit clear), saturating to ±448.
uint8_t brute_force(float x) {
  if (std::isnan(x)) return 0x7f;
  const double v = x;
  const int sign = std::signbit(x) ? 0x80 : 0;
  int best = -1;
  double best_err = std::numeric_limits<double>::infinity();
  for (int m = 0; m < 0x7f; ++m) {  // magnitudes 0 .. 448 (0x7e)
    const double err = std::abs(std::abs(v) - code_value(m));
    if (err < best_err || (err == best_err && (m & 1) == 0)) {
      best = m;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(Fp8E4M3, EveryCodeWidensToItsValue) {
  for (int c = 0; c < 256; ++c) {
    const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(f)) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), code_value(c)) << c;
    EXPECT_EQ(f32_to_fp8_e4m3(f), c) << "a code's own value rounds to itself: " << c;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_f32(0x80)));
}

TEST(Fp8E4M3, SaturatesAndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(463.99f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);  // nearest even would be 480, which e4m3fn lacks
  EXPECT_EQ(f32_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(inf), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-inf), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: a tie, to even (zero)
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);  // 1 + 1/16: a tie between 1 (0x38) and 1.125 (0x39), to even
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);  // 1.125 + 1/16: to 1.25 (0x3a, even)
}

// Every midpoint between neighbouring codes, and the floats either side of it, round as the brute force does.
TEST(Fp8E4M3, MidpointsRoundToEven) {
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = static_cast<float>(code_value(c)), hi = static_cast<float>(code_value(c + 1));
    const float mid = 0.5f * (lo + hi);  // exact: both are short binary fractions
    for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi}) {
      EXPECT_EQ(f32_to_fp8_e4m3(x), brute_force(x)) << x;
      EXPECT_EQ(f32_to_fp8_e4m3(-x), brute_force(-x)) << -x;
    }
  }
}

// Random floats over the whole range, log-uniform in magnitude from 2^-12 to 2^10.
TEST(Fp8E4M3, RandomFloatsRoundToTheNearestCode) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> e(-12.0f, 10.0f);
  std::bernoulli_distribution neg(0.5);
  for (int i = 0; i < 200000; ++i) {
    const float x = (neg(g) ? -1.0f : 1.0f) * std::exp2(e(g));
    ASSERT_EQ(f32_to_fp8_e4m3(x), brute_force(x)) << x;
  }
}

TEST(Fp8E4M3, ConvertsBuffersBothWays) {
  const float src[] = {0.3f, -2.7f, 500.0f, 1e-5f};
  uint8_t codes[4];
  convert_from_f32(src, codes, DType::kFP8E4M3, 4);
  float back[4];
  convert_to_f32(codes, DType::kFP8E4M3, back, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(codes[i], f32_to_fp8_e4m3(src[i]));
    EXPECT_EQ(back[i], fp8_e4m3_to_f32(codes[i]));
  }
  EXPECT_EQ(back[2], 448.0f);
  EXPECT_EQ(back[3], 0.0f);
  EXPECT_NEAR(back[0], 0.3f, 0.3f / 16);  // 3 mantissa bits: half a step is at most 1/16 of the value
  EXPECT_NEAR(back[1], -2.7f, 2.7f / 16);
}

}  // namespace
}  // namespace rl
