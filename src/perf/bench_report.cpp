#include "perf/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "core/file.h"
#include "perf/format.h"

namespace rl::perf {

namespace {

template <typename T>
void put(Json* j, const char* key, const std::optional<T>& v) {
  if (v) (*j)[key] = *v;
}

Status get_string(const Json& j, const char* key, bool required, std::string* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return required ? Status::error(what + ": missing required key \"" + key + "\"") : Status::ok();
  }
  if (!it->is_string()) return Status::error(what + ": \"" + key + "\" must be a string, got " + it->dump());
  *out = it->get<std::string>();
  return Status::ok();
}

Status get_double(const Json& j, const char* key, std::optional<double>* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return Status::error(what + ": \"" + key + "\" must be a number, got " + it->dump());
  *out = it->get<double>();
  return Status::ok();
}

Status get_int(const Json& j, const char* key, std::optional<int64_t>* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer()) return Status::error(what + ": \"" + key + "\" must be an integer, got " + it->dump());
  *out = it->get<int64_t>();
  return Status::ok();
}

Result<BenchResult> parse_result(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be an object");
  BenchResult r;
  RL_RETURN_IF_ERROR(get_string(j, "name", true, &r.name, what));
  RL_RETURN_IF_ERROR(get_string(j, "unit", true, &r.unit, what));
  std::optional<double> measured;
  RL_RETURN_IF_ERROR(get_double(j, "measured", &measured, what));
  if (!measured) return Status::error(what + ": missing required key \"measured\"");
  r.measured = *measured;
  RL_RETURN_IF_ERROR(get_double(j, "predicted", &r.predicted, what));
  RL_RETURN_IF_ERROR(get_double(j, "roofline_pct", &r.roofline_pct, what));
  RL_RETURN_IF_ERROR(get_double(j, "peer", &r.peer, what));
  RL_RETURN_IF_ERROR(get_string(j, "peer_name", false, &r.peer_name, what));
  RL_RETURN_IF_ERROR(get_int(j, "batch", &r.batch, what));
  RL_RETURN_IF_ERROR(get_int(j, "context", &r.context, what));
  RL_RETURN_IF_ERROR(get_double(j, "intensity", &r.intensity, what));
  RL_RETURN_IF_ERROR(get_double(j, "achieved_tflops", &r.achieved_tflops, what));
  RL_RETURN_IF_ERROR(get_double(j, "achieved_tbps", &r.achieved_tbps, what));
  return r;
}

std::string cell(const std::optional<double>& v) { return v ? format_num(*v) : "-"; }
std::string cell(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

}  // namespace

bool unit_is_time(const std::string& unit) { return unit == "s" || unit == "ms" || unit == "us" || unit == "ns"; }

std::optional<double> roofline_pct(const std::string& unit, double measured, double predicted) {
  if (!(measured > 0) || !(predicted > 0)) return std::nullopt;
  return unit_is_time(unit) ? 100.0 * predicted / measured : 100.0 * measured / predicted;
}

void fill_roofline_pct(BenchReport* report) {
  for (BenchResult& r : report->results) {
    if (!r.roofline_pct && r.predicted) r.roofline_pct = roofline_pct(r.unit, r.measured, *r.predicted);
  }
}

Json bench_report_to_json(const BenchReport& report) {
  Json results = Json::array();
  for (const BenchResult& r : report.results) {
    Json j = {{"name", r.name}, {"unit", r.unit}, {"measured", r.measured}};
    put(&j, "predicted", r.predicted);
    put(&j, "roofline_pct", r.roofline_pct);
    put(&j, "peer", r.peer);
    if (!r.peer_name.empty()) j["peer_name"] = r.peer_name;
    put(&j, "batch", r.batch);
    put(&j, "context", r.context);
    put(&j, "intensity", r.intensity);
    put(&j, "achieved_tflops", r.achieved_tflops);
    put(&j, "achieved_tbps", r.achieved_tbps);
    results.push_back(j);
  }
  return Json{{"command", report.command}, {"date", report.date},   {"commit", report.commit}, {"gpu", report.gpu},
              {"device", report.device},   {"model", report.model}, {"results", results}};
}

Result<BenchReport> parse_bench_report(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": a benchmark report must be a JSON object");
  BenchReport report;
  RL_RETURN_IF_ERROR(get_string(j, "command", true, &report.command, what));
  RL_RETURN_IF_ERROR(get_string(j, "date", false, &report.date, what));
  RL_RETURN_IF_ERROR(get_string(j, "commit", false, &report.commit, what));
  RL_RETURN_IF_ERROR(get_string(j, "gpu", false, &report.gpu, what));
  RL_RETURN_IF_ERROR(get_string(j, "device", false, &report.device, what));
  RL_RETURN_IF_ERROR(get_string(j, "model", false, &report.model, what));
  auto it = j.find("results");
  if (it == j.end() || !it->is_array()) return Status::error(what + ": \"results\" must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    RL_ASSIGN_OR_RETURN(BenchResult r, parse_result((*it)[i], what + ": results[" + std::to_string(i) + "]"));
    report.results.push_back(std::move(r));
  }
  return report;
}

Status write_bench_report(const std::string& path, const BenchReport& report) {
  return write_file(path, bench_report_to_json(report).dump(2) + "\n");
}

Result<BenchReport> load_bench_report(const std::string& path) {
  RL_ASSIGN_OR_RETURN(Json j, load_json_file(path));
  return parse_bench_report(j, path);
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string git_describe(const std::string& dir) {
  std::string quoted = "'";
  for (char c : dir) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::string cmd = "git -C " + quoted + " describe --always --dirty 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  if (pclose(pipe) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string format_bench_table(const BenchReport& report) {
  std::vector<std::vector<std::string>> rows = {
      {"name", "batch", "ctx", "measured", "predicted", "% roofline", "peer", "unit"}};
  for (const BenchResult& r : report.results) {
    std::optional<double> pct = r.roofline_pct;
    if (!pct && r.predicted) pct = roofline_pct(r.unit, r.measured, *r.predicted);
    std::string peer = r.peer ? format_num(*r.peer) + (r.peer_name.empty() ? "" : " (" + r.peer_name + ")") : "-";
    rows.push_back({r.name, cell(r.batch), cell(r.context), format_num(r.measured), cell(r.predicted),
                    pct ? format_fixed(*pct, 1) + " %" : "-", peer, r.unit});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string& v = row[c];
      std::string fill(width[c] - v.size(), ' ');
      line += (c == 0 ? v + fill : fill + v);  // names left-aligned, figures right-aligned
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace rl::perf
