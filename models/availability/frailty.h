// Host frailty (issue 3, acceptance 3): how much more or less often a host
// fails than the population at the same clock times, as a multiplicative
// factor on the failure hazards of the population's shrinkage prior.
//
// sojourn shrinks a host's sparse same-clock statistics towards the same cell
// pooled over all hosts (PredictFromStats' `prior`). That prior has the
// population's time-of-day shape but the population's level: a host that has
// never failed in weeks is pulled towards the failure rate of the flaky ones.
// The frailty keeps the shape and moves the level: the prior's
// S1/S2 -> S3/S4/S5 hazards are multiplied by the host's hazard ratio theta
// (proportional hazards with a shared gamma frailty; Clayton, Biometrika 65,
// 1978; Vaupel, Manton & Stallard, Demography 16, 1979).
//
// theta is the host's credibility-weighted (empirical-Bayes, Buhlmann)
// standardised failure ratio over its whole training history:
//   O = the host's observed failures (up -> failure transitions),
//   E = sum over its up steps of the population's failure rate per up step
//       at that day type and local hour (the host is compared with the
//       population at the clock times it was actually up),
//   theta = 1 + Z (O / E - 1), Z = E v / (E v + phi),
// with v the variance of the true ratio between hosts and phi the dispersion
// of a host's count around theta E (Var(O | theta) = phi theta E; phi = 1 for
// Poisson counts, where theta is the gamma-frailty posterior mean
// (O + 1/v) / (E + 1/v); Clayton, Biometrika 65, 1978). Failures come in
// bursts (a VM whose load flaps around Th2 fails every few minutes for an
// hour), so phi is not assumed to be 1: both moments come from splitting
// every host's history at its middle local day (halves 1 and 2, the earlier
// and the later days; so the "noise" phi also holds how much a host changes
// from one half of its history to the next, which is what a prediction for
// the days after the history has to allow for):
//   v   = max(0, sum_h (O1 - E1)(O2 - E2) / sum_h E1 E2)
//         (E[(O1 - E1)(O2 - E2)] = E1 E2 Var(theta)),
//   phi = max(1, mean_h (O1 E2 - O2 E1)^2 / (E1 E2 (E1 + E2)))
//         (E[(O1/E1 - O2/E2)^2 | theta] = phi theta (1/E1 + 1/E2); at least
//         the Poisson dispersion, as for quasi-Poisson counts),
// over the hosts with exposure in both halves (Buhlmann & Gisler, A Course in
// Credibility Theory, 2005, chapter 4). v = 0 (no detectable heterogeneity)
// gives theta = 1 for every host: the prior is used as it is. Nothing here is
// a tuning constant.
//
// By day type (Theta(host, day_type), EstimatorOptions::frailty_by_day_type):
// a host's weekday and weekend ratios need not be the same (a desktop that is
// switched off at weekends, a VM with weekend batch jobs). The two true ratios
// (theta_wd, theta_we) get the multivariate credibility estimate (Buhlmann &
// Gisler chapter 7; Jewell, ASTIN Bulletin 7, 1973)
//   theta = 1 + S (S + N)^-1 (r - 1),
// r_d = O_d / E_d the host's observed ratio on day type d, N = diag(phi / E_d)
// its noise, and S the 2 x 2 between-host covariance of the true ratios from
// the same split halves, S_ab = sum_h (O1_a - E1_a)(O2_b - E2_b) /
// sum_h E1_a E2_b (the off-diagonal averaged over both orders; diagonal at
// least 0, correlation clamped to [-1, 1]). A host with no exposure on one day
// type is predicted there from the other through the covariance. When the two
// ratios are perfectly correlated with equal variance (S = v 1 1') this is
// exactly the pooled theta above (Sherman-Morrison); with less correlation a
// host's weekends are judged more by its weekends.
#ifndef SOJOURN_MODELS_AVAILABILITY_FRAILTY_H_
#define SOJOURN_MODELS_AVAILABILITY_FRAILTY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "models/availability/sojourn_stats.h"
#include "models/availability/state.h"
#include "models/availability/window.h"

namespace sojourn::availability {

// A host's failure exposure by (half: 0 = the local days before the middle
// day of the counted span, 1 = the rest; day type: 0 weekday, 1 weekend;
// local hour 0..23) of the step's start: steps
// spent in S1 or S2 whose next grid point is known, and how many of them
// were followed by a failure state.
struct FailureExposure {
  using Table = std::array<std::array<std::array<double, 24>, 2>, 2>;
  Table up_steps{};
  Table failures{};

  // Sums over one half (0, 1) or both (-1).
  double total_up_steps(int half = -1) const;
  double total_failures(int half = -1) const;
  void Merge(const FailureExposure& other);
};

// The exposure of `series` over the steps t -> t + 1 with the grid point t + 1
// at or before `end_unix` (the training history). `exclude(t)`, if set, drops
// the step t -> t + 1 (e.g. one touching a global monitoring outage).
FailureExposure CountFailureExposure(const StateSeries& series, int64_t end_unix,
                                     const LocalClock& clock,
                                     const std::function<bool(size_t t)>& exclude = nullptr);
// The same over the steps t -> t + 1 whose grid point t is at or after
// `begin_unix` as well (the halves then split the local days from the one of
// the first counted grid point): the exposure added between two moments, as
// a history grows (sojourn-eval's online host frailty).
FailureExposure CountFailureExposure(const StateSeries& series, int64_t begin_unix,
                                     int64_t end_unix, const LocalClock& clock,
                                     const std::function<bool(size_t t)>& exclude = nullptr);

// CountFailureExposure(series, end_unix, clock) of a growing
// grid, for a history that ends at or after its last point (the state
// manager's default request, which counting anew walked the whole grid for).
// The steps into every point but the last (which are final, state.h
// GridBuilder) are counted once, by local day, and kept; each call counts
// only the steps added since, and the last, and sums the days into the
// halves. Equal to CountFailureExposure for any series: one with another
// start or step than the last (a grid trimmed at its start) starts the count
// over, and an earlier end or an older snapshot than the last is counted
// anew. The series of successive calls must otherwise be one grid as it
// grows (a grid built again from its samples needs a new counter). Keeps
// 200 bytes per local day with up steps. Not thread-safe.
class FailureExposureCounter {
 public:
  explicit FailureExposureCounter(LocalClock clock);
  const LocalClock& clock() const { return clock_; }
  FailureExposure Count(const StateSeries& series, int64_t end_unix);

 private:
  struct Day {
    int64_t day = 0;  // local day number
    int weekend = 0;
    std::array<int32_t, 24> up_steps{};
    std::array<int32_t, 24> failures{};
  };
  LocalClock clock_;
  // The series counted (its first point and step and local day), and its
  // steps t -> t + 1 for t < counted_, by local day: the days with up steps,
  // in order (a grid that spans decades of silence keeps none for them).
  int64_t start_ = 0, step_ = 0, first_day_ = 0, counted_ = 0;
  std::vector<Day> days_;
};

// The population model: Add every host's exposure, then Build; Theta(host)
// is that host's hazard ratio. Hosts without up steps are ignored.
class HostFrailtyModel {
 public:
  void Add(const FailureExposure& host);
  void Build();

  // Expected failures of `host` at the population's rates (in one half, or
  // both with half = -1).
  double Expected(const FailureExposure& host, int half = -1) const;
  // The same on one day type (0 weekday, 1 weekend).
  double Expected(const FailureExposure& host, int half, int day_type) const;
  // 1 + Z (O / E - 1); 1 when v = 0, before Build, or with no exposure.
  double Theta(const FailureExposure& host) const;
  // The host's ratio on day type 0 (weekday) or 1 (weekend), by the
  // multivariate credibility above; 1 before Build, with no exposure, or
  // when S = 0. Theta(host) when S cannot be estimated (fewer than two hosts
  // with exposure in both halves for some pair of day types).
  double Theta(const FailureExposure& host, int day_type) const;
  // The between-host variance v of the ratio (0 = no heterogeneity
  // detected) and the within-host dispersion phi.
  double variance() const { return variance_; }
  double dispersion() const { return dispersion_; }
  // S_ab, the between-host covariance of the true ratios on day types a, b,
  // and whether every entry could be estimated.
  double covariance(int a, int b) const { return covariance_[a][b]; }
  bool day_type_covariance_known() const { return day_type_covariance_known_; }
  int hosts() const { return static_cast<int>(hosts_.size()); }

 private:
  std::vector<FailureExposure> hosts_;
  FailureExposure pooled_;
  std::array<std::array<double, 24>, 2> rate_{};
  double variance_ = 0;
  std::array<std::array<double, 2>, 2> covariance_{};
  bool day_type_covariance_known_ = false;
  double dispersion_ = 1;
  bool built_ = false;
};

// The population's level (session 25; sojourn-eval's --smp-population-days):
// failures come in calendar days shared by every host (a busy or a quiet
// week moves all hosts at once; docs/EVALUATION.md, "one-month slices and
// day-level shifts"), which no same-clock estimator fitted on the training
// days can see. The population's standardised failure ratio over the last
// K days, O_K / E_K (every host's failures against the population's rates
// at the day types and hours it was up, as HostFrailtyModel::Expected),
// predicts the next day's ratio O_d / E_d by the best linear predictor
// through (1, 1):
//   ratio = 1 + beta (O_K / E_K - 1),
//   beta  = sum_d E_d x_d y_d / sum_d E_d x_d^2, clamped to [0, 1],
// x_d = O_K / E_K - 1 before day d and y_d = O_d / E_d - 1, over the training
// days with K days before them (Buhlmann's credibility factor Cov / Var, here
// between a day and the days before it rather than between hosts). beta = 0
// (days that do not carry over, or fewer than two pairs) leaves every
// prediction unchanged; the ratio multiplies every failure hazard of the
// host's kernel.
struct LevelPair {
  double o_recent = 0, e_recent = 0;  // the K days before
  double o_day = 0, e_day = 0;        // the day
};
class PopulationLevelModel {
 public:
  void Fit(const std::vector<LevelPair>& pairs);
  double beta() const { return beta_; }
  int pairs() const { return pairs_; }
  // 1 + beta (o / e - 1), at least 0; 1 when e <= 0.
  double Ratio(double o_recent, double e_recent) const;

 private:
  double beta_ = 0;
  int pairs_ = 0;
};

// `s` with the discrete cause-specific hazards towards failure states
// (S3, S4, S5) multiplied by theta >= 0, the hazards towards S1/S2 and the
// censoring unchanged: the counts are rebuilt as the same cohort (same number
// at risk at length 1, same censoring fraction at every length) under the new
// hazards, so HazardRow of the result has exactly the scaled failure hazards
// (capped where they would leave no room for the other exits and the
// censoring at that length).
StateSojourns ScaleFailureHazards(const StateSojourns& s, double theta);
// The same with the hazards towards the up states S1/S2 multiplied by
// theta_other >= 0 as well (capped to leave room for the censoring first,
// then the failures capped in what is left); theta_other = 1 is
// ScaleFailureHazards.
StateSojourns ScaleCauseHazards(const StateSojourns& s, double theta, double theta_other);
// *dst += scale * ScaleFailureHazards(src, theta), entry by entry, without
// building the rescaled table (the same numbers as merging it).
void MergeScaledFailureHazards(const StateSojourns& src, double theta, double scale,
                               StateSojourns* dst);
// The same for every sojourn table of a SojournStats that the kernel
// estimator reads (ordinary, first, first_by_age and the exact-age table).
// Window counts, window frequencies and prior_strength are unchanged.
SojournStats ScaleFailureHazards(const SojournStats& s, double theta);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_FRAILTY_H_
