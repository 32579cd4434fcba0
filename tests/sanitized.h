// Whether this test binary runs under AddressSanitizer (the asan preset), where wall-clock bounds meant for an
// optimised build do not hold: tests that bound time check growth everywhere and absolute time only when false.
#pragma once

namespace rl {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace rl
