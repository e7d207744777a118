#include "models/availability/load_band.h"

#include <algorithm>
#include <vector>

#include "models/availability/sojourn_stats.h"
#include "models/availability/window.h"

namespace sojourn::availability {
namespace {

// Per stratum: exposure by band and exits by band and cause.
struct Stratum {
  double exposure[2] = {0, 0};
  double exits[2][2] = {{0, 0}, {0, 0}};
};

}  // namespace

void BandExposure::Merge(const BandExposure& other) {
  for (int d = 0; d < 2; ++d)
    for (int s = 0; s < 2; ++s)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 2; ++c) {
          observed[d][s][b][c] += other.observed[d][s][b][c];
          expected[d][s][b][c] += other.expected[d][s][b][c];
        }
}

double BandExposure::Ratio(int day_type, int state_index, int band, int cause) const {
  return (observed[day_type][state_index][band][cause] + 1.0) /
         (expected[day_type][state_index][band][cause] + 1.0);
}

FirstSojournRatio BandExposure::RatioOf(int day_type, HostState state, uint8_t band) const {
  FirstSojournRatio r;
  if (IsFailure(state) || band > 1 || day_type < 0 || day_type > 1) return r;
  const int s = StateIndex(state) - 1;
  r.other = Ratio(day_type, s, band, 0);
  r.failure = Ratio(day_type, s, band, 1);
  return r;
}

BandExposure CountBandExposure(const StateSeries& series, int64_t end_unix,
                               int utc_offset_seconds, int64_t cap_steps,
                               int64_t recent_seconds, int64_t long_seconds,
                               const std::function<bool(size_t t)>& exclude) {
  BandExposure out;
  const auto& st = series.states;
  const int64_t n = static_cast<int64_t>(st.size());
  const int64_t step = series.step_seconds;
  if (n == 0 || step <= 0 || cap_steps <= 0 || series.load_band.size() != st.size() ||
      end_unix < series.start_unix) {
    return out;
  }
  // Last grid point of the history.
  const int64_t last_ok = std::min(n - 1, (end_unix - series.start_unix) / step);
  if (cap_steps > last_ok) return out;
  // First index after t whose state differs (n if none).
  std::vector<int64_t> change_next(n);
  change_next[n - 1] = n;
  for (int64_t t = n - 2; t >= 0; --t) {
    change_next[t] = st[t + 1] != st[t] ? t + 1 : change_next[t + 1];
  }
  const std::vector<int64_t> ages = StateAges(st);
  const int64_t recent_steps = recent_seconds > 0 ? (recent_seconds + step - 1) / step : 0;
  const int64_t long_steps =
      recent_steps > 0 && long_seconds > recent_seconds ? (long_seconds + step - 1) / step : 0;
  // Strata: (day type, hour, state, age class 0..2 or 3 = unknown).
  std::vector<Stratum> strata(2 * 24 * 2 * 4);
  for (int64_t t = 0; t + cap_steps <= last_ok; ++t) {
    const HostState s = st[t];
    const uint8_t band = series.load_band[t];
    if (IsFailure(s) || band > 1) continue;
    if (exclude && exclude(static_cast<size_t>(t))) continue;
    const int64_t at = series.start_unix + t * step;
    const int hour = static_cast<int>((at - LocalMidnight(at, utc_offset_seconds)) / 3600);
    const int dt = DayTypeOf(at, utc_offset_seconds) == DayType::kWeekend ? 1 : 0;
    int cls = 0;
    if (ages[t] < 0) {
      cls = 3;
    } else if (recent_steps > 0) {
      cls = AgeClassOf(ages[t], recent_steps, long_steps);
    }
    Stratum& z = strata[((dt * 24 + hour) * 2 + (StateIndex(s) - 1)) * 4 + cls];
    const int64_t x = change_next[t] - t;
    if (x <= cap_steps) {
      z.exposure[band] += static_cast<double>(x);
      z.exits[band][IsFailure(st[change_next[t]]) ? 1 : 0] += 1;
    } else {
      z.exposure[band] += static_cast<double>(cap_steps);
    }
  }
  for (int dt = 0; dt < 2; ++dt) {
    for (int hour = 0; hour < 24; ++hour) {
      for (int s = 0; s < 2; ++s) {
        for (int cls = 0; cls < 4; ++cls) {
          const Stratum& z = strata[((dt * 24 + hour) * 2 + s) * 4 + cls];
          const double total = z.exposure[0] + z.exposure[1];
          if (total <= 0) continue;
          for (int c = 0; c < 2; ++c) {
            const double rate = (z.exits[0][c] + z.exits[1][c]) / total;
            for (int b = 0; b < 2; ++b) {
              out.observed[dt][s][b][c] += z.exits[b][c];
              out.expected[dt][s][b][c] += z.exposure[b] * rate;
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace sojourn::availability
