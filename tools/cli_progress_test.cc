#include "tools/cli_progress.h"

#include <limits>

#include "gtest/gtest.h"

namespace ddpio::tools {
namespace {

TEST(CliProgress, FormatsHoursMinutesSeconds) {
  EXPECT_EQ(FormatHms(0), "0:00:00");
  EXPECT_EQ(FormatHms(4.4), "0:00:04");
  EXPECT_EQ(FormatHms(59.6), "0:01:00");
  EXPECT_EQ(FormatHms(3599), "0:59:59");
  EXPECT_EQ(FormatHms(100000), "27:46:40");
  EXPECT_EQ(FormatHms(-1), "-:--:--");
  EXPECT_EQ(FormatHms(std::numeric_limits<double>::infinity()), "-:--:--");
}

TEST(CliProgress, LineShowsEtaWhileRunningAndElapsedAtTheEnd) {
  // 250 of 1000 in 10 s: 25/s, 750 left -> 30 s.
  EXPECT_EQ(ProgressLine("convert", 250, 1000, 10, false),
            "convert 250/1000  25.0% 25/s ETA 0:00:30");
  EXPECT_EQ(ProgressLine("convert", 1000, 1000, 3725, true),
            "convert 1000/1000 100.0% 0/s in 1:02:05");
  EXPECT_EQ(ProgressLine("scan", 7, 0, 1, false), "scan 7 7/s");  // unknown total: no ETA
}

}  // namespace
}  // namespace ddpio::tools
