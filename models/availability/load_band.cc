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
  const int64_t recent_steps = recent_seconds > 0 ? (recent_seconds + step - 1) / step : 0;
  const int64_t long_steps =
      recent_steps > 0 && long_seconds > recent_seconds ? (long_seconds + step - 1) / step : 0;
  // Strata: (day type, hour, state, age class 0..2 or 3 = unknown).
  std::vector<Stratum> strata(2 * 24 * 2 * 4);
  // Starts t = 0 .. last_t, walked run by run (a run [a, b) of one state:
  // at t its age is t - a, unknown when a = 0, and its first sojourn lasts
  // b - t steps, ending in st[b]) and, inside a run, local hour by local hour,
  // so the clock arithmetic is done once per hour (LocalHourCursor) rather
  // than per grid point.
  const int64_t last_t = last_ok - cap_steps;
  LocalHourCursor hours(series.start_unix, step, utc_offset_seconds);
  for (int64_t a = 0, b = 0; a <= last_t; a = b) {
    b = a + 1;
    while (b < n && st[b] == st[a]) ++b;
    const HostState s = st[a];
    if (IsFailure(s)) continue;
    const int state = StateIndex(s) - 1;
    // b == n cannot be reached within the cap from t <= last_t (x > cap).
    const int cause = b < n && IsFailure(st[b]) ? 1 : 0;
    const int64_t run_end = std::min(b, last_t + 1);
    for (int64_t t = a; t < run_end;) {
      hours.Seek(t);
      const int64_t block_end = std::min(run_end, hours.end());
      const int hour = hours.hour(), dt = hours.weekend();
      Stratum* z = &strata[((dt * 24 + hour) * 2 + state) * 4];
      // Segments of the block with one age class and one kind of start:
      // x = b - t above the cap (followed for cap_steps, no exit) or not.
      while (t < block_end) {
        int64_t seg_end = block_end;
        int cls = 3;
        if (a > 0) {
          cls = 0;
          if (recent_steps > 0) {
            const int64_t age = t - a;
            cls = AgeClassOf(age, recent_steps, long_steps);
            if (age < recent_steps) {
              seg_end = std::min(seg_end, a + recent_steps);
            } else if (long_steps > recent_steps && age < long_steps) {
              seg_end = std::min(seg_end, a + long_steps);
            }
          }
        }
        const int64_t near = b - cap_steps;  // x <= cap_steps from here on
        const bool exits = t >= near;
        if (!exits) seg_end = std::min(seg_end, near);
        int64_t count[2] = {0, 0}, steps[2] = {0, 0};
        for (; t < seg_end; ++t) {
          const uint8_t band = series.load_band[t];
          if (band > 1) continue;
          if (exclude && exclude(static_cast<size_t>(t))) continue;
          ++count[band];
          steps[band] += b - t;
        }
        Stratum& zc = z[cls];
        for (int band = 0; band < 2; ++band) {
          if (count[band] == 0) continue;
          if (exits) {
            zc.exposure[band] += static_cast<double>(steps[band]);
            zc.exits[band][cause] += static_cast<double>(count[band]);
          } else {
            zc.exposure[band] += static_cast<double>(count[band] * cap_steps);
          }
        }
      }
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
