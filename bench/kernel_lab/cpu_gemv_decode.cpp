// CPU lab: the decode GEMVs of a whole Qwen3-0.6B step (28 layers of qkv [4096, 1024], o [1024, 2048], gate_up
// [6144, 1024], down [1024, 3072], then lm_head [151936, 1024]), bf16 and int8 weights, numbered kernel versions
// alternated step by step in one process, so that this host's bandwidth swings (2x within minutes on the 2-vCPU
// build machine) hit every version alike. Threads claim 16-row chunks as CpuBackend::linear does (guided).
// Not part of the build (AVX-512 BF16 + VNNI only):
//   cmake --build --preset cpu --target rl_core
//   g++ -O2 -std=c++20 -march=x86-64-v3 -Isrc bench/kernel_lab/cpu_gemv_decode.cpp build/cpu/src/librl_core.a
//       -lpthread -o /tmp/cpu_gemv_decode && /tmp/cpu_gemv_decode [ROUNDS=31] [THREADS=2]
// Prints, per version, the median step time (range) and the weight bytes streamed per second.
//
// Versions (promoted: v2, src/backend/cpu/cpu_kernels_avx512_bf16.cpp gemv16_bf16 / gemv16_i8):
//   v1  each row read to its end, 4 vectors per iteration into four accumulators; int8 results scaled one by one
//   v2  8 vectors (512 bytes) per iteration into two accumulators; int8 results scaled in one vector
// Measured 2026-12-03 (session 14), AMD EPYC (Zen 4, 2 vCPUs under KVM), medians of 31-41 steps, ms per step:
//   2 threads  bf16 v1 37.4 / 39.6, v2 36.2 / 37.4;  int8 v1 22.9 / 22.0 / 19.5 / 21.2, v2 20.7 / 20.8 / 18.6 / 19.4
//   1 thread   bf16 v1 50.8, v2 43.4;                int8 v1 30.6 / 25.4, v2 24.4 / 21.9
// Not kept: software prefetch 1-4 KiB ahead in the row (bf16 53 -> 61 ms, int8 31 -> 34-36 ms: slower); the
// activations pre-offset to u8 once per call instead of x ^ 0x80 per load (within noise); two rows interleaved in
// one pass (int8 20 -> 30 ms); K as a template parameter with the row loop unrolled (within 3 % of v2); rows owned
// per thread with work stealing instead of guided claims (equal); x 64-byte aligned or not (equal).
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include "core/thread_pool.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c")
#include "backend/cpu/cpu_kernels_avx512_inl.h"

namespace {

using rl::ThreadPool;
using rl::avx512_inl::reduce16;
using rl::avx512_inl::reduce16_epi32;

struct Weights {
  int64_t n, k;
  const uint16_t* bf16;
  const int8_t* q;
  const float* scale;
  const int32_t* row_sum;
};

// x: k bf16 (zero-padded to a multiple of 32), y[j0, j0 + 16).
void bf16_v1(const uint16_t* x, const Weights& w, int64_t j0, float* y) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) {
    const uint16_t* row = w.bf16 + (j0 + j) * w.k;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < w.k; i += 128) {
      for (int u = 0; u < 4; ++u) {
        a[u] = _mm512_dpbf16_ps(a[u], reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + i + 32 * u)),
                                reinterpret_cast<__m512bh>(_mm512_loadu_si512(row + i + 32 * u)));
      }
    }
    acc[j] = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
  }
  _mm512_storeu_ps(y + j0, reduce16(acc));
}

void bf16_v2(const uint16_t* x, const Weights& w, int64_t j0, float* y) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) {
    const uint16_t* row = w.bf16 + (j0 + j) * w.k;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (int64_t i = 0; i < w.k; i += 256) {
      for (int u = 0; u < 256; u += 64) {
        a0 = _mm512_dpbf16_ps(a0, reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + i + u)),
                              reinterpret_cast<__m512bh>(_mm512_loadu_si512(row + i + u)));
        a1 = _mm512_dpbf16_ps(a1, reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + i + u + 32)),
                              reinterpret_cast<__m512bh>(_mm512_loadu_si512(row + i + u + 32)));
      }
    }
    acc[j] = _mm512_add_ps(a0, a1);
  }
  _mm512_storeu_ps(y + j0, reduce16(acc));
}

// x: k int8, y = (Σ (x + 128) q - 128 row_sum) · x_scale · scale.
void int8_v1(const int8_t* x, const Weights& w, int64_t j0, float* y) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[16];
  for (int j = 0; j < 16; ++j) {
    const int8_t* row = w.q + (j0 + j) * w.k;
    __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int64_t i = 0; i < w.k; i += 256) {
      for (int u = 0; u < 4; ++u) {
        a[u] = _mm512_dpbusd_epi32(a[u], _mm512_xor_si512(_mm512_loadu_si512(x + i + 64 * u), offset),
                                   _mm512_loadu_si512(row + i + 64 * u));
      }
    }
    acc[j] = _mm512_add_epi32(_mm512_add_epi32(a[0], a[1]), _mm512_add_epi32(a[2], a[3]));
  }
  alignas(64) int32_t sums[16];
  _mm512_store_si512(sums, reduce16_epi32(acc));
  for (int j = 0; j < 16; ++j) {
    y[j0 + j] = static_cast<float>(sums[j] - 128 * w.row_sum[j0 + j]) * 0.01f * w.scale[j0 + j];
  }
}

void int8_v2(const int8_t* x, const Weights& w, int64_t j0, float* y) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[16];
  for (int j = 0; j < 16; ++j) {
    const int8_t* row = w.q + (j0 + j) * w.k;
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    for (int64_t i = 0; i < w.k; i += 512) {
      for (int u = 0; u < 512; u += 128) {
        a0 = _mm512_dpbusd_epi32(a0, _mm512_xor_si512(_mm512_loadu_si512(x + i + u), offset),
                                 _mm512_loadu_si512(row + i + u));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_xor_si512(_mm512_loadu_si512(x + i + u + 64), offset),
                                 _mm512_loadu_si512(row + i + u + 64));
      }
    }
    acc[j] = _mm512_add_epi32(a0, a1);
  }
  const __m512i s = _mm512_sub_epi32(reduce16_epi32(acc), _mm512_slli_epi32(_mm512_loadu_si512(w.row_sum + j0), 7));
  _mm512_storeu_ps(y + j0, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(0.01f)),
                                         _mm512_loadu_ps(w.scale + j0)));
}

// fn(n0, n1) over 16-row chunks, guided as CpuBackend::linear's for_column_chunks.
template <typename F>
void for_column_chunks(ThreadPool& pool, int64_t n, F&& fn) {
  const int64_t share = 2 * pool.num_threads();
  std::atomic<int64_t> next{0};
  pool.run_on_all([&](int) {
    int64_t b = next.load(std::memory_order_relaxed), e;
    for (;;) {
      do {
        if (b >= n) return;
        e = std::min(n, b + std::max<int64_t>(16, ((n - b) / share + 15) / 16 * 16));
      } while (!next.compare_exchange_weak(b, e, std::memory_order_relaxed));
      fn(b, e);
      b = next.load(std::memory_order_relaxed);
    }
  });
}

// Resident, 2 MiB-aligned, advised as huge pages (as CpuBackend::alloc).
void* alloc_huge(size_t n) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t r = (n + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, r);
  if (p == nullptr) std::abort();
  madvise(p, r, MADV_HUGEPAGE);
  std::memset(p, 1, r);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 31;
  ThreadPool pool(argc > 2 ? std::atoi(argv[2]) : 2);
  const int64_t layer[4][2] = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
  std::vector<Weights> ws;
  double bytes_bf16 = 0;
  auto add = [&](int64_t n, int64_t k) {
    auto* scale = static_cast<float*>(alloc_huge(static_cast<size_t>(n) * 4));
    auto* row_sum = static_cast<int32_t*>(alloc_huge(static_cast<size_t>(n) * 4));
    for (int64_t i = 0; i < n; ++i) scale[i] = 1e-3f, row_sum[i] = 0;
    ws.push_back({n, k, static_cast<const uint16_t*>(alloc_huge(static_cast<size_t>(n * k) * 2)),
                  static_cast<const int8_t*>(alloc_huge(static_cast<size_t>(n * k))), scale, row_sum});
    bytes_bf16 += 2.0 * static_cast<double>(n * k);
  };
  for (int l = 0; l < 28; ++l)
    for (const auto& s : layer) add(s[0], s[1]);
  add(151936, 1024);
  std::vector<uint16_t> xb(4096, 0x3f80);
  std::vector<int8_t> xq(4096, 3);
  std::vector<float> y(151936);
  struct Version {
    const char* name;
    bool bf16;
    void (*bf16_fn)(const uint16_t*, const Weights&, int64_t, float*);
    void (*int8_fn)(const int8_t*, const Weights&, int64_t, float*);
  };
  const Version versions[] = {{"bf16 v1", true, bf16_v1, nullptr}, {"bf16 v2", true, bf16_v2, nullptr},
                              {"int8 v1", false, nullptr, int8_v1}, {"int8 v2", false, nullptr, int8_v2}};
  std::vector<std::vector<double>> t(std::size(versions));
  for (int r = 0; r < rounds; ++r) {
    for (size_t v = 0; v < std::size(versions); ++v) {
      const Version& ver = versions[v];
      const auto t0 = std::chrono::steady_clock::now();
      for (const Weights& w : ws) {
        for_column_chunks(pool, w.n, [&](int64_t b, int64_t e) {
          for (int64_t j = b; j < e; j += 16) {
            if (ver.bf16) {
              ver.bf16_fn(xb.data(), w, j, y.data());
            } else {
              ver.int8_fn(xq.data(), w, j, y.data());
            }
          }
        });
      }
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  for (size_t v = 0; v < std::size(versions); ++v) {
    std::vector<double> s = t[v];
    std::sort(s.begin(), s.end());
    const double med = s[s.size() / 2], bytes = versions[v].bf16 ? bytes_bf16 : bytes_bf16 / 2;
    std::printf("%-8s median %.2f ms (%.2f-%.2f), %.1f GB/s\n", versions[v].name, med * 1e3, s.front() * 1e3,
                s.back() * 1e3, bytes / med / 1e9);
  }
  return 0;
}
