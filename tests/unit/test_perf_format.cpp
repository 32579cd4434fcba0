// Number formatting used by the roofline and benchmark tables.
#include <gtest/gtest.h>

#include "perf/format.h"

namespace rl::perf {
namespace {

TEST(PerfFormat, Numbers) {
  EXPECT_EQ(format_count(8030261248), "8,030,261,248");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(-1000), "-1,000");
  EXPECT_EQ(format_num(262.4056), "262.4");
  EXPECT_EQ(format_num(49921.2), "49,921");
  EXPECT_EQ(format_num(0.95994), "0.9599");
  EXPECT_EQ(format_bytes(16060522496.0), "16.06 GB");
  EXPECT_EQ(format_bytes(131072), "131.1 kB");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_seconds(0.0038109), "3.811 ms");
  EXPECT_EQ(format_seconds(0.000496), "496 us");
  EXPECT_EQ(format_seconds(1.25), "1.25 s");
}

}  // namespace
}  // namespace rl::perf
