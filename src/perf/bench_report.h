// The result file every `ridgeline bench ... --json FILE` writes, and the terminal table of measured vs
// predicted. One report is one run of one command on one device:
// { "command", "date", "commit", "gpu", "device", "model", "results": [ BenchResult... ] }.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl::perf {

// One measured figure. Optional fields are written only when set.
struct BenchResult {
  std::string name;  // "decode", "prefill", "gemm 4096x14336", ...
  std::string unit;  // "tok/s", "ms", "TB/s", "TFLOP/s", ...
  double measured = 0;
  std::optional<double> predicted;     // the roofline's figure in the same unit
  std::optional<double> roofline_pct;  // measured as a % of the roofline (see roofline_pct())
  std::optional<double> peer;          // the peer's figure from the same run, same unit
  std::string peer_name;               // "llama.cpp", "torch", ...
  std::optional<int64_t> batch;
  std::optional<int64_t> context;
  std::optional<double> intensity;        // FLOP/byte of the measured work
  std::optional<double> achieved_tflops;  // FLOPs of the work / measured time
  std::optional<double> achieved_tbps;    // bytes of the work / measured time
};

struct BenchReport {
  std::string command;  // "bench latency", ...
  std::string date;     // ISO 8601 UTC
  std::string commit;   // git describe, or ""
  std::string gpu;      // the chip the roofline used ("H200 (measured)")
  std::string device;   // what ran it ("cuda:0 NVIDIA H200", "cpu")
  std::string model;
  std::vector<BenchResult> results;
};

// Lower is better for times ("s", "ms", "us", "ns"); higher for everything else.
bool unit_is_time(const std::string& unit);
// Percent of the roofline: measured / predicted for rates, predicted / measured for times. nullopt when either
// is not positive.
std::optional<double> roofline_pct(const std::string& unit, double measured, double predicted);
// Fills roofline_pct of every result that has a prediction but no percentage.
void fill_roofline_pct(BenchReport* report);

Json bench_report_to_json(const BenchReport& report);
// Validates types and required keys ("command", "results", each result's "name", "unit", "measured").
Result<BenchReport> parse_bench_report(const Json& j, const std::string& what);
Status write_bench_report(const std::string& path, const BenchReport& report);
Result<BenchReport> load_bench_report(const std::string& path);

// "2026-11-29T14:03:11Z" for now.
std::string utc_timestamp();
// `git describe --always --dirty` run in `dir`; "" when git or the repository is not there.
std::string git_describe(const std::string& dir);

// The terminal table: name, batch, context, measured, predicted, % of roofline, peer, unit.
std::string format_bench_table(const BenchReport& report);

}  // namespace rl::perf
