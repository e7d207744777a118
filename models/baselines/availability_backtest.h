// Backtest of availability predictors on host traces under the fixed protocol
// of issue 7 (which refines the method of paper 000 section 8.2):
//
//  * Each host's grid of states is split by local calendar day at the
//    midpoint (split = floor(ndays * train_ratio); 0.5 gives ndays / 2): the
//    first days train, the rest test. The day type of a window is the type of
//    its start day; windows may run past midnight.
//  * A cell is (host, day type, start hour 0..23, window length 1..H hours,
//    initial state S1/S2). Training windows of a cell of L hours: the
//    same-clock windows of L hours (of the longest length H with
//    BacktestConfig::windows_per_length off) on the most recent
//    `history_days` training days of the type (0 = all) that end inside the
//    training half (availability::HistoryWindowStarts / CollectStats, as the
//    predictor service collects them for a request of L hours). Test windows: those on test days starting in
//    the cell's initial state; empirical TR = fraction with no S3/S4/S5 in
//    samples 1..M (M = T / d; sample 0 fixes the initial state).
//  * Windows that touch a global monitoring outage (fewer than
//    `outage_fraction` of the hosts present reporting, where at least
//    `outage_min_hosts` are present) are excluded, training and
//    test alike (a test window is scored for the lengths that end before the
//    outage). Cells without a training window that starts in S1 or S2 are
//    dropped for every method (no method has data there; counted).
//  * Relative error |pred - emp| / emp over cells with >= min_test_windows
//    test windows and emp > 0; pooled Brier over all test windows.
//
// One TR curve per (host, day type, start hour, initial state, length; with
// windows_per_length off, one for every length). Methods: "smp" (availability::CollectStats + PredictFromStats
// with BacktestConfig::smp_options, library defaults unless changed),
// "smp_paper" (paper-literal options), "window_frequency",
// "last", "bm", "ar", "ma", "arma", "avail_quantile", "on_fraction".
#ifndef SOJOURN_MODELS_BASELINES_AVAILABILITY_BACKTEST_H_
#define SOJOURN_MODELS_BASELINES_AVAILABILITY_BACKTEST_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "models/availability/kernel.h"
#include "models/availability/load_band.h"
#include "models/availability/state.h"
#include "models/availability/window.h"
#include "nlohmann/json.hpp"

namespace sojourn::backtest {

// The paper-literal estimator of "smp_paper" (paper 000 section 6.2):
// transition counting over completed sojourns, first sojourn pooled, and every
// issue 7 improvement of EstimatorOptions switched off.
availability::EstimatorOptions PaperLiteralOptions();

// Every method the backtest knows, in report order.
const std::vector<std::string>& AllMethods();

struct BacktestConfig {
  availability::ClassifierConfig classifier;
  // Options of the "smp" method (library defaults; "smp_paper" always uses
  // PaperLiteralOptions()).
  availability::EstimatorOptions smp_options;
  // Source of the shrinkage prior PredictFromStats gets when
  // smp_options.prior_windows > 0: "hosts" = the same (day type, start hour)
  // pooled over all hosts' training windows; "hours" = this host's other
  // start hours of the same day type; "none" = no prior (shrinkage inert).
  std::string smp_prior = "hosts";
  // Pass each test window's age in its initial state (InitialAgeSteps) to
  // PredictFromStats (only matters with smp_options.recent_age_seconds > 0);
  // false passes -1 (unknown).
  bool smp_pass_age = true;
  // Host frailty (smp_options.host_frailty) of each test window from the
  // host's failure exposure up to the window start (its training half and
  // the test days before the window), as the predictor service computes it
  // from the history it has at the moment of the request; the population's
  // rates, v, phi and S stay fitted on the training halves (fit, then filter,
  // as the time-series baselines are applied). false: from the training
  // half only (one ratio per host and day type).
  bool smp_online_frailty = true;
  // When smp's population is pooled. kTraining (the default): the shrinkage
  // prior ("hosts") from every host's training windows, host frailty's
  // rates and moments from every host's training half (one prior per cell;
  // fit, then filter). kWindow: as of each test window's start, as the
  // predictor service pools its registered hosts' histories at the moment of
  // a request: the prior from every host's same-clock windows that ended by
  // then and, with the online host frailty, host frailty's rates and moments
  // from every host's failure exposure up to then (training and test days
  // alike, nothing after the start). kPrior: only the prior as of the window
  // start. The load band's exit ratios stay fitted on the training halves.
  // kPrior and kWindow need history_days 0, no recency weighting and
  // borrow_below_windows 0 or always (a window's weight must not depend on
  // the later ones); otherwise kTraining is used and the report says so
  // (BacktestResult::smp_pool_at; kPrior when kWindow meets a host frailty
  // from the training half only, smp_online_frailty false).
  enum class PoolAt { kTraining, kPrior, kWindow };
  PoolAt smp_pool_at = PoolAt::kTraining;
  // The population's level over the last this many days (0 = off, the
  // default; 1..28): every failure hazard of smp's kernel for a window is
  // multiplied by availability::PopulationLevelModel's ratio at the window
  // start, fitted on the training days (frailty.h). An experiment of session
  // 25, off by default: the predictor service does not compute it.
  int smp_population_days = 0;
  // The methods that learn from windows (smp, smp_paper, window_frequency)
  // predict a window of L hours from the same-clock training windows of L
  // hours, one estimate per length: paper 000 section 5 cuts windows of the
  // job's length, and the predictor service cuts them at the requested
  // window, so each length is scored as the service answers it. false: every
  // length is read off one curve estimated from the windows of
  // max_window_hours (the time-series models always use those).
  bool windows_per_length = true;
  // Grid step d (seconds); must divide 3600.
  int64_t step_seconds = 300;
  // The trace's local clock: a fixed UTC offset (an int converts) or a tz
  // database zone, whose days are 23 or 25 hours long when daylight saving
  // time starts or ends. The grid is aligned to local midnight; days, day
  // types and window start hours are local. A local hour that a change to
  // daylight saving time skips has no test windows that day.
  availability::LocalClock clock;
  int max_window_hours = 10;
  // Most recent training days of the type used (0 = all).
  int history_days = 0;
  // Fraction of each host's calendar days used for training.
  double train_ratio = 0.5;
  // A grid point where fewer than this fraction of the hosts present (between
  // their first and last grid point) report (state not S5) is a global
  // monitoring outage; 0 disables outage exclusion. The rule needs at least
  // outage_min_hosts hosts present: with fewer, a monitoring outage cannot be
  // told from the hosts' own revocations (one host is always "all hosts"),
  // so such a point is no outage and a gap there is the hosts' S5.
  double outage_fraction = 0.5;
  int outage_min_hosts = 10;
  // Keep the hosts present and reporting at every grid point in
  // BacktestResult::grid_point_hosts.
  bool keep_grid_points = false;
  int min_test_windows = 3;
  // Busy host: at least one S1/S2 -> S3/S4/S5 transition per this many days.
  double busy_days_per_failure = 4.0;
  // Only these day types (both when empty): "weekday", "weekend".
  std::vector<std::string> day_types;
  // Methods to evaluate (AllMethods() when empty).
  std::vector<std::string> methods;
  int threads = 2;
  int reliability_bins = 10;
  // Progress callback (fraction done), may be empty.
  std::function<void(double)> progress;
};

// Per-cell result (one window length of one TR curve).
struct CellResult {
  int host = 0;      // index into the trace vector
  int day_type = 0;  // 0 weekday, 1 weekend
  int hour = 0;
  int hours = 0;  // window length in hours
  int init = 1;   // 1 or 2
  int n_test = 0;
  int n_survived = 0;
  std::vector<double> pred;       // per method: the cell's predicted TR (mean over test windows)
  std::vector<double> brier_sum;  // per method: sum over test windows of (p - outcome)^2
  double emp() const { return n_test > 0 ? static_cast<double>(n_survived) / n_test : 0; }
};

struct ReliabilityBin {
  int64_t n = 0;
  double sum_pred = 0;
  double sum_outcome = 0;
};

// The population's failures on one local calendar day (every host, training
// and test days alike): steps t -> t + 1 whose point t is on that day, spent
// in S1 or S2 with neither point in a global outage (up_steps), and how many of
// them ended in S3..S5 (failures). Day-level changes shared by every host (a
// storm of batch jobs, a maintenance weekend) show as a between-day spread of
// failures / up_steps far above a Poisson count's: see DayDispersion.
struct DayCount {
  int64_t day = 0;   // local day number (days since 1970-01-01, local time)
  int day_type = 0;  // 0 weekday, 1 weekend
  int hosts = 0;     // hosts with up steps that day
  int train_hosts = 0;  // of them, hosts for which the day is a training day
  double up_steps = 0;
  double failures = 0;
};

// Which days SummarizeDays takes: all, or only those that are training (test)
// days of every host with up steps that day. DayRoleName: "all", "train",
// "test" (the JSON's and the report's names).
enum class DayRole { kAll, kTrain, kTest };
inline constexpr DayRole kDayRoles[] = {DayRole::kAll, DayRole::kTrain, DayRole::kTest};
const char* DayRoleName(DayRole role);

// Between-day spread of the failure rate on one day type, over the days of
// `days` with up steps and of `role`: the pooled rate per up hour, the
// standard deviation of the daily rates, and the overdispersion
// sum_d (O_d - E_d)^2 / E_d / (n - 1) with E_d = the day's up steps times
// the pooled rate (1 for Poisson counts; Pearson's chi-square over its
// degrees of freedom).
struct DayDispersion {
  int days = 0;
  double rate_per_up_hour = 0;
  double sd_rate_per_up_hour = 0;
  double overdispersion = 0;
};
DayDispersion SummarizeDays(const std::vector<DayCount>& days, int day_type, DayRole role,
                            int64_t step_seconds);

struct BacktestResult {
  std::vector<std::string> methods;
  std::vector<std::string> hosts;
  std::vector<bool> busy;
  // Cells with >= 1 test window and >= 1 training window starting in S1/S2.
  std::vector<CellResult> cells;
  // Cells with test windows but no training window starting in S1/S2
  // (dropped for every method).
  int64_t cells_without_history = 0;
  // Per method, per bin (all hosts and busy hosts).
  std::vector<std::vector<ReliabilityBin>> reliability;
  std::vector<std::vector<ReliabilityBin>> reliability_busy;
  int64_t outage_points = 0;  // grid points flagged as global outage
  // Grid points where the outage rule was off: fewer than outage_min_hosts
  // hosts present (0 when outage_fraction is 0).
  int64_t outage_few_hosts_points = 0;
  // The frailty variance v and dispersion phi of HostFrailtyModel when smp used host_frailty.
  double frailty_variance = 0;
  double frailty_dispersion = 0;
  // Its day-type covariance S ([0] weekday, [1] weekend).
  std::array<std::array<double, 2>, 2> frailty_covariance{};
  // With load_band_first_sojourn: the population's first-sojourn exits by
  // load band, per window length in hours (band_lengths).
  std::vector<availability::BandExposure> band_exposure;
  std::vector<int> band_lengths;
  int64_t grid_points = 0;
  // Population failures by local day (DayCount), ascending.
  std::vector<DayCount> days;
  // Every grid point of the trace (from the earliest host's first to the
  // latest's last), for `sojourn-eval availability --outages`: the hosts
  // present, those reporting (not S5), and whether the point is a global
  // outage. Filled only with BacktestConfig::keep_grid_points.
  struct GridPoint {
    int64_t unix_seconds = 0;
    int32_t present = 0;
    int32_t reporting = 0;
    bool outage = false;
  };
  std::vector<GridPoint> grid_point_hosts;
  // With smp_population_days: the fitted beta and the number of training
  // (day, days before) pairs it came from.
  double population_level_beta = 0;
  int population_level_pairs = 0;
  // When smp's population was pooled (BacktestConfig::smp_pool_at, or
  // kTraining when its conditions do not hold).
  BacktestConfig::PoolAt smp_pool_at = BacktestConfig::PoolAt::kTraining;
};

// INVALID_ARGUMENT with the reason when `config` cannot run (the checks
// RunBacktest does first), so a caller can refuse it before reading a trace.
absl::Status ValidateBacktestConfig(const BacktestConfig& config);

// Runs the protocol on `traces` with up to 2 threads (over hosts). Fails on a
// bad configuration (step not dividing 3600 s, unknown method or day type, ...).
absl::StatusOr<BacktestResult> RunBacktest(const std::vector<HostTrace>& traces,
                                           const BacktestConfig& config);

// Aggregates of one method over a set of cells (issue 7 "Report per method").
struct MethodSummary {
  double acc_grand = 0;        // 1 - mean over (day type, length, hour) of the group error
  double acc_paper_style = 0;  // 1 - largest per-(day type, length) average over hours
  double acc_worst = 0;        // 1 - largest single (day type, length, hour) error
  double brier = 0;            // pooled over test windows
  int64_t cells = 0;           // cells with a relative error
  int64_t cells_dropped = 0;   // cells with < min_test_windows test windows or emp == 0
  int64_t windows = 0;         // test windows in the Brier score
};
struct LengthSummary {
  double avg_rel_err = 0, min_rel_err = 0, max_rel_err = 0, brier = 0;
  int64_t n = 0;  // cells with a relative error
  // Calibration in the large over all test windows of the length (the
  // windows the Brier score is taken over): mean predicted TR and the
  // fraction that survived.
  double mean_pred = 0, observed = 0;
  int64_t windows = 0;
};

// Summaries of method index `m` over the cells of hosts with busy[h] (or all
// hosts when busy_only is false).
MethodSummary SummarizeMethod(const BacktestResult& r, size_t m, bool busy_only,
                              int min_test_windows);
// [day_type][hours] (hours 1..H at index hours-1).
std::array<std::vector<LengthSummary>, 2> SummarizeByLength(const BacktestResult& r, size_t m,
                                                            int max_window_hours,
                                                            int min_test_windows);

// The whole report as JSON: summary, overall, overall_busy, reliability,
// reliability_busy, and protocol metadata.
nlohmann::json ResultToJson(const BacktestResult& r, const BacktestConfig& config);

// Fig. 14 of paper 000 (section 8.3): inject k unavailability occurrences
// (S3, holding time uniform in [60, 1800] s, starting at a random grid point in
// the hour after 08:00) into the training weekday logs of each host, one per
// log, newest log first (cycling when k exceeds the number of logs), and
// report the prediction discrepancy |TR_noisy - TR_clean| / TR_clean averaged
// over hosts (with TR_clean > 0) for windows of `window_hours` starting at
// 08:00 in S1 (age unknown), for smp, smp_paper and window_frequency. The
// estimators read the noisy series through CollectStats as in RunBacktest;
// smp's "hosts" prior is pooled from the clean series.
struct NoiseResult {
  std::vector<int> injections;
  std::vector<int> window_hours;
  // [method][injection index][window index]: mean discrepancy; hosts used.
  std::map<std::string, std::vector<std::vector<double>>> discrepancy;
  std::map<std::string, std::vector<std::vector<int>>> hosts;
};
absl::StatusOr<NoiseResult> RunNoiseInjection(const std::vector<HostTrace>& traces,
                                              const BacktestConfig& config,
                                              const std::vector<int>& injections,
                                              const std::vector<int>& window_hours, uint64_t seed);

}  // namespace sojourn::backtest

#endif  // SOJOURN_MODELS_BASELINES_AVAILABILITY_BACKTEST_H_
