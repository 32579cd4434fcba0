// CudaBackend::upload_async / download_async: copies of at most kCopyKernelMaxBytes between alloc_pinned memory and
// the device run as a kernel in the stream (launch_copy_bytes), the rest through the copy engine. Every size and
// alignment below must arrive byte for byte on both paths, in stream order with the kernels around it; a pageable
// host buffer, or a range running past the end of its pinned block, takes the copy engine.
#include "backend/cuda/kernel_config.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// The backend's copy path for a scope, restored at its end (also where an assertion returns early).
class CopyPath {
 public:
  explicit CopyPath(bool kernel) : saved_(cuda().copy_kernel()) { cuda().set_copy_kernel(kernel); }
  ~CopyPath() { cuda().set_copy_kernel(saved_); }
  CopyPath(const CopyPath&) = delete;
  CopyPath& operator=(const CopyPath&) = delete;

 private:
  bool saved_;
};

// One round trip: host pattern → (pinned, at offset) → device (at offset) → pinned (other block) → compared.
void round_trip(size_t n, size_t host_off, size_t dev_off, uint32_t seed) {
  CudaBackend& be = cuda();
  const size_t cap = n + 64;
  uint8_t* src = static_cast<uint8_t*>(be.alloc_pinned(cap));
  uint8_t* dst = static_cast<uint8_t*>(be.alloc_pinned(cap));
  void* dev = be.alloc(cap);
  const std::vector<uint8_t> want = pattern(n, seed);
  std::memcpy(src + host_off, want.data(), n);
  std::memset(dst, 0xEE, cap);
  be.upload_async(static_cast<uint8_t*>(dev) + dev_off, src + host_off, n);
  // The upload is in stream order: overwrite the pinned source only after it ran.
  be.download_async(dst + host_off, static_cast<uint8_t*>(dev) + dev_off, n);
  be.synchronize();
  EXPECT_EQ(std::memcmp(dst + host_off, want.data(), n), 0)
      << n << " bytes, host offset " << host_off << ", device offset " << dev_off
      << (be.copy_kernel() ? " (copy kernel)" : " (copy engine)");
  // Nothing outside the range was written.
  for (size_t i = 0; i < host_off; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " before the range";
  for (size_t i = host_off + n; i < cap; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " after the range";
  be.free(dev);
  be.free_pinned(src);
  be.free_pinned(dst);
}

TEST(CudaCopy, SmallCopiesByKernelAndLargeByCopyEngine) {
  const size_t max = static_cast<size_t>(cuda::kCopyKernelMaxBytes);
  for (const bool kernel : {true, false}) {
    CopyPath path(kernel);
    uint32_t seed = 1;
    for (size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{17}, size_t{4096}, size_t{4100}, max - 1, max, max + 16,
                     size_t{1} << 20}) {
      for (const auto& [host_off, dev_off] : {std::pair<size_t, size_t>{0, 0}, {16, 32}, {3, 0}, {0, 5}, {7, 9}}) {
        round_trip(n, host_off, dev_off, seed++);
      }
    }
  }
}

// Pageable host memory (not from alloc_pinned) and a range past the end of a pinned block never reach the kernel:
// the results are still exact through the copy engine.
TEST(CudaCopy, PageableMemoryAndOverrunsTakeTheCopyEngine) {
  CudaBackend& be = cuda();
  CopyPath path(true);
  const std::vector<uint8_t> want = pattern(1000, 42);
  std::vector<uint8_t> pageable(want), back(1000, 0);
  void* dev = be.alloc(2048);
  be.upload_async(dev, pageable.data(), pageable.size());
  be.download_async(back.data(), dev, back.size());
  be.synchronize();
  EXPECT_EQ(back, want);
  // Two adjacent pinned blocks: a copy from the first that runs into the second is not inside one block.
  uint8_t* a = static_cast<uint8_t*>(be.alloc_pinned(512));
  uint8_t* b = static_cast<uint8_t*>(be.alloc_pinned(512));
  std::memcpy(a, want.data(), 512);
  std::memset(b, 0, 512);
  be.upload_async(dev, a, 512);
  be.download_async(b, dev, 512);
  be.synchronize();
  EXPECT_EQ(std::memcmp(b, want.data(), 512), 0);
  be.free(dev);
  be.free_pinned(a);
  be.free_pinned(b);
}

// In stream order with kernels: a kernel writes the device buffer, the download reads it, the next upload
// overwrites it and a kernel reads that: each copy sees the kernel before it (the copy kernel waits for its
// predecessor under PDL).
TEST(CudaCopy, OrderedWithTheKernelsAroundIt) {
  CudaBackend& be = cuda();
  for (const bool kernel : {true, false}) {
    CopyPath path(kernel);
    const int64_t n = 4096;
    Owned x = make(be, DType::kF32, {n});
    Owned y = make(be, DType::kF32, {n});
    Owned z = make(be, DType::kBF16, {n});
    float* pin = static_cast<float*>(be.alloc_pinned(n * 4));
    for (int round = 0; round < 4; ++round) {
      be.fill_uniform(x.t, 100 + round, -1.0f, 1.0f);  // a kernel writes x
      be.download_async(pin, x.t.data, n * 4);          // then the copy reads it
      be.synchronize();
      const std::vector<float> xs = read_f32(be, x.t);
      ASSERT_EQ(std::memcmp(pin, xs.data(), n * 4), 0) << "round " << round << (kernel ? " (copy kernel)" : "");
      for (int64_t i = 0; i < n; ++i) pin[i] = static_cast<float>(i % 200 + round);  // exact in bf16
      be.upload_async(y.t.data, pin, n * 4);  // the copy writes y
      be.cast(y.t, z.t);                      // then a kernel reads it
      const std::vector<float> zs = read_f32(be, z.t);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(zs[i], static_cast<float>(i % 200 + round)) << "element " << i;
    }
    be.free_pinned(pin);
  }
}

}  // namespace
}  // namespace rl::ops_test
