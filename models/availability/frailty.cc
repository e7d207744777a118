#include "models/availability/frailty.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "models/availability/window.h"

namespace sojourn::availability {

namespace {

double Sum(const FailureExposure::Table& t, int half) {
  double s = 0;
  for (int k = 0; k < 2; ++k) {
    if (half >= 0 && k != half) continue;
    for (const auto& d : t[k]) {
      for (double v : d) s += v;
    }
  }
  return s;
}

// Failures on one day type (both halves with half = -1).
double Failures(const FailureExposure& e, int half, int day_type) {
  double s = 0;
  for (int k = 0; k < 2; ++k) {
    if (half >= 0 && k != half) continue;
    for (double v : e.failures[k][day_type]) s += v;
  }
  return s;
}

}  // namespace

double FailureExposure::total_up_steps(int half) const { return Sum(up_steps, half); }

double FailureExposure::total_failures(int half) const { return Sum(failures, half); }

void FailureExposure::Merge(const FailureExposure& other) {
  for (int k = 0; k < 2; ++k) {
    for (int d = 0; d < 2; ++d) {
      for (int h = 0; h < 24; ++h) {
        up_steps[k][d][h] += other.up_steps[k][d][h];
        failures[k][d][h] += other.failures[k][d][h];
      }
    }
  }
}

FailureExposure CountFailureExposure(const StateSeries& series, int64_t end_unix,
                                     const LocalClock& clock,
                                     const std::function<bool(size_t t)>& exclude) {
  return CountFailureExposure(series, series.start_unix, end_unix, clock, exclude);
}

namespace {

// Local day number of a unix time.
int64_t LocalDay(int64_t unix_seconds, const LocalClock& clock) {
  return LocalDayNumber(unix_seconds, clock);
}

// Calls fn(local day, weekend 0/1, local hour, up steps, failures) for the
// steps t -> t + 1 with t_from <= t < t_to, local hour by local hour (the
// clock arithmetic once per hour, not per grid point).
template <typename Fn>
void ForEachHour(const StateSeries& series, int64_t t_from, int64_t t_to, const LocalClock& clock,
                 const std::function<bool(size_t t)>& exclude, Fn fn) {
  const auto& st = series.states;
  LocalHourCursor hours(series.start_unix, series.step_seconds, clock);
  for (int64_t t = t_from; t < t_to;) {
    hours.Seek(t);
    const int64_t day = hours.day();
    const int64_t block_end = std::min(t_to, hours.end());
    int64_t up = 0, failures = 0;
    for (; t < block_end; ++t) {
      if (IsFailure(st[t])) continue;
      if (exclude && exclude(static_cast<size_t>(t))) continue;
      up += 1;
      if (IsFailure(st[t + 1])) failures += 1;
    }
    fn(day, hours.weekend(), hours.hour(), up, failures);
  }
}

// The first local day of the second half of the days first_day .. the one
// of span_end - 1.
int64_t MiddleDay(int64_t first_day, int64_t span_end_unix, const LocalClock& clock) {
  const int64_t last_day = LocalDay(span_end_unix - 1, clock);
  return first_day + (last_day - first_day + 1) / 2;
}

}  // namespace

FailureExposure CountFailureExposure(const StateSeries& series, int64_t begin_unix,
                                     int64_t end_unix, const LocalClock& clock,
                                     const std::function<bool(size_t t)>& exclude) {
  FailureExposure out;
  const int64_t step = series.step_seconds;
  if (step <= 0) return out;
  // The first counted grid point: the first at or after begin_unix.
  const int64_t t_begin =
      begin_unix <= series.start_unix ? 0 : (begin_unix - series.start_unix + step - 1) / step;
  // Halves: the local days before and after the middle of the span.
  const int64_t first_day = LocalDay(series.start_unix + t_begin * step, clock);
  const int64_t span_end = std::min<int64_t>(
      end_unix, series.start_unix + static_cast<int64_t>(series.states.size()) * step);
  const int64_t mid_day = MiddleDay(first_day, span_end, clock);
  // Steps t -> t + 1 for t < t_end.
  const int64_t n = static_cast<int64_t>(series.states.size());
  if (n < 2 || end_unix < series.start_unix + step) return out;
  const int64_t t_end = std::min<int64_t>(n - 1, (end_unix - series.start_unix - step) / step + 1);
  ForEachHour(series, t_begin, t_end, clock, exclude,
              [&](int64_t day, int d, int h, int64_t up, int64_t failures) {
                const int k = day < mid_day ? 0 : 1;
                out.up_steps[k][d][h] += static_cast<double>(up);
                out.failures[k][d][h] += static_cast<double>(failures);
              });
  return out;
}

FailureExposureCounter::FailureExposureCounter(LocalClock clock)
    : clock_(std::move(clock)) {}

FailureExposure FailureExposureCounter::Count(const StateSeries& series, int64_t end_unix) {
  const int64_t n = static_cast<int64_t>(series.states.size());
  const int64_t step = series.step_seconds;
  // A history that ends before the last grid point: counted anew.
  if (step <= 0 || n < 2 || end_unix < series.start_unix + (n - 1) * step) {
    return CountFailureExposure(series, end_unix, clock_);
  }
  if (series.start_unix != start_ || step != step_) {
    // Another series (a grid trimmed at its start, or rebuilt): start over.
    start_ = series.start_unix;
    step_ = step;
    first_day_ = LocalDay(start_, clock_);
    counted_ = 0;
    days_.clear();
  }
  // Every point but the last is final (state.h GridBuilder): the steps
  // into the points before it are counted for good.
  const int64_t final_steps = n - 2;
  if (final_steps < counted_) return CountFailureExposure(series, end_unix, clock_);
  ForEachHour(series, counted_, final_steps, clock_, nullptr,
              [&](int64_t day, int d, int h, int64_t up, int64_t failures) {
                if (up == 0) return;  // then no failure either
                if (days_.empty() || days_.back().day != day) {
                  days_.emplace_back();
                  days_.back().day = day;
                  days_.back().weekend = d;
                }
                days_.back().up_steps[h] += static_cast<int32_t>(up);
                days_.back().failures[h] += static_cast<int32_t>(failures);
              });
  counted_ = final_steps;
  FailureExposure out;
  const int64_t span_end = std::min<int64_t>(end_unix, start_ + n * step);
  const int64_t mid_day = MiddleDay(first_day_, span_end, clock_);
  for (const Day& day : days_) {
    const int k = day.day < mid_day ? 0 : 1;
    for (int h = 0; h < 24; ++h) {
      out.up_steps[k][day.weekend][h] += day.up_steps[h];
      out.failures[k][day.weekend][h] += day.failures[h];
    }
  }
  // The last step reads the last point.
  ForEachHour(series, final_steps, n - 1, clock_, nullptr,
              [&](int64_t day, int d, int h, int64_t up, int64_t failures) {
                const int k = day < mid_day ? 0 : 1;
                out.up_steps[k][d][h] += static_cast<double>(up);
                out.failures[k][d][h] += static_cast<double>(failures);
              });
  return out;
}

void HostFrailtyModel::Add(const FailureExposure& host) {
  if (host.total_up_steps() <= 0) return;
  hosts_.push_back(host);
  pooled_.Merge(host);
}

void HostFrailtyModel::Build() {
  for (int d = 0; d < 2; ++d) {
    for (int h = 0; h < 24; ++h) {
      const double up = pooled_.up_steps[0][d][h] + pooled_.up_steps[1][d][h];
      const double fail = pooled_.failures[0][d][h] + pooled_.failures[1][d][h];
      rate_[d][h] = up > 0 ? fail / up : 0.0;
    }
  }
  built_ = true;
  // Split-half moments (frailty.h): the cross-product of the two halves'
  // excess failures estimates v, their difference phi.
  double cross = 0, norm = 0, disp = 0;
  int n = 0;
  for (const FailureExposure& host : hosts_) {
    const double e1 = Expected(host, 0), e2 = Expected(host, 1);
    if (e1 <= 0 || e2 <= 0) continue;
    const double o1 = host.total_failures(0), o2 = host.total_failures(1);
    cross += (o1 - e1) * (o2 - e2);
    norm += e1 * e2;
    const double diff = o1 * e2 - o2 * e1;
    disp += diff * diff / (e1 * e2 * (e1 + e2));
    ++n;
  }
  variance_ = n >= 2 && norm > 0 ? std::max(0.0, cross / norm) : 0.0;
  // At least Poisson: independent failures at a host's rate vary that much,
  // and a smaller estimate (few hosts, regular synthetic loads) would make
  // one quiet hour look like proof of a reliable host.
  dispersion_ = n >= 2 ? std::max(1.0, disp / n) : 1.0;

  // The day-type covariance S (frailty.h): the same cross-products, of
  // day type a in the first half against day type b in the second.
  day_type_covariance_known_ = true;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      double c = 0, norm_ab = 0;
      int hosts = 0;
      for (const FailureExposure& host : hosts_) {
        const double e1 = Expected(host, 0, a), e2 = Expected(host, 1, b);
        if (e1 <= 0 || e2 <= 0) continue;
        c += (Failures(host, 0, a) - e1) * (Failures(host, 1, b) - e2);
        norm_ab += e1 * e2;
        ++hosts;
      }
      covariance_[a][b] = hosts >= 2 && norm_ab > 0 ? c / norm_ab : 0.0;
      day_type_covariance_known_ &= hosts >= 2 && norm_ab > 0;
    }
  }
  for (int d = 0; d < 2; ++d) covariance_[d][d] = std::max(0.0, covariance_[d][d]);
  const double limit = std::sqrt(covariance_[0][0] * covariance_[1][1]);
  covariance_[0][1] = covariance_[1][0] =
      std::clamp(0.5 * (covariance_[0][1] + covariance_[1][0]), -limit, limit);
}

double HostFrailtyModel::Expected(const FailureExposure& host, int half) const {
  return Expected(host, half, 0) + Expected(host, half, 1);
}

double HostFrailtyModel::Expected(const FailureExposure& host, int half, int day_type) const {
  double e = 0;
  for (int k = 0; k < 2; ++k) {
    if (half >= 0 && k != half) continue;
    for (int h = 0; h < 24; ++h) e += host.up_steps[k][day_type][h] * rate_[day_type][h];
  }
  return e;
}

double HostFrailtyModel::Theta(const FailureExposure& host, int day_type) const {
  if (!built_ || day_type < 0 || day_type > 1) return 1.0;
  // A population without two hosts seen on both day types in both halves
  // (e.g. a cluster younger than a week) cannot tell weekends from
  // weekdays: one ratio for all days, as if perfectly correlated.
  if (!day_type_covariance_known_) return Theta(host);
  const auto& S = covariance_;
  // x = (S + N)^-1 (r - 1) over the day types with exposure; theta = 1 + S x.
  double e[2], dev[2];
  for (int d = 0; d < 2; ++d) {
    e[d] = Expected(host, -1, d);
    dev[d] = e[d] > 0 ? Failures(host, -1, d) / e[d] - 1.0 : 0.0;
  }
  double x[2] = {0, 0};
  if (e[0] > 0 && e[1] > 0) {
    const double a = S[0][0] + dispersion_ / e[0], b = S[0][1], c = S[1][1] + dispersion_ / e[1];
    const double det = a * c - b * b;  // > 0: N is positive definite, S semi-definite
    x[0] = (c * dev[0] - b * dev[1]) / det;
    x[1] = (a * dev[1] - b * dev[0]) / det;
  } else {
    for (int d = 0; d < 2; ++d) {
      if (e[d] > 0) x[d] = dev[d] / (S[d][d] + dispersion_ / e[d]);
    }
  }
  return std::max(0.0, 1.0 + S[day_type][0] * x[0] + S[day_type][1] * x[1]);
}

double HostFrailtyModel::Theta(const FailureExposure& host) const {
  if (!built_ || variance_ <= 0) return 1.0;
  const double e = Expected(host);
  if (e <= 0) return 1.0;
  const double z = e * variance_ / (e * variance_ + dispersion_);
  return std::max(0.0, 1.0 + z * (host.total_failures() / e - 1.0));
}

void PopulationLevelModel::Fit(const std::vector<LevelPair>& pairs) {
  double sxy = 0, sxx = 0;
  pairs_ = 0;
  for (const LevelPair& p : pairs) {
    if (p.e_recent <= 0 || p.e_day <= 0) continue;
    const double x = p.o_recent / p.e_recent - 1.0;
    const double y = p.o_day / p.e_day - 1.0;
    sxy += p.e_day * x * y;
    sxx += p.e_day * x * x;
    ++pairs_;
  }
  beta_ = pairs_ >= 2 && sxx > 0 ? std::clamp(sxy / sxx, 0.0, 1.0) : 0.0;
}

double PopulationLevelModel::Ratio(double o_recent, double e_recent) const {
  if (e_recent <= 0 || beta_ == 0) return 1.0;
  return std::max(0.0, 1.0 + beta_ * (o_recent / e_recent - 1.0));
}

StateSojourns ScaleFailureHazards(const StateSojourns& s, double theta) {
  return ScaleCauseHazards(s, theta, 1.0);
}

namespace {

// The rebuilt cohort of ScaleCauseHazards, entry by entry: the completed
// counts in `completed` ((to, length), count; each key once) and the censored
// counts by length in `censored` / `censored_set` (an entry of the result iff
// set). Shared by ScaleCauseHazards and MergeScaledFailureHazards, so that
// merging the rescaled table and merging its entries as they are computed
// give the same numbers.
struct RebuiltCohort {
  std::vector<std::pair<std::pair<int, int>, double>> completed;
  std::vector<double> censored;
  std::vector<char> censored_set;
};

void RebuildCohort(const StateSojourns& s, double theta, double theta_other, RebuiltCohort* out) {
  theta = std::max(0.0, theta);
  theta_other = std::max(0.0, theta_other);
  int lmax = 0;
  for (const auto& [key, c] : s.completed) lmax = std::max(lmax, key.second);
  for (const auto& [len, c] : s.censored) lmax = std::max(lmax, len);
  out->completed.clear();
  out->censored.assign(lmax + 1, 0.0);
  out->censored_set.assign(lmax + 1, 0);
  if (auto it = s.censored.find(0); it != s.censored.end()) {
    out->censored[0] = it->second;
    out->censored_set[0] = 1;
  }
  if (lmax == 0) return;
  // ends[l]: sojourns that leave the risk set after length l; at_risk[l] =
  // sum of ends[l..lmax] (as in the kernel's HazardRow). events: the
  // completed counts by destination (ascending) and length. Buffers reused
  // by the thread: this runs for every table of every shrinkage.
  thread_local std::vector<double> ends, cens, at_risk;
  thread_local std::vector<std::pair<int, std::vector<double>>> event_rows;
  ends.assign(lmax + 1, 0.0);
  cens.assign(lmax + 1, 0.0);
  size_t n_events = 0;
  for (const auto& [key, c] : s.completed) {
    ends[key.second] += c;
    // Completed keys are ordered by destination, so a new one comes last.
    if (n_events == 0 || event_rows[n_events - 1].first != key.first) {
      if (event_rows.size() <= n_events) event_rows.emplace_back();
      event_rows[n_events].first = key.first;
      event_rows[n_events].second.assign(lmax + 1, 0.0);
      ++n_events;
    }
    event_rows[n_events - 1].second[key.second] += c;
  }
  // Each row's count at length l is replaced by the rebuilt cohort's once
  // length l is done (it is not read again).
  const auto events = absl::MakeSpan(event_rows.data(), n_events);
  for (const auto& [len, c] : s.censored) {
    if (len <= 0) continue;
    ends[len] += c;
    cens[len] += c;
  }
  at_risk.assign(lmax + 2, 0.0);
  for (int l = lmax; l >= 1; --l) at_risk[l] = at_risk[l + 1] + ends[l];
  double risk = at_risk[1];  // the rebuilt cohort at risk at length l
  // Less of the cohort left than this is the rounding residue of the
  // subtractions below, not sojourns: where the cohort is exhausted (a
  // failure hazard capped at the room the other exits leave, e.g. theta 4.5
  // at length 1) about 1e-16 of it used to stay at risk and be carried on
  // through every longer length as entries of about 1e-32. A table of only
  // such entries past an age (the first sojourn's age conditioning) read as
  // hazards of order 1, and whether the residue came out positive depended
  // on the order the counts had been summed in: the order of the hosts in
  // the trace moved predictions by up to 0.11.
  const double residue = 1e-12 * risk;
  int done = 0;  // lengths rebuilt
  for (int l = 1; l <= lmax && risk > 0; ++l) {
    const double r = at_risk[l];
    if (r <= 0) break;
    double fail = 0, other = 0;
    for (const auto& [to, e] : events) (IsFailure(static_cast<HostState>(to)) ? fail : other) += e[l] / r;
    const double c = cens[l] / r;
    // The other exits first (capped to leave room for the censoring), then
    // the failures in the room that is left.
    double g = theta_other;
    if (other * g > 1.0 - c) g = other > 0 ? std::max(0.0, 1.0 - c) / other : 0.0;
    double f = theta;
    const double room = std::max(0.0, 1.0 - other * g - c);
    if (fail * f > room) f = fail > 0 ? room / fail : 0.0;
    double left = risk;
    for (auto& [to, e] : events) {
      if (e[l] <= 0) {
        e[l] = 0;
        continue;
      }
      const double h = e[l] / r * (IsFailure(static_cast<HostState>(to)) ? f : g);
      const double d = h * risk;
      e[l] = d;
      left -= d;
    }
    done = l;
    if (cens[l] > 0) {
      out->censored[l] = c * risk;
      out->censored_set[l] = 1;
      left -= c * risk;
    }
    risk = left > residue ? left : 0.0;
  }
  // With smaller failure hazards some of the cohort outlives the longest
  // length seen: it is censored there (it lasted lmax steps), so the risk
  // sets above stay those of the rebuilt cohort.
  if (risk > 0) {
    out->censored[lmax] += risk;
    out->censored_set[lmax] = 1;
  }
  // In key order (destination, then length), as AddSorted wants them.
  for (const auto& [to, d] : events) {
    for (int l = 1; l <= done; ++l) {
      if (d[l] > 0) out->completed.push_back({{to, l}, d[l]});
    }
  }
}

}  // namespace

StateSojourns ScaleCauseHazards(const StateSojourns& s, double theta, double theta_other) {
  if ((theta == 1.0 && theta_other == 1.0) || s.empty()) return s;
  RebuiltCohort cohort;
  RebuildCohort(s, theta, theta_other, &cohort);
  StateSojourns out;
  AddSorted(cohort.completed, 1.0, &out.completed);
  for (size_t l = 0; l < cohort.censored.size(); ++l) {
    if (cohort.censored_set[l]) out.censored.emplace_hint(out.censored.end(), l, cohort.censored[l]);
  }
  return out;
}

void MergeScaledFailureHazards(const StateSojourns& src, double theta, double scale,
                               StateSojourns* dst) {
  if (theta == 1.0 || src.empty()) {
    dst->Add(src, scale);
    return;
  }
  // One buffer per thread: this runs once per table of every shrinkage.
  thread_local RebuiltCohort cohort;
  RebuildCohort(src, theta, 1.0, &cohort);
  AddSorted(cohort.completed, scale, &dst->completed);
  auto hint = dst->censored.begin();
  for (size_t l = 0; l < cohort.censored.size(); ++l) {
    if (!cohort.censored_set[l]) continue;
    hint = dst->censored.try_emplace(hint, static_cast<int>(l), 0.0);
    hint->second += scale * cohort.censored[l];
    ++hint;
  }
}

SojournStats ScaleFailureHazards(const SojournStats& s, double theta) {
  if (theta == 1.0) return s;
  SojournStats out = s;
  for (int i = 1; i <= 2; ++i) {
    out.ordinary[i] = ScaleFailureHazards(s.ordinary[i], theta);
    out.first[i] = ScaleFailureHazards(s.first[i], theta);
    for (int b = 0; b < kAgeClasses; ++b) out.first_by_age[b][i] = ScaleFailureHazards(s.first_by_age[b][i], theta);
    for (auto& [age, table] : out.first_by_exact_age[i]) table = ScaleFailureHazards(table, theta);
  }
  return out;
}

}  // namespace sojourn::availability
