// Sufficient statistics of the sojourns seen in a set of training windows:
// what the statemgr serves and the predictor consumes, and the input of every
// kernel estimator in kernel.h.
//
// Within one window states[0..n-1] (states[0] = the state at the window
// start), a sojourn in a transient state i (S1 or S2) is a maximal run of
// equal states. Its length in steps is (index where the state changes) -
// (index where it was entered). A sojourn that reaches the window end without
// a change is censored at length (n-1) - entry index (its holding time is
// longer than that). The FIRST sojourn of a window was entered before the
// window started; it is kept separately (its length is counted from the
// window start). Sojourns after the first failure state are ignored (S3..S5
// are absorbing for a guest).
#ifndef SOJOURN_MODELS_AVAILABILITY_SOJOURN_STATS_H_
#define SOJOURN_MODELS_AVAILABILITY_SOJOURN_STATS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "models/availability/state.h"

namespace sojourn::availability {

// The tables are B-trees (absl::btree_map): ordered like std::map, with the
// entries of a node contiguous. A backtest merges population tables into each
// host's for every prediction, and with std::map node allocation and pointer
// chasing took about a third of its time.
using CompletedTable = absl::btree_map<std::pair<int, int>, double>;
using CountByLength = absl::btree_map<int, double>;

// Sojourns of one state. Counts are doubles so windows can be weighted
// (e.g. recency weighting); unweighted accumulation adds 1 per sojourn.
struct StateSojourns {
  // (to-state 1..5, length in steps >= 1) -> count of completed sojourns.
  CompletedTable completed;
  // censored length in steps (>= 0) -> count of sojourns still running at the
  // window end.
  CountByLength censored;

  bool empty() const { return completed.empty() && censored.empty(); }
  double total_completed() const;
  double total_censored() const;
  // Adds scale x every count of `other` (Merge's step for one table).
  void Add(const StateSojourns& other, double scale = 1.0);
};

// (*dst)[key] += scale * count for each (key, count) of `src`, whose keys are
// ascending and distinct (a table, or a sorted vector of pairs). Each entry
// is inserted next to the previous one (a hinted insertion, amortized O(1)
// when the two key sets interleave), so a merge costs about the sum of the
// two sizes instead of a search per entry.
template <typename Map, typename Src>
void AddSorted(const Src& src, double scale, Map* dst) {
  auto hint = dst->begin();
  for (const auto& [key, c] : src) {
    hint = dst->try_emplace(hint, key, 0.0);
    hint->second += scale * c;
    ++hint;
  }
}

// Age classes of the first sojourn (issue 7 age conditioning): how long the
// initial state had lasted before the window start.
enum AgeClass : int {
  kAgeSettled = 0,  // recent_age_seconds .. long_age_seconds (or longer when
                    // there is no long class)
  kAgeRecent = 1,   // below recent_age_seconds
  kAgeLong = 2,     // at least long_age_seconds (when long_age_seconds > 0)
};
inline constexpr int kAgeClasses = 3;

// The age class of an age of `age_steps` (>= 0) with the thresholds in steps
// (recent_steps > 0; long_steps = 0: no long class).
inline int AgeClassOf(int64_t age_steps, int64_t recent_steps, int64_t long_steps) {
  if (age_steps < recent_steps) return kAgeRecent;
  if (long_steps > recent_steps && age_steps >= long_steps) return kAgeLong;
  return kAgeSettled;
}

// A new field must also be copied by CopyWithoutTables (predict.cc) unless it
// is a sojourn table.
struct SojournStats {
  // Grid step of the windows (seconds); 0 when unknown. Used for MTTF in seconds.
  int64_t step_seconds = 0;
  // Length of the windows in steps (the largest seen; 0 when no window).
  int window_steps = 0;
  // Indexed by state 1..5 (index 0 unused; only 1 and 2 are ever filled).
  // ordinary[i]: sojourns entered inside a window; first[i]: each window's first sojourn.
  std::array<StateSojourns, 6> ordinary;
  std::array<StateSojourns, 6> first;
  // Number of windows (unweighted) and their total weight.
  int64_t num_windows = 0;
  double total_weight = 0;
  // Weight of windows by initial state 1..5 (index 0 unused).
  std::array<double, 6> initial{};
  // Weight of windows by initial state (1..5) and the step (1..n-1) of their
  // first failure state; windows without a failure are initial[i] minus these.
  // Gives the empirical window frequency TR_freq(m | i).
  std::array<CountByLength, 6> first_failure;
  // Age conditioning (issue 7): the first sojourns again, split by whether the
  // initial state had lasted fewer than EstimatorOptions::recent_age_seconds
  // before the window start ("recent", index 1), at least long_age_seconds
  // ("long", index 2; only when long_age_seconds > 0) or in between
  // ("settled", index 0): see AgeClass. Windows of unknown age are in none.
  // initial_by_age likewise.
  std::array<std::array<StateSojourns, 6>, kAgeClasses> first_by_age;
  std::array<std::array<double, 6>, kAgeClasses> initial_by_age{};
  // Exact age conditioning (issue 3): the first sojourns once more, keyed by
  // the initial state's age in steps at the window start (how long the state
  // had already lasted; windows of unknown age are left out). A first sojourn
  // filed at age a with holding length x has a total length a + x, observed
  // from a on (left-truncated), so these give the delayed-entry
  // (Kaplan-Meier) hazards of the whole sojourn length: see
  // AgeConditionedFirstRow in kernel.h.
  std::array<std::map<int64_t, StateSojourns>, 6> first_by_exact_age;
  // The cell's own windows only (CollectStats: same day type and clock time,
  // unweighted; not the neighbouring start times or the other day type, which
  // repeat the same days): how many started in S1 or S2 and how many of those
  // had no failure state in the whole window. The between-host dispersion of
  // these gives PopulationPriorBuilder's strength.
  double own_up_windows = 0;
  double own_up_survived = 0;
  // Empirical-Bayes strength (in windows) of this statistics object when it
  // is used as a shrinkage prior: set by PopulationPriorBuilder (predict.h)
  // from the dispersion between hosts; 0 = unknown. Not merged.
  double prior_strength = 0;
  // The host's failure hazard ratio theta against the population
  // (HostFrailtyModel::Theta, frailty.h), set by the caller on the HOST's
  // statistics; with EstimatorOptions::host_frailty, ShrinkStats multiplies
  // the prior's failure hazards by it before adding the prior. 1 = none.
  // Not merged.
  double prior_hazard_ratio = 1;
  // Level-corrected other-day-type borrowing (EstimatorOptions::
  // level_corrected_borrowing): the windows CollectStats borrowed from the
  // other day type, kept apart (at most one element, whose own `borrowed` is
  // empty) so that ShrinkStats can move their failure hazards to this day
  // type's level before adding them (FlattenBorrowed). num_windows above
  // counts them too. Merge merges them into this field.
  std::vector<SojournStats> borrowed;
  // On a shrinkage prior (set by PopulationPriorBuilder): the population's
  // failure rate in this cell over its rate in the borrowed windows (the other
  // day type at the same clock time) of the same hosts, the factor applied to
  // the failure hazards of borrowed windows. 0 = unknown (no borrowing seen).
  // Not merged.
  double borrow_hazard_ratio = 0;

  // Adds every count of `other` (scaled by `scale`) to this (the exact-age
  // table only with `with_exact_age`; the sojourn tables ordinary, first and
  // first_by_age only with `with_tables`, for a caller that merges them
  // itself, e.g. rescaled: MergeScaledFailureHazards in frailty.h).
  void Merge(const SojournStats& other, double scale = 1.0, bool with_exact_age = true,
             bool with_tables = true);
  bool operator==(const SojournStats& o) const;
};

// Failures (S1/S2 -> S3/S4/S5 transitions) and exposure (steps spent in S1
// or S2 at risk) of the sojourns of `s`, ordinary and first, weighted; the
// occurrence/exposure rate failures / exposure is the maximum-likelihood
// failure rate per up step under a constant hazard. `borrowed` is ignored.
void CountFailures(const SojournStats& s, double* failures, double* exposure);

// Adds one window: states[0..n-1], n >= 1 (states[0] is the initial state at
// the window start; a window of L steps has n = L + 1 states).
void AccumulateWindow(const HostState* states, size_t n, SojournStats* stats);
// Same with every count multiplied by `weight` (> 0). `age_bucket` is the
// AgeClass of the initial state's age at the window start, -1 when unknown
// (see SojournStats::first_by_age).
// `exact_age_steps` >= 0 also files the first sojourn in first_by_exact_age
// under that age.
void AccumulateWindow(const HostState* states, size_t n, double weight, SojournStats* stats,
                      int age_bucket = -1, int64_t exact_age_steps = -1);

// Number of consecutive grid points before `index` with the same state as
// states[index], counting at most `cap`; -1 when the series starts before
// `cap` equal points were seen (the age is unknown but below cap).
int64_t InitialAgeSteps(const std::vector<HostState>& states, size_t index, int64_t cap);
// InitialAgeSteps without a cap for every index at once: ages[k] = number of
// equal states right before k, or -1 when the run reaches the series start.
std::vector<int64_t> StateAges(const std::vector<HostState>& states);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_SOJOURN_STATS_H_
