// A hint for spin-wait loops: the pause instruction on x86 (the core yields issue slots to its sibling and the loop
// leaves the memory pipeline alone), a scheduler yield elsewhere.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#else
#include <thread>
#endif

namespace rl {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace rl
