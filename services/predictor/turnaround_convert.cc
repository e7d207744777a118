#include "services/predictor/turnaround_convert.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/text.h"
#include "models/turnaround/swf.h"
#include "services/job_spec.h"

namespace sojourn::predictor {

namespace {
// A policy CheckSchedulingPolicy accepted (mpl_limit 0 = 1).
turnaround::SchedulingPolicy FromProtoChecked(const v1::SchedulingPolicy& p) {
  turnaround::SchedulingPolicy out;
  out.job_selection = p.job_selection() == v1::JOB_SELECTION_EASY
                          ? turnaround::JobSelection::kEasyBackfilling
                          : turnaround::JobSelection::kFcfs;
  out.node_selection = p.node_selection() == v1::NODE_SELECTION_UNIFORM
                           ? turnaround::NodeSelection::kUniform
                           : turnaround::NodeSelection::kNormal;
  out.mpl_limit = p.mpl_limit() > 0 ? p.mpl_limit() : 1;
  return out;
}
}  // namespace

absl::StatusOr<turnaround::JobSpec> FromProto(const v1::JobSpec& p, int64_t latest_unix) {
  if (absl::Status s = CheckJobSpec(p, latest_unix); !s.ok()) return s;
  turnaround::JobSpec j;
  j.job_id = p.job_id();
  j.submit_time = p.submit_unix_seconds();
  j.user = p.user();
  j.group = p.group();
  j.executable = p.executable();
  j.queue = p.queue();
  j.procs = p.procs();
  j.requested_time = p.requested_seconds() > 0 ? p.requested_seconds() : -1;
  j.cpu_fraction = p.cpu_ratio() > 0 ? p.cpu_ratio() : -1;
  return j;
}

absl::StatusOr<turnaround::ClusterSnapshot> FromProto(const v1::ClusterSnapshot& p,
                                                      int64_t latest_unix) {
  // Checked before converting anything, so an oversized snapshot costs nothing.
  if (p.running_size() + static_cast<int64_t>(p.waiting_size()) > kMaxSnapshotJobs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster snapshot has ", p.running_size(), " running + ", p.waiting_size(),
        " waiting jobs; at most ", kMaxSnapshotJobs, " are supported"));
  }
  if (p.nodes_size() > kMaxSnapshotNodes) {
    return absl::InvalidArgumentError(absl::StrCat("cluster snapshot has ", p.nodes_size(),
                                                   " nodes; at most ", kMaxSnapshotNodes,
                                                   " are supported"));
  }
  const int64_t jobs = p.running_size() + static_cast<int64_t>(p.waiting_size());
  if (jobs * p.nodes_size() > kMaxSnapshotJobNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster snapshot has ", jobs, " jobs on ", p.nodes_size(),
        " nodes; jobs x nodes must be at most ", kMaxSnapshotJobNodes,
        " (each scheduling step costs about that much)"));
  }
  // Every snapshot (EstimateTurnaround, JobSubmitted, JobStarted) says when
  // it was taken: 0 (or no snapshot at all) is not a time.
  if (p.now_unix_seconds() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot now_unix_seconds must be > 0, got ", p.now_unix_seconds()));
  }
  if (p.now_unix_seconds() > latest_unix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot now_unix_seconds must be in (0, ", latest_unix,
        "] (the predictor's clock + skew), got ", p.now_unix_seconds()));
  }
  RETURN_IF_ERROR(CheckSchedulingPolicy(p.policy()));
  turnaround::ClusterSnapshot s;
  s.now = p.now_unix_seconds();
  s.policy = FromProtoChecked(p.policy());
  for (int i = 0; i < p.nodes_size(); ++i) {
    const v1::NodeState& n = p.nodes(i);
    if (!(n.local_cpu_ratio() >= 0 && n.local_cpu_ratio() <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", i, ": local_cpu_ratio must be in [0, 1], got ", n.local_cpu_ratio()));
    }
    // MPL_local multiplies run times (eq. 4-5) and is summed over nodes.
    if (n.local_tasks() < 0 || n.local_tasks() > kMaxLocalTasks) {
      return absl::InvalidArgumentError(absl::StrCat("node ", i, ": local_tasks must be in [0, ",
                                                     kMaxLocalTasks, "], got ", n.local_tasks()));
    }
    s.nodes.push_back({n.local_cpu_ratio(), n.local_tasks()});
  }
  // Job ids > 0 name one job each: listed twice, a job would be simulated
  // (and its CPU time counted) twice. 0 and -1 name no job and may repeat.
  absl::flat_hash_map<int64_t, const char*> listed;
  auto list_once = [&listed](int64_t id, const char* where) -> absl::Status {
    if (id <= 0) return absl::OkStatus();
    auto [it, inserted] = listed.emplace(id, where);
    if (inserted) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("cluster snapshot lists job ", id, " twice (",
                                                   it->second, ", then ", where,
                                                   "); job ids > 0 must be distinct"));
  };
  std::vector<char> seen(static_cast<size_t>(p.nodes_size()), 0);
  for (const v1::RunningJob& r : p.running()) {
    turnaround::RunningJob rj;
    ASSIGN_OR_RETURN(rj.spec, FromProto(r.spec(), latest_unix));
    const int64_t id = r.spec().job_id();
    // A job running at the snapshot started after 0, not before its submit
    // and not after the snapshot was taken.
    if (r.start_unix_seconds() <= 0 || r.start_unix_seconds() > p.now_unix_seconds()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": start_unix_seconds must be in (0, ", p.now_unix_seconds(),
          "] (the snapshot's now_unix_seconds), got ", r.start_unix_seconds()));
    }
    if (r.start_unix_seconds() < r.spec().submit_unix_seconds()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": start_unix_seconds ", r.start_unix_seconds(),
          " is before its spec.submit_unix_seconds ", r.spec().submit_unix_seconds()));
    }
    RETURN_IF_ERROR(list_once(id, "running"));
    if (!std::isfinite(r.cpu_seconds_per_task())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": cpu_seconds_per_task must be finite (-1 = unknown)"));
    }
    if (r.cpu_seconds_per_task() < 0 && r.cpu_seconds_per_task() != -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": cpu_seconds_per_task must be >= 0 (-1 = unknown), got ",
          r.cpu_seconds_per_task()));
    }
    // A task uses at most one CPU (cpu_ratio <= 1): no more CPU seconds than
    // it has run, as for a finished job (turnaround::kCpuTimeSlackSeconds).
    const double elapsed = static_cast<double>(p.now_unix_seconds() - r.start_unix_seconds());
    if (r.cpu_seconds_per_task() > elapsed + turnaround::kCpuTimeSlackSeconds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": cpu_seconds_per_task ", r.cpu_seconds_per_task(),
          " is more than the ", elapsed, " s it has run (now_unix_seconds - start_unix_seconds, + ",
          turnaround::kCpuTimeSlackSeconds, " s): a task uses at most one CPU"));
    }
    rj.start_time = r.start_unix_seconds();
    // One task per node, one node per task (JobSpec.procs tasks).
    if (r.nodes().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("running job ", id, ": nodes is empty (a start on no node)"));
    }
    if (r.nodes_size() != r.spec().procs()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "running job ", id, ": nodes lists ", r.nodes_size(), " nodes for spec.procs ",
          r.spec().procs(), " (one distinct node per task)"));
    }
    for (int32_t n : r.nodes()) {
      if (n < 0 || n >= p.nodes_size()) {
        return absl::InvalidArgumentError(absl::StrCat("running job ", id, ": node ", n,
                                                       " outside the snapshot's ",
                                                       p.nodes_size(), " nodes"));
      }
      rj.nodes.push_back(n);
    }
    for (int32_t n : r.nodes()) {
      if (seen[n]++ > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "running job ", id, ": nodes lists node ", n, " twice (one task per node)"));
      }
    }
    for (int32_t n : r.nodes()) seen[n] = 0;
    rj.cpu_time_cur = r.cpu_seconds_per_task();
    s.running.push_back(std::move(rj));
  }
  for (const v1::JobSpec& w : p.waiting()) {
    ASSIGN_OR_RETURN(turnaround::JobSpec j, FromProto(w, latest_unix));
    RETURN_IF_ERROR(list_once(w.job_id(), "waiting"));
    // A job waiting at the snapshot was submitted before it was taken (0 =
    // unknown, queued first); a later submit would put it behind jobs that
    // really came after it.
    if (w.submit_unix_seconds() > p.now_unix_seconds()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "waiting job ", w.job_id(), ": submit_unix_seconds ", w.submit_unix_seconds(),
          " is after the snapshot's now_unix_seconds ", p.now_unix_seconds()));
    }
    s.waiting.push_back(j);
  }
  return s;
}

namespace {
v1::TimeInterval ToProto(const turnaround::TimeEstimate& t) {
  v1::TimeInterval out;
  out.set_point_seconds(t.point);
  out.set_lo_seconds(t.lo);
  out.set_hi_seconds(t.hi);
  return out;
}
}  // namespace

v1::KernelEstimate ToProto(const char* kernel, const turnaround::KernelEstimate& e) {
  v1::KernelEstimate out;
  out.set_kernel(kernel);
  *out.mutable_wait() = ToProto(e.wait);
  *out.mutable_exec() = ToProto(e.exec);
  *out.mutable_turnaround() = ToProto(e.turnaround);
  out.set_from_history(e.from_history);
  out.set_matched_records(e.matched);
  return out;
}

v1::JobHistoryRecord ToProto(const turnaround::JobRecord& r) {
  v1::JobHistoryRecord p;
  v1::JobSpec* j = p.mutable_job();
  j->set_job_id(r.spec.job_id);
  j->set_submit_unix_seconds(r.spec.submit_time);
  j->set_user(r.spec.user);
  j->set_group(r.spec.group);
  j->set_executable(r.spec.executable);
  j->set_queue(r.spec.queue);
  j->set_procs(r.spec.procs);
  j->set_requested_seconds(r.spec.requested_time > 0 ? r.spec.requested_time : 0);
  j->set_cpu_ratio(r.spec.cpu_fraction > 0 ? r.spec.cpu_fraction : 0);
  p.set_start_unix_seconds(r.start_time);
  p.set_finish_unix_seconds(r.start_time + std::max<int64_t>(0, r.exec_time));
  // As the kernels read it: a history written before the bound may hold more.
  p.set_cpu_seconds_per_task(r.bounded_cpu_time_per_task());
  p.set_cpu_seconds_ahead(r.cpu_ahead);
  p.set_cpu_seconds_backwards(r.cpu_backwards);
  p.set_queue_length_at_submit(r.queue_len_submit);
  p.set_queue_length_at_start(r.queue_len_start);
  p.set_shared_tasks(r.shared_tasks);
  p.set_max_local_cpu_ratio(r.max_local_cpu);
  p.set_cluster_nodes(std::max(0, r.cluster_nodes));
  p.mutable_policy()->set_job_selection(
      r.job_selection == turnaround::JobSelection::kEasyBackfilling ? v1::JOB_SELECTION_EASY
                                                                    : v1::JOB_SELECTION_FCFS);
  p.mutable_policy()->set_node_selection(r.node_selection == turnaround::NodeSelection::kUniform
                                             ? v1::NODE_SELECTION_UNIFORM
                                             : v1::NODE_SELECTION_NORMAL);
  return p;
}

absl::StatusOr<turnaround::JobRecord> FromProto(const v1::JobHistoryRecord& p,
                                                int64_t latest_unix) {
  turnaround::JobRecord r;
  ASSIGN_OR_RETURN(r.spec, FromProto(p.job(), latest_unix));
  const int64_t id = r.spec.job_id;
  const int64_t start = p.start_unix_seconds(), finish = p.finish_unix_seconds();
  if (start < r.spec.submit_time || finish < start || finish > latest_unix) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", id, ": times must be submit <= start <= finish <= ", latest_unix,
                     " (the predictor's clock + skew), got submit ", r.spec.submit_time, ", start ",
                     start, ", finish ", finish));
  }
  r.start_time = start;
  r.wait_time = start - r.spec.submit_time;
  r.exec_time = finish - start;
  const double cpu = p.cpu_seconds_per_task();
  if (!std::isfinite(cpu)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", id, ": cpu_seconds_per_task must be finite"));
  }
  RETURN_IF_ERROR(turnaround::CheckCpuTimePerTask(id, cpu, r.exec_time));
  r.cpu_time_per_task = cpu >= 0 ? cpu : -1;
  const struct {
    const char* name;
    double value;
    double max;
  } fields[] = {
      {"cpu_seconds_ahead", p.cpu_seconds_ahead(), HUGE_VAL},
      {"cpu_seconds_backwards", p.cpu_seconds_backwards(), HUGE_VAL},
      {"queue_length_at_submit", static_cast<double>(p.queue_length_at_submit()), HUGE_VAL},
      {"queue_length_at_start", static_cast<double>(p.queue_length_at_start()), HUGE_VAL},
      {"shared_tasks", static_cast<double>(p.shared_tasks()), HUGE_VAL},
      {"max_local_cpu_ratio", p.max_local_cpu_ratio(), 1},
      // A replayed log's machine may be larger than a snapshot (ReadSwf's limit).
      {"cluster_nodes", static_cast<double>(p.cluster_nodes()),
       static_cast<double>(turnaround::kSwfMaxNodes)},
  };
  for (const auto& f : fields) {
    if (!(f.value >= 0 && f.value <= f.max && std::isfinite(f.value))) {
      // Every digit of the value: StrCat's 6 would print 1000001 as 1e+06.
      std::string got;
      AppendShortest(&got, f.value);
      return absl::InvalidArgumentError(
          absl::StrCat("job ", id, ": ", f.name, " must be ",
                       std::isfinite(f.max) ? absl::StrCat("in [0, ", f.max, "]") : "a number >= 0",
                       ", got ", got));
    }
  }
  r.cpu_ahead = p.cpu_seconds_ahead();
  r.cpu_backwards = p.cpu_seconds_backwards();
  r.queue_len_submit = p.queue_length_at_submit();
  r.queue_len_start = p.queue_length_at_start();
  r.shared_tasks = p.shared_tasks();
  r.max_local_cpu = p.max_local_cpu_ratio();
  r.cluster_nodes = p.cluster_nodes() > 0 ? p.cluster_nodes() : -1;
  RETURN_IF_ERROR(CheckSchedulingPolicy(p.policy()));
  const turnaround::SchedulingPolicy policy = FromProtoChecked(p.policy());
  r.job_selection = policy.job_selection;
  r.node_selection = policy.node_selection;
  return r;
}

}  // namespace sojourn::predictor
