// Counter-based random numbers (splitmix64 finaliser): value i of stream `seed` is a pure function of
// (seed, i), so parallel and device implementations produce identical sequences.
#pragma once

#include <cstdint>

namespace rl {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
inline float uniform_from_counter(uint64_t seed, uint64_t i) {
  uint64_t r = mix64(seed ^ mix64(i));
  return static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
}

}  // namespace rl
