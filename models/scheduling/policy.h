// Host ranking policies of paper 000 section 8.4, shared by the broker's
// RankHosts and `sojourn-eval schedule` (pure library: no gRPC types).
//
//   proactive   JCT = TL / [CR (1 - L_t0(TL))]; MTTF = integral of TR (eq. 5);
//               ETL = MTTF CR (1 - L_t0(MTTF)) (eq. 6); JCTF solves
//               TL = CR (1 - L_t0(JCTF)) integral_0^JCTF TR(t) dt (eq. 7).
//               When every usable host has JCT > MTTF the host with the
//               largest ETL is best ("etl"); otherwise the smallest JCTF
//               ("jctf").
//   condor      matchmaking on the job's requirements, ranked by clock rate;
//               oblivious to future failures (paper's Condor-like baseline).
//   round_robin the usable hosts in name order, rotated by a counter.
//   omniscient  the host where the job truly finishes first (simulation only:
//               needs the future, given as HostInput::oracle_completion_seconds).
//   tr          the foundation's order: TR over the job's duration.
//
// CR is the host's clock rate relative to a reference (RankOptions): TL is the
// run time on a dedicated host of the reference speed. With cores known, the
// share of the host a guest gets is min(1, cores (1 - L) / cpu_share), which
// is the paper's (1 - L) for one core and a one-CPU job.
//
// The TR curve is piecewise linear through (0, 1), (d, TR(1)), ...,
// (M d, TR(M)); its integral (the trapezoid rule) restricted to the horizon
// M d is the MTTF (a lower bound of eq. 5's integral to infinity). A JCTF
// beyond the horizon is unknown (reported absent, ranked after known ones).
#ifndef SOJOURN_MODELS_SCHEDULING_POLICY_H_
#define SOJOURN_MODELS_SCHEDULING_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/scheduling/load_forecast.h"

namespace sojourn::scheduling {

enum class Policy { kProactive, kCondor, kRoundRobin, kOmniscient, kTr };

// "proactive" (also for ""), "condor", "round_robin", "omniscient", "tr";
// INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<Policy> ParsePolicy(absl::string_view name);
const char* PolicyName(Policy p);
// The policies of the section 8.4 experiment, in report order.
const std::vector<Policy>& ExperimentPolicies();

// TR(t) from now on a regular grid.
class TrCurve {
 public:
  TrCurve() = default;
  // tr[m-1] = TR(m * step_seconds), m = 1..M; values are clamped to [0, 1].
  TrCurve(int64_t step_seconds, std::vector<double> tr);
  bool empty() const { return tr_.empty() || step_ <= 0; }
  int64_t step_seconds() const { return step_; }
  double horizon_seconds() const { return static_cast<double>(step_) * tr_.size(); }
  const std::vector<double>& values() const { return tr_; }
  // Linear interpolation; TR(0) = 1; TR(horizon) beyond the horizon.
  double At(double t_seconds) const;
  // integral_0^min(t, horizon) TR.
  double Integral(double t_seconds) const;
  // Eq. 5 restricted to the horizon.
  double Mttf() const { return cum_.empty() ? 0.0 : cum_.back(); }

 private:
  int64_t step_ = 0;
  std::vector<double> tr_;
  std::vector<double> cum_;  // cum_[m] = integral_0^{m d}; cum_[0] = 0
};

struct Job {
  // TL: run time on a dedicated host of the reference clock rate, seconds (> 0).
  double task_length_seconds = 0;
  // CPUs the job needs (<= 0 means 1).
  double cpu_share = 1.0;
  double memory_mb = 0;
  // Optional host constraints: a minimum clock rate, and a list of allowed hosts.
  double min_cpu_mhz = 0;
  std::vector<std::string> only_hosts;
};

struct HostInput {
  std::string host;
  // Non-empty: the host cannot take any job, for this reason (heartbeat
  // expired, prediction failed, ...).
  std::string unusable_reason;
  double cpu_mhz = 0;  // 0 = unknown (relative speed 1)
  int cpu_cores = 0;   // 0 = unknown (one core)
  double total_mem_mb = 0;  // 0 = unknown (no memory check)
  // Current state 1..5 of the availability model; 0 = unknown.
  int state = 0;
  // TR from now; null or empty = unknown.
  std::shared_ptr<const TrCurve> tr;
  // L_t0(t); unknown = 0.
  LoadForecast load;
  // Omniscient only: seconds from now until the job would truly finish on
  // this host (+inf when it never would).
  std::optional<double> oracle_completion_seconds;
};

struct RankOptions {
  // Clock rate (MHz) at which TL is measured. 0 = MedianClockRate of the
  // input hosts (the paper's "average CPU speed").
  double reference_mhz = 0;
  // round_robin: rotation of the usable hosts.
  uint64_t round_robin_offset = 0;
};

// Figures behind a host's place (absent when not computable).
struct HostFigures {
  double relative_speed = 1.0;  // CR
  std::optional<double> tr_at_duration;  // TR(TL)
  std::optional<double> mttf_seconds;
  std::optional<double> jct_seconds;
  std::optional<double> jctf_seconds;
  std::optional<double> etl_seconds;
  std::optional<double> predicted_load;  // L_t0(TL)
  std::optional<double> oracle_completion_seconds;
};

struct RankedHost {
  size_t input_index = 0;
  std::string host;
  int rank = 0;  // 1 = best; 0 = cannot take the job
  bool eligible = false;
  // Why the host cannot take the job, or what placed it.
  std::string reason;
  // Rule that ordered it: "etl", "jctf", "clock_rate", "round_robin", "oracle", "tr".
  std::string rule;
  HostFigures figures;
};

struct Ranking {
  Policy policy = Policy::kProactive;
  // Rule used for the usable hosts (proactive: "etl" or "jctf").
  std::string rule;
  // Usable hosts by rank, then the others in input order; every input host once.
  std::vector<RankedHost> hosts;
  // Number of usable hosts (hosts[0..usable) ).
  int usable = 0;
};

// The median clock rate of the hosts that report one and are not marked
// unusable (of all that report one when none is usable; 0 when none does).
// The paper takes the average CPU speed; the median keeps one host that
// reports an absurd rate (registration accepts up to 1e6 MHz), or hosts long
// gone, from changing every other host's JCT. Equal to the mean for one or
// two hosts.
double MedianClockRate(const std::vector<HostInput>& hosts);

// Figures of one host for a job (no eligibility checks).
HostFigures ComputeFigures(const Job& job, const HostInput& host, double reference_mhz);
// Solves eq. 7 for JCTF on `tr` with relative speed `cr` and the guest's
// share of the host at the forecast load (to 1 ms; binary search, exact for
// a load forecast that does not rise with the horizon); nullopt when the work
// is not done within the curve's horizon.
std::optional<double> SolveJctf(double task_length_seconds, const TrCurve& tr, double cr,
                                const LoadForecast& load, int cpu_cores, double cpu_share);

// INVALID_ARGUMENT for a non-positive or non-finite task length or negative
// needs. Never fails because of a host: unusable hosts get a reason.
absl::StatusOr<Ranking> RankHosts(Policy policy, const Job& job,
                                  const std::vector<HostInput>& hosts,
                                  const RankOptions& options = {});

}  // namespace sojourn::scheduling

#endif  // SOJOURN_MODELS_SCHEDULING_POLICY_H_
