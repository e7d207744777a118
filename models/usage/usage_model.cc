#include "models/usage/usage_model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sojourn::usage {
namespace {

int Idx(Resource r) { return static_cast<int>(r); }

std::string Offset(int bins) {
  const int minutes = bins * static_cast<int>(kBinSeconds / 60);
  return absl::StrFormat("+%dh%02dm", minutes / 60, minutes % 60);
}

// "FREE < NEED" with two decimals, or as many more as it takes to tell them
// apart ("0.0999 < 0.1000", not "0.10 < 0.10").
std::string FreeBelowNeed(double free, double need) {
  int digits = 2;
  while (digits < 6 && absl::StrFormat("%.*f", digits, free) ==
                           absl::StrFormat("%.*f", digits, need)) {
    ++digits;
  }
  return absl::StrFormat("%.*f < %.*f", digits, free, digits, need);
}

}  // namespace

UsageModel::UsageModel(UsageSeries series, HostPatterns patterns, const UsageModelOptions& options,
                       int64_t now_unix)
    : series_(std::move(series)),
      patterns_(std::move(patterns)),
      options_(options),
      now_unix_(now_unix) {
  now_bin_ = series_.BinOf(now_unix_);
  if (now_bin_ < 0) now_bin_ = 0;
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    const std::vector<double>& v = series_.of(r);
    if (now_bin_ < static_cast<int64_t>(v.size())) current_bin_[Idx(r)] = v[now_bin_];
  }
  // Bins at or after "now" are not history: drop them; pad a host that went
  // quiet with missing bins.
  series_.Resize(now_bin_);
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    first_valid_[Idx(r)] = series_.FirstValidBin(r);
    binary_use_[Idx(r)] = IsBinaryUse(series_.of(r), now_bin_);
    if (!options_.use_selector) continue;
    const UsagePatterns& current = patterns_.current(r);
    const UsagePatterns& back = patterns_.backtest(r);
    const UsageSeries& s = series_;
    // UPA is replayed only with prototypes trained before the replay point.
    auto patterns_for = [&current, &back, &s](int64_t bin) -> const UsagePatterns* {
      const int64_t t = s.UnixOfBin(bin);
      if (!current.empty() && current.trained_until_unix <= t) return &current;
      if (!back.empty() && back.trained_until_unix <= t) return &back;
      return nullptr;
    };
    const int64_t window = int64_t{options_.selector.window_days} * kBinsPerDay;
    const int step = std::max(1, options_.selector.step_bins);
    // Align the replay points on the step grid so they fall at fixed times.
    int64_t first = now_bin_ - window;
    first += ((-first) % step + step) % step;
    tables_[Idx(r)] = RecentErrorTable(series_.of(r), options_.patterns.downtime, first, now_bin_,
                                       options_.selector, patterns_for, binary_use_[Idx(r)]);
  }
}

UsageModel UsageModel::Build(UsageSeries series, const UsageModelOptions& options,
                             int64_t now_unix) {
  HostPatterns patterns =
      AnalyseHost(series, options.patterns, now_unix, options.selector.window_days);
  return UsageModel(std::move(series), std::move(patterns), options, now_unix);
}

RecentScores UsageModel::Recent(Resource r, int horizon_bins) const {
  return tables_[Idx(r)].Recent(now_bin_, horizon_bins);
}

MethodChoice UsageModel::Choose(Resource r, int horizon_bins) const {
  const UsagePatterns& p = patterns_.current(r);
  MethodChoice rule =
      DataAgeRule(series_.of(r), now_bin_, first_valid_[Idx(r)], horizon_bins,
                  options_.patterns.downtime, p.empty() ? nullptr : &p, options_.adaptive);
  if (!options_.use_selector) return rule;
  return SelectBest(Recent(r, horizon_bins), rule, options_.selector.min_points);
}

UsageModel::Prediction UsageModel::Predict(Resource r, int bins) const {
  Prediction out;
  out.method = Choose(r, bins);
  out.use.resize(bins);
  const UsagePatterns& p = patterns_.current(r);
  out.ok = Forecast(out.method.method, series_.of(r), now_bin_, bins, options_.patterns.downtime,
                    p.empty() ? nullptr : &p, out.use.data());
  if (!out.ok && out.method.method != Forecaster::kPersist) {
    // The chosen forecaster could not answer (e.g. no data in the last 24 h
    // for UPA): fall back to persistence of the current use.
    out.method.why =
        absl::StrCat(ForecasterName(out.method.method), " could not answer; persistence instead");
    out.method.method = Forecaster::kPersist;
    out.method.by_selector = false;
    out.method.recent_error = std::numeric_limits<double>::quiet_NaN();
    out.method.recent_points = 0;
    out.ok = Forecast(Forecaster::kPersist, series_.of(r), now_bin_, bins,
                      options_.patterns.downtime, nullptr, out.use.data());
  }
  if (!out.ok && !std::isnan(current_bin_[Idx(r)])) {
    // No whole 5 minutes yet (a host that has just started reporting): the
    // samples of the current ones, persisted, as the proto promises a host
    // with under 4 hours of data.
    out.method.method = Forecaster::kPersist;
    out.method.by_selector = false;
    out.method.why = "only the current 5 minutes have samples; persistence of them";
    out.method.recent_error = std::numeric_limits<double>::quiet_NaN();
    out.method.recent_points = 0;
    std::fill(out.use.begin(), out.use.end(), current_bin_[Idx(r)]);
    out.ok = true;
  }
  return out;
}

absl::StatusOr<UsageForecast> UsageModel::PredictUsage(Resource r, double hours) const {
  if (!(hours > 0) || hours > options_.max_hours) {
    return absl::InvalidArgumentError(
        absl::StrFormat("hours must be in (0, %g], got %g", options_.max_hours, hours));
  }
  // At least one 5-minute step (hours = 1e-300 answered an empty forecast).
  const int bins = std::max(1, static_cast<int>(std::ceil(hours * kBinsPerHour - 1e-9)));
  Prediction p = Predict(r, bins);
  if (!p.ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("not enough history yet: no ", ResourceName(r), " data in the last 24 hours"));
  }
  UsageForecast f;
  f.resource = r;
  f.start_unix = series_.UnixOfBin(now_bin_);
  f.use = std::move(p.use);
  f.method = std::move(p.method);
  return f;
}

absl::Status UsageModel::CheckFree(double free_cpu, double free_ram) const {
  if (!(free_cpu >= 0 && free_cpu <= 1) || !(free_ram >= 0 && free_ram <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "free_cpu and free_ram are fractions in [0, 1], got %g and %g", free_cpu, free_ram));
  }
  if (free_cpu == 0 && free_ram == 0) {
    // 0 means "not checked"; with both unchecked the answer would be a
    // trivial yes / 72 h with no forecast behind it (and no history needed).
    return absl::InvalidArgumentError(
        "nothing to check: ask for some CPU or memory to stay free (both are 0)");
  }
  return absl::OkStatus();
}

absl::StatusOr<CanRunAnswer> UsageModel::CanRun(double free_cpu, double free_ram,
                                                double hours) const {
  if (absl::Status s = CheckFree(free_cpu, free_ram); !s.ok()) return s;
  if (!(hours > 0) || hours > options_.max_hours) {
    return absl::InvalidArgumentError(
        absl::StrFormat("hours must be in (0, %g], got %g", options_.max_hours, hours));
  }
  // At least one 5-minute step (hours = 1e-300 answered an empty forecast).
  const int bins = std::max(1, static_cast<int>(std::ceil(hours * kBinsPerHour - 1e-9)));
  CanRunAnswer a;
  a.can_run = true;
  std::vector<std::string> methods, notes;
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    const double need = r == Resource::kCpu ? free_cpu : free_ram;
    if (need <= 0) continue;
    Prediction p = Predict(r, bins);
    (r == Resource::kCpu ? a.cpu_method : a.mem_method) = p.method;
    if (!p.ok) {
      if (r == Resource::kMemory) {
        notes.push_back("mem: no memory data, not checked");
        continue;
      }
      // Refused as PredictUsage and HowLong refuse it (it used to answer
      // "no" with an empty method, as if predicted).
      return absl::FailedPreconditionError(
          "not enough history yet: no cpu data in the last 24 hours");
    }
    methods.push_back(absl::StrCat(ResourceName(r), "=", ForecasterName(p.method.method)));
    const bool binary = binary_use_[Idx(r)];
    std::vector<double> answer = p.use;
    ToThresholdAnswer(binary, answer.data(), bins);
    for (int i = 0; i < bins; ++i) {
      if (!(1.0 - answer[i] >= need)) {
        a.can_run = false;
        notes.push_back(
            binary ? absl::StrFormat("%s: predicted in use (probability %.2f) at %s (%s)",
                                     ResourceName(r), p.use[i], Offset(i),
                                     ForecasterName(p.method.method))
                   : absl::StrFormat("%s: predicted free %s at %s (%s)", ResourceName(r),
                                     FreeBelowNeed(1.0 - p.use[i], need), Offset(i),
                                     ForecasterName(p.method.method)));
        break;
      }
    }
  }
  if (methods.empty()) {
    // Only memory was asked for and the host has no memory data: nothing
    // was checked, so there is no answer (as PredictUsage for memory).
    return absl::FailedPreconditionError(
        "not enough history yet: no mem data in the last 24 hours");
  }
  a.method = absl::StrJoin(methods, " ");
  if (a.can_run) {
    notes.insert(notes.begin(), absl::StrFormat("predicted free capacity holds for %gh", hours));
  }
  a.reason = absl::StrJoin(notes, "; ");
  return a;
}

absl::StatusOr<HowLongAnswer> UsageModel::HowLong(double free_cpu, double free_ram) const {
  if (absl::Status s = CheckFree(free_cpu, free_ram); !s.ok()) return s;
  const int max_bins = static_cast<int>(std::floor(options_.max_hours * kBinsPerHour + 1e-9));
  HowLongAnswer a;
  int limit = max_bins;
  std::vector<std::string> methods;
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    const double need = r == Resource::kCpu ? free_cpu : free_ram;
    if (need <= 0) continue;
    Prediction p = Predict(r, max_bins);
    (r == Resource::kCpu ? a.cpu_method : a.mem_method) = p.method;
    if (!p.ok) {
      if (r == Resource::kMemory) continue;  // no memory data: not checked
      // Refused as PredictUsage refuses it: answering "0 h, limited by cpu"
      // with no method would read as a prediction.
      return absl::FailedPreconditionError(
          "not enough history yet: no cpu data in the last 24 hours");
    }
    methods.push_back(absl::StrCat(ResourceName(r), "=", ForecasterName(p.method.method)));
    ToThresholdAnswer(binary_use_[Idx(r)], p.use.data(), max_bins);
    for (int i = 0; i < limit; ++i) {
      if (!(1.0 - p.use[i] >= need)) {
        limit = i;
        a.limited_by = ResourceName(r);
        break;
      }
    }
  }
  if (methods.empty()) {  // only memory asked for, and no memory data
    return absl::FailedPreconditionError(
        "not enough history yet: no mem data in the last 24 hours");
  }
  a.hours = static_cast<double>(limit) / kBinsPerHour;
  a.capped = limit == max_bins;
  a.method = absl::StrJoin(methods, " ");
  return a;
}

}  // namespace sojourn::usage
