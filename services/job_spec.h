// The checks every service applies to a v1::JobSpec it takes (turnaround.proto):
// the predictor on EstimateTurnaround and RecordJobEvent, the broker on
// SubmitJob. One function, so that a job the broker queues is one the
// predictor accepts: a queued job the predictor refused would make every
// snapshot of the queue, and with it every later estimate and job event,
// fail on that one job.
#ifndef SOJOURN_SERVICES_JOB_SPEC_H_
#define SOJOURN_SERVICES_JOB_SPEC_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sojourn/v1/turnaround.pb.h"

namespace sojourn {

// Requested run times are at most a year.
inline constexpr int64_t kMaxRequestedSeconds = 365 * 86400;

// INVALID_ARGUMENT, naming the job and the field, for procs < 1, a submit
// time outside [0, latest_unix], a requested time outside
// [-1, kMaxRequestedSeconds] (-1 or 0 = unknown), cpu_ratio outside [0, 1]
// (0 = unknown), or a user, group, executable or queue id below -1
// (-1 = unknown, as in the Standard Workload Format).
absl::Status CheckJobSpec(const v1::JobSpec& p, int64_t latest_unix = INT64_MAX);

// INVALID_ARGUMENT for an unknown job or node selection or mpl_limit < 0
// (0 = the default, 1).
absl::Status CheckSchedulingPolicy(const v1::SchedulingPolicy& p);

}  // namespace sojourn

#endif  // SOJOURN_SERVICES_JOB_SPEC_H_
