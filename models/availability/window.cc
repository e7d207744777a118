#include "models/availability/window.h"

#include <algorithm>

namespace sojourn::availability {
namespace {

constexpr int64_t kDay = 86400;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

DayType DayTypeOf(int64_t unix_seconds, int utc_offset_seconds) {
  const int64_t day = FloorDiv(unix_seconds + utc_offset_seconds, kDay);
  // 1970-01-01 was a Thursday: (day + 4) mod 7 is 0 on Sundays, 6 on Saturdays.
  int64_t dow = (day + 4) % 7;
  if (dow < 0) dow += 7;
  return (dow == 0 || dow == 6) ? DayType::kWeekend : DayType::kWeekday;
}

int64_t LocalMidnight(int64_t unix_seconds, int utc_offset_seconds) {
  return FloorDiv(unix_seconds + utc_offset_seconds, kDay) * kDay - utc_offset_seconds;
}

void LocalHourCursor::Reset(int64_t t) {
  const int64_t at = start_ + t * step_;
  midnight_ = LocalMidnight(at, offset_);
  hour_ = static_cast<int>((at - midnight_) / 3600);
  weekend_ = DayTypeOf(at, offset_) == DayType::kWeekend ? 1 : 0;
  const int64_t hour_start = midnight_ + hour_ * int64_t{3600};
  // First points at or after the hour's start and the next hour's.
  begin_ = -FloorDiv(start_ - hour_start, step_);
  end_ = -FloorDiv(start_ - hour_start - 3600, step_);
}

int WindowSteps(const StateSeries& series, const WindowSpec& spec) {
  if (series.step_seconds <= 0) return 0;
  return static_cast<int>(std::max<int64_t>(1, spec.length_seconds / series.step_seconds));
}

std::vector<size_t> HistoryWindowStarts(const StateSeries& series, const WindowSpec& spec,
                                        int64_t end_unix, int64_t after_unix) {
  std::vector<size_t> out;
  if (series.step_seconds <= 0 || series.states.empty()) return out;
  const int64_t step = series.step_seconds;
  const int64_t steps = WindowSteps(series, spec);
  const int64_t n = static_cast<int64_t>(series.states.size());
  const int64_t series_end = series.start_unix + (n - 1) * step;
  // No window can end before the series starts or after it ends, so the walk
  // back starts at the series end: it then takes O(days of data) steps
  // whatever end_unix says (INT64_MAX would otherwise be ~1e14 days, and
  // LocalMidnight would overflow).
  if (end_unix < series.start_unix) return out;
  end_unix = std::min(end_unix, series_end);
  // Newest local day whose window could start by end_unix, then walk back.
  int64_t midnight = LocalMidnight(end_unix - std::min<int64_t>(0, spec.start_second_of_day),
                                   spec.utc_offset_seconds);
  for (; ; midnight -= kDay) {
    const int64_t start = midnight + spec.start_second_of_day;
    if (start + steps * step < series.start_unix) break;  // before the series
    if (DayTypeOf(midnight, spec.utc_offset_seconds) != spec.day_type) continue;
    // First grid point at or after the clock start.
    const int64_t idx = -FloorDiv(series.start_unix - start, step);
    if (idx < 0) break;
    const int64_t grid_start = series.start_unix + idx * step;
    if (grid_start + steps * step <= after_unix) break;  // so did every earlier one
    if (grid_start + steps * step > end_unix) continue;
    if (grid_start + steps * step > series_end) continue;
    out.push_back(static_cast<size_t>(idx));
    if (spec.history_days > 0 && static_cast<int>(out.size()) >= spec.history_days) break;
  }
  return out;
}

}  // namespace sojourn::availability
