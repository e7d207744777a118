// Job, queue and cluster descriptions shared by the turnaround kernels
// (paper 002, CISNE, sections 3-5). Plain value types, no gRPC types: the
// predictor service converts its protos into these.
//
// Units: times in seconds (integers in a log, doubles inside the models),
// CPU as a fraction of one node's CPU (1.0 = one fully busy core/node).
#ifndef SOJOURN_MODELS_TURNAROUND_JOB_H_
#define SOJOURN_MODELS_TURNAROUND_JOB_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace sojourn::turnaround {

// Job Selection Policy (section 3): FCFS alone or FCFS + EASY backfilling.
enum class JobSelection { kFcfs, kEasyBackfilling };
// Node Selection Policy (section 3): Normal (least loaded nodes under the
// social contract) or Uniform (nodes with the same parallel co-residents,
// preferring co-residents of the other resource-bound kind).
enum class NodeSelection { kNormal, kUniform };

struct SchedulingPolicy {
  JobSelection job_selection = JobSelection::kFcfs;
  NodeSelection node_selection = NodeSelection::kNormal;
  // Multiprogramming limit MPL_paral: parallel tasks a node may hold at once
  // (the paper's Basic policy uses 1, the others 4). One task per node per job.
  int mpl_limit = 1;
};

absl::StatusOr<JobSelection> ParseJobSelection(const std::string& name);  // "fcfs" | "easy"
absl::StatusOr<NodeSelection> ParseNodeSelection(const std::string& name);  // "normal" | "uniform"
const char* JobSelectionName(JobSelection s);
const char* NodeSelectionName(NodeSelection s);

// What is known about a job at submit time. The paper's application ("Appl",
// section 4.1) is executable + input parameters + number of processors; a log
// has no input parameters, so sojourn keys applications by user, executable
// and size (see TemplateKey).
struct JobSpec {
  int64_t job_id = -1;
  int64_t submit_time = 0;
  int32_t user = -1;
  int32_t group = -1;
  int32_t executable = -1;
  int32_t queue = -1;
  // Number of tasks = number of nodes (one task per node), >= 1.
  int32_t procs = 1;
  // User's requested (wall-clock) time in seconds; -1 unknown.
  int64_t requested_time = -1;
  // Declared CPU(J) in isolation (fraction of a node, 0..1]; -1 unknown
  // (then taken from the job history, else 1).
  double cpu_fraction = -1;
};

// A job running at snapshot time.
struct RunningJob {
  JobSpec spec;
  int64_t start_time = 0;
  // Node indices into ClusterSnapshot::nodes, one per task.
  std::vector<int32_t> nodes;
  // CPU seconds used per task so far (CPUtime_cur); -1 unknown.
  double cpu_time_cur = -1;
};

// Local (owner) load on one node: CPU_local(n) and MPL_local(n) of section 4.2.
struct NodeState {
  double local_cpu = 0.0;
  int32_t local_tasks = 0;
};

// The queue and cluster state a request carries (section 4.2, "the following
// set of data models the cluster state").
struct ClusterSnapshot {
  int64_t now = 0;
  SchedulingPolicy policy;
  std::vector<NodeState> nodes;
  std::vector<RunningJob> running;
  // Waiting jobs in queue order, without the job being estimated.
  std::vector<JobSpec> waiting;
};

// A task uses at most one CPU (CPU(J) <= 1), so its CPU seconds are at most
// its run time; times are whole seconds, so a run of finish - start seconds
// may have lasted up to one second more. A finished job's CPU seconds per
// task above (finish - start) + this are refused, and a stored record's are
// read as at most that (see JobRecord::bounded_cpu_time_per_task).
inline constexpr double kCpuTimeSlackSeconds = 1.0;

// Longest a job estimated may have waited already: its submit is at most
// this long before the snapshot's now. The kernels' wait counts the time
// since the submit, but only the simulating kernels see it (the historical
// kernel learns waits from the history, not from the clock): a submit of 1
// (1970) with a current snapshot answered 56 years from the simulation and
// hybrid kernels and 0 from the historical one. No queue the kernels model
// holds a job that long (the evaluated logs wait hours to days); a year, the
// longest run time a job may request (kMaxRequestedSeconds in
// services/job_spec.h), is a bound no real wait reaches, while an unset or
// wrong clock or a time in the wrong unit lands beyond it.
inline constexpr int64_t kMaxWaitSeconds = 365 * 86400;

// INVALID_ARGUMENT when a finished job's tasks are said to have used more
// CPU seconds each than its run of `run_seconds` (finish - start) allows:
// the job history's check, which the broker applies before a job leaves its
// queue.
inline absl::Status CheckCpuTimePerTask(int64_t job_id, double cpu_seconds_per_task,
                                        int64_t run_seconds) {
  if (cpu_seconds_per_task <= static_cast<double>(run_seconds) + kCpuTimeSlackSeconds) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "job ", job_id, ": ", cpu_seconds_per_task,
      " CPU seconds per task is more than its run time of ", run_seconds, " s (finish - start, + ",
      kCpuTimeSlackSeconds, " s of clock granularity): a task uses at most one CPU"));
}

// One HistDB record (Table 1 of the paper: job state, queue state at submit
// and at start, cluster state at start).
struct JobRecord {
  JobSpec spec;
  int64_t wait_time = -1;   // start - submit
  int64_t exec_time = -1;   // finish - start
  // CPU seconds used per task over the whole run; -1 unknown.
  double cpu_time_per_task = -1;
  // Queue state: CPUtime_ahead (sum of the waiting jobs' CPU time when this job
  // was submitted) and CPUtime_backwards (same when it started), section 4.1.
  double cpu_ahead = 0;
  double cpu_backwards = 0;
  int32_t queue_len_submit = 0;
  int32_t queue_len_start = 0;
  // Cluster state at start: tasks sharing a node with this job
  // (SharedTasksCount of Algorithm 4) and the highest local CPU on its nodes.
  int32_t shared_tasks = 0;
  double max_local_cpu = 0;
  int64_t start_time = -1;  // absolute, -1 until started
  // Nodes of the cluster the job started on (the start snapshot's); -1 when
  // unknown (records written before sojourn kept it). An exported log's
  // MaxNodes (`sojourn export-jobs`).
  int32_t cluster_nodes = -1;
  JobSelection job_selection = JobSelection::kFcfs;
  NodeSelection node_selection = NodeSelection::kNormal;

  // True when this run had its nodes to itself (Algorithm 4 line 4).
  bool isolated() const { return shared_tasks == 0 && max_local_cpu <= 0.0; }
  // CPU seconds per task as the kernels use them: -1 when unknown (or not a
  // number, or the run time is unknown), else at most exec_time +
  // kCpuTimeSlackSeconds. Histories written before that bound was enforced
  // may hold any value (1e15 s made later waits of 1.4e11 h).
  double bounded_cpu_time_per_task() const {
    if (!(cpu_time_per_task >= 0) || exec_time < 0) return -1;
    return std::min(cpu_time_per_task, static_cast<double>(exec_time) + kCpuTimeSlackSeconds);
  }
  // Total CPU seconds over all tasks (bounded as above), or -1.
  double cpu_time_total() const {
    const double c = bounded_cpu_time_per_task();
    return c < 0 ? -1 : c * spec.procs;
  }
};

// A history template (Gibbons / Smith style, Table 1): records sharing a key
// at one level. Level 0 is the paper's application; coarser levels are the
// fallbacks used when an application has no history yet.
enum class TemplateLevel : uint8_t {
  kUserExecutableProcs = 0,  // the application (Appl)
  kUserExecutable = 1,
  kUserProcs = 2,
  kUser = 3,
  kQueueProcs = 4,
};
inline constexpr int kNumTemplateLevels = 5;

struct TemplateKey {
  TemplateLevel level = TemplateLevel::kUserExecutableProcs;
  int32_t a = -1, b = -1, c = -1;

  static TemplateKey For(const JobSpec& job, TemplateLevel level);
  bool operator==(const TemplateKey& o) const {
    return level == o.level && a == o.a && b == o.b && c == o.c;
  }
  template <typename H>
  friend H AbslHashValue(H h, const TemplateKey& k) {
    return H::combine(std::move(h), static_cast<uint8_t>(k.level), k.a, k.b, k.c);
  }
  std::string DebugString() const;
};

// Running sums over a template, kept by the store so that getCPUtime (Alg. 1
// line 3) is O(1).
struct TemplateStats {
  int64_t count = 0;
  double sum_exec = 0;
  double sum_wait = 0;
  int64_t cpu_count = 0;       // records with a known CPU time
  double sum_cpu_per_task = 0;
  double sum_cpu_total = 0;
  double sum_cpu_fraction = 0;  // over isolated runs with known CPU time
  int64_t isolated_cpu_count = 0;
  // ExecTime_total in isolation (section 4.2): CPU time / declared CPU(J)
  // when both are known, else the observed execution time.
  double sum_isolated_exec = 0;

  double mean_exec() const { return count ? sum_exec / count : -1; }
  double mean_cpu_per_task() const { return cpu_count ? sum_cpu_per_task / cpu_count : -1; }
  double mean_cpu_total() const { return cpu_count ? sum_cpu_total / cpu_count : -1; }
  double mean_isolated_exec() const { return count ? sum_isolated_exec / count : -1; }
  double mean_isolated_cpu_fraction() const {
    return isolated_cpu_count ? sum_cpu_fraction / isolated_cpu_count : -1;
  }
  void Add(const JobRecord& r);
  // False when sum_cpu_per_task exceeds what Add() can produce (the records'
  // run times plus kCpuTimeSlackSeconds each): sums written by an earlier
  // version from an unbounded CPU time (or not a number), to be rebuilt from
  // the records.
  bool CpuTimesBounded() const;
};

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_JOB_H_
