#include "models/availability/window.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"

namespace sojourn::availability {
namespace {

constexpr int64_t kDay = 86400;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Beyond these the civil-time arithmetic of absl saturates; no trace or
// request is near them (the callers clamp to their series).
constexpr int64_t kMaxZoneSeconds = int64_t{1} << 52;

}  // namespace

namespace {

// Whether `name` is a zone of the system's tz database: a relative path of
// letters, digits and _+- under its directory. Checked before absl loads it,
// because absl keeps every name it was asked for, found or not, for the life
// of the process (a request naming zones at random would grow it).
bool IsZoneFile(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/' || name.back() == '/') return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '+' &&
          c != '-') {
        return false;
      }
    }
  }
  const char* dir = std::getenv("TZDIR");
  const std::string path =
      absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo", "/", name);
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

absl::StatusOr<LocalClock> LocalClock::Zone(absl::string_view name) {
  absl::TimeZone tz;
  if (!IsZoneFile(name) || !absl::LoadTimeZone(std::string(name), &tz)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown time zone '", absl::CHexEscape(name.substr(0, 80)), name.size() > 80 ? "..." : "",
        "' (a name of the tz database such as Europe/Amsterdam or America/New_York; is the "
        "tzdata package installed?)"));
  }
  LocalClock out;
  out.zone_ = tz;
  out.name_ = std::string(name);
  return out;
}

int LocalClock::OffsetFromZone(int64_t unix_seconds) const {
  unix_seconds = std::clamp(unix_seconds, -kMaxZoneSeconds, kMaxZoneSeconds);
  return zone_->At(absl::FromUnixSeconds(unix_seconds)).offset;
}

std::string LocalClock::ToString() const {
  if (zone_) return name_;
  const int a = offset_ < 0 ? -offset_ : offset_;
  std::string out = absl::StrFormat("UTC%c%02d:%02d", offset_ < 0 ? '-' : '+', a / 3600,
                                    (a % 3600) / 60);
  if (a % 60 != 0) absl::StrAppendFormat(&out, ":%02d", a % 60);
  return out;
}

int64_t LocalClock::UnixAt(int64_t day, int64_t second_of_day) const {
  if (!zone_) return day * kDay + second_of_day - offset_;
  day = std::clamp(day, -kMaxZoneSeconds / kDay, kMaxZoneSeconds / kDay);
  const absl::CivilSecond civil = absl::CivilSecond(1970, 1, 1) + (day * kDay + second_of_day);
  return absl::ToUnixSeconds(absl::FromCivil(civil, *zone_));
}

int64_t LocalDayNumber(int64_t unix_seconds, const LocalClock& clock) {
  return FloorDiv(unix_seconds + clock.OffsetAt(unix_seconds), kDay);
}

DayType DayTypeOfLocalDay(int64_t day) {
  // 1970-01-01 was a Thursday: (day + 4) mod 7 is 0 on Sundays, 6 on Saturdays.
  int64_t dow = (day + 4) % 7;
  if (dow < 0) dow += 7;
  return (dow == 0 || dow == 6) ? DayType::kWeekend : DayType::kWeekday;
}

DayType DayTypeOf(int64_t unix_seconds, const LocalClock& clock) {
  return DayTypeOfLocalDay(LocalDayNumber(unix_seconds, clock));
}

int64_t LocalSecondOfDay(int64_t unix_seconds, const LocalClock& clock) {
  return FloorMod(unix_seconds + clock.OffsetAt(unix_seconds), kDay);
}

int64_t LocalMidnight(int64_t unix_seconds, const LocalClock& clock) {
  return clock.UnixAt(LocalDayNumber(unix_seconds, clock), 0);
}

void LocalHourCursor::Reset(int64_t t) {
  const int64_t at = start_ + t * step_;
  // One zone lookup per local hour (LocalMidnight and DayTypeOf would each
  // make their own).
  const int64_t local = at + clock_.OffsetAt(at);
  day_ = FloorDiv(local, kDay);
  midnight_ = clock_.UnixAt(day_, 0);
  hour_ = static_cast<int>(FloorMod(local, kDay) / 3600);
  weekend_ = DayTypeOfLocalDay(day_) == DayType::kWeekend ? 1 : 0;
  // The local hour's start: offsets change on whole hours (or half hours),
  // so the hour runs 3600 s from there.
  const int64_t hour_start = at - FloorMod(local, 3600);
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
  int64_t day = LocalDayNumber(end_unix - std::min<int64_t>(0, spec.start_second_of_day),
                               spec.clock);
  for (; ; --day) {
    // The clock time on that day: with a time zone, the same wall-clock time
    // across a change of daylight saving time.
    const int64_t start = spec.clock.UnixAt(day, spec.start_second_of_day);
    if (start + steps * step < series.start_unix) break;  // before the series
    if (DayTypeOfLocalDay(day) != spec.day_type) continue;
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
