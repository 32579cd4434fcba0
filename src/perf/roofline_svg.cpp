#include "perf/roofline_svg.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "perf/format.h"

namespace rl::perf {

namespace {

constexpr double kWidth = 960, kHeight = 640;
constexpr double kLeft = 90, kRight = 40, kTop = 60, kBottom = 70;
const char* kDecodeColor = "#1f63c6";
const char* kPrefillColor = "#e07b00";
const char* kMeasuredColor = "#c8102e";

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) { return format_fixed(v, 1); }

// Log-log mapping of the plot area; ranges are whole decades.
struct Axes {
  double x_lo, x_hi, y_lo, y_hi;  // log10 of the data range
  double px(double intensity) const {
    return kLeft + (std::log10(intensity) - x_lo) / (x_hi - x_lo) * (kWidth - kLeft - kRight);
  }
  double py(double tflops) const {
    return kHeight - kBottom - (std::log10(tflops) - y_lo) / (y_hi - y_lo) * (kHeight - kTop - kBottom);
  }
};

Axes make_axes(const RooflineChart& c) {
  double ridge = c.peak_tflops / c.bandwidth_tbps;
  double x_min = ridge, x_max = ridge, y_min = c.peak_tflops, y_max = c.peak_tflops;
  for (const ChartPoint& p : c.points) {
    x_min = std::min(x_min, p.intensity);
    x_max = std::max(x_max, p.intensity);
    y_min = std::min(y_min, p.tflops);
    y_max = std::max(y_max, p.tflops);
  }
  Axes a;
  a.x_lo = std::floor(std::log10(x_min / 2));
  a.x_hi = std::ceil(std::log10(x_max * 3));
  a.y_lo = std::floor(std::log10(y_min / 2));
  a.y_hi = std::ceil(std::log10(y_max * 2));
  return a;
}

std::string tick_label(double exponent) {
  double v = std::pow(10.0, exponent);
  return v >= 1 ? format_count(static_cast<int64_t>(std::llround(v))) : format_g(v, 3);
}

std::string text(double x, double y, const std::string& s, const std::string& attrs) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + attrs + ">" + xml_escape(s) + "</text>\n";
}

void draw_grid(const Axes& a, std::string* out) {
  double x0 = kLeft, x1 = kWidth - kRight, y0 = kTop, y1 = kHeight - kBottom;
  *out += "<g class=\"grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n";
  for (double e = a.x_lo; e < a.x_hi; e += 1) {
    for (int k = 2; k <= 9; ++k) {
      double x = a.px(k * std::pow(10.0, e));
      *out += "<line x1=\"" + num(x) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x) + "\" y2=\"" + num(y1) + "\"/>\n";
    }
  }
  for (double e = a.y_lo; e < a.y_hi; e += 1) {
    for (int k = 2; k <= 9; ++k) {
      double y = a.py(k * std::pow(10.0, e));
      *out += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
    }
  }
  *out += "</g>\n<g class=\"decades\" stroke=\"#bdbdbd\" stroke-width=\"1\">\n";
  for (double e = a.x_lo; e <= a.x_hi; e += 1) {
    double x = a.px(std::pow(10.0, e));
    *out += "<line x1=\"" + num(x) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x) + "\" y2=\"" + num(y1) + "\"/>\n";
  }
  for (double e = a.y_lo; e <= a.y_hi; e += 1) {
    double y = a.py(std::pow(10.0, e));
    *out += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
  }
  *out += "</g>\n<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(x1 - x0) + "\" height=\"" +
          num(y1 - y0) + "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1\"/>\n";
  for (double e = a.x_lo; e <= a.x_hi; e += 1) {
    *out += text(a.px(std::pow(10.0, e)), y1 + 20, tick_label(e), "class=\"tick\" text-anchor=\"middle\"");
  }
  for (double e = a.y_lo; e <= a.y_hi; e += 1) {
    *out += text(x0 - 8, a.py(std::pow(10.0, e)) + 4, tick_label(e), "class=\"tick\" text-anchor=\"end\"");
  }
  *out += text((x0 + x1) / 2, kHeight - 22, "arithmetic intensity (FLOP/byte)",
               "class=\"axis\" text-anchor=\"middle\" font-size=\"15\"");
  *out += text(
      22, (y0 + y1) / 2, "attainable TFLOP/s",
      "class=\"axis\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 22 " + num((y0 + y1) / 2) + ")\"");
}

// Where the slope's "N TB/s" label goes: a sixth of the way (in log space) from where the slope enters the plot
// to the ridge, just above the line, where predicted points are rare (batch 1 already sits further right).
double slope_start(const RooflineChart& c, const Axes& a) {
  return std::max(std::pow(10.0, a.x_lo), std::pow(10.0, a.y_lo) / c.bandwidth_tbps);
}

void bandwidth_label_at(const RooflineChart& c, const Axes& a, double* x, double* y) {
  double x_start = slope_start(c, a);
  double ridge = c.peak_tflops / c.bandwidth_tbps;
  double at = x_start * std::pow(ridge / x_start, 1.0 / 6);
  *x = a.px(at) - 10;
  *y = a.py(at * c.bandwidth_tbps) - 10;
}

void draw_roof(const RooflineChart& c, const Axes& a, std::string* out) {
  double ridge = c.peak_tflops / c.bandwidth_tbps;
  // The slope enters the plot at the left edge or at the bottom edge, whichever it meets first.
  double x_start = slope_start(c, a);
  double x_end = std::pow(10.0, a.x_hi);
  *out += "<polyline class=\"roof\" fill=\"none\" stroke=\"#111\" stroke-width=\"2.5\" points=\"" + num(a.px(x_start)) +
          "," + num(a.py(x_start * c.bandwidth_tbps)) + " " + num(a.px(ridge)) + "," + num(a.py(c.peak_tflops)) + " " +
          num(a.px(x_end)) + "," + num(a.py(c.peak_tflops)) + "\"/>\n";
  double rx = a.px(ridge), ry = a.py(c.peak_tflops);
  *out += "<line class=\"ridge-drop\" x1=\"" + num(rx) + "\" y1=\"" + num(ry) + "\" x2=\"" + num(rx) + "\" y2=\"" +
          num(kHeight - kBottom) + "\" stroke=\"#111\" stroke-dasharray=\"4 4\" stroke-width=\"1\"/>\n";
  *out += "<circle class=\"ridge\" cx=\"" + num(rx) + "\" cy=\"" + num(ry) + "\" r=\"6\" fill=\"#111\"/>\n";
  // Low on the dashed drop line: the decode points crowd the slope just left of the ridge, the prefill point
  // sits on the ceiling to its right.
  *out += text(rx + 6, kHeight - kBottom - 10, "ridge " + format_g(ridge, 4) + " FLOP/byte",
               "class=\"label ridge-label\" font-size=\"13\"");
  *out += text(a.px(x_end) - 8, ry - 8, format_g(c.peak_tflops, 4) + " TFLOP/s peak",
               "class=\"label\" text-anchor=\"end\" font-size=\"13\"");
  // Bandwidth label along the slope, rotated to its angle.
  double x_label = 0, y_label = 0;
  bandwidth_label_at(c, a, &x_label, &y_label);
  double angle = -std::atan2(a.py(x_start * c.bandwidth_tbps) - ry, rx - a.px(x_start)) * 180 / std::numbers::pi;
  *out += text(x_label, y_label, format_g(c.bandwidth_tbps, 4) + " TB/s",
               "class=\"label\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(" + format_fixed(angle, 1) +
                   " " + num(x_label) + " " + num(y_label) + ")\"");
}

// Label placement: each label tries a few positions around its point and takes the first that overlaps no
// marker or label placed before it. Prefill and measured labels go first and are always drawn; a decode label
// with no free position is dropped (its marker keeps a <title>), as decode points crowd near the ridge.
struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

struct Placement {
  double dx, dy;
  const char* anchor;  // "start" | "middle" | "end"
};

constexpr double kLabelFont = 12, kCharWidth = 6.8;

Box label_box(double x, double y, const std::string& s, const char* anchor) {
  double w = kCharWidth * static_cast<double>(s.size());
  double left = std::string(anchor) == "start" ? x : std::string(anchor) == "end" ? x - w : x - w / 2;
  return {left, y - kLabelFont + 2, left + w, y + 3};
}

void draw_points(const RooflineChart& c, const Axes& a, std::string* out) {
  std::vector<Box> taken;
  // The legend, the bandwidth label on the slope and the ridge label are fixed.
  taken.push_back({kLeft, kTop, kLeft + 240, kTop + 70});
  double ridge = c.peak_tflops / c.bandwidth_tbps;
  taken.push_back(label_box(a.px(ridge) + 6, kHeight - kBottom - 10, "ridge 000.0 FLOP/byte", "start"));
  double bx = 0, by = 0;
  bandwidth_label_at(c, a, &bx, &by);
  taken.push_back({bx - 36, by - 30, bx + 36, by + 26});  // the rotated label's bounding box
  for (const ChartPoint& p : c.points) {
    double x = a.px(p.intensity), y = a.py(p.tflops);
    taken.push_back({x - 6, y - 6, x + 6, y + 6});
    std::string title = "<title>" + xml_escape(p.label) + ": " + format_g(p.intensity) + " FLOP/byte, " +
                        format_g(p.tflops) + " TFLOP/s</title>";
    switch (p.kind) {
      case PointKind::kDecode:
        *out += "<circle class=\"decode\" cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"5\" fill=\"" + kDecodeColor +
                "\">" + title + "</circle>\n";
        break;
      case PointKind::kPrefill:
        *out += "<rect class=\"prefill\" x=\"" + num(x - 6) + "\" y=\"" + num(y - 6) +
                "\" width=\"12\" height=\"12\" fill=\"" + kPrefillColor + "\">" + title + "</rect>\n";
        break;
      case PointKind::kMeasured:
        *out += "<circle class=\"measured\" cx=\"" + num(x) + "\" cy=\"" + num(y) +
                "\" r=\"5\" fill=\"none\" stroke-width=\"2.5\" stroke=\"" + kMeasuredColor + "\">" + title +
                "</circle>\n";
        break;
    }
  }
  static const std::vector<Placement> kDecodeSpots = {{7, 16, "start"}, {-7, -8, "end"}, {7, -8, "start"}};
  static const std::vector<Placement> kOtherSpots = {{0, 24, "middle"},  {9, 4, "start"},  {-9, 4, "end"},
                                                     {0, -12, "middle"}, {9, 18, "start"}, {-9, -10, "end"}};
  for (PointKind kind : {PointKind::kPrefill, PointKind::kMeasured, PointKind::kDecode}) {
    for (const ChartPoint& p : c.points) {
      if (p.kind != kind) continue;
      double x = a.px(p.intensity), y = a.py(p.tflops);
      const auto& spots = kind == PointKind::kDecode ? kDecodeSpots : kOtherSpots;
      const Placement* chosen = nullptr;
      for (const Placement& spot : spots) {
        Box b = label_box(x + spot.dx, y + spot.dy, p.label, spot.anchor);
        bool inside = b.x0 >= kLeft && b.x1 <= kWidth - kRight && b.y0 >= kTop && b.y1 <= kHeight - kBottom;
        if (inside && std::none_of(taken.begin(), taken.end(), [&](const Box& t) { return t.overlaps(b); })) {
          chosen = &spot;
          break;
        }
      }
      if (chosen == nullptr) {
        if (kind == PointKind::kDecode) continue;
        chosen = &spots[0];
      }
      taken.push_back(label_box(x + chosen->dx, y + chosen->dy, p.label, chosen->anchor));
      const char* color = kind == PointKind::kDecode    ? kDecodeColor
                          : kind == PointKind::kPrefill ? kPrefillColor
                                                        : kMeasuredColor;
      *out += text(x + chosen->dx, y + chosen->dy, p.label,
                   std::string("class=\"label\" text-anchor=\"") + chosen->anchor + "\" font-size=\"12\" fill=\"" +
                       color + "\"");
    }
  }
}

void draw_legend(const RooflineChart& c, std::string* out) {
  bool has_measured =
      std::any_of(c.points.begin(), c.points.end(), [](const ChartPoint& p) { return p.kind == PointKind::kMeasured; });
  double x = kLeft + 16, y = kTop + 20;
  *out += "<g class=\"legend\" font-size=\"13\">\n";
  *out += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y - 4) + "\" r=\"5\" fill=\"" + kDecodeColor + "\"/>\n";
  *out += text(x + 12, y, "decode, predicted (batch B)", "");
  y += 20;
  *out += "<rect x=\"" + num(x - 5) + "\" y=\"" + num(y - 9) + "\" width=\"10\" height=\"10\" fill=\"" + kPrefillColor +
          "\"/>\n";
  *out += text(x + 12, y, "prefill, predicted", "");
  if (has_measured) {
    y += 20;
    *out += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y - 4) +
            "\" r=\"5\" fill=\"none\" stroke-width=\"2.5\" stroke=\"" + kMeasuredColor + "\"/>\n";
    *out += text(x + 12, y, "measured", "");
  }
  *out += "</g>\n";
}

}  // namespace

RooflineChart make_roofline_chart(const RooflineAnalysis& a, const BenchReport* measured) {
  RooflineChart c;
  c.title = a.model + " on " + a.gpu.name + ": weights " + precision_name(a.options.weights) + ", KV " +
            precision_name(a.options.kv) + ", context " + std::to_string(a.options.context);
  c.bandwidth_tbps = a.roof.bandwidth_bytes_per_s / 1e12;
  c.peak_tflops = a.roof.peak_flops_per_s / 1e12;
  for (const StepCost& s : a.sweep) {
    c.points.push_back({"B=" + std::to_string(s.batch), s.intensity(), s.achieved_tflops(), PointKind::kDecode});
  }
  c.points.push_back({"prefill " + std::to_string(a.prefill.context), a.prefill.intensity(),
                      a.prefill.achieved_tflops(), PointKind::kPrefill});
  if (measured == nullptr) return c;
  for (const BenchResult& r : measured->results) {
    double tflops = 0;
    if (r.achieved_tflops)
      tflops = *r.achieved_tflops;
    else if (r.achieved_tbps && r.intensity)
      tflops = *r.achieved_tbps * *r.intensity;
    if (!r.intensity || !(*r.intensity > 0) || !(tflops > 0) || !std::isfinite(*r.intensity) ||
        !std::isfinite(tflops)) {
      c.skipped.push_back(r.name);
      continue;
    }
    std::string label = r.name + (r.batch ? " B=" + std::to_string(*r.batch) : "");
    c.points.push_back({label, *r.intensity, tflops, PointKind::kMeasured});
  }
  return c;
}

std::string render_roofline_svg(const RooflineChart& c) {
  Axes a = make_axes(c);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) + "\" font-family=\"sans-serif\">\n";
  out += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" fill=\"white\"/>\n";
  out += text(kWidth / 2, 32, "Roofline: " + c.title, "class=\"title\" text-anchor=\"middle\" font-size=\"16\"");
  draw_grid(a, &out);
  draw_roof(c, a, &out);
  draw_points(c, a, &out);
  draw_legend(c, &out);
  out += "</svg>\n";
  return out;
}

}  // namespace rl::perf
