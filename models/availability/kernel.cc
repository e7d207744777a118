#include "models/availability/kernel.h"

#include <algorithm>

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
  for (const auto& [key, c] : b.completed) out.completed[key] += c;
  for (const auto& [len, c] : b.censored) out.censored[len] += c;
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
  o.frequency_weight = 0;
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

SemiMarkovKernel EstimateKernel(const SojournStats& stats, const EstimatorOptions& opt) {
  SemiMarkovKernel k;
  k.step_seconds = stats.step_seconds;
  for (int i = 1; i <= 2; ++i) {
    const StateSojourns& ordinary = stats.ordinary[i];
    const StateSojourns& first = stats.first[i];
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
    if (!first.empty() && stats.initial[i] >= opt.min_first_sojourn_windows) {
      // An empty first row is meaningful (no first sojourn ever ended): keep it.
      k.first_rows[i] = EstimateRow(first, opt);
    }
  }
  return k;
}

}  // namespace sojourn::availability
