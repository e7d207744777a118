// Backtests of the turnaround kernels on an SWF log (issue 4):
//  - replay: the log's own waits and runtimes are the truth; every job is
//    estimated at its submit time from the history of jobs finished before
//    it and the queue/cluster reconstructed from the log;
//  - simulate: the log drives the off-line simulator (section 5) on a
//    configured non-dedicated cluster; the simulated times are the truth.
// Both feed HistDB through the same job events as the predictor.
#ifndef SOJOURN_MODELS_TURNAROUND_EVALUATION_H_
#define SOJOURN_MODELS_TURNAROUND_EVALUATION_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/turnaround/estimator.h"
#include "models/turnaround/hist_db.h"
#include "models/turnaround/metrics.h"
#include "models/turnaround/swf.h"

namespace sojourn::turnaround {

enum class EvalMode { kReplay, kSimulate };

// simulate: most local-load session events (span x nodes x local load / mean
// session) a run may need. The local-load model steps through every session
// end even while the cluster is idle, so a log spanning 1e12 s would loop for
// hours; 5e7 events are 190 years of log on 64 nodes at 75 % (the shared
// SDSC-SP2 log needs about 6e5). An event costs O(log nodes) since session 22
// (it was O(nodes)): about 1 us at 100,000 nodes and 2 us at 1,000,000, so 5e7
// take about 1 to 2 minutes.
inline constexpr double kMaxLocalLoadEvents = 5e7;

struct EvalConfig {
  EvalMode mode = EvalMode::kReplay;
  // replay: the policy the kernels assume the site used (MPL 1, dedicated);
  // simulate: the simulated cluster's policy.
  SchedulingPolicy policy{JobSelection::kEasyBackfilling, NodeSelection::kNormal, 1};
  // simulate only: cluster size (job sizes are scaled by nodes / MaxNodes of
  // the log header) and share of nodes with a local user.
  int nodes = 64;
  double local_load = 0.75;
  uint64_t seed = 1;
  // Use only the first max_jobs jobs of the log (0 = all).
  int64_t max_jobs = 0;
  EstimatorOptions estimator;
  // Called about every 5 % of the jobs, and at least every 10 s, with a
  // one-line progress message.
  std::function<void(const std::string&)> progress;
};

struct EvalReport {
  // [kernel][metric], metric 0 turnaround, 1 wait, 2 exec.
  std::array<std::array<MetricSummary, 3>, kNumKernels> summary{};
  std::array<double, kNumKernels> cost_us_mean{};
  std::array<double, kNumKernels> cost_us_median{};
  int64_t jobs_in_log = 0;
  int64_t jobs_estimated = 0;
  int64_t jobs_scored = 0;
  int64_t estimate_failures = 0;
  int cluster_nodes = 0;
  double mean_queue_length = 0;  // waiting jobs seen at submit
  double seconds = 0;            // wall time of the run
};

inline constexpr const char* kMetricNames[3] = {"turnaround", "wait", "exec"};

// InvalidArgument for a configuration it refuses (nodes < 1, a simulate run
// above kMaxLocalLoadEvents).
absl::StatusOr<EvalReport> RunEvaluation(const SwfLog& log, const EvalConfig& config, HistDb& db);

// The job history a replay of `log` records, without estimating a job (what
// `sojourn import-jobs` sends a predictor): a record for every job that
// finished, in the order they finished (the order the history takes them),
// with the queue and cluster state the replay reconstructs from the log
// (config.policy, config.max_jobs; the nodes a job ran on are the lowest
// free ones). Unlike the records RunEvaluation stores, these keep the log's
// job numbers (a negative one becomes 0) and leave a requested time the log
// lacks unknown (-1); the queue state is still computed with it filled in.
// Times are the log's plus `time_offset` (its UnixStartTime: Unix seconds).
// `lines`, if not null, receives each record's line in the log.
// config.progress, if set, hears about every 10 s of a long replay.
absl::StatusOr<std::vector<JobRecord>> ReplayHistory(const SwfLog& log, const EvalConfig& config,
                                                     int64_t time_offset,
                                                     std::vector<int64_t>* lines = nullptr);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_EVALUATION_H_
