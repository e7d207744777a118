// Same-clock training windows (paper 000 section 6.2): to predict a window
// that starts at a given clock time on a weekday (weekend day), the kernel is
// estimated from the windows at the same clock time on the most recent N
// weekdays (weekend days).
#ifndef SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
#define SOJOURN_MODELS_AVAILABILITY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "models/availability/state.h"

namespace sojourn::availability {

enum class DayType { kWeekday, kWeekend };

// The lab's local clock, by which windows have a "same clock time" and days a
// type: a fixed offset from UTC, or a time zone of the tz database whose offset
// follows daylight saving time (the same-clock windows of paper 000 section
// 6.2 are the lab's wall clock: 16:30 is 16:30 in winter and in summer). A
// fixed offset converts implicitly, so an int offset still works where one was
// taken. Cheap to copy.
class LocalClock {
 public:
  LocalClock(int utc_offset_seconds = 0)  // NOLINT: implicit by design
      : offset_(utc_offset_seconds) {}
  // A zone such as "Europe/Amsterdam", "America/New_York" or "UTC" of the
  // system's tz database ($TZDIR or /usr/share/zoneinfo, Debian's tzdata);
  // INVALID_ARGUMENT for a name it does not have.
  static absl::StatusOr<LocalClock> Zone(absl::string_view name);

  // Seconds east of UTC at `unix_seconds`.
  int OffsetAt(int64_t unix_seconds) const {
    return zone_ ? OffsetFromZone(unix_seconds) : offset_;
  }
  bool has_zone() const { return zone_.has_value(); }
  // The zone's name, or "" for a fixed offset.
  const std::string& zone_name() const { return name_; }
  // "UTC+02:00" or the zone's name, for messages.
  std::string ToString() const;

  // Unix time of the local clock time `second_of_day` seconds after midnight on
  // the local day `day` (days since 1970-01-01 on the local calendar). A clock
  // time that a change to daylight saving time skips is the moment of the
  // change (02:30 on that night is 03:00); one it repeats, the first time.
  int64_t UnixAt(int64_t day, int64_t second_of_day) const;

  bool operator==(const LocalClock& o) const {
    return offset_ == o.offset_ && name_ == o.name_;
  }
  bool operator!=(const LocalClock& o) const { return !(*this == o); }

 private:
  int OffsetFromZone(int64_t unix_seconds) const;
  int offset_ = 0;
  std::optional<absl::TimeZone> zone_;
  std::string name_;
};

// Day type (Saturday/Sunday = weekend) of the local calendar day containing
// `unix_seconds`.
DayType DayTypeOf(int64_t unix_seconds, const LocalClock& clock);

// Day type of the local calendar day `day` (days since 1970-01-01).
DayType DayTypeOfLocalDay(int64_t day);

// The local calendar day (days since 1970-01-01) containing `unix_seconds`.
int64_t LocalDayNumber(int64_t unix_seconds, const LocalClock& clock);

// Seconds after local midnight on the local clock (0..86399): 16:30 is
// 59400 on every day, also on one that daylight saving time shortens.
int64_t LocalSecondOfDay(int64_t unix_seconds, const LocalClock& clock);

// Unix time of local midnight starting the local day that contains
// `unix_seconds` (a day that daylight saving time shortens or lengthens is
// 23 or 25 hours long).
int64_t LocalMidnight(int64_t unix_seconds, const LocalClock& clock);

struct WindowSpec {
  // The day type of the window's START day (windows may run past midnight).
  DayType day_type = DayType::kWeekday;
  // Local clock time of the window start, seconds after local midnight.
  int64_t start_second_of_day = 0;
  int64_t length_seconds = 0;
  // Use at most this many most recent days of day_type (0 = all).
  int history_days = 0;
  LocalClock clock;
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
  LocalHourCursor(int64_t start_unix, int64_t step_seconds, LocalClock clock)
      : start_(start_unix), step_(step_seconds), clock_(std::move(clock)) {}
  // Moves to point t (>= every t seen before).
  void Seek(int64_t t) {
    if (t >= end_ || t < begin_) Reset(t);
  }
  // Of the point last sought: local hour 0..23, 1 on a weekend day, local
  // day (LocalDayNumber), local midnight (unix seconds) and the first point
  // of the next local hour.
  int hour() const { return hour_; }
  int64_t day() const { return day_; }
  int weekend() const { return weekend_; }
  int64_t midnight() const { return midnight_; }
  int64_t end() const { return end_; }

 private:
  void Reset(int64_t t);
  const int64_t start_, step_;
  const LocalClock clock_;
  int64_t begin_ = 0, end_ = 0, midnight_ = 0, day_ = 0;
  int hour_ = 0, weekend_ = 0;
};

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_WINDOW_H_
