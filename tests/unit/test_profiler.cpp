// StepProfiler: the Chrome-trace JSON it writes, with the kernel track (--profile-kernels) beside the host spans.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/profiler.h"

namespace rl {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(StepProfiler, DisabledWritesNothing) {
  StepProfiler p;
  p.span("schedule", 1.0, 0.5);
  p.kernel_span("k", 1.0, 0.5);
  EXPECT_EQ(p.num_events(), 0u);
  EXPECT_TRUE(p.write().is_ok());
}

TEST(StepProfiler, KernelSpansOnTheirOwnTrackWithCopiedEscapedNames) {
  const std::string path = ::testing::TempDir() + "rl_profiler_test.json";
  StepProfiler p;
  p.open(path);
  p.span("schedule", 10.0, 0.001, 0, 7);
  {
    std::string name = "ns::gemv<128, \"q\">";  // a temporary: the profiler must keep its own copy
    p.kernel_span(name, 9.5, 0.002);           // before the first host span: the trace starts here
    name = "overwritten";
  }
  p.kernel_span("ns::gemv<128, \"q\">", 10.0005, 0.0001);
  EXPECT_EQ(p.num_events(), 3u);
  ASSERT_TRUE(p.write().is_ok());
  const std::string j = read_file(path);
  std::remove(path.c_str());
  EXPECT_NE(j.find("\"name\":\"device kernels\""), std::string::npos) << j;
  // The kernel's quotes escaped; its start is the trace's zero, the host span 0.5 s (500000 µs) later.
  EXPECT_NE(j.find("{\"name\":\"ns::gemv<128, \\\"q\\\">\",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":0.000,\"dur\":2000.000}"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"name\":\"schedule\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":500000.000,\"dur\":1000.000,"
                   "\"args\":{\"step\":7}}"),
            std::string::npos)
      << j;
  EXPECT_EQ(j.find("overwritten"), std::string::npos);
}

TEST(StepProfiler, UnwritablePathNamesTheFile) {
  StepProfiler p;
  p.open("/nonexistent-dir/trace.json");
  p.span("schedule", 1.0, 0.5);
  const Status st = p.write();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace rl
