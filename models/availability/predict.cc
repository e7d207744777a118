#include "models/availability/predict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "models/availability/frailty.h"
#include "models/availability/tr.h"

namespace sojourn::availability {

namespace {

// WindowFrequencyCurve from the first failures of the windows that started
// in `init` (step -> weight) and those windows' total weight.
std::vector<double> WindowFrequencyCurve(const CountByLength& first_failure, double total,
                                         HostState init, int M) {
  if (total <= 0 || M <= 0) return {};
  std::vector<double> tr(M);
  auto it = first_failure.begin();
  double failed = 0;
  for (int m = 1; m <= M; ++m) {
    while (it != first_failure.end() && it->first <= m) {
      failed += it->second;
      ++it;
    }
    tr[m - 1] = IsFailure(init) ? 0.0 : std::max(0.0, 1.0 - failed / total);
  }
  return tr;
}

}  // namespace

std::vector<double> WindowFrequencyCurve(const SojournStats& stats, HostState init, int M) {
  const int i = StateIndex(init);
  return WindowFrequencyCurve(stats.first_failure[i], stats.initial[i], init, M);
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

void PopulationPriorBuilder::Add(const SojournStats& host) { AddTo(hosts_.size(), host); }

void PopulationPriorBuilder::AddTo(size_t host, const SojournStats& more) {
  if (host >= hosts_.size()) hosts_.resize(host + 1);
  pooled_.Merge(more);
  Host& h = hosts_[host];
  h.up_windows += more.own_up_windows;
  h.up_survived += more.own_up_survived;
  h.windows += more.num_windows;
  h.weight += more.total_weight;
  double f = 0, e = 0;
  CountFailures(more, &f, &e);
  h.failures += f;
  h.exposure += e;
  if (!more.borrowed.empty()) {
    const SojournStats& b = more.borrowed[0];
    h.borrowed_windows += b.num_windows;
    h.borrowed_weight += b.total_weight;
    CountFailures(b, &f, &e);
    h.borrowed_failures += f;
    h.borrowed_exposure += e;
  }
}

int PopulationPriorBuilder::hosts() const {
  int n = 0;
  for (const Host& h : hosts_) n += h.up_windows > 0 ? 1 : 0;
  return n;
}

SojournStats PopulationPriorBuilder::Build(bool level_borrowed) const {
  std::vector<std::pair<double, double>> per_host;
  // Failures and exposure of the own and the borrowed windows of the hosts
  // that borrowed, counted in windows of average weight (own and
  // neighbouring windows weigh 1 and neighbor_window_weight, borrowed ones
  // other_day_type_weight), so that the 0.5 below is half a failure on
  // either side.
  double own_failures = 0, own_exposure = 0, borrowed_failures = 0, borrowed_exposure = 0;
  for (const Host& h : hosts_) {
    if (h.up_windows > 0) per_host.emplace_back(h.up_windows, h.up_survived);
    const int64_t own_windows = h.windows - h.borrowed_windows;
    if (own_windows > 0 && h.weight > 0 && h.borrowed_windows > 0 && h.borrowed_weight > 0) {
      const double own_unit = static_cast<double>(own_windows) / h.weight;
      own_failures += h.failures * own_unit;
      own_exposure += h.exposure * own_unit;
      const double borrowed_unit = static_cast<double>(h.borrowed_windows) / h.borrowed_weight;
      borrowed_failures += h.borrowed_failures * borrowed_unit;
      borrowed_exposure += h.borrowed_exposure * borrowed_unit;
    }
  }
  double ratio = 0;
  if (own_exposure > 0 && borrowed_exposure > 0) {
    ratio = ((own_failures + 0.5) / own_exposure) / ((borrowed_failures + 0.5) / borrowed_exposure);
  }
  SojournStats out = FlattenBorrowed(pooled_, level_borrowed && ratio > 0 ? ratio : 1.0);
  out.prior_strength = BetaBinomialConcentration(per_host);
  out.borrow_hazard_ratio = ratio;
  return out;
}

namespace {

// Which sojourn tables of states 1 and 2 a shrinkage fills (the others stay
// empty): ShrinkStats fills every one, PredictFromStats only those its
// prediction reads (PredictScope), so that a caller predicting once per
// window (the backtest with the host's ratio at each window start) does not
// rebuild and copy the rest. Each table it fills gets the same numbers either
// way.
struct TableScope {
  std::array<bool, 6> ordinary{};
  std::array<bool, 6> first{};
  std::array<std::array<bool, 6>, kAgeClasses> first_by_age{};
  std::array<bool, 6> first_by_exact_age{};

  static TableScope All() {
    TableScope s;
    s.ordinary.fill(true);
    s.first.fill(true);
    for (auto& b : s.first_by_age) b.fill(true);
    s.first_by_exact_age.fill(true);
    return s;
  }
};

// What PredictFromShrunk reads when predicting from `init` at
// `init_age_seconds`: the ordinary sojourns of both up states, the first
// sojourns of `init` (of both states without a first-sojourn kernel, which
// pools them into the ordinary rows), the age class of `init` with age
// conditioning, and its exact-age table with exact_age_first_sojourn. The
// kernel's ordinary row of a state without ordinary sojourns falls back to
// that state's first sojourns: PredictFromStats checks for that case.
TableScope PredictScope(HostState init, const EstimatorOptions& opt, int64_t init_age_seconds) {
  TableScope s;
  for (int i = 1; i <= 2; ++i) {
    s.ordinary[i] = true;
    s.first[i] = !opt.first_sojourn_kernel;
  }
  if (IsFailure(init)) return s;
  const int i = StateIndex(init);
  s.first[i] = true;
  if (opt.recent_age_seconds > 0 && init_age_seconds >= 0) {
    const int bucket = AgeClassOf(init_age_seconds, opt.recent_age_seconds,
                                  opt.long_age_seconds > opt.recent_age_seconds
                                      ? opt.long_age_seconds
                                      : 0);
    s.first_by_age[bucket][i] = true;
  }
  s.first_by_exact_age[i] = opt.exact_age_first_sojourn;
  return s;
}

// Every field of `s` but the sojourn tables and the borrowed windows.
SojournStats CopyWithoutTables(const SojournStats& s) {
  SojournStats out;
  out.step_seconds = s.step_seconds;
  out.window_steps = s.window_steps;
  out.num_windows = s.num_windows;
  out.total_weight = s.total_weight;
  out.initial = s.initial;
  out.first_failure = s.first_failure;
  out.initial_by_age = s.initial_by_age;
  out.own_up_windows = s.own_up_windows;
  out.own_up_survived = s.own_up_survived;
  out.prior_strength = s.prior_strength;
  out.prior_hazard_ratio = s.prior_hazard_ratio;
  out.borrow_hazard_ratio = s.borrow_hazard_ratio;
  return out;
}

// FlattenBorrowed filling only the tables in `scope`.
SojournStats FlattenBorrowedIn(const SojournStats& s, double ratio, const TableScope& scope) {
  SojournStats out = CopyWithoutTables(s);
  const SojournStats* b = s.borrowed.empty() ? nullptr : &s.borrowed[0];
  // Each table in scope, plus the borrowed windows' table with its failure
  // hazards at `ratio` (ScaleFailureHazards rescales states 1 and 2), merged
  // as it is rescaled (MergeScaledFailureHazards at scale 1 adds what merging
  // the rescaled table adds).
  const auto theta = [ratio](int i) { return i == 1 || i == 2 ? ratio : 1.0; };
  const auto take = [&](bool in_scope, const StateSojourns& own, const StateSojourns* borrowed,
                        int i, StateSojourns* dst) {
    if (!in_scope) return;
    *dst = own;
    if (borrowed != nullptr) MergeScaledFailureHazards(*borrowed, theta(i), 1.0, dst);
  };
  for (int i = 0; i < 6; ++i) {
    take(scope.ordinary[i], s.ordinary[i], b ? &b->ordinary[i] : nullptr, i, &out.ordinary[i]);
    take(scope.first[i], s.first[i], b ? &b->first[i] : nullptr, i, &out.first[i]);
    for (int a = 0; a < kAgeClasses; ++a) {
      take(scope.first_by_age[a][i], s.first_by_age[a][i], b ? &b->first_by_age[a][i] : nullptr,
           i, &out.first_by_age[a][i]);
    }
    if (scope.first_by_exact_age[i]) {
      out.first_by_exact_age[i] = s.first_by_exact_age[i];
      if (b == nullptr) continue;
      for (const auto& [age, table] : b->first_by_exact_age[i]) {
        MergeScaledFailureHazards(table, theta(i), 1.0, &out.first_by_exact_age[i][age]);
      }
    }
  }
  if (b != nullptr) {
    out.Merge(*b, 1.0, /*with_exact_age=*/false, /*with_tables=*/false);
    out.num_windows = s.num_windows;
  }
  return out;
}

// ShrinkStats filling only the tables in `scope`.
SojournStats ShrinkStatsIn(const SojournStats& raw, const EstimatorOptions& opt,
                           const SojournStats* prior, double* strength, const TableScope& scope) {
  *strength = 0;
  const double ratio = opt.level_corrected_borrowing && prior != nullptr &&
                               prior->borrow_hazard_ratio > 0
                           ? prior->borrow_hazard_ratio
                           : 1.0;
  SojournStats shrunk = FlattenBorrowedIn(raw, ratio, scope);
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
    flattened = FlattenBorrowedIn(*prior, ratio, scope);
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
    if (scope.ordinary[i]) {
      MergeScaledFailureHazards(flat_prior->ordinary[i], theta(i), scale, &shrunk.ordinary[i]);
    }
    if (scope.first[i]) {
      MergeScaledFailureHazards(flat_prior->first[i], theta(i), scale, &shrunk.first[i]);
    }
    for (int b = 0; b < kAgeClasses; ++b) {
      if (!scope.first_by_age[b][i]) continue;
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
        if (scope.first_by_age[b][i]) {
          MergeScaledFailureHazards(flat_prior->first_by_age[b][i], theta(i), extra,
                                    &shrunk.first_by_age[b][i]);
        }
        shrunk.initial_by_age[b][i] += extra * w;
      }
    }
  }
  shrunk.num_windows = windows;
  return shrunk;
}

}  // namespace

SojournStats FlattenBorrowed(const SojournStats& s, double ratio) {
  if (s.borrowed.empty()) return s;
  return FlattenBorrowedIn(s, ratio, TableScope::All());
}

SojournStats ShrinkStats(const SojournStats& raw, const EstimatorOptions& opt,
                         const SojournStats* prior, double* strength) {
  return ShrinkStatsIn(raw, opt, prior, strength, TableScope::All());
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
  // The first sojourns of `init` the kernel is estimated from, and their
  // windows' weight: the host's age class and load band narrow them down.
  const StateSojourns* first = &shrunk.first[i];
  double initial = shrunk.initial[i];
  StateSojourns narrowed;
  if (opt.recent_age_seconds > 0 && init_age_seconds >= 0) {
    // Age conditioning: the first sojourns of windows whose initial state was
    // as old (recent / settled / long) as the host's now, shrunk towards all first
    // sojourns with weight opt.age_prior_windows.
    const int bucket = AgeClassOf(init_age_seconds, opt.recent_age_seconds,
                                  opt.long_age_seconds > opt.recent_age_seconds
                                      ? opt.long_age_seconds
                                      : 0);
    narrowed = shrunk.first_by_age[bucket][i];
    const double n_all = shrunk.initial[i];
    if (opt.age_prior_windows > 0 && n_all > 0) {
      const double scale = opt.age_prior_windows / n_all;
      narrowed.Add(shrunk.first[i], scale);
    }
    first = &narrowed;
    initial = shrunk.initial_by_age[bucket][i] + (n_all > 0 ? opt.age_prior_windows : 0);
  }
  if (opt.load_band_first_sojourn && opt.first_sojourn_kernel && !(band_ratio == FirstSojournRatio{})) {
    // Load band (load_band.h): the first sojourn's cause-specific hazards at
    // the host's band, proportional to those of all bands (of the age class
    // when there is one).
    narrowed = ScaleCauseHazards(*first, band_ratio.failure, band_ratio.other);
    first = &narrowed;
  }
  SemiMarkovKernel kernel = EstimateKernelFrom(shrunk, opt, i, *first, initial);
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
    const std::vector<double> freq = WindowFrequencyCurve(shrunk.first_failure[i], initial, init, M);
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
  const TableScope scope = PredictScope(init, opt, init_age_seconds);
  SojournStats shrunk = ShrinkStatsIn(stats, opt, prior, &strength, scope);
  // An up state without ordinary sojourns: its ordinary row comes from its
  // first sojourns (EstimateKernel), so those are shrunk too.
  TableScope missing;
  bool any_missing = false;
  for (int j = 1; j <= 2; ++j) {
    if (!scope.first[j] && shrunk.ordinary[j].empty()) any_missing = missing.first[j] = true;
  }
  if (any_missing) {
    SojournStats more = ShrinkStatsIn(stats, opt, prior, &strength, missing);
    for (int j = 1; j <= 2; ++j) {
      if (missing.first[j]) shrunk.first[j] = std::move(more.first[j]);
    }
  }
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
                          const std::function<bool(size_t start)>& exclude, int64_t after_unix) {
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
  const int same = add(HistoryWindowStarts(series, spec, end_unix, after_unix), 1.0, true);
  if (opt.neighbor_window_weight > 0 && opt.neighbor_offset_seconds > 0) {
    for (int sign : {-1, 1}) {
      WindowSpec nb = spec;
      nb.start_second_of_day += sign * opt.neighbor_offset_seconds;
      // Keep the start day (and so the day type) of the window itself.
      if (nb.start_second_of_day < 0 || nb.start_second_of_day >= 86400) continue;
      add(HistoryWindowStarts(series, nb, end_unix, after_unix), opt.neighbor_window_weight, false);
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
      add(HistoryWindowStarts(series, other, end_unix, after_unix), opt.other_day_type_weight, false);
      target = &stats;
      if (borrowed.num_windows > 0) {
        stats.num_windows += borrowed.num_windows;
        stats.borrowed.push_back(std::move(borrowed));
      }
    } else {
      add(HistoryWindowStarts(series, other, end_unix, after_unix), opt.other_day_type_weight, false);
    }
  }
  return stats;
}

}  // namespace sojourn::availability
