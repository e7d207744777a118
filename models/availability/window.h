// Same-clock training windows (paper 000 section 6.2): to predict a window
// that starts at a given clock time on a weekday (weekend day), the kernel is
// estimated from the windows at the same clock time on the most recent N
// weekdays (weekend days).
#ifndef SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
#define SOJOURN_MODELS_AVAILABILITY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/availability/state.h"

namespace sojourn::availability {

enum class DayType { kWeekday, kWeekend };

// Day type (Saturday/Sunday = weekend) of the local calendar day containing
// `unix_seconds`, local time = UTC + utc_offset_seconds.
DayType DayTypeOf(int64_t unix_seconds, int utc_offset_seconds);

// Unix time of local midnight starting the local day that contains `unix_seconds`.
int64_t LocalMidnight(int64_t unix_seconds, int utc_offset_seconds);

struct WindowSpec {
  // The day type of the window's START day (windows may run past midnight).
  DayType day_type = DayType::kWeekday;
  // Local clock time of the window start, seconds after local midnight.
  int64_t start_second_of_day = 0;
  int64_t length_seconds = 0;
  // Use at most this many most recent days of day_type (0 = all).
  int history_days = 0;
  int utc_offset_seconds = 0;
};

// Start indexes (into series.states) of the same-clock windows on the most
// recent `history_days` days of spec.day_type whose window ENDS at or before
// `end_unix` (training data); newest first. A window at index s covers
// states[s .. s + L] with L = length_seconds / series.step_seconds (rounded
// down, at least 1), so all L+1 points must lie inside the series. A window
// start that is not on the grid uses the first grid point after it. Days whose
// window does not fit inside the series are skipped and not counted. Takes
// time in the days the series spans, for any `end_unix` (INT64_MAX included).
std::vector<size_t> HistoryWindowStarts(const StateSeries& series, const WindowSpec& spec,
                                        int64_t end_unix);

// Number of steps L of a window of spec.length_seconds on `series`' grid.
int WindowSteps(const StateSeries& series, const WindowSpec& spec);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
