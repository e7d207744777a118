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

// How far after a service's clock the times of a job may be (submit, start,
// finish; a snapshot's now): the predictor's default --max_clock_skew_seconds,
// and the broker's limit on the times its job queue takes. One value for
// both, so that a job event the broker queues is one the predictor's job
// history records: with a larger broker limit (it used to be the broker's 2 h
// --max_clock_skew_seconds for host samples), a job submitted 1-2 h ahead was
// queued while the history refused its events for good. The predictor's flag
// may only raise it (its clock may lag the broker's).
inline constexpr int64_t kMaxJobClockSkewSeconds = 3600;

// INVALID_ARGUMENT, naming the job and the field, for a negative job_id
// (CheckJobId), procs < 1, a submit time outside [0, latest_unix], a
// requested time outside [-1, kMaxRequestedSeconds] (-1 or 0 = unknown),
// cpu_ratio outside [0, 1] (0 = unknown), or a user, group, executable or
// queue id below -1 (-1 = unknown, as in the Standard Workload Format).
absl::Status CheckJobSpec(const v1::JobSpec& p, int64_t latest_unix = INT64_MAX);

// Job ids. A job the broker's queue or the predictor's job history keeps
// (SubmitJob, StartJob, FinishJob, every RecordJobEvent) is named by an id
// > 0: the queue and the history key on it, and 0 is protobuf's default, what
// a client that forgot the field sends. The job estimated
// (EstimateTurnaround, EstimateJobTurnaround) and the jobs of a snapshot may
// have id 0: a job without an id (a what-if job, one known only to the
// caller), never looked up and never remembered. Negative ids are refused
// everywhere. INVALID_ARGUMENT naming the id otherwise.
absl::Status CheckRecordedJobId(int64_t job_id);
absl::Status CheckJobId(int64_t job_id);

// INVALID_ARGUMENT for an unknown job or node selection or mpl_limit < 0
// (0 = the default, 1).
absl::Status CheckSchedulingPolicy(const v1::SchedulingPolicy& p);

}  // namespace sojourn

#endif  // SOJOURN_SERVICES_JOB_SPEC_H_
