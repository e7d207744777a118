#include "models/turnaround/job.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sojourn::turnaround {

absl::StatusOr<JobSelection> ParseJobSelection(const std::string& name) {
  if (name == "fcfs") return JobSelection::kFcfs;
  if (name == "easy" || name == "backfilling" || name == "bf") return JobSelection::kEasyBackfilling;
  return absl::InvalidArgumentError(absl::StrCat("unknown job selection policy '", name,
                                                 "' (want fcfs or easy)"));
}

absl::StatusOr<NodeSelection> ParseNodeSelection(const std::string& name) {
  if (name == "normal") return NodeSelection::kNormal;
  if (name == "uniform") return NodeSelection::kUniform;
  return absl::InvalidArgumentError(absl::StrCat("unknown node selection policy '", name,
                                                 "' (want normal or uniform)"));
}

const char* JobSelectionName(JobSelection s) {
  return s == JobSelection::kFcfs ? "fcfs" : "easy";
}
const char* NodeSelectionName(NodeSelection s) {
  return s == NodeSelection::kNormal ? "normal" : "uniform";
}

TemplateKey TemplateKey::For(const JobSpec& job, TemplateLevel level) {
  TemplateKey k;
  k.level = level;
  switch (level) {
    case TemplateLevel::kUserExecutableProcs:
      k.a = job.user, k.b = job.executable, k.c = job.procs;
      break;
    case TemplateLevel::kUserExecutable:
      k.a = job.user, k.b = job.executable;
      break;
    case TemplateLevel::kUserProcs:
      k.a = job.user, k.c = job.procs;
      break;
    case TemplateLevel::kUser:
      k.a = job.user;
      break;
    case TemplateLevel::kQueueProcs:
      k.a = job.queue, k.c = job.procs;
      break;
  }
  return k;
}

std::string TemplateKey::DebugString() const {
  return absl::StrCat("L", static_cast<int>(level), "(", a, ",", b, ",", c, ")");
}

void TemplateStats::Add(const JobRecord& r) {
  ++count;
  sum_exec += std::max<int64_t>(r.exec_time, 0);
  sum_wait += std::max<int64_t>(r.wait_time, 0);
  // Bounded by the run time: an absurd CPU time in an older record must not
  // stretch every later estimate of the template (getCPUtime, ExecTime_total).
  const double cpu = r.bounded_cpu_time_per_task();
  if (cpu >= 0 && r.spec.cpu_fraction > 0) {
    sum_isolated_exec += cpu / std::min(1.0, r.spec.cpu_fraction);
  } else {
    sum_isolated_exec += std::max<int64_t>(r.exec_time, 0);
  }
  if (cpu >= 0) {
    ++cpu_count;
    sum_cpu_per_task += cpu;
    sum_cpu_total += r.cpu_time_total();
    if (r.isolated() && r.exec_time > 0) {
      ++isolated_cpu_count;
      sum_cpu_fraction += std::min(1.0, cpu / r.exec_time);
    }
  }
}

bool TemplateStats::CpuTimesBounded() const {
  // Every record adds at most exec_time + kCpuTimeSlackSeconds to
  // sum_cpu_per_task and at least exec_time to sum_exec; the relative margin
  // absorbs rounding of the sums.
  const double bound = sum_exec + kCpuTimeSlackSeconds * static_cast<double>(cpu_count);
  return sum_cpu_per_task <= bound * (1 + 1e-9) + 1e-6;
}

}  // namespace sojourn::turnaround
