// NCCL all-reduce bus bandwidth over every visible GPU (issue 19: the roofline's all-reduce term), through the
// engine's own communicators (backend/cuda/nccl_communicator.h): one thread per GPU, bf16 sums on each backend's
// stream, sizes 4 KB .. 64 MB by powers of two. Prints one line per size:
//   RESULT allreduce bytes=<n> us=<time per all-reduce> algbw_gbps=<bytes / time> busbw_gbps=<algbw 2 (N-1) / N>
// as nccl-tests defines them. Usage: rl_bench_nccl [num_gpus (default: all)] [iterations (default 50)].
#include <cuda_runtime_api.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/tp_support.h"

int main(int argc, char** argv) {
  int n = 0;
  cudaGetDeviceCount(&n);
  if (argc > 1) n = std::atoi(argv[1]);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  if (n < 1) {
    std::fprintf(stderr, "rl_bench_nccl: no CUDA device\n");
    return 1;
  }
  std::vector<std::unique_ptr<rl::CudaBackend>> be;
  std::vector<rl::CudaBackend*> raw;
  for (int r = 0; r < n; ++r) {
    be.push_back(std::make_unique<rl::CudaBackend>(r));
    raw.push_back(be.back().get());
  }
  auto comms = rl::cuda::make_nccl_group(raw);
  if (!comms.is_ok()) {
    std::fprintf(stderr, "rl_bench_nccl: %s\n", comms.message().c_str());
    return 1;
  }
  std::printf("ranks %d, %s\n", n, (*comms)[0]->name().c_str());
  constexpr size_t kMin = 4 << 10, kMax = 64 << 20;
  std::barrier sync(n);
  std::vector<std::thread> threads;
  std::vector<std::vector<double>> times(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      rl::CudaBackend& b = *raw[static_cast<size_t>(r)];
      rl::cuda::bind_thread(b);
      rl::parallel::Communicator& comm = *(*comms)[static_cast<size_t>(r)];
      void* buf = b.alloc(kMax);
      b.fill_zero(buf, kMax);
      cudaEvent_t start, stop;
      cudaEventCreate(&start);
      cudaEventCreate(&stop);
      for (size_t bytes = kMin; bytes <= kMax; bytes *= 2) {
        const rl::Tensor x(buf, rl::DType::kBF16, {static_cast<int64_t>(bytes / 2)});
        for (int i = 0; i < 5; ++i) (void)comm.all_reduce_sum(x);  // warm-up
        b.synchronize();
        sync.arrive_and_wait();
        cudaEventRecord(start, b.stream());
        for (int i = 0; i < iters; ++i) (void)comm.all_reduce_sum(x);
        cudaEventRecord(stop, b.stream());
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        times[static_cast<size_t>(r)].push_back(1e3 * ms / iters);
        sync.arrive_and_wait();
      }
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      b.free(buf);
    });
  }
  for (std::thread& t : threads) t.join();
  size_t i = 0;
  for (size_t bytes = kMin; bytes <= kMax; bytes *= 2, ++i) {
    double us = 0;
    for (int r = 0; r < n; ++r) us = std::max(us, times[static_cast<size_t>(r)][i]);  // the slowest rank
    const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    std::printf("RESULT allreduce bytes=%zu us=%.2f algbw_gbps=%.1f busbw_gbps=%.1f\n", bytes, us, algbw,
                algbw * 2.0 * (n - 1) / n);
  }
  comms->clear();
  return 0;
}
