#include "perf/format.h"

#include <cmath>
#include <cstdio>

namespace rl::perf {

std::string format_g(double v, int significant) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", significant, v);
  return buf;
}

std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string format_count(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_num(double v) {
  if (std::isfinite(v) && std::fabs(v) >= 1e4 && std::fabs(v) < 9e18) return format_count(std::llround(v));
  return format_g(v, 4);
}

std::string format_bytes(double bytes) {
  static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return (u == 0 ? format_fixed(v, 0) : format_g(v, 4)) + " " + kUnits[u];
}

std::string format_seconds(double s) {
  if (s >= 1) return format_g(s, 4) + " s";
  if (s >= 1e-3) return format_g(s * 1e3, 4) + " ms";
  return format_g(s * 1e6, 4) + " us";
}

}  // namespace rl::perf
