#include "models/availability/predict.h"

#include <algorithm>
#include <cmath>

#include "models/availability/frailty.h"
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

double BetaBinomialConcentration(const std::vector<std::pair<double, double>>& n_and_survived) {
  double N = 0, Y = 0, sum_n2 = 0;
  int H = 0;
  for (const auto& [n, y] : n_and_survived) {
    if (!(n > 0)) continue;
    ++H;
    N += n;
    Y += y;
    sum_n2 += n * n;
  }
  if (H < 2 || N - H <= 0) return 0;
  const double mu = Y / N;
  if (mu <= 0 || mu >= 1) return 0;
  double ssb = 0, ssw = 0;
  for (const auto& [n, y] : n_and_survived) {
    if (!(n > 0)) continue;
    const double p = y / n;
    ssb += n * (p - mu) * (p - mu);
    ssw += n * p * (1 - p);
  }
  const double msb = ssb / (H - 1);
  const double msw = ssw / (N - H);
  const double n0 = (N - sum_n2 / N) / (H - 1);
  const double denom = msb + (n0 - 1) * msw;
  const double rho = denom > 0 ? (msb - msw) / denom : 0;
  if (rho <= 0) return N;
  return std::clamp(1.0 / rho - 1.0, 1.0, N);
}

void PopulationPriorBuilder::Add(const SojournStats& host) {
  pooled_.Merge(host);
  if (host.own_up_windows > 0) per_host_.emplace_back(host.own_up_windows, host.own_up_survived);
  if (!host.borrowed.empty()) {
    // Counted in windows of average weight (own and neighbouring windows
    // weigh 1 and neighbor_window_weight, borrowed ones other_day_type_weight),
    // so that the 0.5 of Build is half a failure on either side.
    const SojournStats& b = host.borrowed[0];
    const int64_t own_windows = host.num_windows - b.num_windows;
    if (own_windows > 0 && host.total_weight > 0 && b.num_windows > 0 && b.total_weight > 0) {
      double f = 0, e = 0;
      CountFailures(host, &f, &e);
      const double own_unit = static_cast<double>(own_windows) / host.total_weight;
      own_failures_ += f * own_unit;
      own_exposure_ += e * own_unit;
      CountFailures(b, &f, &e);
      const double borrowed_unit = static_cast<double>(b.num_windows) / b.total_weight;
      borrowed_failures_ += f * borrowed_unit;
      borrowed_exposure_ += e * borrowed_unit;
    }
  }
}

SojournStats PopulationPriorBuilder::Build(bool level_borrowed) const {
  double ratio = 0;
  if (own_exposure_ > 0 && borrowed_exposure_ > 0) {
    ratio = ((own_failures_ + 0.5) / own_exposure_) /
            ((borrowed_failures_ + 0.5) / borrowed_exposure_);
  }
  SojournStats out = FlattenBorrowed(pooled_, level_borrowed && ratio > 0 ? ratio : 1.0);
  out.prior_strength = BetaBinomialConcentration(per_host_);
  out.borrow_hazard_ratio = ratio;
  return out;
}

SojournStats FlattenBorrowed(const SojournStats& s, double ratio) {
  if (s.borrowed.empty()) return s;
  SojournStats out = s;
  out.borrowed.clear();
  out.Merge(ScaleFailureHazards(s.borrowed[0], ratio));
  out.num_windows = s.num_windows;
  return out;
}

SojournStats ShrinkStats(const SojournStats& raw, const EstimatorOptions& opt,
                         const SojournStats* prior, double* strength) {
  *strength = 0;
  const double ratio = opt.level_corrected_borrowing && prior != nullptr &&
                               prior->borrow_hazard_ratio > 0
                           ? prior->borrow_hazard_ratio
                           : 1.0;
  SojournStats shrunk = FlattenBorrowed(raw, ratio);
  if (prior == nullptr || opt.prior_windows <= 0 || prior->total_weight <= 0) return shrunk;
  // Shrinkage towards the prior: pseudo-counts worth `strength` windows.
  *strength = opt.empirical_bayes_prior && prior->prior_strength > 0 ? prior->prior_strength
                                                                     : opt.prior_windows;
  const int64_t windows = shrunk.num_windows;
  // A prior that still holds borrowed windows (not from the builder) is
  // flattened first; the builder's is used as it is (no copy).
  SojournStats flattened;
  const SojournStats* flat_prior = prior;
  if (!prior->borrowed.empty()) {
    flattened = FlattenBorrowed(*prior, ratio);
    flat_prior = &flattened;
  }
  const double scale = *strength / prior->total_weight;
  // The prior at the host's level (host frailty): its failure hazards
  // rescaled by the host's ratio as its tables are merged
  // (MergeScaledFailureHazards: the same numbers as merging
  // ScaleFailureHazards(*flat_prior, host_ratio), without building that copy).
  // Only states 1 and 2 have sojourn tables to rescale; ratio 1 merges them as
  // they are.
  const double host_ratio = opt.host_frailty ? shrunk.prior_hazard_ratio : 1.0;
  const auto theta = [host_ratio](int i) { return i == 1 || i == 2 ? host_ratio : 1.0; };
  shrunk.Merge(*flat_prior, scale, /*with_exact_age=*/false, /*with_tables=*/false);
  for (int i = 0; i < 6; ++i) {
    MergeScaledFailureHazards(flat_prior->ordinary[i], theta(i), scale, &shrunk.ordinary[i]);
    MergeScaledFailureHazards(flat_prior->first[i], theta(i), scale, &shrunk.first[i]);
    for (int b = 0; b < kAgeClasses; ++b) {
      MergeScaledFailureHazards(flat_prior->first_by_age[b][i], theta(i), scale,
                                &shrunk.first_by_age[b][i]);
    }
  }
  if (opt.per_class_age_prior) {
    for (int b = 0; b < kAgeClasses; ++b) {
      for (int i = 1; i <= 2; ++i) {
        const double w = flat_prior->initial_by_age[b][i];
        if (w <= 0 || flat_prior->initial[i] <= w) continue;
        const double extra = scale * (flat_prior->initial[i] / w - 1);
        MergeScaledFailureHazards(flat_prior->first_by_age[b][i], theta(i), extra,
                                  &shrunk.first_by_age[b][i]);
        shrunk.initial_by_age[b][i] += extra * w;
      }
    }
  }
  shrunk.num_windows = windows;
  return shrunk;
}

TrPrediction PredictFromShrunk(const SojournStats& shrunk, HostState init, int M,
                               const EstimatorOptions& opt, const SojournStats* prior,
                               double strength, int64_t init_age_seconds,
                               const FirstSojournRatio& band_ratio) {
  if (!shrunk.borrowed.empty()) {
    // Not from ShrinkStats: merge the borrowed windows as they are.
    return PredictFromShrunk(FlattenBorrowed(shrunk, 1.0), init, M, opt, prior, strength,
                             init_age_seconds, band_ratio);
  }
  TrPrediction out;
  out.windows_used = static_cast<int>(shrunk.num_windows);
  const int i = StateIndex(init);
  const bool seen = !IsFailure(init) && (!shrunk.ordinary[i].empty() || !shrunk.first[i].empty());
  out.low_history = shrunk.num_windows < 3 || !seen;
  if (M <= 0) return out;
  if (IsFailure(init)) {
    out.tr.assign(M, 0.0);
    out.mttf_seconds = 0;
    return out;
  }
  const SojournStats* used = &shrunk;
  SojournStats aged;
  if (opt.recent_age_seconds > 0 && init_age_seconds >= 0) {
    // Age conditioning: the first sojourns of windows whose initial state was
    // as old (recent / settled / long) as the host's now, shrunk towards all first
    // sojourns with weight opt.age_prior_windows.
    const int bucket = AgeClassOf(init_age_seconds, opt.recent_age_seconds,
                                  opt.long_age_seconds > opt.recent_age_seconds
                                      ? opt.long_age_seconds
                                      : 0);
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
  if (opt.load_band_first_sojourn && opt.first_sojourn_kernel && !(band_ratio == FirstSojournRatio{})) {
    // Load band (load_band.h): the first sojourn's cause-specific hazards at
    // the host's band, proportional to those of all bands (in the age-
    // conditioned copy when there is one; copied once otherwise).
    if (used != &aged) {
      aged = *used;
      used = &aged;
    }
    aged.first[i] = ScaleCauseHazards(aged.first[i], band_ratio.failure, band_ratio.other);
  }
  SemiMarkovKernel kernel = EstimateKernel(*used, opt);
  if (opt.exact_age_first_sojourn && opt.first_sojourn_kernel && init_age_seconds >= 0 &&
      shrunk.step_seconds > 0) {
    // Exact age: the residual holding time of the sojourn in progress, from
    // the delayed-entry hazards of the host's and the prior's first sojourns
    // (the fallback, where no window was at that length, is the kernel's
    // first row as estimated without it).
    const int64_t age_steps = init_age_seconds / shrunk.step_seconds;
    const bool with_prior = prior != nullptr && strength > 0 && prior->total_weight > 0;
    const double prior_scale = with_prior ? strength / prior->total_weight : 0;
    int max_length = shrunk.window_steps;
    if (with_prior) max_length = std::max(max_length, prior->window_steps);
    const KernelRow* fallback = nullptr;
    KernelRow fb;
    if (auto it = kernel.first_rows.find(i); it != kernel.first_rows.end()) {
      fb = it->second;
      fallback = &fb;
    } else if (auto r = kernel.rows.find(i); r != kernel.rows.end()) {
      fb = r->second;
      fallback = &fb;
    }
    // Host frailty: the prior's first sojourns at the host's level, as
    // ShrinkStats scales the rest of the prior.
    const std::map<int64_t, StateSojourns>* prior_exact =
        with_prior ? &prior->first_by_exact_age[i] : nullptr;
    std::map<int64_t, StateSojourns> scaled_exact;
    if (prior_exact != nullptr && opt.host_frailty && shrunk.prior_hazard_ratio != 1.0) {
      for (const auto& [age, table] : *prior_exact) {
        scaled_exact[age] = ScaleFailureHazards(table, shrunk.prior_hazard_ratio);
      }
      prior_exact = &scaled_exact;
    }
    kernel.first_rows[i] =
        AgeConditionedFirstRow(shrunk.first_by_exact_age[i], prior_exact, prior_scale, age_steps, M,
                               max_length, fallback, opt.age_prior_windows);
  }
  out.tr = TrCurve(kernel, init, M);
  if (opt.frequency_weight > 0) {
    const std::vector<double> freq = WindowFrequencyCurve(*used, init, M);
    if (!freq.empty()) {
      const double w = std::min(1.0, opt.frequency_weight);
      for (int m = 0; m < M; ++m) out.tr[m] = (1 - w) * out.tr[m] + w * freq[m];
    }
  }
  out.mttf_seconds = MttfSteps(out.tr) * static_cast<double>(shrunk.step_seconds);
  return out;
}

TrPrediction PredictFromStats(const SojournStats& stats, HostState init, int M,
                              const EstimatorOptions& opt, const SojournStats* prior,
                              int64_t init_age_seconds, const FirstSojournRatio& band_ratio) {
  double strength = 0;
  const SojournStats shrunk = ShrinkStats(stats, opt, prior, &strength);
  TrPrediction out =
      PredictFromShrunk(shrunk, init, M, opt, prior, strength, init_age_seconds, band_ratio);
  // Low history is about the host's own data, not the prior's.
  const int i = StateIndex(init);
  auto seen = [i](const SojournStats& s) { return !s.ordinary[i].empty() || !s.first[i].empty(); };
  out.low_history = stats.num_windows < 3 || IsFailure(init) ||
                    (!seen(stats) && (stats.borrowed.empty() || !seen(stats.borrowed[0])));
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
  const int64_t long_steps =
      recent_steps > 0 && opt.long_age_seconds > opt.recent_age_seconds
          ? (opt.long_age_seconds + series.step_seconds - 1) / series.step_seconds
          : 0;
  // Exact ages (uncapped; -1 = the run reaches the series start).
  std::vector<int64_t> exact_ages;
  if (opt.exact_age_first_sojourn) exact_ages = StateAges(series.states);
  SojournStats* target = &stats;  // where `add` accumulates
  auto add = [&](const std::vector<size_t>& starts, double base_weight, bool own) {
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
        const int64_t age =
            InitialAgeSteps(series.states, s, std::max(recent_steps, long_steps));
        if (age >= 0) bucket = AgeClassOf(age, recent_steps, long_steps);
      }
      if (own && !IsFailure(series.states[s])) {
        // The cell's own windows (for the between-host dispersion).
        stats.own_up_windows += 1;
        bool survived = true;
        for (int k = 1; k <= steps && survived; ++k) survived = !IsFailure(series.states[s + k]);
        stats.own_up_survived += survived ? 1 : 0;
      }
      AccumulateWindow(series.states.data() + s, static_cast<size_t>(steps) + 1, w, target,
                       bucket, exact_ages.empty() ? -1 : exact_ages[s]);
      ++used;
    }
    return used;
  };
  const int same = add(HistoryWindowStarts(series, spec, end_unix), 1.0, true);
  if (opt.neighbor_window_weight > 0 && opt.neighbor_offset_seconds > 0) {
    for (int sign : {-1, 1}) {
      WindowSpec nb = spec;
      nb.start_second_of_day += sign * opt.neighbor_offset_seconds;
      // Keep the start day (and so the day type) of the window itself.
      if (nb.start_second_of_day < 0 || nb.start_second_of_day >= 86400) continue;
      add(HistoryWindowStarts(series, nb, end_unix), opt.neighbor_window_weight, false);
    }
  }
  if (same < opt.borrow_below_windows && opt.other_day_type_weight > 0) {
    WindowSpec other = spec;
    other.day_type = spec.day_type == DayType::kWeekday ? DayType::kWeekend : DayType::kWeekday;
    if (opt.level_corrected_borrowing) {
      // Kept apart (SojournStats::borrowed) for ShrinkStats to level.
      SojournStats borrowed;
      borrowed.step_seconds = series.step_seconds;
      target = &borrowed;
      add(HistoryWindowStarts(series, other, end_unix), opt.other_day_type_weight, false);
      target = &stats;
      if (borrowed.num_windows > 0) {
        stats.num_windows += borrowed.num_windows;
        stats.borrowed.push_back(std::move(borrowed));
      }
    } else {
      add(HistoryWindowStarts(series, other, end_unix), opt.other_day_type_weight, false);
    }
  }
  return stats;
}

}  // namespace sojourn::availability
