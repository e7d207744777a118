#include "models/baselines/baselines.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"

namespace sojourn::baselines {
namespace {

// Rows of data needed per coefficient before an order is used.
constexpr int kRowsPerCoef = 4;

// Solves the ridge-regularised least-squares problem min |X b - y|^2 + lambda |b|^2
// with a tiny lambda relative to the scale of X^T X, so constant or collinear
// regressors (a host that is always up) give a finite, small solution.
Eigen::VectorXd SolveLs(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  Eigen::MatrixXd xtx = x.transpose() * x;
  Eigen::VectorXd xty = x.transpose() * y;
  const double scale = xtx.diagonal().mean();
  const double lambda = 1e-8 * (scale > 0 ? scale : 1.0) + 1e-12;
  xtx.diagonal().array() += lambda;
  return xtx.ldlt().solve(xty);
}

double Mean(const std::vector<double>& x) {
  if (x.empty()) return 0;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

// Largest order <= want that leaves at least kRowsPerCoef rows per coefficient.
int FeasibleOrder(int want, size_t n, int extra_lags, int other_coefs) {
  int p = want;
  while (p > 0) {
    const int64_t rows = static_cast<int64_t>(n) - std::max(p, 0) - extra_lags;
    if (rows >= static_cast<int64_t>(kRowsPerCoef) * (p + other_coefs)) break;
    --p;
  }
  return p;
}

// Whether x[t] = sum_i a[i] x[t-1-i] + noise is stationary: every eigenvalue
// of its companion matrix (every inverse root of 1 - sum_i a[i] z^(i+1)) lies
// strictly inside the unit circle. An empty AR part is stationary.
bool IsStationary(const std::vector<double>& a) {
  const int p = static_cast<int>(a.size());
  if (p == 0) return true;
  for (double v : a) {
    if (!std::isfinite(v)) return false;
  }
  Eigen::MatrixXd c = Eigen::MatrixXd::Zero(p, p);
  for (int i = 0; i < p; ++i) c(0, i) = a[i];
  for (int i = 1; i < p; ++i) c(i, i - 1) = 1;
  return c.eigenvalues().cwiseAbs().maxCoeff() < 1;
}

}  // namespace

absl::StatusOr<TsKind> ParseTsKind(const std::string& name) {
  if (name == "last") return TsKind::kLast;
  if (name == "bm") return TsKind::kBm;
  if (name == "ar") return TsKind::kAr;
  if (name == "ma") return TsKind::kMa;
  if (name == "arma") return TsKind::kArma;
  return absl::InvalidArgumentError(absl::StrCat("unknown time-series model '", name, "'"));
}

const char* TsKindName(TsKind kind) {
  switch (kind) {
    case TsKind::kLast:
      return "last";
    case TsKind::kBm:
      return "bm";
    case TsKind::kAr:
      return "ar";
    case TsKind::kMa:
      return "ma";
    case TsKind::kArma:
      return "arma";
  }
  return "?";
}

std::vector<double> FitArCoefficients(const std::vector<double>& x, double mean, int p) {
  const int n = static_cast<int>(x.size());
  if (p <= 0 || n - p < 1) return {};
  Eigen::MatrixXd a(n - p, p);
  Eigen::VectorXd y(n - p);
  for (int t = p; t < n; ++t) {
    y(t - p) = x[t] - mean;
    for (int i = 0; i < p; ++i) a(t - p, i) = x[t - 1 - i] - mean;
  }
  Eigen::VectorXd b = SolveLs(a, y);
  return std::vector<double>(b.data(), b.data() + b.size());
}

TsModel FitTsModel(const TsSpec& spec, const std::vector<double>& train) {
  TsModel m;
  m.kind_ = spec.kind;
  m.mean_ = Mean(train);
  double var = 0;
  for (double v : train) var += (v - m.mean_) * (v - m.mean_);
  m.scale_ = train.size() > 1 ? std::sqrt(var / static_cast<double>(train.size() - 1)) : 0.0;
  const size_t n = train.size();

  switch (spec.kind) {
    case TsKind::kLast:
      break;
    case TsKind::kBm: {
      // RPS BM(p): the mean of the last N values, N <= p chosen to minimise
      // the one-step-ahead squared error on the training series.
      const int pmax = std::max(1, std::min<int>(spec.p, static_cast<int>(n) - 1));
      double best = std::numeric_limits<double>::infinity();
      m.bm_window_ = 1;
      if (n >= 2) {
        std::vector<double> prefix(n + 1, 0.0);
        for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + train[i];
        for (int w = 1; w <= pmax; ++w) {
          double sse = 0;
          // Same evaluation rows for every w so the errors are comparable.
          for (size_t t = static_cast<size_t>(pmax); t < n; ++t) {
            const double pred = (prefix[t] - prefix[t - w]) / w;
            sse += (train[t] - pred) * (train[t] - pred);
          }
          if (sse < best - 1e-12) {
            best = sse;
            m.bm_window_ = w;
          }
        }
      }
      break;
    }
    case TsKind::kAr: {
      // The largest feasible order whose fit is stationary; none: the mean
      // forecast (baselines.h, FitTsModel).
      for (int p = FeasibleOrder(spec.p, n, 0, 0); p > 0; --p) {
        std::vector<double> a = FitArCoefficients(train, m.mean_, p);
        if (IsStationary(a)) {
          m.ar_ = std::move(a);
          break;
        }
      }
      break;
    }
    case TsKind::kMa:
    case TsKind::kArma: {
      // Hannan-Rissanen. Stage 1: long AR(m) residuals.
      const int want_p = spec.kind == TsKind::kArma ? spec.p : 0;
      const int want_q = spec.q;
      const int long_order = FeasibleOrder(std::max(20, 2 * (want_p + want_q)), n, 0, 0);
      if (long_order < 1) break;  // mean forecast
      std::vector<double> a = FitArCoefficients(train, m.mean_, long_order);
      std::vector<double> e(n, 0.0);
      for (size_t t = long_order; t < n; ++t) {
        double pred = 0;
        for (int i = 0; i < long_order; ++i) pred += a[i] * (train[t - 1 - i] - m.mean_);
        e[t] = train[t] - m.mean_ - pred;
      }
      // Stage 2: regress on p lags of x and q lags of the stage-1 residuals.
      int p = want_p, q = want_q;
      while (p + q > 0) {
        const int64_t rows = static_cast<int64_t>(n) - long_order - std::max(p, q);
        if (rows >= static_cast<int64_t>(kRowsPerCoef) * (p + q)) break;
        if (q >= p && q > 0)
          --q;
        else
          --p;
      }
      // A fit whose AR part is not stationary is replaced by the next smaller
      // model of the same sequence, down to the mean forecast.
      for (; p + q > 0; (q >= p && q > 0) ? --q : --p) {
        const int start = long_order + std::max(p, q);
        const int rows = static_cast<int>(n) - start;
        Eigen::MatrixXd x(rows, p + q);
        Eigen::VectorXd y(rows);
        for (int r = 0; r < rows; ++r) {
          const size_t t = static_cast<size_t>(start + r);
          y(r) = train[t] - m.mean_;
          for (int i = 0; i < p; ++i) x(r, i) = train[t - 1 - i] - m.mean_;
          for (int j = 0; j < q; ++j) x(r, p + j) = e[t - 1 - j];
        }
        Eigen::VectorXd b = SolveLs(x, y);
        std::vector<double> ar(b.data(), b.data() + p);
        if (!IsStationary(ar)) continue;
        m.ar_ = std::move(ar);
        m.ma_.assign(b.data() + p, b.data() + p + q);
        break;
      }
      break;
    }
  }
  m.x_.reserve(n + 1024);
  for (double v : train) m.Observe(v);
  return m;
}

void TsModel::Observe(double x) {
  if (!ma_.empty()) {
    // One-step prediction from the current state, then the new residual.
    double pred = mean_;
    const size_t n = x_.size();
    for (size_t i = 0; i < ar_.size() && i < n; ++i) pred += ar_[i] * (x_[n - 1 - i] - mean_);
    for (size_t j = 0; j < ma_.size() && j < e_.size(); ++j) pred += ma_[j] * e_[e_.size() - 1 - j];
    double e = x - pred;
    // A non-invertible MA part would let the filter diverge; residuals beyond
    // 10 training standard deviations carry no information, so bound them.
    const double bound = 10 * std::max(scale_, 1e-6);
    e = std::clamp(e, -bound, bound);
    e_.push_back(e);
  }
  x_.push_back(x);
}

std::vector<double> TsModel::Forecast(int h) const {
  std::vector<double> out;
  if (h <= 0) return out;
  out.reserve(h);
  const size_t n = x_.size();
  switch (kind_) {
    case TsKind::kLast:
      out.assign(h, n > 0 ? x_.back() : mean_);
      return out;
    case TsKind::kBm: {
      const size_t w = std::min<size_t>(bm_window_, n);
      double v = mean_;
      if (w > 0) v = std::accumulate(x_.end() - static_cast<std::ptrdiff_t>(w), x_.end(), 0.0) / w;
      out.assign(h, v);
      return out;
    }
    case TsKind::kAr:
    case TsKind::kMa:
    case TsKind::kArma:
      break;
  }
  // x~[n + k] for k >= 0 = forecasts; lags before that are observations.
  auto lag = [&](int k_from_end) -> double {  // value at index n + k_from_end (< n + out.size())
    const int64_t idx = static_cast<int64_t>(n) + k_from_end;
    if (idx >= static_cast<int64_t>(n)) return out[idx - n];
    if (idx < 0) return mean_;
    return x_[idx];
  };
  for (int k = 0; k < h; ++k) {
    double pred = mean_;
    for (size_t i = 0; i < ar_.size(); ++i)
      pred += ar_[i] * (lag(k - 1 - static_cast<int>(i)) - mean_);
    // Future residuals are 0: only residuals at observed times contribute.
    for (size_t j = 0; j < ma_.size(); ++j) {
      const int64_t idx = static_cast<int64_t>(n) + k - 1 - static_cast<int64_t>(j);
      if (idx < static_cast<int64_t>(n) && idx >= 0 && static_cast<size_t>(idx) < e_.size()) {
        pred += ma_[j] * e_[idx];
      }
    }
    out.push_back(pred);
  }
  return out;
}

int ForecastSurvivalSteps(const std::vector<double>& forecast, double failure_level) {
  for (size_t i = 0; i < forecast.size(); ++i) {
    if (!(forecast[i] <= failure_level)) return static_cast<int>(i);
  }
  return static_cast<int>(forecast.size());
}

AvailIntervalSurvival::AvailIntervalSurvival(std::vector<int64_t> interval_lengths)
    : sorted_(std::move(interval_lengths)) {
  std::sort(sorted_.begin(), sorted_.end());
}

size_t AvailIntervalSurvival::CountLonger(int64_t x) const {
  return static_cast<size_t>(sorted_.end() - std::upper_bound(sorted_.begin(), sorted_.end(), x));
}

double AvailIntervalSurvival::Tr(int64_t uptime_steps, int64_t m) const {
  const size_t base = CountLonger(uptime_steps);
  if (base == 0) return 1.0;
  return static_cast<double>(CountLonger(uptime_steps + m)) / static_cast<double>(base);
}

std::vector<int64_t> CompletedUpIntervals(const std::vector<bool>& up) {
  std::vector<int64_t> out;
  const size_t n = up.size();
  size_t i = 0;
  // Skip the run touching the start.
  while (i < n && up[i]) ++i;
  while (i < n) {
    while (i < n && !up[i]) ++i;
    const size_t start = i;
    while (i < n && up[i]) ++i;
    if (i < n && i > start) out.push_back(static_cast<int64_t>(i - start));
  }
  return out;
}

void OnFraction::Observe(bool on, double dt_seconds) {
  if (dt_seconds <= 0) return;
  const double w = std::exp(-dt_seconds / tau_);
  f_ = f_ * w + (1 - w) * (on ? 1.0 : 0.0);
}

namespace {

// The estimates at t from the intervals completed by then, the start of the
// up run in progress at t (> t: down at t) and the on-fraction after points
// 1..t.
DeployedEstimates Conclude(std::vector<int64_t> intervals, size_t run_in_progress, size_t t,
                           int64_t window_steps, OnFraction f, double down_after_seconds) {
  DeployedEstimates out;
  const AvailIntervalSurvival survival(std::move(intervals));
  out.completed_intervals = static_cast<int64_t>(survival.num_intervals());
  if (run_in_progress <= t && !(down_after_seconds > 0)) {
    out.up_steps = static_cast<int64_t>(t - run_in_progress);
    out.avail_time_tr = survival.Tr(out.up_steps, window_steps);
  }
  f.Observe(false, down_after_seconds);  // no-op unless > 0
  out.on_fraction = f.value();
  return out;
}

}  // namespace

DeployedEstimates DeployedEstimatesAt(const std::vector<bool>& up, size_t t, int64_t window_steps,
                                      double step_seconds, double down_after_seconds) {
  if (t >= up.size()) return DeployedEstimates();
  // One pass over the runs of points 0..t: the completed availability
  // intervals (CompletedUpIntervals of the prefix: up runs with a down point
  // on both sides; the one in progress at t is the up-time), and the
  // on-fraction after points 1..t, one Observe per run (a run of k equal
  // steps is k Observes of one step: w^k = exp(-k dt / tau)).
  std::vector<int64_t> intervals;
  OnFraction f;
  size_t run_in_progress = t + 1;
  for (size_t i = 0; i <= t;) {
    size_t j = i;
    while (j < t && up[j + 1] == up[i]) ++j;  // the run is points i..j
    const size_t first = std::max<size_t>(i, 1);
    if (j >= first) f.Observe(up[i], step_seconds * static_cast<double>(j - first + 1));
    if (up[i] && i > 0 && j < t) intervals.push_back(static_cast<int64_t>(j - i + 1));
    if (up[i] && j == t) run_in_progress = i;
    i = j + 1;
  }
  return Conclude(std::move(intervals), run_in_progress, t, window_steps, f, down_after_seconds);
}

void DeployedEstimatesKeeper::EndRun(size_t run_start, bool run_up, size_t j,
                                     double step_seconds, std::vector<int64_t>* intervals,
                                     OnFraction* on) {
  const size_t first = std::max<size_t>(run_start, 1);
  if (j >= first) on->Observe(run_up, step_seconds * static_cast<double>(j - first + 1));
  if (run_up && run_start > 0) intervals->push_back(static_cast<int64_t>(j - run_start + 1));
}

void DeployedEstimatesKeeper::Add(bool up) {
  if (n_ > 0 && up != run_up_) {
    EndRun(run_start_, run_up_, n_ - 1, step_seconds_, &intervals_, &on_);
    run_start_ = n_;
  }
  if (n_ == 0 || up != run_up_) run_up_ = up;
  ++n_;
}

DeployedEstimates DeployedEstimatesKeeper::At(bool last_up, int64_t window_steps,
                                              double down_after_seconds) const {
  // As DeployedEstimatesAt's walk from the run in progress on, with t = n_.
  const size_t t = n_;
  std::vector<int64_t> intervals = intervals_;
  OnFraction f = on_;
  size_t run_in_progress = t + 1;
  size_t i = run_start_;
  if (n_ > 0 && last_up != run_up_) {
    EndRun(run_start_, run_up_, t - 1, step_seconds_, &intervals, &f);
    i = t;
  }
  // The last run, points i .. t.
  const size_t first = std::max<size_t>(i, 1);
  if (t >= first) f.Observe(last_up, step_seconds_ * static_cast<double>(t - first + 1));
  if (last_up) run_in_progress = i;
  return Conclude(std::move(intervals), run_in_progress, t, window_steps, f, down_after_seconds);
}

}  // namespace sojourn::baselines
