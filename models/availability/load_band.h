// Load-band conditioning of the first sojourn (issue 3, acceptance 3).
//
// The semi-Markov model knows a host's state (S1, S2) and, with age
// conditioning, how long it has been in it, but not where its load is inside
// the state's range. A host in S1 at load 0.18 is about to enter S2 or S3 far
// more often than one at load 0.01 at the same clock time: that is what the
// time-series baselines (LAST, BM, AR...) see and the SMP did not. The
// first sojourn of a window (the one in progress at the window start) is
// therefore given proportional cause-specific hazards (Cox, JRSS B 34, 1972)
// in the load band at the window start (state.h LoadBandOf: the lower or the
// upper half of the state's load range):
//   h_j(l | band b) = rho_{b,c(j)} h_j(l),
// with c(j) = failure (S3/S4/S5) or the other up state, and h_j the first
// sojourn's hazards as estimated from the cell's windows of every band.
//
// rho is the standardised ratio (indirect standardisation, as host frailty's
// O / E in frailty.h) of the first sojourns that started in band b against
// their strata, pooled over hosts:
//   O_b = exits (of cause c) of the first sojourns that started in band b,
//   E_b = sum over strata s of T_{b,s} * D_s / T_s,
// where every grid point t of a host's training history in S1 or S2 with a
// known band starts a first sojourn, followed for at most the window length
// (its exposure T is the steps until it exits or the cap), and a stratum is
// (host, day type, local hour of t, state, age class of t). Comparing each
// band only with its own host at the same clock time and age takes out what
// host frailty, the same-clock windows and age conditioning already carry,
// so rho is the within-host effect of the load alone; it is relative to the
// strata's own mix of bands, the mix the cell's first-sojourn hazards were
// estimated on. rho = (O + 1) / (E + 1) (a gamma(1, 1) prior on the ratio:
// one expected exit's worth of evidence for "no effect"). A trace whose up
// samples are all in one band (e.g. 0/1 availability pings) has O = E in
// every stratum and rho = 1: nothing changes.
#ifndef SOJOURN_MODELS_AVAILABILITY_LOAD_BAND_H_
#define SOJOURN_MODELS_AVAILABILITY_LOAD_BAND_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "models/availability/state.h"
#include "models/availability/window.h"

namespace sojourn::availability {

// The hazard ratios applied to the first sojourn (PredictFromStats).
struct FirstSojournRatio {
  double failure = 1;  // exits to S3/S4/S5
  double other = 1;    // exits to the other up state
  bool operator==(const FirstSojournRatio& o) const {
    return failure == o.failure && other == o.other;
  }
};

// One host's (or a population's) observed and expected first-sojourn exits,
// by [day type 0 weekday / 1 weekend][state S1 = 0, S2 = 1][band 0, 1]
// [cause 0 other up state, 1 failure].
struct BandExposure {
  using Table = std::array<std::array<std::array<std::array<double, 2>, 2>, 2>, 2>;
  Table observed{};
  Table expected{};
  void Merge(const BandExposure& other);
  // (O + 1) / (E + 1) of one cell.
  double Ratio(int day_type, int state_index, int band, int cause) const;
  // The ratios of a host in `state` (S1/S2) and `band` (0, 1) on `day_type`;
  // 1 for anything else (a failure state, an unknown band).
  FirstSojournRatio RatioOf(int day_type, HostState state, uint8_t band) const;
};

// The exposure of `series` (which must carry load_band; an empty band
// series gives an empty table) over the first sojourns that start at grid
// points t with t + cap_steps at or before `end_unix` (the training
// history), followed for at most cap_steps steps (the window length).
// Strata use the local hour of `clock` and the age classes of
// recent_seconds / long_seconds (AgeClassOf; a run reaching the series start
// is its own class; recent_seconds = 0: no age strata). `exclude(t)`, if set,
// drops the start t (e.g. a window from t touching a monitoring outage).
BandExposure CountBandExposure(const StateSeries& series, int64_t end_unix,
                               const LocalClock& clock, int64_t cap_steps,
                               int64_t recent_seconds, int64_t long_seconds,
                               const std::function<bool(size_t t)>& exclude = nullptr);

namespace internal_load_band {
// Per stratum: exposure by band and exits by band and cause.
struct Stratum {
  double exposure[2] = {0, 0};
  double exits[2][2] = {{0, 0}, {0, 0}};
};
// A run [a, b) of one state, read up to b - 1.
struct RunCursor {
  int64_t a = 0, b = 0;
};
}  // namespace internal_load_band

// CountBandExposure(series, end_unix, ...) of a growing grid, for a history
// that ends at or after its last point (the state manager's default request,
// which counting anew walked the whole grid for: 30 ms at a year of 6 s
// samples). The starts whose cap ends before the series' last point are
// counted once and kept (every grid point but the last is final, state.h
// GridBuilder); each call counts only those added since, and the last.
// Equal to CountBandExposure for any series: one with another start or step
// than the last (a grid trimmed at its start) starts the count over, and
// an earlier end or an older snapshot than the last is counted anew. The
// series of successive calls must otherwise be one grid as it grows (a grid
// built again from its samples needs a new counter). Not thread-safe.
class BandExposureCounter {
 public:
  BandExposureCounter(const LocalClock& clock, int64_t cap_steps, int64_t recent_seconds,
                      int64_t long_seconds);
  // Whether this counter counts with these arguments.
  bool Counts(const LocalClock& clock, int64_t cap_steps, int64_t recent_seconds,
              int64_t long_seconds) const;
  BandExposure Count(const StateSeries& series, int64_t end_unix);

 private:
  LocalClock clock_;
  int64_t cap_steps_, recent_seconds_, long_seconds_;
  // The series counted (its first point and step), the starts before next_
  // counted in strata_, and the run of the last of them.
  int64_t start_ = 0, step_ = 0, next_ = 0;
  internal_load_band::RunCursor run_;
  std::vector<internal_load_band::Stratum> strata_;
};

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_LOAD_BAND_H_
