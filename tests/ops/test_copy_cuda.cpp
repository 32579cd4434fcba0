// CudaBackend::upload_async / download_async: copies of at most kCopyKernelMaxBytes between alloc_pinned memory and
// the device run as a kernel in the stream (launch_copy_bytes), the rest through the copy engine. Every size and
// alignment below must arrive byte for byte on both paths, in stream order with the kernels around it; a pageable
// host buffer, or a range running past the end of its pinned block, takes the copy engine. upload_many_async (a
// step's staging: several copies as one kernel, the pending input ids resolved on the way) must give what the
// copies one by one and resolve_pending_ids give, for every mix of sizes, alignments and paths.
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

// One upload_many_async case: copy i takes sizes[i] bytes from host_at[i] of one pinned block to dev_at[i] of one
// device block; with ids_in >= 0, num_ids i32 ids at word ids_at of copy ids_in's destination hold pending
// references among plain ids. The result must be what the copies one by one and resolve_pending_ids give.
struct ManyCase {
  std::vector<size_t> sizes, host_at, dev_at;
  int ids_in = -1;
  size_t ids_at = 0, num_ids = 0;
};

void check_many(const ManyCase& mc, uint32_t seed) {
  CudaBackend& be = cuda();
  size_t cap = 64;
  for (size_t i = 0; i < mc.sizes.size(); ++i) {
    cap = std::max(cap, std::max(mc.host_at[i], mc.dev_at[i]) + mc.sizes[i]);
  }
  uint8_t* pin = static_cast<uint8_t*>(be.alloc_pinned(cap));
  uint8_t* back = static_cast<uint8_t*>(be.alloc_pinned(cap));
  uint8_t* dev = static_cast<uint8_t*>(be.alloc(cap));
  const std::vector<uint8_t> bytes = pattern(cap, seed);
  std::memcpy(pin, bytes.data(), cap);
  std::vector<Backend::PinnedUpload> ups;
  for (size_t i = 0; i < mc.sizes.size(); ++i) ups.push_back({dev + mc.dev_at[i], pin + mc.host_at[i], mc.sizes[i]});
  // The previous step's sampled ids (device; row 5 failed) and pending references to them in the staged ids.
  const int64_t num_sampled = 64;
  std::vector<int32_t> sampled(num_sampled);
  for (int64_t k = 0; k < num_sampled; ++k) {
    sampled[static_cast<size_t>(k)] = k == 5 ? -1 : 1000 + static_cast<int32_t>(k);
  }
  Owned sampled_dev = make(be, DType::kI32, {num_sampled});
  be.upload(sampled_dev.t.data, sampled.data(), sampled.size() * 4);
  std::vector<int32_t> resolved(mc.num_ids);
  Backend::PendingIds pending;
  if (mc.ids_in >= 0) {
    const size_t c = static_cast<size_t>(mc.ids_in);
    for (size_t j = 0; j < mc.num_ids; ++j) {
      // Every third a pending reference (one of them to row 5: token 0), the rest plain ids.
      const int32_t v = j % 3 == 0 ? -static_cast<int32_t>((j * 7) % num_sampled) - 1 : static_cast<int32_t>(j);
      std::memcpy(pin + mc.host_at[c] + (mc.ids_at + j) * 4, &v, 4);
      resolved[j] = v < 0 ? std::max(sampled[static_cast<size_t>(-v - 1)], 0) : v;
    }
    pending.ids = Tensor(dev + mc.dev_at[c] + mc.ids_at * 4, DType::kI32, {static_cast<int64_t>(mc.num_ids)});
    pending.sampled = sampled_dev.t;
  }
  std::vector<uint8_t> want(cap, 0xAB);
  be.upload(dev, want.data(), cap);
  for (size_t i = 0; i < mc.sizes.size(); ++i) {
    std::memcpy(want.data() + mc.dev_at[i], pin + mc.host_at[i], mc.sizes[i]);
  }
  if (mc.ids_in >= 0) {
    std::memcpy(want.data() + mc.dev_at[static_cast<size_t>(mc.ids_in)] + mc.ids_at * 4, resolved.data(),
                mc.num_ids * 4);
  }
  be.upload_many_async(ups.data(), ups.size(), mc.ids_in >= 0 ? &pending : nullptr);
  be.download_async(back, dev, cap);
  be.synchronize();
  for (size_t i = 0; i < cap; ++i) {
    ASSERT_EQ(back[i], want[i]) << "byte " << i << " of " << mc.sizes.size() << " copies, seed " << seed
                                << (be.copy_kernel() ? " (copy kernel)" : " (copy engine)");
  }
  be.free(dev);
  be.free_pinned(pin);
  be.free_pinned(back);
}

TEST(CudaCopy, ManyUploadsAsOneWithPendingIdsResolved) {
  const size_t max = static_cast<size_t>(cuda::kCopyKernelMaxBytes);
  uint32_t seed = 100;
  for (const bool kernel : {true, false}) {
    CopyPath path(kernel);
    // A step's staging: ids at the start of an aligned copy, the sampling parameters beside it.
    check_many({{4096, 384}, {0, 8192}, {0, 8192}, 0, 0, 100}, seed++);
    // Ids that start and end inside 16-byte chunks, in the second of three copies; odd sizes and offsets around.
    check_many({{17, 1028, 3}, {0, 64, 2005}, {0, 64, 2007}, 1, 3, 37}, seed++);
    // Both sides on words, not on 16 bytes: the ids go a word at a time.
    check_many({{2000, 64}, {4, 4096}, {8, 4096}, 0, 10, 200}, seed++);
    // The host side off the words (the kernel cannot resolve there): the copies one by one, then the resolve.
    check_many({{1001, 64}, {0, 4098}, {0, 4096}, 1, 2, 10}, seed++);
    // A size off the words: the same.
    check_many({{1000, 802}, {0, 4096}, {0, 4096}, 1, 4, 150}, seed++);
    // No pending ids; the most copies one kernel takes, and one more (with ids); a copy too large for the kernel.
    check_many({{100, 200, 300, 400}, {0, 512, 1024, 2048}, {0, 512, 1024, 2048}}, seed++);
    check_many({{100, 200, 300, 400, 500}, {0, 512, 1024, 2048, 4096}, {0, 512, 1024, 2048, 4096}, 4, 1, 50},
               seed++);
    check_many({{max + 64, 256}, {0, max + 128}, {0, max + 128}, 1, 0, 64}, seed++);
    // Empty copies among the others.
    check_many({{0, 512, 0}, {0, 0, 1024}, {0, 0, 1024}, 1, 0, 128}, seed++);
  }
}

}  // namespace
}  // namespace rl::ops_test
