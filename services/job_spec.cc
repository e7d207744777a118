#include "services/job_spec.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sojourn {

absl::Status CheckRecordedJobId(int64_t job_id) {
  if (job_id > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "job_id must be > 0 for a job the queue or the job history keeps, got ", job_id));
}

absl::Status CheckJobId(int64_t job_id) {
  if (job_id >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("job_id must be >= 0 (0 = a job without an id), got ", job_id));
}

absl::Status CheckJobSpec(const v1::JobSpec& p, int64_t latest_unix) {
  RETURN_IF_ERROR(CheckJobId(p.job_id()));
  if (p.procs() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", p.job_id(), ": procs must be >= 1, got ", p.procs()));
  }
  if (p.submit_unix_seconds() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job ", p.job_id(), ": negative submit time"));
  }
  if (p.submit_unix_seconds() > latest_unix) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", p.job_id(), ": submit_unix_seconds ", p.submit_unix_seconds(),
                     " is in the future (after ", latest_unix, ", the service's clock + skew)"));
  }
  if (p.requested_seconds() < -1 || p.requested_seconds() > kMaxRequestedSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", p.job_id(), ": requested_seconds must be in [1, ", kMaxRequestedSeconds,
        "] (-1 or 0 = unknown), got ", p.requested_seconds()));
  }
  if (!(p.cpu_ratio() >= 0 && p.cpu_ratio() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", p.job_id(), ": cpu_ratio must be in [0, 1] (0 = unknown), got ", p.cpu_ratio()));
  }
  const struct {
    const char* name;
    int32_t value;
  } ids[] = {{"user", p.user()},
             {"group", p.group()},
             {"executable", p.executable()},
             {"queue", p.queue()}};
  for (const auto& id : ids) {
    if (id.value < -1) {
      return absl::InvalidArgumentError(absl::StrCat("job ", p.job_id(), ": ", id.name,
                                                     " must be >= -1 (-1 = unknown), got ",
                                                     id.value));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSchedulingPolicy(const v1::SchedulingPolicy& p) {
  if (!v1::JobSelection_IsValid(p.job_selection()) ||
      !v1::NodeSelection_IsValid(p.node_selection())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown scheduling policy: job_selection ",
                                                   p.job_selection(), ", node_selection ",
                                                   p.node_selection()));
  }
  if (p.mpl_limit() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mpl_limit must be >= 0 (0 = 1), got ", p.mpl_limit()));
  }
  return absl::OkStatus();
}

}  // namespace sojourn
