// bench serve's statistics: percentiles as numpy.percentile (linear interpolation) computes them.
#include <gtest/gtest.h>

#include "server/serve_bench.h"

namespace rl::server {
namespace {

TEST(ServeBenchTest, PercentilesInterpolateLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) == [2.5, 3.7, 3.97]
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
}

TEST(ServeBenchTest, SummarySortsAndAverages) {
  Summary s = summarize({10, 0, 5});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_DOUBLE_EQ(s.median, 5);
  EXPECT_DOUBLE_EQ(s.p90, 9);  // numpy.percentile([0, 5, 10], 90)
  Summary empty = summarize({});
  EXPECT_EQ(empty.mean, 0);
  EXPECT_EQ(empty.p99, 0);
}

TEST(ServeBenchTest, PrometheusSumAddsEveryLabelSetOfOneMetric) {
  const std::string text =
      "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.\n"
      "# TYPE vllm:prefix_cache_hits_total counter\n"
      "vllm:prefix_cache_hits_total{model_name=\"a\"} 30\n"
      "vllm:prefix_cache_hits_total{model_name=\"b\"} 12.5\n"
      "vllm:prefix_cache_hits_total_extra 1000\n"
      "vllm:prefix_cache_queries_total 100\n";
  EXPECT_DOUBLE_EQ(prometheus_sum(text, "vllm:prefix_cache_hits_total"), 42.5);
  EXPECT_DOUBLE_EQ(prometheus_sum(text, "vllm:prefix_cache_queries_total"), 100);
  EXPECT_EQ(prometheus_sum(text, "vllm:num_requests_running"), -1);
  EXPECT_EQ(prometheus_sum("", "vllm:prefix_cache_hits_total"), -1);
  EXPECT_EQ(prometheus_sum("vllm:prefix_cache_hits_total abc\n", "vllm:prefix_cache_hits_total"), -1);
}

TEST(ServeBenchTest, BadConfigIsAnError) {
  ServeBenchConfig c;
  c.num_prompts = 0;
  EXPECT_FALSE(run_serve_bench(c));
  c.num_prompts = 1;
  c.url = "ftp://x";
  auto r = run_serve_bench(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("http://"), std::string::npos);
}

}  // namespace
}  // namespace rl::server
