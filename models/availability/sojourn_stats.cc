#include "models/availability/sojourn_stats.h"

#include <algorithm>

namespace sojourn::availability {

double StateSojourns::total_completed() const {
  double t = 0;
  for (const auto& [key, c] : completed) t += c;
  return t;
}

double StateSojourns::total_censored() const {
  double t = 0;
  for (const auto& [len, c] : censored) t += c;
  return t;
}

void StateSojourns::Add(const StateSojourns& other, double scale) {
  AddSorted(other.completed, scale, &completed);
  AddSorted(other.censored, scale, &censored);
}

void SojournStats::Merge(const SojournStats& other, double scale, bool with_exact_age,
                         bool with_tables) {
  if (step_seconds == 0) step_seconds = other.step_seconds;
  window_steps = std::max(window_steps, other.window_steps);
  for (int i = 0; i < 6; ++i) {
    if (with_tables) {
      ordinary[i].Add(other.ordinary[i], scale);
      first[i].Add(other.first[i], scale);
    }
    initial[i] += scale * other.initial[i];
    AddSorted(other.first_failure[i], scale, &first_failure[i]);
    for (int b = 0; b < kAgeClasses; ++b) {
      if (with_tables) first_by_age[b][i].Add(other.first_by_age[b][i], scale);
      initial_by_age[b][i] += scale * other.initial_by_age[b][i];
    }
    if (!with_exact_age) continue;
    for (const auto& [age, src] : other.first_by_exact_age[i]) first_by_exact_age[i][age].Add(src, scale);
  }
  if (!other.borrowed.empty()) {
    if (borrowed.empty()) borrowed.emplace_back();
    borrowed[0].Merge(other.borrowed[0], scale, with_exact_age);
  }
  num_windows += other.num_windows;
  total_weight += scale * other.total_weight;
  own_up_windows += scale * other.own_up_windows;
  own_up_survived += scale * other.own_up_survived;
}

bool SojournStats::operator==(const SojournStats& o) const {
  for (int i = 0; i < 6; ++i) {
    if (ordinary[i].completed != o.ordinary[i].completed ||
        ordinary[i].censored != o.ordinary[i].censored ||
        first[i].completed != o.first[i].completed || first[i].censored != o.first[i].censored ||
        first_failure[i] != o.first_failure[i]) {
      return false;
    }
    for (int b = 0; b < kAgeClasses; ++b) {
      if (first_by_age[b][i].completed != o.first_by_age[b][i].completed ||
          first_by_age[b][i].censored != o.first_by_age[b][i].censored) {
        return false;
      }
    }
    if (first_by_exact_age[i].size() != o.first_by_exact_age[i].size()) return false;
    for (auto a = first_by_exact_age[i].begin(), b = o.first_by_exact_age[i].begin();
         a != first_by_exact_age[i].end(); ++a, ++b) {
      if (a->first != b->first || a->second.completed != b->second.completed ||
          a->second.censored != b->second.censored) {
        return false;
      }
    }
  }
  return step_seconds == o.step_seconds && window_steps == o.window_steps &&
         num_windows == o.num_windows && total_weight == o.total_weight && initial == o.initial &&
         initial_by_age == o.initial_by_age && prior_strength == o.prior_strength &&
         own_up_windows == o.own_up_windows && own_up_survived == o.own_up_survived &&
         prior_hazard_ratio == o.prior_hazard_ratio && borrowed == o.borrowed &&
         borrow_hazard_ratio == o.borrow_hazard_ratio;
}

void CountFailures(const SojournStats& s, double* failures, double* exposure) {
  *failures = 0;
  *exposure = 0;
  for (int i = 1; i <= 2; ++i) {
    for (const StateSojourns* t : {&s.ordinary[i], &s.first[i]}) {
      for (const auto& [key, c] : t->completed) {
        *exposure += c * key.second;
        if (IsFailure(static_cast<HostState>(key.first))) *failures += c;
      }
      for (const auto& [len, c] : t->censored) *exposure += c * len;
    }
  }
}

void AccumulateWindow(const HostState* states, size_t n, SojournStats* stats) {
  AccumulateWindow(states, n, 1.0, stats);
}

int64_t InitialAgeSteps(const std::vector<HostState>& states, size_t index, int64_t cap) {
  int64_t age = 0;
  while (age < cap) {
    if (index < static_cast<size_t>(age) + 1) return -1;
    if (states[index - age - 1] != states[index]) break;
    ++age;
  }
  return age;
}

std::vector<int64_t> StateAges(const std::vector<HostState>& states) {
  std::vector<int64_t> ages(states.size(), -1);
  int64_t run_start = -1;  // -1: the current run began at the series start
  for (size_t k = 1; k < states.size(); ++k) {
    if (states[k] != states[k - 1]) run_start = static_cast<int64_t>(k);
    ages[k] = run_start < 0 ? -1 : static_cast<int64_t>(k) - run_start;
  }
  return ages;
}

void AccumulateWindow(const HostState* states, size_t n, double weight, SojournStats* stats,
                      int age_bucket, int64_t exact_age_steps) {
  if (n == 0 || weight <= 0) return;
  stats->num_windows += 1;
  stats->total_weight += weight;
  stats->window_steps = std::max(stats->window_steps, static_cast<int>(n - 1));
  const int init = StateIndex(states[0]);
  stats->initial[init] += weight;
  const bool aged = age_bucket >= 0 && age_bucket < kAgeClasses;
  if (aged) stats->initial_by_age[age_bucket][init] += weight;
  if (!IsFailure(states[0])) {
    for (size_t k = 1; k < n; ++k) {
      if (IsFailure(states[k])) {
        stats->first_failure[init][static_cast<int>(k)] += weight;
        break;
      }
    }
  }
  size_t entry = 0;  // index where the current sojourn was entered
  while (!IsFailure(states[entry])) {
    const int from = StateIndex(states[entry]);
    StateSojourns& bucket = entry == 0 ? stats->first[from] : stats->ordinary[from];
    size_t b = entry + 1;
    while (b < n && states[b] == states[entry]) ++b;
    StateSojourns* aged_bucket =
        (entry == 0 && aged) ? &stats->first_by_age[age_bucket][from] : nullptr;
    StateSojourns* exact_bucket = (entry == 0 && exact_age_steps >= 0)
                                      ? &stats->first_by_exact_age[from][exact_age_steps]
                                      : nullptr;
    if (b == n) {
      bucket.censored[static_cast<int>(n - 1 - entry)] += weight;
      if (aged_bucket) aged_bucket->censored[static_cast<int>(n - 1 - entry)] += weight;
      if (exact_bucket) exact_bucket->censored[static_cast<int>(n - 1 - entry)] += weight;
      return;
    }
    bucket.completed[{StateIndex(states[b]), static_cast<int>(b - entry)}] += weight;
    if (aged_bucket) {
      aged_bucket->completed[{StateIndex(states[b]), static_cast<int>(b - entry)}] += weight;
    }
    if (exact_bucket) {
      exact_bucket->completed[{StateIndex(states[b]), static_cast<int>(b - entry)}] += weight;
    }
    entry = b;
  }
}

}  // namespace sojourn::availability
