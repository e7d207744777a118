#include "models/availability/kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace sojourn::availability {
namespace {

// Paper 000 section 6.2: Q_i(j) = n_ij / n_i and H_ij(l) = n_ij(l) / n_ij over
// completed sojourns, so K_ij(l) = n_ij(l) / n_i. Censored sojourns are dropped.
KernelRow CountingRow(const StateSojourns& s) {
  KernelRow row;
  const double total = s.total_completed();
  if (total <= 0) return row;
  for (const auto& [key, c] : s.completed) {
    auto& pmf = row[key.first];
    if (static_cast<int>(pmf.size()) < key.second) pmf.resize(key.second, 0.0);
    pmf[key.second - 1] += c / total;
  }
  return row;
}

// Discrete cause-specific hazards (Aalen-Johansen): at risk at length l are
// the sojourns that lasted at least l steps (completed with length >= l, or
// censored at c >= l, since a sojourn censored at c lasts more than c steps).
// h_j(l) = d_j(l) / R(l), S(l) = prod_{u<=l} (1 - sum_j h_j(u)),
// K_ij(l) = S(l-1) h_j(l). Mass beyond the longest observed sojourn stays in i
// (the row sums to 1 - S(Lmax) <= 1).
KernelRow HazardRow(const StateSojourns& s) {
  KernelRow row;
  int lmax = 0;
  for (const auto& [key, c] : s.completed) lmax = std::max(lmax, key.second);
  if (lmax == 0) return row;
  // at_risk[l] for l = 1..lmax: events at length >= l + censored at >= l.
  std::vector<double> ends(lmax + 2, 0.0);  // ends[l]: sojourns leaving risk after length l
  for (const auto& [key, c] : s.completed) ends[key.second] += c;
  for (const auto& [len, c] : s.censored) ends[std::min(len, lmax + 1)] += c;
  std::vector<double> at_risk(lmax + 2, 0.0);
  double acc = 0;
  for (int l = lmax + 1; l >= 1; --l) {
    acc += ends[l];
    at_risk[l] = acc;
  }
  std::vector<double> events(lmax + 1, 0.0);
  for (const auto& [key, c] : s.completed) events[key.second] += c;
  std::vector<double> surv(lmax + 1, 1.0);  // surv[l] = S(l)
  for (int l = 1; l <= lmax; ++l) {
    const double h = at_risk[l] > 0 ? events[l] / at_risk[l] : 0.0;
    surv[l] = surv[l - 1] * std::max(0.0, 1.0 - h);
  }
  for (const auto& [key, c] : s.completed) {
    const int l = key.second;
    auto& pmf = row[key.first];
    if (static_cast<int>(pmf.size()) < l) pmf.resize(l, 0.0);
    pmf[l - 1] += surv[l - 1] * c / at_risk[l];
  }
  return row;
}

KernelRow EstimateRow(const StateSojourns& s, const EstimatorOptions& opt) {
  return opt.censoring_aware ? HazardRow(s) : CountingRow(s);
}

StateSojourns Pooled(const StateSojourns& a, const StateSojourns& b) {
  StateSojourns out = a;
  out.Add(b);
  return out;
}

}  // namespace

EstimatorOptions BasicEstimatorOptions() {
  EstimatorOptions o;
  o.prior_windows = 0;
  o.recency_half_life_windows = 0;
  o.borrow_below_windows = 0;
  o.other_day_type_weight = 0;
  o.neighbor_window_weight = 0;
  o.recent_age_seconds = 0;
  o.long_age_seconds = 0;
  o.per_class_age_prior = false;
  o.frequency_weight = 0;
  o.empirical_bayes_prior = false;
  o.exact_age_first_sojourn = false;
  o.host_frailty = false;
  o.level_corrected_borrowing = false;
  o.load_band_first_sojourn = false;
  return o;
}

EstimatorOptions PaperEstimatorOptions() {
  EstimatorOptions o = BasicEstimatorOptions();
  o.censoring_aware = false;
  o.first_sojourn_kernel = false;
  return o;
}

double SemiMarkovKernel::At(int i, int j, int l) const {
  auto r = rows.find(i);
  if (r == rows.end()) return 0;
  auto c = r->second.find(j);
  if (c == r->second.end() || l < 1 || l > static_cast<int>(c->second.size())) return 0;
  return c->second[l - 1];
}

double SemiMarkovKernel::Q(int i, int j) const {
  auto r = rows.find(i);
  if (r == rows.end()) return 0;
  auto c = r->second.find(j);
  if (c == r->second.end()) return 0;
  double s = 0;
  for (double v : c->second) s += v;
  return s;
}

double SemiMarkovKernel::RowSum(int i) const {
  auto r = rows.find(i);
  if (r == rows.end()) return 0;
  double s = 0;
  for (const auto& [j, pmf] : r->second) {
    for (double v : pmf) s += v;
  }
  return s;
}

KernelRow AgeConditionedFirstRow(const std::map<int64_t, StateSojourns>& own,
                                 const std::map<int64_t, StateSojourns>* prior,
                                 double prior_scale, int64_t age, int horizon, int max_length,
                                 const KernelRow* fallback, double fallback_weight) {
  KernelRow row;
  if (horizon <= 0 || age < 0) return row;
  // risk[l] and events[j][l] at total length t = age + l, l = 1..horizon
  // (difference array for the risk sets).
  std::vector<double> risk_diff(horizon + 2, 0.0);
  std::map<int, std::vector<double>> events;
  auto add_table = [&](const std::map<int64_t, StateSojourns>& table, double scale) {
    if (scale <= 0) return;
    // Entries with a_k + x_k > age and a_k < age + horizon.
    for (auto it = table.lower_bound(std::max<int64_t>(0, age + 1 - max_length));
         it != table.end() && it->first < age + horizon; ++it) {
      const int64_t a = it->first;
      auto span = [&](int64_t x, double w) {  // at risk for t in (a, a + x]
        const int64_t lo = std::max<int64_t>(a + 1, age + 1) - age;
        const int64_t hi = std::min<int64_t>(a + x, age + horizon) - age;
        if (lo > hi) return;
        risk_diff[lo] += w;
        risk_diff[hi + 1] -= w;
      };
      for (const auto& [key, c] : it->second.completed) {
        span(key.second, scale * c);
        const int64_t l = a + key.second - age;
        if (l >= 1 && l <= horizon) {
          auto& e = events[key.first];
          if (e.empty()) e.assign(horizon + 1, 0.0);
          e[l] += scale * c;
        }
      }
      for (const auto& [len, c] : it->second.censored) span(len, scale * c);
    }
  };
  add_table(own, 1.0);
  if (prior != nullptr) add_table(*prior, prior_scale);
  // Hazards of the fallback row: h_j(l) = G_j(l) / S(l-1).
  std::map<int, std::vector<double>> fb_hazard;
  if (fallback != nullptr) {
    std::vector<double> mass(horizon + 1, 0.0);
    for (const auto& [to, pmf] : *fallback) {
      for (int l = 1; l <= std::min<int>(horizon, pmf.size()); ++l) mass[l] += pmf[l - 1];
    }
    std::vector<double> surv_before(horizon + 1, 1.0);  // S(l-1)
    for (int l = 2; l <= horizon; ++l) surv_before[l] = surv_before[l - 1] - mass[l - 1];
    for (const auto& [to, pmf] : *fallback) {
      auto& h = fb_hazard[to];
      h.assign(horizon + 1, 0.0);
      for (int l = 1; l <= std::min<int>(horizon, pmf.size()); ++l) {
        h[l] = surv_before[l] > 1e-300 ? pmf[l - 1] / surv_before[l] : 0.0;
      }
    }
  }
  for (const auto& [to, e] : events) row[to].assign(horizon, 0.0);
  for (const auto& [to, h] : fb_hazard) row[to].assign(horizon, 0.0);
  double surv = 1.0;  // S(l-1), relative to the age
  double risk = 0;
  for (int l = 1; l <= horizon && surv > 0; ++l) {
    risk += risk_diff[l];
    if (risk < 1e-12) risk = 0;  // rounding residue of the difference array
    const double denom = risk + fallback_weight;
    double total = 0;
    if (denom > 0) {
      for (auto& [to, pmf] : row) {
        auto e = events.find(to);
        auto fb = fb_hazard.find(to);
        const double d = (e != events.end() ? e->second[l] : 0.0) +
                         (fb != fb_hazard.end() ? fallback_weight * fb->second[l] : 0.0);
        const double h = d / denom;
        pmf[l - 1] = surv * h;
        total += h;
      }
    } else {
      for (const auto& [to, h] : fb_hazard) {
        row[to][l - 1] = surv * h[l];
        total += h[l];
      }
    }
    surv *= std::max(0.0, 1.0 - total);
  }
  return row;
}

namespace {

// EstimateKernel's rows; `first_of(i)` and `initial_of(i)` give the first
// sojourns of state i and their windows' weight, and a first row is
// estimated for the states in `first_rows_for` only.
template <typename FirstOf, typename InitialOf>
SemiMarkovKernel EstimateKernelImpl(const SojournStats& stats, const EstimatorOptions& opt,
                                    const FirstOf& first_of, const InitialOf& initial_of,
                                    const std::array<bool, 3>& first_rows_for) {
  SemiMarkovKernel k;
  k.step_seconds = stats.step_seconds;
  for (int i = 1; i <= 2; ++i) {
    const StateSojourns& ordinary = stats.ordinary[i];
    const StateSojourns& first = first_of(i);
    if (!opt.first_sojourn_kernel) {
      // Paper: the first sojourn is treated as entered at the window start.
      KernelRow row = EstimateRow(Pooled(ordinary, first), opt);
      if (!row.empty()) k.rows[i] = std::move(row);
      continue;
    }
    // A state only ever seen as a window's first sojourn: its ordinary kernel
    // falls back to those sojourns.
    KernelRow row = EstimateRow(ordinary.empty() ? first : ordinary, opt);
    if (!row.empty()) k.rows[i] = std::move(row);
    if (first_rows_for[i] && !first.empty() && initial_of(i) >= opt.min_first_sojourn_windows) {
      // An empty first row is meaningful (no first sojourn ever ended): keep it.
      k.first_rows[i] = EstimateRow(first, opt);
    }
  }
  return k;
}

}  // namespace

SemiMarkovKernel EstimateKernel(const SojournStats& stats, const EstimatorOptions& opt) {
  return EstimateKernelImpl(
      stats, opt, [&stats](int i) -> const StateSojourns& { return stats.first[i]; },
      [&stats](int i) { return stats.initial[i]; }, {false, true, true});
}

SemiMarkovKernel EstimateKernelFrom(const SojournStats& stats, const EstimatorOptions& opt,
                                    int init, const StateSojourns& first, double initial) {
  std::array<bool, 3> rows_for{};
  if (init >= 1 && init <= 2) rows_for[init] = true;
  return EstimateKernelImpl(
      stats, opt,
      [&](int i) -> const StateSojourns& { return i == init ? first : stats.first[i]; },
      [&](int i) { return i == init ? initial : stats.initial[i]; }, rows_for);
}

}  // namespace sojourn::availability
