// Same-clock training windows (paper 000 section 6.2): to predict a window
// that starts at a given clock time on a weekday (weekend day), the kernel is
// estimated from the windows at the same clock time on the most recent N
// weekdays (weekend days).
#ifndef SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
#define SOJOURN_MODELS_AVAILABILITY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <limits>
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
// With `after_unix`, only the windows that also end after it (the walk back
// stops there, so consecutive moments cost a day each).
std::vector<size_t> HistoryWindowStarts(const StateSeries& series, const WindowSpec& spec,
                                        int64_t end_unix,
                                        int64_t after_unix = std::numeric_limits<int64_t>::min());

// Number of steps L of a window of spec.length_seconds on `series`' grid.
int WindowSteps(const StateSeries& series, const WindowSpec& spec);

// The local hour of the points of a regular grid (start_unix + t * step),
// visited in increasing t: the clock arithmetic is done once per local hour
// rather than once per point (the exposure counts walk whole histories, 403,200
// points for 28 days at 6 s).
class LocalHourCursor {
 public:
  LocalHourCursor(int64_t start_unix, int64_t step_seconds, int utc_offset_seconds)
      : start_(start_unix), step_(step_seconds), offset_(utc_offset_seconds) {}
  // Moves to point t (>= every t seen before).
  void Seek(int64_t t) {
    if (t >= end_ || t < begin_) Reset(t);
  }
  // Of the point last sought: local hour 0..23, 1 on a weekend day, local
  // midnight (unix seconds) and the first point of the next local hour.
  int hour() const { return hour_; }
  int weekend() const { return weekend_; }
  int64_t midnight() const { return midnight_; }
  int64_t end() const { return end_; }

 private:
  void Reset(int64_t t);
  const int64_t start_, step_;
  const int offset_;
  int64_t begin_ = 0, end_ = 0, midnight_ = 0;
  int hour_ = 0, weekend_ = 0;
};

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
