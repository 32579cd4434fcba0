// The benchmark result format: JSON round trip, validation errors, % of roofline, the terminal table.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/file.h"
#include "perf/bench_report.h"

namespace rl::perf {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const std::string kFixture = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/perf/llama_cpp_h200.json";

TEST(PerfBenchReport, RoundTrip) {
  BenchReport r;
  r.command = "bench latency";
  r.date = "2026-11-29T10:00:00Z";
  r.commit = "abc1234";
  r.gpu = "H200 (measured)";
  r.device = "cuda:0";
  r.model = "Qwen3-0.6B";
  BenchResult d;
  d.name = "decode";
  d.unit = "tok/s";
  d.measured = 500;
  d.predicted = 3565;
  d.peer = 664;
  d.peer_name = "llama.cpp";
  d.batch = 1;
  d.context = 256;
  d.intensity = 1.0;
  d.achieved_tflops = 0.6;
  r.results.push_back(d);
  BenchResult bare;
  bare.name = "load";
  bare.unit = "s";
  bare.measured = 0.25;
  r.results.push_back(bare);

  std::string path = std::string(RIDGELINE_BINARY_DIR) + "/test_perf_report.json";
  ASSERT_TRUE(write_bench_report(path, r).is_ok());
  auto back = load_bench_report(path);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->command, "bench latency");
  EXPECT_EQ(back->commit, "abc1234");
  EXPECT_EQ(back->model, "Qwen3-0.6B");
  ASSERT_EQ(back->results.size(), 2u);
  EXPECT_EQ(back->results[0].peer_name, "llama.cpp");
  EXPECT_DOUBLE_EQ(*back->results[0].peer, 664);
  EXPECT_EQ(*back->results[0].context, 256);
  EXPECT_FALSE(back->results[1].predicted.has_value());
  EXPECT_FALSE(back->results[1].batch.has_value());
  // Unset optionals are not written at all.
  Json j = bench_report_to_json(r);
  EXPECT_FALSE(j["results"][1].contains("predicted"));
  for (const char* key : {"command", "date", "commit", "gpu", "device", "model", "results"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

TEST(PerfBenchReport, ValidationNamesTheField) {
  auto missing = parse_bench_report(Json::parse(R"({"command": "x", "results": [
      {"name": "a", "unit": "tok/s", "measured": 1}, {"name": "b", "unit": "tok/s"}]})"),
                                    "r.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(contains(missing.message(), "r.json: results[1]: missing required key \"measured\""))
      << missing.message();
  auto wrong = parse_bench_report(Json::parse(R"({"command": "x", "results": [
      {"name": "a", "unit": "tok/s", "measured": "fast"}]})"),
                                  "r.json");
  EXPECT_TRUE(contains(wrong.message(), "\"measured\" must be a number")) << wrong.message();
  EXPECT_TRUE(contains(parse_bench_report(Json::parse(R"({"command": "x"})"), "r.json").message(),
                       "\"results\" must be an array"));
  EXPECT_TRUE(contains(parse_bench_report(Json::parse("[1]"), "r.json").message(), "must be a JSON object"));
  EXPECT_FALSE(load_bench_report("/nonexistent/perf.json").is_ok());
}

TEST(PerfBenchReport, RooflinePercent) {
  // Rates: measured / predicted. llama.cpp's 208 tok/s against 264.6 predicted = 78.6 % (shared/gpu.md: ≈ 79 %).
  EXPECT_NEAR(*roofline_pct("tok/s", 208, 264.6), 78.61, 0.01);
  // Times: predicted / measured (lower is better). 10 ms predicted, 12.5 ms measured = 80 %.
  EXPECT_NEAR(*roofline_pct("ms", 12.5, 10), 80.0, 1e-9);
  EXPECT_FALSE(roofline_pct("tok/s", 0, 100).has_value());
  EXPECT_FALSE(roofline_pct("tok/s", 100, -1).has_value());
}

TEST(PerfBenchReport, TableFromFixture) {
  auto r = load_bench_report(kFixture);
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->results.size(), 5u);
  fill_roofline_pct(&*r);
  // 204 / 262.8 = 77.63 %; the tokenizer row is a time: 1.2 / 1.5 = 80 %.
  EXPECT_NEAR(*r->results[0].roofline_pct, 77.63, 0.01);
  EXPECT_NEAR(*r->results[4].roofline_pct, 80.0, 1e-9);
  std::string table = format_bench_table(*r);
  EXPECT_TRUE(contains(table, "measured")) << table;
  EXPECT_TRUE(contains(table, "% roofline")) << table;
  EXPECT_TRUE(contains(table, "77.6 %")) << table;
  EXPECT_TRUE(contains(table, "80.0 %")) << table;
  EXPECT_TRUE(contains(table, "llama.cpp prefill")) << table;
  // One header line plus one line per result.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 6);
}

TEST(PerfBenchReport, TimestampAndCommit) {
  std::string ts = utc_timestamp();
  ASSERT_EQ(ts.size(), 20u) << ts;
  EXPECT_EQ(ts[4], '-');
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
  // Not a repository: "" rather than an error.
  EXPECT_EQ(git_describe("/nonexistent-dir-for-perf-test"), "");
}

}  // namespace
}  // namespace rl::perf
