// Tests of same-clock window selection (paper 000 section 6.2).
#include "models/availability/window.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::availability {
namespace {

constexpr int64_t kMon20240101 = 1704067200;  // Monday 2024-01-01 00:00 UTC
constexpr int64_t kHour = 3600;
constexpr int64_t kDay = 86400;

int64_t FloorModForTest(int64_t a, int64_t b) { return ((a % b) + b) % b; }

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
        ASSERT_EQ(c.day(), LocalDayNumber(at, offset));
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

// 2024 in New York: daylight saving time from Sun Mar 10 02:00 EST (07:00
// UTC) to Sun Nov 3 02:00 EDT (06:00 UTC).
constexpr int64_t kNyDstStart = 1710054000;  // 2024-03-10 07:00 UTC
constexpr int64_t kNyDstEnd = 1730613600;    // 2024-11-03 06:00 UTC

LocalClock NewYork() {
  auto clock = LocalClock::Zone("America/New_York");
  EXPECT_TRUE(clock.ok()) << clock.status();
  return clock.ok() ? *clock : LocalClock();
}

// A zone's offset, local days and clock times follow daylight saving time:
// the day it starts has 23 hours, the day it ends 25, and 16:30 is 16:30.
TEST(LocalClockTest, ZoneFollowsDaylightSavingTime) {
  const LocalClock ny = NewYork();
  EXPECT_TRUE(ny.has_zone());
  EXPECT_EQ(ny.ToString(), "America/New_York");
  EXPECT_EQ(ny.OffsetAt(kNyDstStart - 1), -5 * 3600);
  EXPECT_EQ(ny.OffsetAt(kNyDstStart), -4 * 3600);
  EXPECT_EQ(ny.OffsetAt(kNyDstEnd - 1), -4 * 3600);
  EXPECT_EQ(ny.OffsetAt(kNyDstEnd), -5 * 3600);
  // Local midnights around the change: Sunday Mar 10 is 23 h long.
  const int64_t sat_midnight = LocalMidnight(kNyDstStart - kDay, ny);
  const int64_t sun_midnight = LocalMidnight(kNyDstStart + kHour, ny);
  const int64_t mon_midnight = LocalMidnight(kNyDstStart + 22 * kHour, ny);
  EXPECT_EQ(sat_midnight, kNyDstStart - 2 * kHour - kDay);  // 05:00 UTC, EST
  EXPECT_EQ(sun_midnight - sat_midnight, kDay);
  EXPECT_EQ(mon_midnight - sun_midnight, 23 * kHour);
  EXPECT_EQ(LocalMidnight(kNyDstEnd + kHour, ny) - LocalMidnight(kNyDstEnd - kHour, ny), 0);
  EXPECT_EQ(LocalMidnight(kNyDstEnd + kDay, ny) - LocalMidnight(kNyDstEnd, ny), 25 * kHour);
  // 16:30 on Wednesday Mar 6 (EST) and Mar 13 (EDT): 21:30 and 20:30 UTC.
  const int64_t mar6 = sat_midnight - 3 * kDay + 16 * kHour + 1800;
  EXPECT_EQ(mar6, 1709760600);  // 2024-03-06 21:30 UTC
  const int64_t mar13 = mar6 + 7 * kDay - kHour;
  for (int64_t t : {mar6, mar13}) {
    EXPECT_EQ(LocalSecondOfDay(t, ny), 16 * kHour + 1800) << t;
    EXPECT_EQ(DayTypeOf(t, ny), DayType::kWeekday) << t;
    EXPECT_EQ(ny.UnixAt(LocalDayNumber(t, ny), 16 * kHour + 1800), t) << t;
  }
  // A fixed offset sees 15:30 on Mar 13.
  EXPECT_EQ(LocalSecondOfDay(mar13, -5 * 3600), 15 * kHour + 1800);
  // 02:30 on Mar 10 does not exist: the moment of the change, 03:00 EDT.
  EXPECT_EQ(ny.UnixAt(LocalDayNumber(kNyDstStart, ny), 2 * kHour + 1800), kNyDstStart);
  // 01:30 on Nov 3 happens twice: the first, in EDT.
  EXPECT_EQ(ny.UnixAt(LocalDayNumber(kNyDstEnd, ny), kHour + 1800), kNyDstEnd - 1800);
  // Saturday 23:30 local is Sunday in UTC: still a weekend day, and Friday
  // 23:30 local (Saturday 03:30 UTC) a weekday.
  EXPECT_EQ(DayTypeOf(sat_midnight - 1800, ny), DayType::kWeekday);
  EXPECT_EQ(DayTypeOf(sat_midnight + 1800, ny), DayType::kWeekend);
  EXPECT_EQ(DayTypeOf(mon_midnight - 1800, ny), DayType::kWeekend);
  EXPECT_EQ(DayTypeOf(mon_midnight + 1800, ny), DayType::kWeekday);
}

// Names that are not a zone of the tz database are refused with the name;
// paths out of it too, though they name files. A fixed offset prints as one.
TEST(LocalClockTest, UnknownZonesAndFixedOffsets) {
  for (const char* bad : {"", "Mars/Olympus_Mons", "../../etc/passwd", "/usr/share/zoneinfo/UTC",
                          "Europe/", "Europe//Paris", "Europe/Paris\n", "America"}) {
    auto clock = LocalClock::Zone(bad);
    ASSERT_FALSE(clock.ok()) << bad;
    EXPECT_EQ(clock.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(clock.status().message().find("unknown time zone"), std::string::npos);
  }
  EXPECT_NE(LocalClock::Zone("Mars/Olympus_Mons").status().message().find("Mars/Olympus_Mons"),
            std::string::npos);
  auto utc = LocalClock::Zone("UTC");
  ASSERT_TRUE(utc.ok()) << utc.status();
  EXPECT_EQ(utc->OffsetAt(kNyDstStart), 0);
  EXPECT_NE(*utc, LocalClock(0));  // a zone is not its offset: counters keyed by it differ
  EXPECT_EQ(LocalClock(7200).ToString(), "UTC+02:00");
  EXPECT_EQ(LocalClock(-19800).ToString(), "UTC-05:30");
  EXPECT_EQ(LocalClock(7200), LocalClock(7200));
  EXPECT_FALSE(LocalClock(7200).has_zone());
  EXPECT_EQ(LocalClock(7200).OffsetAt(kNyDstStart), 7200);
}

// With a zone, the cursor's hour is the wall clock's, also on the days
// daylight saving time starts and ends, and its end() the first point of the
// next wall-clock hour.
TEST(LocalHourCursorTest, FollowsTheZonesWallClock) {
  const LocalClock ny = NewYork();
  for (int64_t start : {kNyDstStart - 2 * kDay + 17, kNyDstEnd - 2 * kDay + 17}) {
    for (int64_t step : {7, 300, 3600, 5400}) {
      LocalHourCursor c(start, step, ny);
      for (int64_t t = 0; t < 4 * kDay / step; t += 1 + t % 3) {
        c.Seek(t);
        const int64_t at = start + t * step;
        ASSERT_EQ(c.midnight(), LocalMidnight(at, ny)) << step << " " << t;
        ASSERT_EQ(c.day(), LocalDayNumber(at, ny)) << step << " " << t;
        ASSERT_EQ(c.hour(), LocalSecondOfDay(at, ny) / 3600) << step << " " << t;
        ASSERT_EQ(c.weekend(), DayTypeOf(at, ny) == DayType::kWeekend ? 1 : 0);
        ASSERT_GT(c.end(), t);
        const int64_t hour_start = at - LocalSecondOfDay(at, ny) % 3600;
        ASSERT_GE(start + c.end() * step, hour_start + 3600) << step << " " << t;
        ASSERT_LT(start + c.end() * step - step, hour_start + 3600) << step << " " << t;
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
  spec.clock = kOffset;
  spec.start_second_of_day = 9 * kHour + 1800;  // 9:30 -> 10:00
  EXPECT_EQ(HistoryWindowStarts(series_, spec, Local(3, 0)),
            (std::vector<size_t>{Index(2, 10), Index(1, 10)}));
}

// With a zone, the windows at 16:30 are at 16:30 on the lab's wall clock
// before and after daylight saving time starts (21:30 UTC, then 20:30); a
// fixed offset keeps 21:30 UTC, which is 17:30 after the change.
TEST(HistoryWindowStartsZoneTest, SameWallClockAcrossDaylightSavingTime) {
  StateSeries series;
  series.step_seconds = 900;
  series.start_unix = kNyDstStart - 7 * kDay;  // Sun Mar 3
  series.states.assign(14 * 96, HostState::kS1);
  WindowSpec spec{DayType::kWeekday, 16 * kHour + 1800, kHour, 0, NewYork()};
  const int64_t end = kNyDstStart + 5 * kDay;  // Fri Mar 15 07:00 UTC
  auto unix_of = [&](size_t i) { return series.start_unix + static_cast<int64_t>(i) * 900; };
  const auto starts = HistoryWindowStarts(series, spec, end);
  ASSERT_EQ(starts.size(), 9u);  // Mon Mar 4 .. Thu Mar 14
  for (size_t i : starts) {
    EXPECT_EQ(LocalSecondOfDay(unix_of(i), spec.clock), 16 * kHour + 1800) << unix_of(i);
    EXPECT_EQ(FloorModForTest(unix_of(i), kDay), unix_of(i) < kNyDstStart ? 21 * kHour + 1800
                                                                          : 20 * kHour + 1800);
  }
  spec.clock = -5 * 3600;
  for (size_t i : HistoryWindowStarts(series, spec, end)) {
    EXPECT_EQ(FloorModForTest(unix_of(i), kDay), 21 * kHour + 1800);
  }
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
