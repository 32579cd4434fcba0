// The roofline chart as a standalone SVG, drawn by hand: log-log axes (arithmetic intensity in FLOP/byte
// against attainable TFLOP/s), the roof (bandwidth slope, compute ceiling), the ridge point, the model's
// predicted decode and prefill points and, optionally, measured points from a benchmark report.
#pragma once

#include <string>
#include <vector>

#include "perf/bench_report.h"
#include "perf/roofline.h"

namespace rl::perf {

enum class PointKind { kDecode, kPrefill, kMeasured };

struct ChartPoint {
  std::string label;
  double intensity = 0;  // FLOP/byte
  double tflops = 0;     // attainable (predicted) or achieved (measured) TFLOP/s
  PointKind kind = PointKind::kDecode;
};

struct RooflineChart {
  std::string title;
  double bandwidth_tbps = 0;
  double peak_tflops = 0;
  std::vector<ChartPoint> points;
  std::vector<std::string> skipped;  // measured results without an intensity or achieved rate
};

// Decode points for every batch of the sweep, the prefill point, and each measured result that has an
// intensity and an achieved rate (achieved_tflops, or achieved_tbps x intensity).
RooflineChart make_roofline_chart(const RooflineAnalysis& a, const BenchReport* measured);

// Elements carry classes the tests look for: polyline.roof, circle.ridge, circle.decode, rect.prefill,
// circle.measured, text.label.
std::string render_roofline_svg(const RooflineChart& chart);

}  // namespace rl::perf
