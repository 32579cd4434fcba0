// Metrics registry: the Prometheus text exposition is parsed back by an independent parser written from the
// format specification; concurrent updates lose nothing; engine metrics use vLLM's names.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/metrics.h"
#include "sched/scheduler.h"

namespace rl {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value;
};

struct Exposition {
  std::map<std::string, std::string> help;
  std::map<std::string, std::string> type;
  std::vector<Sample> samples;

  double value(const std::string& name, const std::map<std::string, std::string>& labels) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    ADD_FAILURE() << "no sample " << name;
    return NAN;
  }
};

// Parses text format 0.0.4; fails the test on any malformed line.
Exposition parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  std::string current_family;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      e.help[line.substr(7, sp - 7)] = line.substr(sp + 1);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      current_family = line.substr(7, sp - 7);
      EXPECT_TRUE(e.help.count(current_family)) << "TYPE before HELP: " << line;
      e.type[current_family] = line.substr(sp + 1);
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    EXPECT_EQ(s.name.rfind(current_family, 0), 0u) << "sample outside its family: " << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        std::string key;
        while (line[i] != '=') key += line[i++];
        EXPECT_EQ(line[i + 1], '"') << line;
        i += 2;
        std::string value;
        while (line[i] != '"') {
          if (line[i] == '\\') {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        ++i;
        if (line[i] == ',') ++i;
        s.labels[key] = value;
      }
      ++i;
    }
    EXPECT_EQ(line[i], ' ') << line;
    const std::string v = line.substr(i + 1);
    s.value = v == "+Inf" ? INFINITY : std::stod(v);
    e.samples.push_back(s);
  }
  return e;
}

TEST(Metrics, ExpositionParsesBack) {
  MetricsRegistry reg;
  reg.counter("req_total", "Requests.\nSecond line", {{"code", "200"}}).inc(3);
  reg.counter("req_total", "ignored", {{"code", "500"}}).inc();
  reg.gauge("temp", "A gauge.", {{"path", "a\"b\\c\nd"}}).set(-2.5);
  Histogram& h = reg.histogram("lat_seconds", "Latency.", {0.1, 1.0, 10.0}, {{"m", "x"}});
  for (double v : {0.05, 0.1, 0.5, 2.0, 100.0}) h.observe(v);
  const std::string text = reg.render();
  const Exposition e = parse(text);
  EXPECT_EQ(e.type.at("req_total"), "counter");
  EXPECT_EQ(e.type.at("temp"), "gauge");
  EXPECT_EQ(e.type.at("lat_seconds"), "histogram");
  EXPECT_EQ(e.help.at("req_total"), "Requests.\\nSecond line");
  EXPECT_EQ(e.value("req_total", {{"code", "200"}}), 3.0);
  EXPECT_EQ(e.value("req_total", {{"code", "500"}}), 1.0);
  EXPECT_EQ(e.value("temp", {{"path", "a\"b\\c\nd"}}), -2.5);
  EXPECT_EQ(e.value("lat_seconds_bucket", {{"m", "x"}, {"le", "0.1"}}), 2.0);  // le is inclusive
  EXPECT_EQ(e.value("lat_seconds_bucket", {{"m", "x"}, {"le", "1"}}), 3.0);
  EXPECT_EQ(e.value("lat_seconds_bucket", {{"m", "x"}, {"le", "10"}}), 4.0);
  EXPECT_EQ(e.value("lat_seconds_bucket", {{"m", "x"}, {"le", "+Inf"}}), 5.0);
  EXPECT_EQ(e.value("lat_seconds_count", {{"m", "x"}}), 5.0);
  EXPECT_NEAR(e.value("lat_seconds_sum", {{"m", "x"}}), 102.65, 1e-9);
  EXPECT_EQ(text.back(), '\n');
  // The same family is returned on re-registration.
  EXPECT_EQ(&reg.counter("req_total", "", {{"code", "200"}}), &reg.counter("req_total", "", {{"code", "200"}}));
}

TEST(Metrics, ConcurrentUpdatesLoseNothing) {
  MetricsRegistry reg;
  const int num_threads = 8;
  const int num_iters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&reg, t] {
      for (int i = 0; i < num_iters; ++i) {
        reg.counter("c_total", "c").inc();
        reg.gauge("g", "g").inc(2.0);
        reg.histogram("h", "h", {1.0, 2.0}).observe(i % 3);
        if (i % 1000 == 0) reg.counter("per_thread_total", "p", {{"t", std::to_string(t)}}).inc();
        if (i % 5000 == 0) (void)reg.render();
      }
    });
  }
  for (auto& th : threads) th.join();
  const Exposition e = parse(reg.render());
  EXPECT_EQ(e.value("c_total", {}), num_threads * num_iters);
  EXPECT_EQ(e.value("g", {}), 2.0 * num_threads * num_iters);
  EXPECT_EQ(e.value("h_count", {}), num_threads * num_iters);
  EXPECT_EQ(e.value("h_bucket", {{"le", "+Inf"}}), num_threads * num_iters);
  // i % 3 in {0, 1, 2}: 0 and 1 are <= 1; everything is <= 2.
  const int per_thread_le1 = (num_iters + 2) / 3 + (num_iters + 1) / 3;
  EXPECT_EQ(e.value("h_bucket", {{"le", "1"}}), num_threads * per_thread_le1);
  EXPECT_EQ(e.value("per_thread_total", {{"t", "3"}}), num_iters / 1000);
}

TEST(Metrics, EngineMetricsUseVllmNames) {
  MetricsRegistry reg;
  EngineMetrics m(reg, "tiny");
  double now = 0.0;
  SchedulerConfig c;
  c.kv.num_blocks = 32;
  c.kv.block_size = 4;
  Scheduler s(c, [&now] { return now; });
  SamplingParams p;
  p.max_tokens = 3;
  ASSERT_TRUE(s.add_request(Request("a", {1, 2, 3, 4, 5}, p)).ok());
  while (s.has_unfinished()) {
    now += 0.5;
    SchedulerOutput out = s.schedule();
    now += 0.25;
    UpdateResult u = s.update_from_output(out, std::vector<TokenId>(out.scheduled.size(), 7));
    m.update(s.stats());
    m.observe_step(u);
  }
  const Exposition e = parse(reg.render());
  const std::map<std::string, std::string> l{{"model_name", "tiny"}};
  EXPECT_EQ(e.value("vllm:num_requests_running", l), 0.0);
  EXPECT_EQ(e.value("vllm:prompt_tokens_total", l), 5.0);
  EXPECT_EQ(e.value("vllm:generation_tokens_total", l), 3.0);
  EXPECT_EQ(e.value("vllm:prefix_cache_queries_total", l), 5.0);
  EXPECT_EQ(e.value("vllm:num_preemptions_total", l), 0.0);
  EXPECT_EQ(e.value("vllm:time_to_first_token_seconds_count", l), 1.0);
  EXPECT_DOUBLE_EQ(e.value("vllm:time_to_first_token_seconds_sum", l), 0.75);  // arrival 0, first token 0.75
  EXPECT_EQ(e.value("vllm:inter_token_latency_seconds_count", l), 2.0);
  EXPECT_DOUBLE_EQ(e.value("vllm:inter_token_latency_seconds_sum", l), 1.5);
  EXPECT_DOUBLE_EQ(e.value("vllm:e2e_request_latency_seconds_sum", l), 2.25);
  EXPECT_EQ(e.value("vllm:request_success_total", {{"model_name", "tiny"}, {"finished_reason", "length"}}), 1.0);
  EXPECT_EQ(e.type.at("vllm:kv_cache_usage_perc"), "gauge");
}

}  // namespace
}  // namespace rl
