// Predicted host CPU load L_t0(t) averaged over [t0, t0 + t] (paper 000
// section 8.4, footnote 1: "the aggregated one-step-ahead algorithm").
//
// Aggregation: the recent load samples are cut into consecutive blocks of
// length t ending at t0 and each block is averaged, giving a series
// a_1..a_n of t-long averages (a_n the newest). One step ahead of that series
// is the average over the next t: a_{n+1} = mu + phi (a_n - mu), an AR(1)
// about the series mean mu with phi the lag-1 autocorrelation clamped to
// [0, 1] (phi = 1 gives LAST, phi = 0 the block mean). With fewer than three
// blocks the forecast is the mean of the blocks there are; with no sample in
// any block it is unknown.
#ifndef SOJOURN_MODELS_SCHEDULING_LOAD_FORECAST_H_
#define SOJOURN_MODELS_SCHEDULING_LOAD_FORECAST_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/host_sample.h"

namespace sojourn::scheduling {

// One-step-ahead AR(1) forecast of the next value of `blocks` (oldest first)
// as described above; nullopt for an empty series.
std::optional<double> OneStepAhead(const std::vector<double>& blocks);

// L_t0(horizon): the aggregated one-step-ahead forecast of the mean load over
// [t0, t0 + horizon] from the samples at or before t0 (time-sorted; only the
// last `max_blocks` blocks of length `horizon` are used). Clamped to [0, 1];
// nullopt when no sample lies in the blocks.
std::optional<double> AggregatedLoadForecast(const std::vector<HostSample>& samples, int64_t t0,
                                             int64_t horizon_seconds, int max_blocks = 8);

// L_t0(t) at several horizons, piecewise linear in t between them (constant
// beyond the first and last). Empty = unknown (treated as load 0).
class LoadForecast {
 public:
  LoadForecast() = default;
  // A flat forecast.
  static LoadForecast Constant(double load);
  // Forecasts at the horizons of DefaultHorizons() (or `horizons`) from
  // `samples` at or before t0; unknown horizons are left out.
  static LoadForecast FromSamples(const std::vector<HostSample>& samples, int64_t t0,
                                  const std::vector<int64_t>& horizons = DefaultHorizons(),
                                  int max_blocks = 8);
  // 15 min, 30 min, 1, 2, 4, 8, 16, 24, 48 h.
  static const std::vector<int64_t>& DefaultHorizons();

  void Add(int64_t horizon_seconds, double load);
  bool known() const { return !points_.empty(); }
  // L_t0(t) in [0, 1] (0 when unknown).
  double At(double t_seconds) const;
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int64_t, double>> points_;  // sorted by horizon
};

}  // namespace sojourn::scheduling

#endif  // SOJOURN_MODELS_SCHEDULING_LOAD_FORECAST_H_
