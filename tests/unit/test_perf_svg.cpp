// The roofline SVG: well-formed XML (a small checker below), the expected elements, and geometry checked
// against the chart's own tick labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loader/model_config.h"
#include "model/model.h"
#include "perf/bench_report.h"
#include "perf/roofline.h"
#include "perf/roofline_svg.h"

namespace rl::perf {
namespace {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // direct character data
};

// A minimal XML well-formedness check: balanced, properly nested tags, quoted attributes, no raw '<' or bare
// '&' in text or attribute values. Fills `out` with every element in document order.
bool parse_xml(const std::string& s, std::vector<Element>* out, std::string* error) {
  std::vector<size_t> open;  // indices into *out
  auto entity_ok = [&](size_t i) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
      if (s.compare(i, std::strlen(e), e) == 0) return true;
    }
    return false;
  };
  size_t i = 0;
  if (s.compare(0, 5, "<?xml") == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&' && !entity_ok(i)) return *error = "bare & at " + std::to_string(i), false;
      if (!open.empty())
        (*out)[open.back()].text += s[i];
      else if (!std::isspace(static_cast<unsigned char>(s[i])))
        return *error = "text outside the root", false;
      ++i;
      continue;
    }
    size_t end = s.find('>', i);
    if (end == std::string::npos) return *error = "unterminated tag", false;
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (!tag.empty() && tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || (*out)[open.back()].name != name) return *error = "mismatched </" + name + ">", false;
      open.pop_back();
      continue;
    }
    bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    Element e;
    size_t p = 0;
    while (p < tag.size() && !std::isspace(static_cast<unsigned char>(tag[p]))) e.name += tag[p++];
    if (e.name.empty()) return *error = "empty tag name", false;
    while (true) {
      while (p < tag.size() && std::isspace(static_cast<unsigned char>(tag[p]))) ++p;
      if (p >= tag.size()) break;
      size_t eq = tag.find('=', p);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') {
        return *error = "unquoted attribute in <" + e.name + ">", false;
      }
      size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return *error = "unterminated attribute in <" + e.name + ">", false;
      std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos) return *error = "'<' in an attribute", false;
      e.attrs[tag.substr(p, eq - p)] = value;
      p = close + 1;
    }
    if (open.empty() && !out->empty()) return *error = "second root element <" + e.name + ">", false;
    out->push_back(e);
    if (!self_closing) open.push_back(out->size() - 1);
  }
  if (!open.empty()) return *error = "unclosed <" + (*out)[open.back()].name + ">", false;
  return true;
}

std::vector<const Element*> with_class(const std::vector<Element>& els, const std::string& name,
                                       const std::string& cls) {
  std::vector<const Element*> out;
  for (const Element& e : els) {
    auto it = e.attrs.find("class");
    if (e.name == name && it != e.attrs.end() && (" " + it->second + " ").find(" " + cls + " ") != std::string::npos) {
      out.push_back(&e);
    }
  }
  return out;
}

double num(const Element* e, const char* key) { return std::stod(e->attrs.at(key)); }

// The roof polyline's vertices as x0, y0, x1, y1, ...
std::vector<double> roof_points(const std::vector<Element>& els) {
  std::vector<double> xy;
  auto roof = with_class(els, "polyline", "roof");
  if (roof.size() != 1) return xy;
  std::stringstream ss(roof[0]->attrs.at("points"));
  std::string pair;
  while (ss >> pair) {
    size_t comma = pair.find(',');
    xy.push_back(std::stod(pair.substr(0, comma)));
    xy.push_back(std::stod(pair.substr(comma + 1)));
  }
  return xy;
}

RooflineAnalysis llama_on_h200() {
  auto c = load_model_config(std::string(RIDGELINE_SOURCE_DIR) + "/models/configs/Llama-3.1-8B/config.json");
  EXPECT_TRUE(c.is_ok());
  auto a = analyze_roofline(*c, "Llama-3.1-8B", measured_h200(), RooflineOptions{});
  EXPECT_TRUE(a.is_ok());
  return *a;
}

TEST(PerfSvg, CheckerRejectsMalformedXml) {
  std::vector<Element> els;
  std::string err;
  EXPECT_FALSE(parse_xml("<svg><g></svg>", &els, &err));
  els.clear();
  EXPECT_FALSE(parse_xml("<svg><text>a & b</text></svg>", &els, &err));
  els.clear();
  EXPECT_FALSE(parse_xml("<svg x=1></svg>", &els, &err));
  els.clear();
  EXPECT_TRUE(parse_xml("<svg><text>a &amp; b</text><g/></svg>", &els, &err)) << err;
}

TEST(PerfSvg, ChartHoldsRoofRidgeAndPoints) {
  RooflineAnalysis a = llama_on_h200();
  std::string svg = render_roofline_svg(make_roofline_chart(a, nullptr));
  std::vector<Element> els;
  std::string err;
  ASSERT_TRUE(parse_xml(svg, &els, &err)) << err;
  ASSERT_FALSE(els.empty());
  EXPECT_EQ(els[0].name, "svg");
  EXPECT_EQ(els[0].attrs["xmlns"], "http://www.w3.org/2000/svg");

  // One decode marker per sweep batch (1 .. 1024 at context 1024), each titled with its batch.
  auto decode = with_class(els, "circle", "decode");
  ASSERT_EQ(decode.size(), a.sweep.size());
  EXPECT_EQ(decode.size(), 11u);
  EXPECT_EQ(with_class(els, "rect", "prefill").size(), 1u);
  EXPECT_TRUE(with_class(els, "circle", "measured").empty());

  std::vector<std::string> labels;
  for (const Element* e : with_class(els, "text", "label")) labels.push_back(e->text);
  auto has_label = [&](const std::string& t) { return std::find(labels.begin(), labels.end(), t) != labels.end(); };
  EXPECT_TRUE(has_label("B=1"));
  EXPECT_TRUE(has_label("B=2"));
  EXPECT_TRUE(has_label("prefill 512"));
  EXPECT_TRUE(has_label("ridge 177.9 FLOP/byte"));
  EXPECT_TRUE(has_label("4.25 TB/s"));
  EXPECT_TRUE(has_label("756 TFLOP/s peak"));

  // The roof: left end, ridge corner, right end; the ridge marker sits on the corner.
  std::vector<double> xy = roof_points(els);
  ASSERT_EQ(xy.size(), 6u);
  auto ridge = with_class(els, "circle", "ridge");
  ASSERT_EQ(ridge.size(), 1u);
  EXPECT_NEAR(num(ridge[0], "cx"), xy[2], 0.06);
  EXPECT_NEAR(num(ridge[0], "cy"), xy[3], 0.06);
  EXPECT_NEAR(xy[3], xy[5], 0.06);  // flat ceiling

  // The ridge's x against the x-axis ticks "100" and "1,000": log10(177.88 / 100) of a decade past "100".
  double x100 = -1, x1000 = -1, y1 = -1, y1000 = -1;
  for (const Element* t : with_class(els, "text", "tick")) {
    bool x_axis = t->attrs.at("text-anchor") == "middle";
    if (x_axis && t->text == "100") x100 = num(t, "x");
    if (x_axis && t->text == "1,000") x1000 = num(t, "x");
    if (!x_axis && t->text == "1") y1 = num(t, "y") - 4;  // tick labels sit 4 px below their line
    if (!x_axis && t->text == "1,000") y1000 = num(t, "y") - 4;
  }
  ASSERT_GT(x100, 0);
  ASSERT_GT(x1000, 0);
  ASSERT_GT(y1, 0);
  ASSERT_GT(y1000, 0);
  EXPECT_NEAR(num(ridge[0], "cx"), x100 + std::log10(756 / 4.25 / 100) * (x1000 - x100), 0.2);
  // Its height: 756 TFLOP/s, log10(756) / 3 of the way from "1" to "1,000".
  EXPECT_NEAR(num(ridge[0], "cy"), y1 + std::log10(756.0) / 3 * (y1000 - y1), 0.2);

  // Every decode point here is memory-bound, so it lies on the bandwidth slope (left end → ridge).
  for (const Element* d : decode) {
    double x = num(d, "cx"), y = num(d, "cy");
    double on_slope = xy[1] + (x - xy[0]) * (xy[3] - xy[1]) / (xy[2] - xy[0]);
    EXPECT_NEAR(y, on_slope, 0.3) << "decode point at x=" << x;
    EXPECT_LT(x, xy[2]);
  }
  // Decode points move right (higher intensity) with batch.
  for (size_t k = 1; k < decode.size(); ++k) EXPECT_GT(num(decode[k], "cx"), num(decode[k - 1], "cx"));
  // The prefill point (458 FLOP/byte, compute-bound) sits on the ceiling right of the ridge.
  auto prefill = with_class(els, "rect", "prefill");
  EXPECT_NEAR(num(prefill[0], "y") + 6, xy[3], 0.2);
  EXPECT_GT(num(prefill[0], "x") + 6, xy[2]);
}

TEST(PerfSvg, MeasuredPointsFromResults) {
  RooflineAnalysis a = llama_on_h200();
  auto report = load_bench_report(std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/perf/llama_cpp_h200.json");
  ASSERT_TRUE(report.is_ok()) << report.message();
  RooflineChart chart = make_roofline_chart(a, &*report);
  ASSERT_EQ(chart.skipped.size(), 1u);
  EXPECT_EQ(chart.skipped[0], "tokenizer");
  std::string svg = render_roofline_svg(chart);
  std::vector<Element> els;
  std::string err;
  ASSERT_TRUE(parse_xml(svg, &els, &err)) << err;
  auto measured = with_class(els, "circle", "measured");
  ASSERT_EQ(measured.size(), 4u);
  // Measured points are in their own colour, distinct from the predicted ones.
  auto decode = with_class(els, "circle", "decode");
  EXPECT_NE(measured[0]->attrs.at("stroke"), decode[0]->attrs.at("fill"));
  bool labelled = false;
  for (const Element* t : with_class(els, "text", "label")) labelled |= t->text == "llama.cpp decode B=16";
  EXPECT_TRUE(labelled);
  // Below the roof: 90.4 TFLOP/s at 54.4 FLOP/byte is under the 4.25 TB/s slope (231 TFLOP/s there), i.e.
  // lower on the page (larger y) than the slope at the same x, by log10(231 / 90.4) = 0.41 decade.
  std::vector<double> xy = roof_points(els);
  ASSERT_EQ(xy.size(), 6u);
  double x = num(measured[2], "cx");
  double slope_y = xy[1] + (x - xy[0]) * (xy[3] - xy[1]) / (xy[2] - xy[0]);
  EXPECT_GT(num(measured[2], "cy"), slope_y + 10);
}

TEST(PerfSvg, LabelsAreEscaped) {
  RooflineChart c;
  c.title = "a <b> & \"c\"";
  c.bandwidth_tbps = 1;
  c.peak_tflops = 100;
  c.points.push_back({"x<y & z", 2, 2, PointKind::kMeasured});
  std::vector<Element> els;
  std::string err;
  ASSERT_TRUE(parse_xml(render_roofline_svg(c), &els, &err)) << err;
  EXPECT_EQ(with_class(els, "circle", "measured").size(), 1u);
}

}  // namespace
}  // namespace rl::perf
