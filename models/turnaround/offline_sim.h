// CISNE's off-line mode (paper 002, section 5, Fig. 6): a discrete-event
// simulator that runs a parallel workload on a configured non-dedicated
// cluster with local load, scheduling with the same job/node selection code
// as the kernels (cluster_model.h). It is the "dummy" cluster: job arrivals,
// starts and finishes are reported through hooks, so the same estimator and
// HistDB event code as on-line records history and estimates every arriving
// job against the times the simulated cluster then produces.
//
// Execution model (the truth): a job needs `runtime` seconds of dedicated
// execution; on a node whose total CPU demand (local + parallel, eq. 8)
// exceeds 1 every task gets its demand scaled down, and a coscheduled job
// progresses at the pace of its slowest node: rate = 1 / max(1, CPU_max(J)).
#ifndef SOJOURN_MODELS_TURNAROUND_OFFLINE_SIM_H_
#define SOJOURN_MODELS_TURNAROUND_OFFLINE_SIM_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "models/turnaround/job.h"
#include "models/turnaround/local_load.h"

namespace sojourn::turnaround {

struct OfflineJob {
  JobSpec spec;          // procs already fitted to the cluster
  double runtime = 0;    // dedicated execution time, seconds
  double cpu_fraction = 1;  // CPU(J) while running alone
};

struct OfflineConfig {
  int nodes = 64;
  SchedulingPolicy policy{JobSelection::kFcfs, NodeSelection::kNormal, 4};
  LocalLoadConfig local;
  // Tests: on every event, check each running job's kept CPU_max against
  // ClusterModel::CpuMax over its nodes; a difference is an InternalError.
  bool check_cpu_max = false;
};

struct OfflineHooks {
  // Before the job joins the queue; `snapshot` does not contain it.
  std::function<absl::Status(const JobSpec&, const ClusterSnapshot&)> on_submit;
  // When the job starts on `nodes`; `snapshot` is the state after this
  // scheduling pass (the job itself is in `running`).
  std::function<absl::Status(const JobSpec&, int64_t start, const std::vector<int32_t>& nodes,
                             const ClusterSnapshot&)>
      on_start;
  std::function<absl::Status(const JobSpec&, int64_t finish, double cpu_time_per_task)> on_finish;
  // Every kOfflineTickEvents simulation events, with the simulated time (for
  // progress reports on long runs).
  std::function<void(double now)> on_tick;
};
inline constexpr int64_t kOfflineTickEvents = 4096;

struct OfflineResult {
  int64_t jobs = 0;
  double makespan = 0;  // last finish - first submit
  int64_t events = 0;
};

// Runs `jobs` (sorted by submit time; procs must be <= config.nodes).
// A hook error aborts the run and is returned.
absl::StatusOr<OfflineResult> RunOffline(const std::vector<OfflineJob>& jobs,
                                         const OfflineConfig& config, const OfflineHooks& hooks);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_OFFLINE_SIM_H_
