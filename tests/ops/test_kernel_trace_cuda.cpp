// Per-kernel device spans on CUDA (Backend::start_kernel_trace / take_kernel_spans: CUPTI's activity API,
// kernel_trace.cpp), what --profile-kernels writes: kernels launched directly and from a CUDA graph come back once
// each, named, with positive durations, in start order, on now_seconds()'s clock; copy-engine copies as "memcpy ..."
// spans. The trace stays on for the rest
// of the process once started, so the device scripts run this test in a process of its own.
#include <cuda_runtime.h>

#include "core/log.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

TEST(CudaKernelTrace, RecordsKernelsInAndOutOfGraphs) {
  ASSERT_TRUE(cuda().start_kernel_trace().is_ok());
  const int64_t rows = 4, hidden = 1024;
  Owned x = make_bf16(cuda(), random_bf16_values(rows * hidden), {rows, hidden});
  Owned w = make_bf16(cuda(), random_bf16_values(hidden), {hidden});
  Owned out = make(cuda(), DType::kBF16, {rows, hidden});
  cuda().synchronize();
  (void)cuda().take_kernel_spans();  // what ran before this test, and the uploads above
  const double t0 = now_seconds();
  for (int i = 0; i < 3; ++i) cuda().rms_norm(x.t, w.t, out.t, NormParams{});
  cudaStream_t s = cuda().stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int i = 0; i < 2; ++i) cuda().rms_norm(x.t, w.t, out.t, NormParams{});
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  // Copy-engine copies come back too: one device-to-device (a same-dtype cast), one host-to-device (pageable
  // memory, which the copy kernel never takes).
  cuda().cast(out.t, x.t);
  const std::vector<uint16_t> host(64, 0);
  cuda().upload_async(x.t.data, host.data(), host.size() * 2);
  cuda().synchronize();
  const double t1 = now_seconds();
  const std::vector<Backend::KernelSpan> spans = cuda().take_kernel_spans();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  int norms = 0, d2d = 0, h2d = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Backend::KernelSpan& k = spans[i];
    if (i > 0) {
      EXPECT_LE(spans[i - 1].start, k.start) << "start order";
    }
    d2d += k.name == "memcpy DtoD";
    h2d += k.name == "memcpy HtoD";
    if (k.name.find("rms_norm_kernel") == std::string::npos) continue;
    ++norms;
    EXPECT_EQ(k.name.find('('), std::string::npos) << k.name << ": no argument list";
    EXPECT_GT(k.seconds, 0.0) << k.name;
    EXPECT_LT(k.seconds, 0.05) << k.name;
    // The clocks agree to well within the run (CUPTI's timestamps placed on now_seconds()).
    EXPECT_GT(k.start, t0 - 0.02) << k.name;
    EXPECT_LT(k.start + k.seconds, t1 + 0.02) << k.name;
  }
  EXPECT_EQ(norms, 5) << spans.size() << " spans";
  EXPECT_EQ(d2d, 1) << spans.size() << " spans";
  EXPECT_EQ(h2d, 1) << spans.size() << " spans";
  EXPECT_TRUE(cuda().take_kernel_spans().empty()) << "taken once";
}

}  // namespace
}  // namespace rl::ops_test
