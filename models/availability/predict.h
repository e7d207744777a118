// The ONE entry point both the predictor service and sojourn-eval use to turn
// training statistics into a TR curve, so they agree; and the helper that
// collects those statistics from a host's state series.
#ifndef SOJOURN_MODELS_AVAILABILITY_PREDICT_H_
#define SOJOURN_MODELS_AVAILABILITY_PREDICT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "models/availability/kernel.h"
#include "models/availability/load_band.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/state.h"
#include "models/availability/window.h"

namespace sojourn::availability {

struct TrPrediction {
  // tr[m-1] = TR(m), m = 1..M.
  std::vector<double> tr;
  // MttfSteps(tr) * stats.step_seconds (restricted to the horizon; 0 when the
  // initial state is a failure).
  double mttf_seconds = 0;
  int windows_used = 0;
  // Fewer than 3 training windows, or no sojourn observed in `init`.
  bool low_history = false;
};

// Estimates the kernel from `stats` with `opt` and computes TR(1..M) from
// `init`. With opt.prior_windows > 0 and a non-empty `prior`, the prior's
// counts are added first, scaled to weigh opt.prior_windows windows in total
// (shrinkage, issue 7). With opt.frequency_weight > 0 the curve is blended
// with the empirical frequency of the training windows that started in
// `init` (when there are any). `prior` may be null; it is only read.
// `init_age_seconds` is how long the host has already been in `init` (it may
// be capped at the larger of opt.recent_age_seconds and opt.long_age_seconds;
// -1 = unknown; from a series use InitialAgeSteps * step); with
// opt.recent_age_seconds > 0 and a known age it selects the age-conditioned
// first-sojourn data of its AgeClass.
// `band_ratio`: with opt.load_band_first_sojourn, the first sojourn's hazard
// ratios at the host's load band (load_band.h; BandExposure::RatioOf).
TrPrediction PredictFromStats(const SojournStats& stats, HostState init, int M,
                              const EstimatorOptions& opt, const SojournStats* prior = nullptr,
                              int64_t init_age_seconds = -1,
                              const FirstSojournRatio& band_ratio = {});

// Statistics of the training windows of `spec` that end by `end_unix`
// (HistoryWindowStarts), each window states[s .. s + L] with L =
// WindowSteps(series, spec). With opt.recent_age_seconds > 0 each window's
// first sojourn is also filed by age (InitialAgeSteps). Applies
// opt.recency_half_life_windows, the neighbouring start times and the
// other-day-type borrowing of `opt`.
// `exclude`, if set, drops windows by start index (e.g. windows touching a
// global monitoring outage).
//
// `after_unix`: only the windows that also end after it (the windows added
// between two moments; summed over consecutive moments they are the windows
// up to the last, exactly when opt.recency_half_life_windows is 0,
// spec.history_days is 0 and opt.borrow_below_windows is 0 or kAlwaysBorrow,
// the cases where a window's weight does not depend on the others).
SojournStats CollectStats(const StateSeries& series, const WindowSpec& spec, int64_t end_unix,
                          const EstimatorOptions& opt,
                          const std::function<bool(size_t start)>& exclude = nullptr,
                          int64_t after_unix = std::numeric_limits<int64_t>::min());

// Empirical-Bayes concentration kappa = alpha + beta (in windows) of a beta
// prior on the per-host probability that a window survives, from the hosts'
// (n_h windows, y_h survived) pairs: the ANOVA estimator of the intraclass
// correlation rho of clustered binary data (Fleiss, Statistical Methods for
// Rates and Proportions, 2nd ed. 1981, section 13.2; Ridout, Demetrio & Firth,
// Biometrics 55, 1999), which subtracts the binomial within-host variance,
// and kappa = 1 / rho - 1 (the beta-binomial identity rho = 1 / (kappa + 1)).
// Clamped to [1, N] (N = total windows): at least one window, the strength
// of the Jeffreys Beta(1/2, 1/2) prior, at most all the data (rho <= 0: no
// detectable heterogeneity, pool completely). 0 when it cannot be estimated
// (fewer than 2 hosts with windows, no within-host degrees of freedom, or
// every window survived / failed).
double BetaBinomialConcentration(const std::vector<std::pair<double, double>>& n_and_survived);

// The shrinkage prior of one cell pooled over hosts, as both the predictor
// service (over its registered hosts) and sojourn-eval (over the trace's
// hosts) build it: Add each host's CollectStats of the cell, then Build the
// sum, whose prior_strength is the BetaBinomialConcentration of the hosts'
// full-window survival (windows starting in S1 or S2; weighted counts).
//
// With level-corrected borrowing (hosts' statistics that keep their borrowed
// windows apart), Build also sets borrow_hazard_ratio: over the hosts that
// borrowed, the occurrence/exposure failure rate of their own windows over
// that of their borrowed windows (the same hosts and days, the other day
// type), the counts of each side in units of its average window weight and
// 0.5 added to its failures (the Haldane-Anscombe correction, so that a cell
// or a borrowed set without failures gives a finite, non-zero ratio); and
// the borrowed windows are merged into the
// prior with their failure hazards scaled by it (FlattenBorrowed) when
// `level_borrowed` (EstimatorOptions::level_corrected_borrowing), as they are
// otherwise.
//
// As the hosts' histories grow (sojourn-eval's prior as of each window start,
// as the service pools it then): AddTo(host, more) adds windows of a host
// already added (or a new one at index hosts()), `more` being that host's
// windows since its last call (CollectStats with after_unix). Build then gives
// what Add-ing each host's whole statistics would give (the host's counts and
// its failure and exposure sums add up; equal up to the order of the
// floating-point sums).
class PopulationPriorBuilder {
 public:
  void Add(const SojournStats& host);
  void AddTo(size_t host, const SojournStats& more);
  SojournStats Build(bool level_borrowed = true) const;
  // Hosts with a window that started in S1 or S2 (those the strength counts).
  int hosts() const;

 private:
  // A host's sums: its full-window survival (own windows starting in S1 or
  // S2), its windows and their weight, and the failures and exposure of its
  // own (with the neighbouring) and of its borrowed windows.
  struct Host {
    double up_windows = 0, up_survived = 0;
    int64_t windows = 0, borrowed_windows = 0;
    double weight = 0, borrowed_weight = 0;
    double failures = 0, exposure = 0, borrowed_failures = 0, borrowed_exposure = 0;
  };
  SojournStats pooled_;
  std::vector<Host> hosts_;
};

// `s` with its borrowed windows (SojournStats::borrowed) merged in, their
// failure hazards multiplied by `ratio` (ScaleFailureHazards; 1 = as they
// are); num_windows is unchanged (it already counts them).
SojournStats FlattenBorrowed(const SojournStats& s, double ratio);

// The shrinkage step of PredictFromStats: `stats` (its borrowed windows
// merged in, with opt.level_corrected_borrowing at the level of
// prior->borrow_hazard_ratio when there is one, FlattenBorrowed) plus `prior`
// scaled to weigh
// the shrinkage strength (opt.prior_windows, or prior->prior_strength with
// opt.empirical_bayes_prior); `stats` itself when there is no shrinkage. The
// exact-age table is not merged (PredictFromShrunk reads it from the prior).
// Returns the strength used in *strength (0 = none).
SojournStats ShrinkStats(const SojournStats& stats, const EstimatorOptions& opt,
                         const SojournStats* prior, double* strength);
// The rest of PredictFromStats on ShrinkStats' output (so a caller predicting
// one cell for many ages shrinks once): PredictFromStats(stats, ...) ==
// PredictFromShrunk(ShrinkStats(stats, opt, prior, &s), init, M, opt, prior, s, age),
// exactly. (PredictFromStats itself shrinks only the tables that one
// prediction reads, which is cheaper when each call has its own host ratio.)
TrPrediction PredictFromShrunk(const SojournStats& shrunk, HostState init, int M,
                               const EstimatorOptions& opt, const SojournStats* prior,
                               double strength, int64_t init_age_seconds,
                               const FirstSojournRatio& band_ratio = {});

// The empirical window frequency TR_freq(1..M | init) of `stats` (fraction of
// the windows that started in init with no failure by step m); empty when no
// window started in init. Steps beyond the windows' length keep the last value.
std::vector<double> WindowFrequencyCurve(const SojournStats& stats, HostState init, int M);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_PREDICT_H_
