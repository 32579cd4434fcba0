// Number formatting shared by the roofline and benchmark reports.
#pragma once

#include <cstdint>
#include <string>

namespace rl::perf {

std::string format_g(double v, int significant = 4);  // printf %g
std::string format_fixed(double v, int decimals);     // printf %.Nf
std::string format_count(int64_t v);
// Figures for people: below 10,000 as %.4g ("262.4", "0.9599"), above as a rounded count ("49,920").
std::string format_num(double v);        // 8030261248 → "8,030,261,248"
std::string format_bytes(double bytes);  // decimal units: "16.06 GB", "131.1 kB", "512 B"
std::string format_seconds(double s);    // "3.79 ms", "12.0 us", "1.25 s"

}  // namespace rl::perf
