// Tests of same-clock window selection (paper 000 section 6.2).
#include "models/availability/window.h"

#include <vector>

#include "gtest/gtest.h"

namespace sojourn::availability {
namespace {

constexpr int64_t kMon20240101 = 1704067200;  // Monday 2024-01-01 00:00 UTC
constexpr int64_t kHour = 3600;
constexpr int64_t kDay = 86400;

// Weekday / weekend by the local calendar day.
TEST(DayTypeTest, UsesLocalCalendarDay) {
  EXPECT_EQ(DayTypeOf(0, 0), DayType::kWeekday);           // Thu 1970-01-01
  EXPECT_EQ(DayTypeOf(2 * kDay, 0), DayType::kWeekend);    // Sat 1970-01-03
  EXPECT_EQ(DayTypeOf(-kDay, 0), DayType::kWeekday);       // Wed 1969-12-31
  EXPECT_EQ(DayTypeOf(-4 * kDay, 0), DayType::kWeekend);   // Sun 1969-12-28
  const int64_t sat = kMon20240101 + 5 * kDay;              // Sat 2024-01-06 00:00 UTC
  EXPECT_EQ(DayTypeOf(sat + 1800, 0), DayType::kWeekend);
  EXPECT_EQ(DayTypeOf(sat + 1800, -kHour), DayType::kWeekday);      // still Friday at UTC-1
  EXPECT_EQ(DayTypeOf(sat - 1800, 2 * kHour), DayType::kWeekend);   // already Saturday at UTC+2
  const int64_t mon = kMon20240101 + 7 * kDay;
  EXPECT_EQ(DayTypeOf(mon - 1800, 0), DayType::kWeekend);
  EXPECT_EQ(DayTypeOf(mon - 1800, kHour), DayType::kWeekday);
  EXPECT_EQ(LocalMidnight(kMon20240101, 2 * kHour), kMon20240101 - 2 * kHour + 0);
  EXPECT_EQ(LocalMidnight(kMon20240101 + 23 * kHour, 2 * kHour), kMon20240101 + 22 * kHour);
}

// The cursor gives every point the hour, day type and midnight that
// LocalMidnight / DayTypeOf give it, and its end() is the first point of the
// next local hour, for steps that do not divide an hour or exceed it and time
// zones off the whole hour; points may be skipped.
TEST(LocalHourCursorTest, AgreesWithTheClockFunctions) {
  const int64_t start = 1700438400 + 5 * 86400 - 3 * 3600 + 17;  // Friday 21:00:17 UTC
  for (int64_t step : {1, 7, 300, 3600, 5400}) {
    for (int offset : {0, 7200, -19800, 20700}) {
      LocalHourCursor c(start, step, offset);
      for (int64_t t = 0; t < 200000 / step + 100; t += 1 + t % 3) {
        c.Seek(t);
        const int64_t at = start + t * step;
        const int64_t midnight = LocalMidnight(at, offset);
        ASSERT_EQ(c.midnight(), midnight) << step << " " << offset << " " << t;
        ASSERT_EQ(c.hour(), (at - midnight) / 3600);
        ASSERT_EQ(c.weekend(), DayTypeOf(at, offset) == DayType::kWeekend ? 1 : 0);
        // end() is after t, in the next local hour, and the point before it
        // is still in this one.
        ASSERT_GT(c.end(), t);
        const int64_t next = start + c.end() * step, before = next - step;
        ASSERT_GE(next, midnight + (c.hour() + 1) * 3600);
        ASSERT_LT(before, midnight + (c.hour() + 1) * 3600);
      }
    }
  }
}

class HistoryWindowStartsTest : public ::testing::Test {
 protected:
  // Hourly grid from local midnight of Monday 2024-01-01 at UTC+2, 14 days.
  void SetUp() override {
    series_.start_unix = kMon20240101 - kOffset;
    series_.step_seconds = kHour;
    series_.states.assign(14 * 24, HostState::kS1);
  }
  static int64_t Local(int day_of_jan, int64_t hour) {
    return kMon20240101 - kOffset + (day_of_jan - 1) * kDay + hour * kHour;
  }
  static size_t Index(int day_of_jan, int hour) { return (day_of_jan - 1) * 24 + hour; }
  static constexpr int kOffset = 2 * 3600;
  StateSeries series_;
};

// Weekday windows 9:00-11:00 ending by Wed Jan 10 10:00 local: Jan 10 is
// excluded (ends 11:00), then Tue 9, Mon 8, Fri 5 ... Mon 1, newest first.
TEST_F(HistoryWindowStartsTest, WeekdaysNewestFirstEndingBeforeCutoff) {
  WindowSpec spec{DayType::kWeekday, 9 * kHour, 2 * kHour, 0, kOffset};
  const auto starts = HistoryWindowStarts(series_, spec, Local(10, 10));
  EXPECT_EQ(starts, (std::vector<size_t>{Index(9, 9), Index(8, 9), Index(5, 9), Index(4, 9),
                                         Index(3, 9), Index(2, 9), Index(1, 9)}));
  // Exactly at the window end counts.
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(10, 11)).front(), Index(10, 9));
  spec.history_days = 3;
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(10, 10)),
            (std::vector<size_t>{Index(9, 9), Index(8, 9), Index(5, 9)}));
  EXPECT_EQ(WindowSteps(series_, spec), 2);
}

// Weekend windows, including one that runs past midnight and one that would
// run past the end of the series.
TEST_F(HistoryWindowStartsTest, WeekendWindowsAndSeriesEnd) {
  WindowSpec spec{DayType::kWeekend, 22 * kHour, 2 * kHour, 0, kOffset};
  // Jan 14 22:00 + 2 h needs index 336, past the last point 335: skipped.
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(30, 0)),
            (std::vector<size_t>{Index(13, 22), Index(7, 22), Index(6, 22)}));
}

// The same clock time at a different UTC offset selects different grid points,
// and a start between grid points uses the next one.
TEST_F(HistoryWindowStartsTest, UtcOffsetAndUnalignedStart) {
  WindowSpec spec{DayType::kWeekday, 9 * kHour, kHour, 2, 0};  // 9:00 UTC = 11:00 local
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(3, 0)),
            (std::vector<size_t>{Index(2, 11), Index(1, 11)}));
  spec.utc_offset_seconds = kOffset;
  spec.start_second_of_day = 9 * kHour + 1800;  // 9:30 -> 10:00
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(3, 0)),
            (std::vector<size_t>{Index(2, 10), Index(1, 10)}));
}

// Nothing before the series and nothing in an empty series.
TEST_F(HistoryWindowStartsTest, EmptyCases) {
  WindowSpec spec{DayType::kWeekday, 9 * kHour, kHour, 0, kOffset};
  EXPECT_TRUE(HistoryWindowStarts(series_, spec, Local(1, 9)).empty());
  EXPECT_TRUE(HistoryWindowStarts(StateSeries{}, spec, Local(5, 0)).empty());
}

// An end far past the series (INT64_MAX, as a fuzzer sent to the statemgr)
// selects what the series end does, at once: the walk back starts at the
// series end, not ~1e14 days later. An end before the series selects nothing.
TEST_F(HistoryWindowStartsTest, ExtremeEndsAreClampedToTheSeries) {
  for (int offset : {0, kOffset, -14 * 3600, 14 * 3600}) {
    WindowSpec spec{DayType::kWeekday, 9 * kHour, 2 * kHour, 0, offset};
    const auto at_end = HistoryWindowStarts(series_, spec, Local(30, 0));
    EXPECT_FALSE(at_end.empty());
    EXPECT_EQ(HistoryWindowStarts(series_, spec, INT64_MAX), at_end) << offset;
    EXPECT_TRUE(HistoryWindowStarts(series_, spec, INT64_MIN).empty()) << offset;
    EXPECT_TRUE(HistoryWindowStarts(series_, spec, -1).empty()) << offset;
  }
}

}  // namespace
}  // namespace sojourn::availability
