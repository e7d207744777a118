#include "models/availability/predict.h"

#include <cmath>

#include "models/availability/tr.h"

namespace sojourn::availability {

std::vector<double> WindowFrequencyCurve(const SojournStats& stats, HostState init, int M) {
  const int i = StateIndex(init);
  const double total = stats.initial[i];
  if (total <= 0 || M <= 0) return {};
  std::vector<double> tr(M);
  auto it = stats.first_failure[i].begin();
  double failed = 0;
  for (int m = 1; m <= M; ++m) {
    while (it != stats.first_failure[i].end() && it->first <= m) {
      failed += it->second;
      ++it;
    }
    tr[m - 1] = IsFailure(init) ? 0.0 : std::max(0.0, 1.0 - failed / total);
  }
  return tr;
}

TrPrediction PredictFromStats(const SojournStats& stats, HostState init, int M,
                              const EstimatorOptions& opt, const SojournStats* prior,
                              int64_t init_age_seconds) {
  TrPrediction out;
  out.windows_used = static_cast<int>(stats.num_windows);
  const int i = StateIndex(init);
  const bool seen = !IsFailure(init) && (!stats.ordinary[i].empty() || !stats.first[i].empty());
  out.low_history = stats.num_windows < 3 || !seen;
  if (M <= 0) return out;
  if (IsFailure(init)) {
    out.tr.assign(M, 0.0);
    out.mttf_seconds = 0;
    return out;
  }
  const SojournStats* used = &stats;
  SojournStats shrunk;
  if (prior != nullptr && opt.prior_windows > 0 && prior->total_weight > 0) {
    // Shrinkage towards the prior: pseudo-counts worth opt.prior_windows windows.
    shrunk = stats;
    shrunk.Merge(*prior, opt.prior_windows / prior->total_weight);
    shrunk.num_windows = stats.num_windows;
    used = &shrunk;
  }
  SojournStats aged;
  if (opt.recent_age_seconds > 0 && init_age_seconds >= 0) {
    // Age conditioning: the first sojourns of windows whose initial state was
    // as old (recent / settled) as the host's now, shrunk towards all first
    // sojourns with weight opt.age_prior_windows.
    const int bucket = init_age_seconds < opt.recent_age_seconds ? 1 : 0;
    aged = *used;
    StateSojourns first = used->first_by_age[bucket][i];
    const double n_all = used->initial[i];
    if (opt.age_prior_windows > 0 && n_all > 0) {
      const double scale = opt.age_prior_windows / n_all;
      for (const auto& [key, c] : used->first[i].completed) first.completed[key] += scale * c;
      for (const auto& [len, c] : used->first[i].censored) first.censored[len] += scale * c;
    }
    aged.first[i] = std::move(first);
    aged.initial[i] = used->initial_by_age[bucket][i] + (n_all > 0 ? opt.age_prior_windows : 0);
    used = &aged;
  }
  const SemiMarkovKernel kernel = EstimateKernel(*used, opt);
  out.tr = TrCurve(kernel, init, M);
  if (opt.frequency_weight > 0) {
    const std::vector<double> freq = WindowFrequencyCurve(*used, init, M);
    if (!freq.empty()) {
      const double w = std::min(1.0, opt.frequency_weight);
      for (int m = 0; m < M; ++m) out.tr[m] = (1 - w) * out.tr[m] + w * freq[m];
    }
  }
  out.mttf_seconds = MttfSteps(out.tr) * static_cast<double>(stats.step_seconds);
  return out;
}

SojournStats CollectStats(const StateSeries& series, const WindowSpec& spec, int64_t end_unix,
                          const EstimatorOptions& opt,
                          const std::function<bool(size_t start)>& exclude) {
  SojournStats stats;
  stats.step_seconds = series.step_seconds;
  const int steps = WindowSteps(series, spec);
  // Age threshold in grid steps (rounded up): "recent" = fewer equal points
  // before the window start than this.
  const int64_t recent_steps =
      opt.recent_age_seconds > 0 && series.step_seconds > 0
          ? (opt.recent_age_seconds + series.step_seconds - 1) / series.step_seconds
          : 0;
  auto add = [&](const std::vector<size_t>& starts, double base_weight) {
    int k = 0;
    int used = 0;
    for (size_t s : starts) {
      if (exclude && exclude(s)) continue;
      // Recency counts the kept windows, newest first.
      double w = base_weight;
      if (opt.recency_half_life_windows > 0) {
        w *= std::pow(0.5, k / opt.recency_half_life_windows);
      }
      ++k;
      int bucket = -1;
      if (recent_steps > 0) {
        const int64_t age = InitialAgeSteps(series.states, s, recent_steps);
        if (age >= 0) bucket = age < recent_steps ? 1 : 0;
      }
      AccumulateWindow(series.states.data() + s, static_cast<size_t>(steps) + 1, w, &stats,
                       bucket);
      ++used;
    }
    return used;
  };
  const int same = add(HistoryWindowStarts(series, spec, end_unix), 1.0);
  if (opt.neighbor_window_weight > 0 && opt.neighbor_offset_seconds > 0) {
    for (int sign : {-1, 1}) {
      WindowSpec nb = spec;
      nb.start_second_of_day += sign * opt.neighbor_offset_seconds;
      // Keep the start day (and so the day type) of the window itself.
      if (nb.start_second_of_day < 0 || nb.start_second_of_day >= 86400) continue;
      add(HistoryWindowStarts(series, nb, end_unix), opt.neighbor_window_weight);
    }
  }
  if (same < opt.borrow_below_windows && opt.other_day_type_weight > 0) {
    WindowSpec other = spec;
    other.day_type = spec.day_type == DayType::kWeekday ? DayType::kWeekend : DayType::kWeekday;
    add(HistoryWindowStarts(series, other, end_unix), opt.other_day_type_weight);
  }
  return stats;
}

}  // namespace sojourn::availability
