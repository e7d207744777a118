#include "models/availability/load_band.h"

#include <algorithm>
#include <vector>

#include "models/availability/sojourn_stats.h"
#include "models/availability/window.h"

namespace sojourn::availability {

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

namespace {

using internal_load_band::RunCursor;
using internal_load_band::Stratum;

constexpr size_t kStrata = 2 * 24 * 2 * 4;

// The age classes' bounds in steps (0 = none).
void AgeSteps(int64_t step, int64_t recent_seconds, int64_t long_seconds, int64_t* recent_steps,
              int64_t* long_steps) {
  *recent_steps = recent_seconds > 0 ? (recent_seconds + step - 1) / step : 0;
  *long_steps = *recent_steps > 0 && long_seconds > recent_seconds
                    ? (long_seconds + step - 1) / step
                    : 0;
}

// Adds the first sojourns that start at t_from .. t_to - 1 to `strata`
// (by (day type, hour, state, age class 0..2 or 3 = unknown)), reading only
// the points before `limit` (t_to + cap_steps <= limit: a run still going at
// `limit` lasts longer than the cap from every start counted). `run` is a run
// [a, b) of one state with a <= t_from (b - 1 the furthest point read of it);
// it is left at the run of the last start counted, to go on from t_to.
void AddStarts(const StateSeries& series, int64_t t_from, int64_t t_to, int64_t limit,
               int64_t cap_steps, int64_t recent_steps, int64_t long_steps,
               LocalHourCursor& hours, const std::function<bool(size_t t)>& exclude,
               RunCursor* run, Stratum* strata) {
  const auto& st = series.states;
  // Starts walked run by run (a run [a, b) of one state: at t its age is
  // t - a, unknown when a = 0, and its first sojourn lasts b - t steps,
  // ending in st[b]) and, inside a run, local hour by local hour, so the
  // clock arithmetic is done once per hour (LocalHourCursor) rather than per
  // grid point.
  for (int64_t t = t_from; t < t_to;) {
    if (run->b <= run->a) run->b = run->a + 1;
    while (run->b < limit && st[run->b] == st[run->a]) ++run->b;
    if (t >= run->b) {  // that run ended before t: the next one
      run->a = run->b;
      continue;
    }
    const int64_t a = run->a, b = run->b;
    const HostState s = st[a];
    const int64_t run_end = std::min(b, t_to);
    if (IsFailure(s)) {
      t = run_end;
      continue;
    }
    const int state = StateIndex(s) - 1;
    // Used only by starts within the cap of b, so b < limit.
    const int cause = b < limit && IsFailure(st[b]) ? 1 : 0;
    while (t < run_end) {
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
}

// Observed and expected exits by band from the strata: within each stratum,
// each band's exposure at the stratum's rate.
BandExposure Standardise(const std::vector<Stratum>& strata) {
  BandExposure out;
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

}  // namespace

BandExposure CountBandExposure(const StateSeries& series, int64_t end_unix,
                               const LocalClock& clock, int64_t cap_steps,
                               int64_t recent_seconds, int64_t long_seconds,
                               const std::function<bool(size_t t)>& exclude) {
  const int64_t n = static_cast<int64_t>(series.states.size());
  const int64_t step = series.step_seconds;
  if (n == 0 || step <= 0 || cap_steps <= 0 || series.load_band.size() != series.states.size() ||
      end_unix < series.start_unix) {
    return {};
  }
  // Last grid point of the history.
  const int64_t last_ok = std::min(n - 1, (end_unix - series.start_unix) / step);
  if (cap_steps > last_ok) return {};
  int64_t recent_steps = 0, long_steps = 0;
  AgeSteps(step, recent_seconds, long_seconds, &recent_steps, &long_steps);
  std::vector<Stratum> strata(kStrata);
  LocalHourCursor hours(series.start_unix, step, clock);
  RunCursor run;
  // Starts t = 0 .. last_ok - cap_steps, each followed to at most last_ok.
  AddStarts(series, 0, last_ok - cap_steps + 1, last_ok + 1, cap_steps, recent_steps, long_steps,
            hours, exclude, &run, strata.data());
  return Standardise(strata);
}

BandExposureCounter::BandExposureCounter(const LocalClock& clock, int64_t cap_steps,
                                         int64_t recent_seconds, int64_t long_seconds)
    : clock_(clock),
      cap_steps_(cap_steps),
      recent_seconds_(recent_seconds),
      long_seconds_(long_seconds) {}

bool BandExposureCounter::Counts(const LocalClock& clock, int64_t cap_steps,
                                 int64_t recent_seconds, int64_t long_seconds) const {
  return clock_ == clock && cap_steps_ == cap_steps &&
         recent_seconds_ == recent_seconds && long_seconds_ == long_seconds;
}

BandExposure BandExposureCounter::Count(const StateSeries& series, int64_t end_unix) {
  const int64_t n = static_cast<int64_t>(series.states.size());
  const int64_t step = series.step_seconds;
  auto anew = [&] {
    return CountBandExposure(series, end_unix, clock_, cap_steps_, recent_seconds_,
                             long_seconds_);
  };
  // A history that ends before the last grid point: counted anew.
  if (n == 0 || step <= 0 || end_unix < series.start_unix ||
      (end_unix - series.start_unix) / step < n - 1) {
    return anew();
  }
  if (series.start_unix != start_ || step != step_) {
    // Another series (a grid trimmed at its start, or rebuilt): start over.
    start_ = series.start_unix;
    step_ = step;
    next_ = 0;
    run_ = RunCursor();
    strata_.assign(kStrata, Stratum());
  }
  // Every point but the last is final (state.h GridBuilder): the starts
  // whose cap ends before the last point are counted for good.
  const int64_t final_end = n - 1;
  const int64_t final_starts = final_end - cap_steps_;
  // No cap or no bands (CountBandExposure's empty table), or a snapshot
  // older than the last one counted.
  if (cap_steps_ <= 0 || series.load_band.size() != series.states.size() ||
      final_starts < next_) {
    return anew();
  }
  int64_t recent_steps = 0, long_steps = 0;
  AgeSteps(step, recent_seconds_, long_seconds_, &recent_steps, &long_steps);
  LocalHourCursor hours(series.start_unix, step, clock_);
  AddStarts(series, next_, final_starts, final_end, cap_steps_, recent_steps, long_steps, hours,
            nullptr, &run_, strata_.data());
  next_ = final_starts;
  // The last start reads the last point.
  std::vector<Stratum> strata = strata_;
  RunCursor run = run_;
  AddStarts(series, final_starts, n - cap_steps_, n, cap_steps_, recent_steps, long_steps, hours,
            nullptr, &run, strata.data());
  return Standardise(strata);
}

}  // namespace sojourn::availability
