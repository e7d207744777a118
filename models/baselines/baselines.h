// Baseline availability predictors that sojourn's semi-Markov TR is compared
// against (issue 3, issue 7). Pure library: no gRPC types.
//
//  * The linear time-series models of paper 000 Table 4 as implemented in the
//    RPS toolkit (paper 000 ref. [10]): LAST, BM(p), AR(p), MA(q), ARMA(p,q),
//    with p = q = 8. Fitted by least squares with Eigen; MA and ARMA by the
//    Hannan-Rissanen two-stage regression (a long AR gives residual estimates,
//    then the series is regressed on its own lags and the lagged residuals).
//    Paper 000 section 8.2.1 applies them to a window by forecasting the
//    host's load/state level over the window from the samples of the same
//    clock window on previous days and reading the predicted trajectory's
//    state transitions; ForecastSurvivalSteps() turns a forecast into that.
//  * The two estimators deployed systems use today, turned into a TR:
//    AvailIntervalSurvival (HTCondor startd's AvailTimeEstimate: empirical
//    survival of past availability intervals longer than the current up-time)
//    and OnFraction (BOINC client's exponentially weighted on-fraction with a
//    10-day time constant).
#ifndef SOJOURN_MODELS_BASELINES_BASELINES_H_
#define SOJOURN_MODELS_BASELINES_BASELINES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sojourn::baselines {

// ------------------------------------------------------------ time series

enum class TsKind { kLast, kBm, kAr, kMa, kArma };

// "last", "bm", "ar", "ma", "arma".
absl::StatusOr<TsKind> ParseTsKind(const std::string& name);
const char* TsKindName(TsKind kind);

struct TsSpec {
  TsKind kind = TsKind::kAr;
  // AR order p (BM: the largest averaging window N <= p); RPS default 8.
  int p = 8;
  // MA order q; RPS default 8.
  int q = 8;
};

// A fitted linear time-series predictor with its filter state. Observe() the
// series one value at a time (the training values are observed by
// FitTsModel); Forecast(h) gives the h-step-ahead forecasts from everything
// observed so far. Copyable; not thread-safe (one instance per series).
class TsModel {
 public:
  // Appends one observation and updates the residual filter (MA/ARMA).
  void Observe(double x);
  // Forecasts x[n+1..n+h] after the n observations so far (multi-step: the
  // forecasts are fed back for AR lags, future residuals are 0).
  std::vector<double> Forecast(int h) const;

  TsKind kind() const { return kind_; }
  // Orders actually used (reduced when the training series was short; 0 when
  // the model fell back to the training mean).
  int p() const { return static_cast<int>(ar_.size()); }
  int q() const { return static_cast<int>(ma_.size()); }
  int bm_window() const { return bm_window_; }
  double mean() const { return mean_; }
  const std::vector<double>& ar() const { return ar_; }
  const std::vector<double>& ma() const { return ma_; }

 private:
  friend TsModel FitTsModel(const TsSpec& spec, const std::vector<double>& train);
  TsKind kind_ = TsKind::kLast;
  double mean_ = 0;
  double scale_ = 1;        // training standard deviation, bounds filter residuals
  std::vector<double> ar_;  // ar_[i] multiplies x[t-1-i] - mean
  std::vector<double> ma_;  // ma_[j] multiplies e[t-1-j]
  int bm_window_ = 1;
  std::vector<double> x_;  // observations (all; the models read the last few)
  std::vector<double> e_;  // residuals (MA/ARMA)
};

// Fits the model to `train` and observes it. Never fails: a series too short
// for the requested orders gets smaller orders (at least 4 rows per
// coefficient), and one too short for any lag gets the mean forecast.
// Constant series are handled (ridge-regularised normal equations).
// AR and ARMA models are stationary: least squares (and Hannan-Rissanen's
// second stage) can return an AR part with a root on or inside the unit
// circle, whose multi-step forecasts run away from the series; such a fit is
// replaced by the next smaller order (ARMA: the same (p, q) sequence as for a
// short series), down to the mean forecast, as maximum-likelihood fitting in
// standard packages keeps the AR part stationary (R's arima with
// transform.pars, statsmodels' ARIMA with enforce_stationarity, both the
// default).
TsModel FitTsModel(const TsSpec& spec, const std::vector<double>& train);

// Least-squares AR(p) coefficients of a centred series (exposed for tests):
// x[t] - mean = sum_i a[i] (x[t-1-i] - mean) + e[t].
std::vector<double> FitArCoefficients(const std::vector<double>& x, double mean, int p);

// Number of forecast steps (from step 1) before the first one above
// `failure_level`: the predicted trajectory survives a window of L steps iff
// L <= the result. Returns forecast.size() when no step fails.
int ForecastSurvivalSteps(const std::vector<double>& forecast, double failure_level);

// ------------------------------------------------------------ HTCondor

// Empirical survival of past availability intervals (HTCondor startd's
// AvailTime statistics behind AvailTimeEstimate): with intervals of lengths
// len_k (steps) completed in the history and a host that has been up for u
// steps, TR(m) = #{len_k > u + m} / #{len_k > u}. When no past interval is
// longer than u (the host is in its longest-ever run) TR(m) = 1.
class AvailIntervalSurvival {
 public:
  explicit AvailIntervalSurvival(std::vector<int64_t> interval_lengths);
  double Tr(int64_t uptime_steps, int64_t m) const;
  size_t num_intervals() const { return sorted_.size(); }

 private:
  std::vector<int64_t> sorted_;
  // Number of intervals longer than x.
  size_t CountLonger(int64_t x) const;
};

// Completed availability intervals (maximal runs of up steps bounded by down
// steps on both sides) of an up/down series; runs touching either end of the
// series are censored and left out.
std::vector<int64_t> CompletedUpIntervals(const std::vector<bool>& up);

// ------------------------------------------------------------ BOINC

// BOINC client's on-fraction (client/time_stats.cpp): after dt seconds in
// state `on`, f <- f * exp(-dt / tau) + (1 - exp(-dt / tau)) * on, with
// tau = 10 days and f = 1 initially. As a TR, BOINC has no notion of interval
// length: the probability that the host is available, f, is used for every
// window length.
class OnFraction {
 public:
  explicit OnFraction(double time_constant_seconds = 10 * 86400.0) : tau_(time_constant_seconds) {}
  void Observe(bool on, double dt_seconds);
  double value() const { return f_; }
  double Tr() const { return f_; }

 private:
  double tau_;
  double f_ = 1.0;
};

// ------------------------------------------------------------ live

// What the two deployed estimators above say of a window of `window_steps`
// grid steps starting at point t of a host's up/down grid (up[i]: the host was
// usable, S1 or S2, at point i), from points 0..t only: what a predictor
// serving them beside the TR reports (PredictAvailabilityRequest.
// deployed_estimates). The backtest scores the same two estimators, with the
// intervals of the training half (docs/EVALUATION.md, avail_quantile and
// on_fraction).
struct DeployedEstimates {
  // AvailIntervalSurvival of the intervals completed by t, at the host's
  // up-time: 0 when the host is down at t.
  double avail_time_tr = 0;
  int64_t completed_intervals = 0;
  // Steps since the host's current up run started (0 when down at t).
  int64_t up_steps = 0;
  // OnFraction after observing points 1..t, each step_seconds long.
  double on_fraction = 1;
};
// t must be < up.size(). `down_after_seconds` > 0: the host has been down
// that long after point t (a state manager's host silent past its revocation
// gap, or in S3/S4 now): no up-time, and the on-fraction counts that time as
// off, as BOINC's client does on its next start.
DeployedEstimates DeployedEstimatesAt(const std::vector<bool>& up, size_t t, int64_t window_steps,
                                      double step_seconds, double down_after_seconds = 0);

// DeployedEstimatesAt(up, t, ...) at the last point t of a series that grows
// at its end (the state manager's request for a window from now, which
// walked the host's whole grid): the runs before the one in progress are
// walked once and kept (their completed intervals and the on-fraction after
// them), so each call costs the points added since and a sort of the
// intervals. Equal to DeployedEstimatesAt. Not thread-safe.
class DeployedEstimatesKeeper {
 public:
  explicit DeployedEstimatesKeeper(double step_seconds) : step_seconds_(step_seconds) {}
  // Appends the next point of the series.
  void Add(bool up);
  // Points added.
  size_t size() const { return n_; }
  // DeployedEstimatesAt(the points added then `last_up`, t = size(),
  // window_steps, step_seconds, down_after_seconds): `last_up` is the
  // series' last point, which is not kept (it may still change).
  DeployedEstimates At(bool last_up, int64_t window_steps, double down_after_seconds = 0) const;

 private:
  // Ends the run in progress, the points run_start_ .. j, into intervals_
  // and on_ (as DeployedEstimatesAt walks it).
  static void EndRun(size_t run_start, bool run_up, size_t j, double step_seconds,
                     std::vector<int64_t>* intervals, OnFraction* on);

  double step_seconds_;
  size_t n_ = 0;
  // The run in progress (from run_start_, up or down) and what the runs
  // before it gave.
  size_t run_start_ = 0;
  bool run_up_ = false;
  std::vector<int64_t> intervals_;
  OnFraction on_;
};

}  // namespace sojourn::baselines

#endif  // SOJOURN_MODELS_BASELINES_BASELINES_H_
