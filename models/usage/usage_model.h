// Per-host usage predictor: LUPA's getPrediction / canRunGridApplication /
// howLongCanRunGridApplication (paper 003, section 4.1) answered by the
// forecaster that the best-of selector (issue 8) or, with too little history,
// the adaptive data-age rule (section 4.2) picks. Pure library: the
// predictor's RPCs and the CLI are thin adapters over UsageModel.
//
//   UsageSeries series = *Resample(trace);
//   UsageModel model = UsageModel::Build(series, {}, now_unix);
//   auto can = model.CanRun(/*free_cpu=*/0.5, /*free_ram=*/0.25, /*hours=*/4);
//   // can->can_run, can->reason, can->method ("cpu=upa mem=last4")
//
// A UsageModel is immutable after construction and safe for concurrent use.
#ifndef SOJOURN_MODELS_USAGE_USAGE_MODEL_H_
#define SOJOURN_MODELS_USAGE_USAGE_MODEL_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/usage/forecasters.h"
#include "models/usage/patterns.h"
#include "models/usage/series.h"

namespace sojourn::usage {

struct UsageModelOptions {
  PatternOptions patterns;
  AdaptiveOptions adaptive;
  SelectorOptions selector;
  // false: always the data-age rule of section 4.2 (LUPA's behaviour).
  bool use_selector = true;
  // Longest horizon; HowLong is capped here (section 4.1: 72 hours).
  double max_hours = 72;
};

struct UsageForecast {
  Resource resource = Resource::kCpu;
  // Time of the first value; values are kBinSeconds apart.
  int64_t start_unix = 0;
  int64_t step_seconds = kBinSeconds;
  // Predicted use, fraction 0..1 of the capacity.
  std::vector<double> use;
  MethodChoice method;
};

struct CanRunAnswer {
  bool can_run = false;
  // Why, e.g. "cpu: predicted free 0.35 < 0.50 at +2h05m (upa)".
  std::string reason;
  // "cpu=<method> mem=<method>" (mem omitted when not checked).
  std::string method;
  MethodChoice cpu_method, mem_method;
};

struct HowLongAnswer {
  // Hours the requested free CPU and memory are predicted to last, a
  // multiple of 5 minutes, at most max_hours.
  double hours = 0;
  bool capped = false;
  // "cpu", "mem", or "" when capped.
  std::string limited_by;
  std::string method;
  MethodChoice cpu_method, mem_method;
};

class UsageModel {
 public:
  // `series`: the host's 5-minute history; bins at or after `now_unix` are
  // ignored. `patterns`: the host's latest pattern analysis (may be empty).
  // Replays every forecaster over the selector's window (a few ms).
  UsageModel(UsageSeries series, HostPatterns patterns, const UsageModelOptions& options,
             int64_t now_unix);
  // Runs the pattern analysis (AnalyseHost with the selector's window as the
  // backtest period) and builds the model.
  static UsageModel Build(UsageSeries series, const UsageModelOptions& options, int64_t now_unix);

  // The forecaster for `r` over the next `horizon_bins` bins, and why.
  MethodChoice Choose(Resource r, int horizon_bins) const;
  // The recent error of every forecaster for `r` on requests of
  // `horizon_bins` (the selector's view).
  RecentScores Recent(Resource r, int horizon_bins) const;

  // getPrediction: the use of `r` for the next `hours` in 5-minute steps.
  // InvalidArgument unless 0 < hours <= max_hours; FailedPrecondition ("not
  // enough history yet: no cpu data in the last 24 hours") when the host has
  // no data for `r` in the last day.
  absl::StatusOr<UsageForecast> PredictUsage(Resource r, double hours) const;
  // canRunGridApplication: whether free CPU >= free_cpu and free memory >=
  // free_ram (fractions 0..1 of the host's capacity) are predicted for every
  // 5-minute step of the next `hours`. For a resource whose history is a 0/1
  // state (IsBinaryUse) the forecast is the probability of state 1 and each
  // step is answered with the more likely state (ToThresholdAnswer). A zero
  // request is not checked (InvalidArgument when both are zero: nothing to
  // check); memory is not checked (and the reason says so) when the host has
  // no memory data. FailedPrecondition ("not enough history
  // yet: ...") when CPU is asked for and the host has no CPU data in the last
  // day, as PredictUsage and HowLong.
  absl::StatusOr<CanRunAnswer> CanRun(double free_cpu, double free_ram, double hours) const;
  // howLongCanRunGridApplication: for how long both requests are predicted
  // to hold, capped at max_hours (0/1 resources and zero requests as in
  // CanRun).
  // FailedPrecondition ("not enough history yet: ...") when CPU is asked for
  // and the host has no CPU data in the last day, as PredictUsage.
  absl::StatusOr<HowLongAnswer> HowLong(double free_cpu, double free_ram) const;

  const HostPatterns& patterns() const { return patterns_; }
  const UsageSeries& series() const { return series_; }
  int64_t now_unix() const { return now_unix_; }

 private:
  struct Prediction {
    bool ok = false;
    std::vector<double> use;
    MethodChoice method;
  };
  Prediction Predict(Resource r, int bins) const;
  absl::Status CheckFree(double free_cpu, double free_ram) const;

  UsageSeries series_;
  HostPatterns patterns_;
  UsageModelOptions options_;
  int64_t now_unix_;
  int64_t now_bin_;
  std::array<int64_t, 2> first_valid_{-1, -1};
  // The mean of the samples in the bin "now" falls in (not history, so not in
  // the series), per resource; NaN when none. Persistence's last resort: a
  // host whose only samples are in the current 5 minutes.
  std::array<double, 2> current_bin_{std::numeric_limits<double>::quiet_NaN(),
                                     std::numeric_limits<double>::quiet_NaN()};
  // IsBinaryUse of each resource's history: threshold questions are then
  // answered with the more likely state (ToThresholdAnswer).
  std::array<bool, 2> binary_use_{false, false};
  std::array<RecentErrorTable, 2> tables_;
};

}  // namespace sojourn::usage

#endif  // SOJOURN_MODELS_USAGE_USAGE_MODEL_H_
