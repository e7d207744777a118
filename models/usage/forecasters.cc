#include "models/usage/forecasters.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sojourn::usage {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

// Last known value before `now`, looking back at most one day.
double LastValue(const std::vector<double>& series, int64_t now, DowntimePolicy downtime) {
  for (int64_t b = now - 1; b >= std::max<int64_t>(0, now - kBinsPerDay); --b) {
    const double v = HistoryValue(series, b, downtime);
    if (!std::isnan(v)) return v;
  }
  return kNaN;
}

// The residual of the paper's UPA at the last known history bin: the
// observed value minus the matched, re-centred prototype there.
struct UpaResidual {
  int64_t bin = -1;  // last history bin with a value; -1 when none
  double residual = 0;
};

// The paper's UPA (section 2.2). `residual` (optional) receives the residual
// of the first match at the last known history bin.
bool ForecastUpaPaper(const std::vector<double>& series, int64_t now, int horizon,
                      DowntimePolicy downtime, const UsagePatterns& patterns, double* out,
                      UpaResidual* residual = nullptr) {
  if (patterns.empty()) return false;
  const bool variational = patterns.options.normalization == Normalization::kVariational;
  // window[i] = bin now - 288 + i: 24 h of history, then the forecast as it is
  // produced (chaining, section 2.2 (b)).
  std::vector<double> window(kBinsPerDay + horizon, kNaN);
  int valid_history = 0;
  int last_valid = -1;
  for (int i = 0; i < kBinsPerDay; ++i) {
    window[i] = HistoryValue(series, now - kBinsPerDay + i, downtime);
    if (!std::isnan(window[i])) {
      ++valid_history;
      last_valid = i;
    }
  }
  if (valid_history == 0) return false;
  int produced = 0;
  int phase = static_cast<int>(((now % kBinsPerDay) + kBinsPerDay) % kBinsPerDay);
  while (produced < horizon) {
    const double* recent = window.data() + produced;
    double a = 0;
    if (variational) {
      int n = 0;
      for (int i = 0; i < kBinsPerDay; ++i) {
        if (!std::isnan(recent[i])) {
          a += recent[i];
          ++n;
        }
      }
      a /= n;
    }
    // Nearest prototype over bins [phase, phase + 288) (section 2.2).
    size_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < patterns.prototypes.size(); ++c) {
      const double* proto = patterns.prototypes[c].data() + phase;
      double d = 0;
      for (int i = 0; i < kBinsPerDay; ++i) {
        const double x = recent[i];
        if (std::isnan(x)) continue;
        const double e = x - a - proto[i];
        d += e * e;
      }
      if (d < best_d) {
        best_d = d;
        best = c;
      }
    }
    if (produced == 0 && residual != nullptr) {
      residual->bin = now - kBinsPerDay + last_valid;
      residual->residual =
          window[last_valid] - Clamp01(patterns.prototypes[best][phase + last_valid] + a);
    }
    const double* future = patterns.prototypes[best].data() + phase + kBinsPerDay;
    const int steps = std::min(kBinsPerDay - phase, horizon - produced);
    for (int j = 0; j < steps; ++j) {
      const double v = Clamp01(future[j] + a);
      out[produced + j] = v;
      window[kBinsPerDay + produced + j] = v;
    }
    produced += steps;
    phase = 0;
  }
  return true;
}

// sojourn's UPA: the paper's forecast plus the expected AR(1) residual.
bool ForecastUpa(const std::vector<double>& series, int64_t now, int horizon,
                 DowntimePolicy downtime, const UsagePatterns& patterns, double* out) {
  const double phi = patterns.residual_phi;
  if (!(phi > 0)) return ForecastUpaPaper(series, now, horizon, downtime, patterns, out);
  UpaResidual r;
  if (!ForecastUpaPaper(series, now, horizon, downtime, patterns, out, &r)) return false;
  const std::vector<double>& by_step = patterns.residual_phi_by_step;
  if (!by_step.empty()) {
    const int64_t steps = static_cast<int64_t>(by_step.size());
    for (int j = 0; j < horizon; ++j) {
      const int64_t k = now + j - r.bin;
      const double c = k <= steps ? by_step[k - 1]
                                  : by_step.back() * std::pow(phi, static_cast<double>(k - steps));
      out[j] = Clamp01(out[j] + c * r.residual);
    }
    return true;
  }
  // phi^(now - r.bin) for the first forecast bin, then one more factor per bin.
  double w = r.residual * std::pow(phi, static_cast<double>(now - r.bin));
  for (int j = 0; j < horizon && w != 0; ++j) {
    out[j] = Clamp01(out[j] + w);
    w *= phi;
  }
  return true;
}

}  // namespace

const char* ForecasterName(Forecaster f) {
  switch (f) {
    case Forecaster::kUpa:
      return "upa";
    case Forecaster::kLast4:
      return "last4";
    case Forecaster::kPersist:
      return "persist";
    case Forecaster::kSameTimeYesterday:
      return "same_time_yesterday";
    case Forecaster::kUpaPaper:
      return "upa_paper";
  }
  return "?";
}

absl::StatusOr<Forecaster> ParseForecaster(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Forecaster f : kAllForecasters) {
    if (n == ForecasterName(f)) return f;
  }
  if (n == ForecasterName(Forecaster::kUpaPaper)) return Forecaster::kUpaPaper;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown forecaster '", name, "' (upa, last4, persist, same_time_yesterday or upa_paper)"));
}

double HistoryValue(const std::vector<double>& series, int64_t b, DowntimePolicy downtime) {
  if (b < 0 || b >= static_cast<int64_t>(series.size())) return kNaN;
  const double v = series[b];
  if (std::isnan(v) && downtime == DowntimePolicy::kFullUse) return 1.0;
  return v;
}

bool Forecast(Forecaster f, const std::vector<double>& series, int64_t now, int horizon,
              DowntimePolicy downtime, const UsagePatterns* patterns, double* out) {
  if (horizon <= 0) return true;
  switch (f) {
    case Forecaster::kUpa:
      return patterns != nullptr && ForecastUpa(series, now, horizon, downtime, *patterns, out);
    case Forecaster::kUpaPaper:
      return patterns != nullptr &&
             ForecastUpaPaper(series, now, horizon, downtime, *patterns, out);
    case Forecaster::kPersist: {
      const double v = LastValue(series, now, downtime);
      if (std::isnan(v)) return false;
      std::fill(out, out + horizon, v);
      return true;
    }
    case Forecaster::kLast4: {
      // Section 4.2: "the average of the last four hours".
      double sum = 0;
      int n = 0;
      for (int64_t b = now - 4 * kBinsPerHour; b < now; ++b) {
        const double v = HistoryValue(series, b, downtime);
        if (!std::isnan(v)) {
          sum += v;
          ++n;
        }
      }
      const double v = n > 0 ? sum / n : LastValue(series, now, downtime);
      if (std::isnan(v)) return false;
      std::fill(out, out + horizon, v);
      return true;
    }
    case Forecaster::kSameTimeYesterday: {
      const double fallback = LastValue(series, now, downtime);
      if (std::isnan(fallback)) return false;
      for (int i = 0; i < horizon; ++i) {
        const double v = HistoryValue(series, now - kBinsPerDay + (i % kBinsPerDay), downtime);
        out[i] = std::isnan(v) ? fallback : v;
      }
      return true;
    }
  }
  return false;
}

double FitResidualPhi(const std::vector<double>& series, DowntimePolicy downtime,
                      const UsagePatterns& patterns, int64_t end_bin, int* pairs, int steps,
                      std::vector<double>* by_step) {
  if (pairs != nullptr) *pairs = 0;
  if (by_step != nullptr) by_step->clear();
  if (by_step == nullptr) steps = 0;
  steps = std::max(0, steps);
  std::vector<double> s0k(steps, 0.0), s00k(steps, 0.0), chained(steps);
  if (patterns.empty()) return 0.0;
  end_bin = std::min<int64_t>(end_bin, static_cast<int64_t>(series.size()));
  // Span of data collection before end_bin (as BuildObjects).
  int64_t first = -1, last = -1;
  for (int64_t b = 0; b < end_bin; ++b) {
    if (!std::isnan(series[b])) {
      if (first < 0) first = b;
      last = b;
    }
  }
  if (first < 0) return 0.0;
  const bool variational = patterns.options.normalization == Normalization::kVariational;
  const int k = static_cast<int>(patterns.prototypes.size());
  const int64_t lo = first + kBinsPerDay;          // a day of history
  const int64_t hi = std::min(last, end_bin - 1);  // the target bin is known
  // For every `now` of a day starting at bin d0 the matched window
  // [now - 288, now) lines up with prototype bins [now - d0, now - d0 + 288),
  // i.e. bin base + i of the series with prototype bin i, base = d0 - 288. The
  // distance of section 2.2, sum over known bins of (x - a - P)^2, is then
  // See - 2 a Se + n a^2 with prefix sums of e = x - P, e^2 and n over the
  // day's 576 bins.
  constexpr int kW = kObjectBins;
  std::vector<double> h(kW), sx(kW + 1), se(static_cast<size_t>(k) * (kW + 1)),
      see(static_cast<size_t>(k) * (kW + 1));
  std::vector<int> cnt(kW + 1);
  double s00 = 0, s01 = 0;
  int n_pairs = 0;
  for (int64_t d0 = lo - ((lo % kBinsPerDay) + kBinsPerDay) % kBinsPerDay; d0 <= hi;
       d0 += kBinsPerDay) {
    const int64_t base = d0 - kBinsPerDay;
    cnt[0] = 0;
    sx[0] = 0;
    for (int c = 0; c < k; ++c) se[c * (kW + 1)] = see[c * (kW + 1)] = 0;
    for (int i = 0; i < kW; ++i) {
      h[i] = HistoryValue(series, base + i, downtime);
      const bool known = !std::isnan(h[i]);
      cnt[i + 1] = cnt[i] + (known ? 1 : 0);
      sx[i + 1] = sx[i] + (known ? h[i] : 0.0);
      for (int c = 0; c < k; ++c) {
        const size_t o = static_cast<size_t>(c) * (kW + 1);
        const double e = known ? h[i] - patterns.prototypes[c][i] : 0.0;
        se[o + i + 1] = se[o + i] + e;
        see[o + i + 1] = see[o + i] + e * e;
      }
    }
    const int64_t from = std::max(d0, lo), to = std::min(d0 + kBinsPerDay - 1, hi);
    for (int64_t now = from; now <= to; ++now) {
      const int p = static_cast<int>(now - d0);
      const double x0 = h[p + kBinsPerDay - 1], x1 = h[p + kBinsPerDay];
      if (std::isnan(x0) || std::isnan(x1)) continue;
      const int n = cnt[p + kBinsPerDay] - cnt[p];
      const double a = variational ? (sx[p + kBinsPerDay] - sx[p]) / n : 0.0;
      int best = 0;
      double best_d = std::numeric_limits<double>::infinity();
      for (int c = 0; c < k; ++c) {
        const size_t o = static_cast<size_t>(c) * (kW + 1);
        const double d = (see[o + p + kBinsPerDay] - see[o + p]) -
                         2 * a * (se[o + p + kBinsPerDay] - se[o + p]) + n * a * a;
        if (d < best_d) {
          best_d = d;
          best = c;
        }
      }
      const std::vector<double>& proto = patterns.prototypes[best];
      const double r0 = x0 - Clamp01(proto[p + kBinsPerDay - 1] + a);
      const double r1 = x1 - Clamp01(proto[p + kBinsPerDay] + a);
      s00 += r0 * r0;
      s01 += r0 * r1;
      ++n_pairs;
      // k-step residuals against the forecast made at `now`; past the 48 h
      // object the paper's chained forecast (computed directly).
      bool have_chained = false;
      for (int j = 0; j < steps && now + j <= hi; ++j) {
        const double x = HistoryValue(series, now + j, downtime);
        if (std::isnan(x)) continue;
        double level;
        if (p + kBinsPerDay + j < kObjectBins) {
          level = Clamp01(proto[p + kBinsPerDay + j] + a);
        } else {
          if (!have_chained) {
            have_chained = ForecastUpaPaper(series, now, steps, downtime, patterns, chained.data());
            if (!have_chained) break;
          }
          level = chained[j];
        }
        s0k[j] += r0 * (x - level);
        s00k[j] += r0 * r0;
      }
    }
  }
  if (pairs != nullptr) *pairs = n_pairs;
  if (n_pairs < kMinResidualPairs || !(s00 > 0)) {
    return std::min(kMaxResidualPhi, std::max(0.0, patterns.options.unestimated_residual_phi));
  }
  if (steps > 0) {
    by_step->resize(steps);
    for (int j = 0; j < steps; ++j) {
      (*by_step)[j] =
          s00k[j] > 0 ? std::min(kMaxResidualPhi, std::max(0.0, s0k[j] / s00k[j])) : 0.0;
    }
  }
  return std::min(kMaxResidualPhi, std::max(0.0, s01 / s00));
}

bool StaysAvailable(const double* use, int bins, double alpha) {
  for (int i = 0; i < bins; ++i) {
    if (!(1.0 - use[i] >= alpha)) return false;
  }
  return true;
}

bool IsBinaryUse(const std::vector<double>& series, int64_t end) {
  end = std::min<int64_t>(end, static_cast<int64_t>(series.size()));
  bool any = false;
  for (int64_t b = 0; b < end; ++b) {
    const double v = series[b];
    if (std::isnan(v)) continue;
    if (v != 0.0 && v != 1.0) return false;
    any = true;
  }
  return any;
}

void ToThresholdAnswer(bool binary_use, double* use, int bins) {
  if (!binary_use) return;
  for (int i = 0; i < bins; ++i) use[i] = use[i] > 0.5 ? 1.0 : 0.0;
}

double DecisionError(const double* pred, const double* actual) {
  int wrong = 0, total = 0;
  double max_p = 0, max_a = 0;
  int done = 0;
  for (int eta_minutes : kEtaMinutes) {
    const int bins = eta_minutes * 60 / static_cast<int>(kBinSeconds);
    for (; done < bins; ++done) {
      if (std::isnan(actual[done])) return kNaN;
      max_p = std::max(max_p, pred[done]);
      max_a = std::max(max_a, actual[done]);
    }
    for (int i = 0; i < kNumAlphas; ++i) {
      const double alpha = Alpha(i);
      wrong += ((1.0 - max_p >= alpha) != (1.0 - max_a >= alpha)) ? 1 : 0;
      ++total;
    }
  }
  return static_cast<double>(wrong) / total;
}

bool DecisionErrorsByEta(const double* pred, const double* actual,
                         std::array<double, kEtaMinutes.size()>* wrong) {
  std::array<double, kEtaMinutes.size()> out;
  double max_p = 0, max_a = 0;
  int done = 0;
  for (size_t e = 0; e < kEtaMinutes.size(); ++e) {
    const int bins = kEtaMinutes[e] * 60 / static_cast<int>(kBinSeconds);
    for (; done < bins; ++done) {
      if (std::isnan(actual[done])) return false;
      max_p = std::max(max_p, pred[done]);
      max_a = std::max(max_a, actual[done]);
    }
    int w = 0;
    for (int i = 0; i < kNumAlphas; ++i) {
      const double alpha = Alpha(i);
      w += ((1.0 - max_p >= alpha) != (1.0 - max_a >= alpha)) ? 1 : 0;
    }
    out[e] = static_cast<double>(w) / kNumAlphas;
  }
  *wrong = out;
  return true;
}

int EtaIndexFor(int horizon_bins) {
  int best = 0;
  for (size_t e = 0; e < kEtaMinutes.size(); ++e) {
    if (kEtaMinutes[e] * 60 / static_cast<int>(kBinSeconds) <= horizon_bins)
      best = static_cast<int>(e);
  }
  return best;
}

MethodChoice DataAgeRule(const std::vector<double>& series, int64_t now, int64_t first, int horizon,
                         DowntimePolicy downtime, const UsagePatterns* patterns,
                         const AdaptiveOptions& options) {
  MethodChoice c;
  if (first >= now) first = -1;
  const double hours = first < 0 ? 0.0 : static_cast<double>(now - first) / kBinsPerHour;
  const double days = hours / 24.0;
  if (days > options.upa_min_days && patterns != nullptr && !patterns->empty()) {
    c.method = Forecaster::kUpa;
    c.why = absl::StrFormat("data-age rule: %.1f days of data (> %g)", days, options.upa_min_days);
    // Idle rule (section 4.2): idle for two hours and UPA predicts idle
    // predominance for the job's duration -> prefer last4.
    const int idle_bins = static_cast<int>(std::lround(options.idle_hours * kBinsPerHour));
    bool idle = idle_bins > 0 && now >= idle_bins;
    for (int64_t b = now - idle_bins; idle && b < now; ++b) {
      const double v = HistoryValue(series, b, downtime);
      idle = !std::isnan(v) && v <= options.idle_use;
    }
    if (idle && horizon > 0) {
      std::vector<double> pred(horizon);
      if (Forecast(Forecaster::kUpa, series, now, horizon, downtime, patterns, pred.data())) {
        const int idle_pred = static_cast<int>(std::count_if(
            pred.begin(), pred.end(), [&](double v) { return v <= options.idle_use; }));
        if (2 * idle_pred > horizon) {
          c.method = Forecaster::kLast4;
          c.why =
              absl::StrFormat("idle rule: idle for %gh and UPA predicts idleness for %d of %d bins",
                              options.idle_hours, idle_pred, horizon);
        }
      }
    }
  } else if (hours > options.last4_min_hours) {
    c.method = Forecaster::kLast4;
    c.why =
        absl::StrFormat("data-age rule: %.1f days of data%s", days,
                        (patterns == nullptr || patterns->empty()) && days > options.upa_min_days
                            ? " but no use patterns yet"
                            : "");
  } else {
    c.method = Forecaster::kPersist;
    c.why = absl::StrFormat("data-age rule: %.1f hours of data (<= %g)", hours,
                            options.last4_min_hours);
  }
  return c;
}

RecentErrorTable::RecentErrorTable(const std::vector<double>& series, DowntimePolicy downtime,
                                   int64_t first, int64_t limit, const SelectorOptions& options,
                                   const std::function<const UsagePatterns*(int64_t)>& patterns_for,
                                   bool binary_use)
    : first_(first),
      step_(std::max(1, options.step_bins)),
      window_bins_(options.window_days * kBinsPerDay) {
  limit = std::min<int64_t>(limit, static_cast<int64_t>(series.size()));
  const int64_t points =
      limit - kTestHorizonBins >= first ? (limit - kTestHorizonBins - first) / step_ + 1 : 0;
  for (int f = 0; f < kNumForecasters; ++f) {
    for (auto& v : sum_[f]) v.assign(points + 1, 0.0);
    count_[f].assign(points + 1, 0);
  }
  std::vector<double> pred(kTestHorizonBins), actual(kTestHorizonBins);
  std::array<double, kEtaMinutes.size()> wrong;
  for (int64_t p = 0; p < points; ++p) {
    const int64_t s = first + p * step_;
    bool ok = s >= 0;
    for (int i = 0; ok && i < kTestHorizonBins; ++i) {
      actual[i] = HistoryValue(series, s + i, downtime);
      ok = !std::isnan(actual[i]);
    }
    const UsagePatterns* patterns = ok ? patterns_for(s) : nullptr;
    for (int f = 0; f < kNumForecasters; ++f) {
      wrong.fill(0.0);
      int n = 0;
      if (ok && Forecast(kAllForecasters[f], series, s, kTestHorizonBins, downtime, patterns,
                         pred.data())) {
        ToThresholdAnswer(binary_use, pred.data(), kTestHorizonBins);
        DecisionErrorsByEta(pred.data(), actual.data(), &wrong);
        n = 1;
      }
      for (size_t e = 0; e < wrong.size(); ++e) sum_[f][e][p + 1] = sum_[f][e][p] + wrong[e];
      count_[f][p + 1] = count_[f][p] + n;
    }
  }
}

RecentScores RecentErrorTable::Recent(int64_t now, int horizon_bins) const {
  RecentScores out;
  const int64_t points = count_[0].empty() ? 0 : static_cast<int64_t>(count_[0].size()) - 1;
  const int e = EtaIndexFor(horizon_bins);
  if (points == 0) return out;
  // Points p with s = first + p * step in [now - window, now - horizon].
  const auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  const auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  int64_t lo = ceil_div(now - window_bins_ - first_, step_);
  int64_t hi = floor_div(now - kTestHorizonBins - first_, step_);
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, points - 1);
  if (hi < lo) return out;
  for (int f = 0; f < kNumForecasters; ++f) {
    const int n = count_[f][hi + 1] - count_[f][lo];
    out[f].points = n;
    if (n > 0) out[f].error = (sum_[f][e][hi + 1] - sum_[f][e][lo]) / n;
  }
  return out;
}

MethodChoice SelectBest(const RecentScores& scores, const MethodChoice& fallback, int min_points) {
  int best = -1;
  const int preferred = static_cast<int>(fallback.method);
  for (int f = 0; f < kNumForecasters; ++f) {
    if (scores[f].points < std::max(1, min_points)) continue;
    if (best < 0 || scores[f].error < scores[best].error - 1e-12 ||
        (std::abs(scores[f].error - scores[best].error) <= 1e-12 && f == preferred)) {
      best = f;
    }
  }
  if (best < 0) return fallback;
  MethodChoice c;
  c.method = kAllForecasters[best];
  c.by_selector = true;
  c.recent_error = scores[best].error;
  c.recent_points = scores[best].points;
  c.why = absl::StrFormat("best-of selector: lowest recent error %.4f over %d replay points",
                          c.recent_error, c.recent_points);
  return c;
}

}  // namespace sojourn::usage
