// Usage forecasters, the availability tests that score them, the adaptive
// data-age rule (paper 003, section 4.2) and the per-host recent-error
// bookkeeping of the best-of selector (issue 8, after the Network Weather
// Service: answer with the forecaster that has been most accurate lately).
// Pure functions and value types; thread-compatible.
#ifndef SOJOURN_MODELS_USAGE_FORECASTERS_H_
#define SOJOURN_MODELS_USAGE_FORECASTERS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/usage/patterns.h"
#include "models/usage/series.h"

namespace sojourn::usage {

enum class Forecaster {
  kUpa = 0,                // sojourn's UPA: kUpaPaper plus a decaying residual (section 2.2)
  kLast4 = 1,              // mean of the last 4 hours (section 4.2)
  kPersist = 2,            // the current use persists (section 4.2)
  kSameTimeYesterday = 3,  // the value 24 h earlier (issue 8)
  kUpaPaper = 4,           // the paper-literal UPA: nearest prototype to the last 24 h
};
// The forecasters the best-of selector and the data-age rule choose among
// (kUpaPaper is kept for comparison only: wherever sojourn uses UPA it is kUpa).
inline constexpr int kNumForecasters = 4;
inline constexpr std::array<Forecaster, kNumForecasters> kAllForecasters = {
    Forecaster::kUpa, Forecaster::kLast4, Forecaster::kPersist, Forecaster::kSameTimeYesterday};

// "upa", "last4", "persist", "same_time_yesterday", "upa_paper".
const char* ForecasterName(Forecaster f);
absl::StatusOr<Forecaster> ParseForecaster(absl::string_view name);

// Value of history bin b as the forecasters see it: NaN outside the series or
// when missing under kDiscard, 1.0 (full use) when missing under kFullUse.
double HistoryValue(const std::vector<double>& series, int64_t b, DowntimePolicy downtime);

// Predicts the use of bins [now, now + horizon) into out[0..horizon), each
// value clamped to 0..1. Reads only bins before `now`. `patterns` is needed
// by the UPAs only. Returns false when the forecaster cannot answer (no
// history; for the UPAs also no prototypes or no data in the last 24 h).
//
// kUpaPaper (section 2.2, to the letter): the last 24 h are compared with
// bins [p, p + 288) of every prototype, p = time of day of `now`, and the
// nearest prototype's bins from p + 288 on are the forecast. With variational
// normalisation the mean of the last 24 h is subtracted before the comparison
// and added to the prototype. Past the end of the 48 h object the prediction
// is chained (section 2.2, option (b)): the last 24 h of history-plus-forecast
// select the next prototype. Missing history bins are left out of the
// distance.
//
// kUpa: section 2.2's "after some possible processing" made concrete as a
// seasonal-plus-error model. The matched, re-centred prototype is the
// seasonal level L; its residual at the last known history bin b is
// r = x_b - L_b, and the residuals are modelled as AR(1) with the
// coefficient patterns->residual_phi fitted on the training data
// (FitResidualPhi). The forecast of bin now + j is the paper's forecast plus
// the expected residual, L_{now+j} + phi^(now+j-b) * r, clamped to 0..1 (with
// k-step coefficients, residual_phi_by_step, phi_k replaces phi^k). With
// phi = 0 (e.g. patterns stored before the correction existed) kUpa is
// kUpaPaper.
bool Forecast(Forecaster f, const std::vector<double>& series, int64_t now, int horizon,
              DowntimePolicy downtime, const UsagePatterns* patterns, double* out);

// Least-squares AR(1) coefficient of the residuals of the paper's UPA on
// the history bins before `end_bin`: at every `now` with a day of history
// inside the span of data collection, the last 24 h are matched as
// kUpaPaper does, and the residual pair (x_{now-1} - L_{now-1},
// x_now - L_now) of the matched, re-centred prototype L is collected (both
// bins known). phi = sum(r0 * r1) / sum(r0^2), clamped to [0, kMaxResidualPhi].
// `pairs` (optional) receives the number of pairs.
//
// With fewer than kMinResidualPairs pairs, or when the residuals are all zero
// (e.g. a desktop that never went down in training), phi cannot be estimated
// and is patterns.options.unestimated_residual_phi, by default kMaxResidualPhi:
// the deviation from the pattern is taken to persist (the random-walk limit),
// so UPA starts from the current use as persistence does, the forecast sojourn
// falls back to wherever a model cannot be estimated. phi = 0 would assert
// that every deviation vanishes within five minutes, which no host with an
// estimate supports. (Until 2026-11-22 it was 0, the paper's forecast;
// docs/EVALUATION-usage.md compares both.) 0 when there are no prototypes or
// no data.
// (kMaxResidualPhi is in patterns.h.)
inline constexpr int kMinResidualPairs = 288;  // one day of 5-minute pairs
//
// With steps > 0, by_step[k - 1] (k = 1..steps) receives the k-step
// coefficient phi_k = sum(r0 * r_k) / sum(r0^2) over the same `now`s, r_k the
// residual of bin now + k - 1 against the paper's forecast made at `now`
// (chained past the 48 h object) where that bin is known and before the end
// of data collection; clamped like phi.
double FitResidualPhi(const std::vector<double>& series, DowntimePolicy downtime,
                      const UsagePatterns& patterns, int64_t end_bin, int* pairs = nullptr,
                      int steps = 0, std::vector<double>* by_step = nullptr);

// Availability tests of section 3: "will the free share of the resource stay
// at or above alpha for eta?" with alpha in 10 %..90 % (step 10 %) and eta in
// 10, 20, 30, 60, 90, 120, 240 minutes.
inline constexpr std::array<int, 7> kEtaMinutes = {10, 20, 30, 60, 90, 120, 240};
inline constexpr int kNumAlphas = 9;
inline constexpr int kTestHorizonBins = 48;  // the longest eta
inline double Alpha(int i) { return 0.1 * (i + 1); }

// True when 1 - use[i] >= alpha for every i < bins (the test's "yes").
bool StaysAvailable(const double* use, int bins, double alpha);

// True when series[0, end) has a known value and every known value is exactly
// 0 or 1: the resource is a state indicator, e.g. a host's up/down state with
// down-time counted as full use (an availability matrix).
bool IsBinaryUse(const std::vector<double>& series, int64_t end);

// The use a threshold question ("will free >= alpha hold for eta?") is
// answered with. For a binary resource a forecast bin is the probability of
// state 1 (in use / down), and a threshold on it is a question about that
// state, so each bin is replaced by its more likely state (1 when use > 0.5):
// the per-bin median, which minimises the expected number of wrong answers
// for every alpha at once, where the probability itself would answer "no" to
// the high alphas and "yes" to the low ones. A continuous forecast is left as
// it is. Used wherever sojourn answers threshold questions: the best-of
// selector's scoring, UsageModel::CanRun / HowLong and the availability
// matrix of `sojourn-eval usage`. The forecast itself (PredictUsage, ranking
// by predicted mean use) is unchanged.
void ToThresholdAnswer(bool binary_use, double* use, int bins);

// Fraction of the 63 (alpha, eta) tests that `pred` answers differently from
// `actual` (both kTestHorizonBins long). NaN when `actual` has a NaN.
double DecisionError(const double* pred, const double* actual);

// The same per eta: wrong[e] = share of the 9 alpha tests of kEtaMinutes[e]
// answered wrongly. False (and wrong untouched) when `actual` has a NaN.
bool DecisionErrorsByEta(const double* pred, const double* actual,
                         std::array<double, kEtaMinutes.size()>* wrong);

// Index in kEtaMinutes of the longest eta not longer than `horizon_bins`
// (0 for shorter horizons): the test a request of that horizon resembles.
int EtaIndexFor(int horizon_bins);

// Section 4.2's adaptive behaviour.
struct AdaptiveOptions {
  // UPA with more than this many days of data.
  double upa_min_days = 21;
  // last4 with more than this many hours of data; persistence otherwise.
  double last4_min_hours = 4;
  // Idle rule: a bin is idle when its use is at most this (availability of
  // 99 %, the paper's example threshold).
  double idle_use = 0.01;
  // Idle rule: the host must have been idle this long.
  double idle_hours = 2;
};

// Which forecaster answered, and why.
struct MethodChoice {
  Forecaster method = Forecaster::kPersist;
  // Human-readable reason, e.g. "data-age rule: 3.2 days of data (<= 21)".
  std::string why;
  // The best-of selector's mean recent error of `method` (fraction of wrong
  // availability tests) and on how many replay points; NaN / 0 when the
  // data-age rule chose.
  double recent_error = std::numeric_limits<double>::quiet_NaN();
  int recent_points = 0;
  bool by_selector = false;
};

// Section 4.2: UPA if more than upa_min_days of data (measured from the first
// bin with data) and prototypes exist; else last4 if more than
// last4_min_hours; else persistence. Idle rule: when UPA is chosen, the host
// has been idle for idle_hours and UPA predicts idleness for most of the next
// `horizon` bins, last4 answers instead.
// `first_valid` is the first bin of `series` with data (-1: none).
MethodChoice DataAgeRule(const std::vector<double>& series, int64_t now, int64_t first_valid,
                         int horizon, DowntimePolicy downtime, const UsagePatterns* patterns,
                         const AdaptiveOptions& options);

// The best-of selector's settings.
struct SelectorOptions {
  // Recent errors are averaged over replay points of this many past days.
  int window_days = 7;
  // A forecaster needs this many replay points to be judged (default: one
  // day of points); with fewer for every forecaster the data-age rule answers.
  int min_points = kBinsPerDay / 5;
  // Replay every this many bins. 5 bins (25 minutes) is coprime with the
  // hour and the day, so over the window the replay points visit every
  // 5-minute phase equally, as requests do; an hourly grid would land every
  // point on the hour, where hourly-sampled hosts change state, and unfairly
  // penalise persistence.
  int step_bins = 5;
};

// Mean recent error of one forecaster.
struct RecentScore {
  double error = std::numeric_limits<double>::quiet_NaN();
  int points = 0;
};
using RecentScores = std::array<RecentScore, kNumForecasters>;

// Per-host record of how each forecaster did on the host's own history: every
// forecaster is replayed at points first, first + step, ... and scored with
// DecisionErrorsByEta against what happened next. Recent() sums the points of
// a window with prefix sums, so one table serves any number of queries.
class RecentErrorTable {
 public:
  // `patterns_for(s)` gives the prototypes UPA may use at replay point s (it
  // should not have been trained on data after s), or nullptr. `binary_use`:
  // forecasts are scored as ToThresholdAnswer turns them into answers.
  RecentErrorTable(const std::vector<double>& series, DowntimePolicy downtime, int64_t first,
                   int64_t limit, const SelectorOptions& options,
                   const std::function<const UsagePatterns*(int64_t)>& patterns_for,
                   bool binary_use = false);
  RecentErrorTable() = default;

  // Scores over points s with now - window <= s and s + kTestHorizonBins <=
  // now, on the availability tests whose eta matches a request of
  // `horizon_bins` (EtaIndexFor): a forecaster is judged on the kind of
  // question it is about to answer.
  RecentScores Recent(int64_t now, int horizon_bins) const;

 private:
  int64_t first_ = 0;
  int step_ = kBinsPerHour;
  int window_bins_ = 7 * kBinsPerDay;
  // Prefix sums over point index, per forecaster and eta.
  std::array<std::array<std::vector<double>, kEtaMinutes.size()>, kNumForecasters> sum_;
  std::array<std::vector<int>, kNumForecasters> count_;
};

// The best-of choice: the forecaster with the lowest recent error among those
// with at least min_points points; ties go to `fallback`'s method, then to
// the order of kAllForecasters. Returns `fallback` when nobody qualifies.
MethodChoice SelectBest(const RecentScores& scores, const MethodChoice& fallback, int min_points);

}  // namespace sojourn::usage

#endif  // SOJOURN_MODELS_USAGE_FORECASTERS_H_
