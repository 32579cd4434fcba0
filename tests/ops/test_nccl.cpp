// The NCCL communicator (tensor parallelism on GPUs, issue 19) over every visible GPU: one rank per device, each
// rank's collectives on its own backend stream from its own thread. On a one-GPU machine the group has one rank
// (the sum is the identity); on more GPUs the sums and gathers cross devices. Integer-valued inputs make every
// sum exact whatever order NCCL reduces in.
#include <cuda_runtime_api.h>

#include <thread>

#include "backend/cuda/nccl_communicator.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(NcclGroup, AllReduceAndAllGatherOverEveryVisibleGpu) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  ASSERT_GE(n, 1);
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<CudaBackend*> ranks;
  for (int d = 0; d < n; ++d) {
    auto be = create_cuda_backend(d);
    ASSERT_TRUE(be.is_ok()) << be.message();
    owned.push_back(std::move(*be));
    ranks.push_back(static_cast<CudaBackend*>(owned.back().get()));
  }
  auto group = cuda::make_nccl_group(ranks);
  ASSERT_TRUE(group.is_ok()) << group.message();
  const int64_t len = 4099;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CudaBackend& be = *ranks[static_cast<size_t>(r)];
      RL_CHECK(cudaSetDevice(be.device_index()) == cudaSuccess);
      parallel::Communicator& c = *(*group)[static_cast<size_t>(r)];
      std::vector<float> x(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = static_cast<float>((i % 17) * (r + 1));
      DeviceBuffer dx(&be, x.size() * 4), dout(&be, x.size() * 4 * static_cast<size_t>(n));
      be.upload(dx.data(), x.data(), x.size() * 4);
      Tensor t(dx.data(), DType::kF32, {len});
      Status st = c.all_reduce_sum(t);
      if (st.is_ok()) st = c.all_gather(t, Tensor(dout.data(), DType::kF32, {len * n}));
      be.synchronize();
      std::vector<float> sum(x.size()), gathered(x.size() * static_cast<size_t>(n));
      be.download(sum.data(), dx.data(), sum.size() * 4);
      be.download(gathered.data(), dout.data(), gathered.size() * 4);
      const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
      for (int64_t i = 0; i < len && st.is_ok(); ++i) {
        const float want = static_cast<float>(i % 17) * ranks_sum;
        if (sum[static_cast<size_t>(i)] != want) st = Status::error("sum at " + std::to_string(i));
        for (int q = 0; q < n; ++q) {
          if (gathered[static_cast<size_t>(q * len + i)] != want) st = Status::error("gather at " + std::to_string(i));
        }
      }
      if (!st.is_ok()) failures[static_cast<size_t>(r)] = st.message();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(failures[static_cast<size_t>(r)].empty()) << "rank " << r << ": " << failures[r];
  std::printf("NCCL group: %d rank(s), %s\n", n, (*group)[0]->name().c_str());
}

TEST(NcclGroup, TwoRanksOnOneDeviceAreRefusedWithAClearError) {
  auto group = cuda::make_nccl_group({&cuda(), &cuda()});
  ASSERT_FALSE(group.is_ok());
  EXPECT_NE(group.message().find("one rank per GPU"), std::string::npos) << group.message();
}

}  // namespace
}  // namespace rl::ops_test
