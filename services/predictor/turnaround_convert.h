// Conversions between the turnaround contract (turnaround.proto) and the
// CISNE library (models/turnaround), used by the predictor's RPCs.
#ifndef SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_
#define SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_

#include "absl/status/statusor.h"
#include "models/turnaround/estimator.h"
#include "sojourn/v1/turnaround.pb.h"

namespace sojourn::predictor {

// INVALID_ARGUMENT for procs < 1 or negative times.
absl::StatusOr<turnaround::JobSpec> FromProto(const v1::JobSpec& p);
// Largest snapshot the predictor simulates: running + waiting jobs, and
// nodes. An estimate costs about (jobs x events), so 60,000 jobs took ~30 s
// of CPU per call; the evaluated workloads (docs/EVALUATION-turnaround.md)
// queue at most a few hundred jobs on 64-128 nodes.
inline constexpr int kMaxSnapshotJobs = 10000;
inline constexpr int kMaxSnapshotNodes = 100000;

// INVALID_ARGUMENT for node indices outside the snapshot, malformed jobs and
// snapshots beyond kMaxSnapshotJobs / kMaxSnapshotNodes.
absl::StatusOr<turnaround::ClusterSnapshot> FromProto(const v1::ClusterSnapshot& p);
v1::KernelEstimate ToProto(const char* kernel, const turnaround::KernelEstimate& e);

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_TURNAROUND_CONVERT_H_
