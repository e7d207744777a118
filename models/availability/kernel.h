// Discrete-time semi-Markov kernel (paper 000 section 6) and its estimation
// from SojournStats.
//
// K_ij(l) = Q_i(j) H_ij(l): probability that a process that has just entered
// state i stays there exactly l >= 1 steps and then enters j. A row may sum to
// less than 1: the rest is the probability of no transition within the
// horizon (the process stays in i).
#ifndef SOJOURN_MODELS_AVAILABILITY_KERNEL_H_
#define SOJOURN_MODELS_AVAILABILITY_KERNEL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "models/availability/sojourn_stats.h"

namespace sojourn::availability {

struct EstimatorOptions {
  // true: holding times censored by the window end are used (discrete
  // cause-specific hazards, i.e. the Aalen-Johansen / Kaplan-Meier estimate).
  // false = paper-literal (000 section 6.2): transition counting over completed
  // sojourns only, the unfinished last sojourn of every window is dropped.
  bool censoring_aware = true;
  // true: each window's first sojourn (already in progress at the window
  // start) gets its own kernel, used for the first step of the TR recursion.
  // false = paper: the first sojourn is treated as entered at the window start
  // and pooled into the ordinary kernel.
  bool first_sojourn_kernel = true;
  // The first-sojourn kernel of a state is used only if at least this many
  // windows (weight) started in that state; otherwise the ordinary kernel is.
  double min_first_sojourn_windows = 1;

  // ---- Issue 7 improvements. Defaults chosen by the Brier score of the
  // issue 7 protocol on both shared traces (see the avail-core report):
  // population shrinkage + neighbouring start times + age conditioning gave
  // -12.5% (desktop) and -8.8% (Bitbrains) against the window frequency;
  // recency weighting and the frequency blend did not help and are off.
  // Shrinkage and age conditioning only act when the caller passes a `prior`
  // or an initial age to PredictFromStats.
  //
  // Shrinkage: PredictFromStats adds its `prior` statistics (e.g. the same
  // cell pooled over all or similar hosts) as pseudo-observations worth this
  // many windows, so a host with few windows leans on the prior and one with
  // many on its own data. 0 = off. 6 until session 7; since host frailty puts
  // the prior at the host's own level and three age classes thin each class,
  // 12 gives a lower Brier score on both shared traces and on all four of
  // their host halves (docs/EVALUATION.md, "a stronger shrinkage prior").
  double prior_windows = 12;
  // Recency weighting (CollectStats): the k-th newest training window
  // (k = 0, 1, ...) gets weight 0.5^(k / recency_half_life_windows). 0 = off.
  // Made both traces worse (half-life 2..8 windows).
  double recency_half_life_windows = 0;
  // Other-day-type borrowing (CollectStats): when fewer than
  // borrow_below_windows windows of the requested day type exist, the other
  // day type's windows at the same clock time are added with weight
  // other_day_type_weight. 0 = off; kAlwaysBorrow = whatever the number of
  // windows. 8 until session 18; since then always (with the level
  // correction below, the borrowed windows keep only their time-of-day
  // shape), which gave a lower Brier score, all and busy hosts, on both
  // shared traces and on all four of their host halves by a rule written
  // before those runs (docs/EVALUATION.md, "always borrowing").
  static constexpr int kAlwaysBorrow = std::numeric_limits<int>::max();
  int borrow_below_windows = kAlwaysBorrow;
  double other_day_type_weight = 0.25;
  // Level-corrected borrowing: the borrowed windows keep the other day type's
  // time-of-day shape but not its level. CollectStats keeps them apart
  // (SojournStats::borrowed), and ShrinkStats multiplies their failure
  // hazards by the prior's borrow_hazard_ratio (the population's failure
  // rate in the requested day type over that in the other at the same clock,
  // PopulationPriorBuilder) before adding them, as host_frailty moves the
  // prior to the host's level. false = the borrowed windows are added as they
  // are (issue 7). Without a prior that carries the ratio both are the same.
  bool level_corrected_borrowing = true;
  // Neighbouring start times (CollectStats): the host's windows starting
  // neighbor_offset_seconds earlier and later (same day type and length) are
  // added with weight neighbor_window_weight. 0 = off.
  double neighbor_window_weight = 0.25;
  int64_t neighbor_offset_seconds = 3600;
  // Age conditioning: when > 0, CollectStats splits the training windows'
  // first sojourns by whether the initial state had lasted less than this
  // many seconds before the window start, and PredictFromStats, given the
  // host's current age in its state, uses the matching first-sojourn data,
  // shrunk towards all first sojourns with weight age_prior_windows. 0 = off.
  int64_t recent_age_seconds = 6 * 3600;
  // A third age class: with long_age_seconds > recent_age_seconds > 0, the
  // first sojourns of windows whose initial state had lasted at least this
  // long ("long", one whole daily cycle by default) are kept apart from the
  // "settled" ones (recent_age_seconds .. long_age_seconds). 0 = two classes.
  int64_t long_age_seconds = 24 * 3600;
  // With a shrinkage prior: give each age class of the host's first sojourns
  // as many prior pseudo-windows as all first sojourns of its initial state
  // get (the prior's windows of that class, scaled up), instead of the share
  // the class has among the prior's windows. Off by default: it helps the
  // desktop trace and hurts Bitbrains weekends (docs/EVALUATION.md, session 6).
  bool per_class_age_prior = false;
  double age_prior_windows = 2;
  // ---- Issue 3 (acceptance 3) improvements.
  // Empirical-Bayes shrinkage strength: when the `prior` passed to
  // PredictFromStats carries an estimated strength (prior_strength > 0, set by
  // PopulationPriorBuilder from the dispersion of window survival between the
  // hosts of the pooled cell), it replaces prior_windows, which stays the
  // strength when there is no estimate and the switch for shrinkage at all
  // (prior_windows = 0 disables it).
  bool empirical_bayes_prior = false;
  // Exact age conditioning of the first sojourn: CollectStats also files each
  // window's first sojourn by the initial state's exact age, and
  // PredictFromStats, given the host's age a in its initial state, uses the
  // delayed-entry (left-truncated Kaplan-Meier) cause-specific hazards of the
  // whole sojourn at lengths a+1, a+2, ... (semi-Markov residual holding time
  // H(a+l) / S(a)), from the host's windows plus the prior's, scaled as for
  // the shrinkage (AgeConditionedFirstRow), shrunk towards the hazards of the
  // first-sojourn kernel without it (with the 2-class split when that is on)
  // with weight age_prior_windows sojourns at risk, the weight the 2-class
  // split gives all first sojourns.
  bool exact_age_first_sojourn = false;
  // Host frailty: the shrinkage prior's hazards towards S3/S4/S5 are
  // multiplied by the host's hazard ratio (SojournStats::prior_hazard_ratio,
  // from HostFrailtyModel in frailty.h: the empirical-Bayes standardised
  // failure ratio of the host over its whole history against the population
  // at the same clock times), so the prior keeps the population's
  // time-of-day shape at the host's own level (since session 5 also the
  // prior's exact-age table that exact_age_first_sojourn reads). On by
  // default: it improves
  // the relative error where smp lost and keeps the Brier score within 1 %
  // on both shared traces (docs/EVALUATION.md, "Host frailty").
  bool host_frailty = true;
  // With host_frailty, the caller takes the host's ratio on the requested
  // day type (HostFrailtyModel::Theta(host, day_type): weekday and weekend
  // ratios as two correlated frailties, multivariate credibility) instead of
  // one ratio over all days. On by default: Brier lower on every shared-trace
  // run and host half, fewer losing weekend cells on the desktop trace
  // (docs/EVALUATION.md, "Host frailty by day type").
  bool frailty_by_day_type = true;
  // Load-band conditioning of the first sojourn (load_band.h): the first
  // sojourn's cause-specific hazards are multiplied by the population's
  // standardised exit ratios of the host's load band at the window start
  // (the lower or upper half of its state's load range), which the caller
  // passes to PredictFromStats (BandExposure::RatioOf). Not with
  // exact_age_first_sojourn (that row is rebuilt from the exact-age table).
  // On by default since session 13: a lower Brier score on every Bitbrains
  // run (whole trace and both host halves), the same numbers on the desktop
  // pings (one band), one losing cell fewer (docs/EVALUATION.md, "load band
  // of the first sojourn").
  bool load_band_first_sojourn = true;
  // Blend with the empirical window frequency of the training windows that
  // started in the same state (PredictFromStats): TR = (1 - w) TR_smp + w
  // TR_freq. 0 = pure SMP.
  double frequency_weight = 0;
};

// The paper's estimator (000 section 6.2): transition counting, first sojourn
// pooled, every issue 7 extension off ("smp_paper").
EstimatorOptions PaperEstimatorOptions();
// Censoring-aware with the first-sojourn kernel but no issue 7 extension
// (the issue 3 "smp"; for ablations).
EstimatorOptions BasicEstimatorOptions();

// to-state -> pmf, pmf[l-1] = K_ij(l) for l = 1..pmf.size().
using KernelRow = std::map<int, std::vector<double>>;

struct SemiMarkovKernel {
  // Step d of the discrete time (seconds); 0 when unknown.
  int64_t step_seconds = 0;
  // from-state -> row. States 3, 4 and 5 are absorbing whatever their rows
  // say; any other state without a row never leaves.
  std::map<int, KernelRow> rows;
  // First-sojourn kernel: G_ij(l) = P(first transition after l steps, to j |
  // in state i at step 0, entered at an unknown earlier time). A state absent
  // here uses its ordinary row for the first sojourn.
  std::map<int, KernelRow> first_rows;

  // K_ij(l) (0 outside the stored range).
  double At(int i, int j, int l) const;
  // Q_i(j) = sum_l K_ij(l), and the row sum sum_j Q_i(j).
  double Q(int i, int j) const;
  double RowSum(int i) const;
};

inline bool IsAbsorbingState(int s) { return s >= 3 && s <= 5; }

// First-sojourn row of state i for a host that has been in i for `age` >= 0
// steps, l = 1..horizon: the discrete cause-specific hazards of the total
// sojourn length t = age + l, h_j(t) = d_j(t) / R(t), where a first sojourn
// filed at age a_k with holding length x_k (completed towards j, or censored)
// is at risk for a_k < t <= a_k + x_k and ends at t = a_k + x_k
// (delayed entry). `own` counts weigh 1, `prior` counts (may be null)
// prior_scale. The hazards h_fb of `fallback` (a row of the same state, may
// be null = no transition) act as a prior worth `fallback_weight` sojourns
// at risk: h_j = (d_j + w h_fb_j) / (R + w); with w = 0 they are used only
// where R = 0.
// `max_length` bounds the holding lengths x_k stored in the tables.
KernelRow AgeConditionedFirstRow(const std::map<int64_t, StateSojourns>& own,
                                 const std::map<int64_t, StateSojourns>* prior,
                                 double prior_scale, int64_t age, int horizon, int max_length,
                                 const KernelRow* fallback, double fallback_weight = 0);

// Estimates the kernel of transient states 1 and 2 (and, with
// opt.first_sojourn_kernel, their first-sojourn kernels). States with no data
// get no row (they never leave). step_seconds is copied from stats.
SemiMarkovKernel EstimateKernel(const SojournStats& stats, const EstimatorOptions& opt);
// The same for a prediction from `init` (1 or 2): the first sojourns of
// `init` are `first` and their windows' weight `initial` (e.g. those of the
// host's age class) instead of stats.first[init] and stats.initial[init], and
// only the first row of `init` is estimated (the TR recursion from `init`
// reads no other first row). The ordinary rows are EstimateKernel's.
SemiMarkovKernel EstimateKernelFrom(const SojournStats& stats, const EstimatorOptions& opt,
                                    int init, const StateSojourns& first, double initial);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_KERNEL_H_
