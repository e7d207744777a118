// Conversions between the turnaround contract (turnaround.proto) and the
// CISNE library (models/turnaround), used by the predictor's RPCs.
#ifndef SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_
#define SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_

#include "absl/status/statusor.h"
#include "models/turnaround/estimator.h"
#include "sojourn/v1/turnaround.pb.h"

namespace sojourn::predictor {

// INVALID_ARGUMENT for a job CheckJobSpec (services/job_spec.h) refuses:
// times a request may carry are after 0 and at most `latest_unix` (the
// predictor's clock plus its allowed skew); requested times at most a year.
absl::StatusOr<turnaround::JobSpec> FromProto(const v1::JobSpec& p,
                                              int64_t latest_unix = INT64_MAX);
// Largest snapshot the predictor simulates: running + waiting jobs, and
// nodes. An estimate costs about (jobs x events), so 60,000 jobs took ~30 s
// of CPU per call; the evaluated workloads (docs/EVALUATION-turnaround.md)
// queue at most a few hundred jobs on 64-128 nodes.
inline constexpr int kMaxSnapshotJobs = 10000;
inline constexpr int kMaxSnapshotNodes = 100000;
// One scheduling step costs about jobs x nodes (EASY backfilling sorts the
// nodes for every queued job), and an estimate only notices its deadline
// between steps: 10,000 jobs on 100,000 nodes kept the predictor busy for
// 90 s past the deadline. 1e8 keeps a step well under a second.
inline constexpr int64_t kMaxSnapshotJobNodes = 100'000'000;
// Most local (owner) tasks a node may report (NodeState.local_tasks,
// MPL_local): run times are multiplied by MPL_max (eq. 4-5) and SharedTasks
// sums it over a job's nodes; 2^31 - 1 overflowed them. The same as the
// broker's largest --mpl_limit.
inline constexpr int32_t kMaxLocalTasks = 1000;

// INVALID_ARGUMENT for malformed jobs and snapshots beyond kMaxSnapshotJobs /
// kMaxSnapshotNodes / kMaxSnapshotJobNodes. now_unix_seconds must be in
// (0, latest_unix] (0 = no snapshot); a node's local_cpu_ratio in [0, 1] and
// local_tasks in [0, kMaxLocalTasks] (the message names the node index); a
// running job's start in (0, now] and not before its spec's submit, its nodes
// distinct indices into the snapshot, exactly spec.procs of them (one task
// per node), its cpu_seconds_per_task -1 (unknown) or in [0, now - start +
// turnaround::kCpuTimeSlackSeconds] (a task uses at most one CPU). Job ids
// > 0 must be distinct over running + waiting (0 and -1 name no job and may
// repeat). Unknown policy enum values are INVALID_ARGUMENT too. Running jobs
// may share a node beyond policy.mpl_limit: the limit binds what the
// scheduler starts, and the snapshot reports what runs (placed under another
// limit, or a what-if policy). The job estimated must not be in the snapshot
// (turnaround::ValidateRequest checks it). Every RPC taking a snapshot
// (EstimateTurnaround, RecordJobEvent) goes through this.
absl::StatusOr<turnaround::ClusterSnapshot> FromProto(const v1::ClusterSnapshot& p,
                                                      int64_t latest_unix = INT64_MAX);
v1::KernelEstimate ToProto(const char* kernel, const turnaround::KernelEstimate& e);
// A finished job's record as ListJobHistory returns it (unknown requested
// time and CPU ratio as 0, unknown CPU seconds as -1, as JobSpec and
// JobFinished take them; CPU seconds bounded by the run time as the kernels
// read them).
v1::JobHistoryRecord ToProto(const turnaround::JobRecord& r);
// A record ImportJobHistory takes: INVALID_ARGUMENT naming the job and the
// field unless the job passes CheckJobSpec, submit <= start <= finish <=
// latest_unix, cpu_seconds_per_task is finite and at most the run time +
// kCpuTimeSlackSeconds (below 0 = unknown), the queue and cluster fields are
// finite and >= 0, max_local_cpu_ratio <= 1, cluster_nodes <=
// turnaround::kSwfMaxNodes (0 = unknown; a replayed log's machine) and the
// policy is known (its mpl_limit is not kept). ToProto's inverse for every
// record it returns (a CPU time beyond the bound comes back bounded).
absl::StatusOr<turnaround::JobRecord> FromProto(const v1::JobHistoryRecord& p,
                                                int64_t latest_unix = INT64_MAX);

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_
