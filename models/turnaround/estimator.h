// CISNE's turnaround prediction engine (paper 002, section 4): the
// Historical (Algorithms 1-2), Simulation (Algorithm 3 with equations 1-12)
// and Hybrid (Algorithm 4) kernels, plus the baselines user_estimate,
// last_two (Tsafrir et al.) and template_mean (Smith et al.), over a HistDB.
//
// A request carries the job, the queue and the cluster snapshot; the result
// has each kernel's waiting, execution and turnaround time with an interval.
// No gRPC types: the predictor's EstimateTurnaround and job-event RPCs are
// thin adapters over TurnaroundEstimator.
//
//   InMemoryHistDb db;  // or RocksHistDb::Open(dir, {})
//   TurnaroundEstimator est(db, EstimatorOptions{});
//   est.OnSubmitted(job, snapshot_at_submit);   // job events feed HistDB
//   ASSIGN_OR_RETURN(TurnaroundResult r, est.Estimate({job, snapshot}));
//   r.hybrid.turnaround.point, r.hybrid.turnaround.lo, ...
#ifndef SOJOURN_MODELS_TURNAROUND_ESTIMATOR_H_
#define SOJOURN_MODELS_TURNAROUND_ESTIMATOR_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/turnaround/hist_db.h"
#include "models/turnaround/job.h"

namespace sojourn::turnaround {

enum class Kernel {
  kHistorical = 0,
  kSimulation = 1,
  kHybrid = 2,
  kUserEstimate = 3,
  kLastTwo = 4,
  kTemplateMean = 5,
};
inline constexpr int kNumKernels = 6;
// "historical", "simulation", "hybrid", "user_estimate", "last_two", "template_mean".
const char* KernelName(Kernel k);

// RemTime approaches of section 4.2.2 and CPUtime_cur approaches of 4.2.3.
enum class RemTimeMethod { kProp, kMpl, kCpu };
enum class CpuTimeMethod { kMpl, kCpu };

struct EstimatorOptions {
  // Algorithm 2 line 5: relative |CPUtime_ahead| difference for "similar".
  // Default 0.05 (the paper's 5 %).
  double similarity_threshold = 0.05;
  // Newest records read from one template per estimate; bounds the cost of an
  // estimate whatever the size of HistDB. Default 500 (the paper reads about
  // 50 records per search out of 10,000).
  int history_window = 500;
  // Simulation kernel: the paper's final choice, RemTime by MPL (eq. 3-5) and
  // CPUtime_cur by CPU (eq. 11-12).
  RemTimeMethod remtime = RemTimeMethod::kMpl;
  CpuTimeMethod cputime = CpuTimeMethod::kCpu;
  // Intervals: central coverage target (0.8 = 10th..90th percentile) of the
  // recent log-residuals of each kernel; until `min_calibration` outcomes are
  // known the interval comes from the matched history (Historical) or is
  // [point/2, 2*point].
  double interval_coverage = 0.8;
  int calibration_window = 2000;
  int min_calibration = 30;
};

struct TimeEstimate {
  double point = 0;  // seconds
  double lo = 0;
  double hi = 0;
};

struct KernelEstimate {
  TimeEstimate wait;
  TimeEstimate exec;
  TimeEstimate turnaround;
  // True if the job's own history (any template level) was used.
  bool from_history = false;
  // Template level the history came from, when from_history.
  TemplateLevel level = TemplateLevel::kUserExecutableProcs;
  // History records matched (Historical: the SimilarJobList size).
  int matched = 0;
};

struct EstimateRequest {
  JobSpec job;
  ClusterSnapshot snapshot;
  // Optional: polled by the simulation kernels once per simulated event;
  // when it returns true the estimate stops with CANCELLED (e.g. the RPC's
  // client gave up). Must be safe to call from the estimating thread.
  std::function<bool()> cancelled;
};

// The estimate last made for a job (EstimateTurnaround with its id) against
// what happened, for one kernel and one time, seconds: OnFinished's `scored`.
struct ScoredEstimate {
  Kernel kernel = Kernel::kHistorical;
  int quantity = 0;  // 0 = wait, 1 = run (execution), 2 = turnaround
  double predicted = 0;
  double lo = 0, hi = 0;  // the interval given with it
  double observed = 0;
};

struct TurnaroundResult {
  KernelEstimate historical;
  KernelEstimate simulation;
  KernelEstimate hybrid;
};

// Thread-safe: estimates may run concurrently; events and estimates may
// interleave. `db` must outlive the estimator.
class TurnaroundEstimator {
 public:
  TurnaroundEstimator(HistDb& db, const EstimatorOptions& options);

  // The three CISNE kernels for one job. InvalidArgument on a malformed
  // request (see ValidateRequest); Cancelled when request.cancelled() says so.
  absl::StatusOr<TurnaroundResult> Estimate(const EstimateRequest& request);
  // One kernel (CISNE kernel or baseline).
  absl::StatusOr<KernelEstimate> EstimateWith(Kernel kernel, const EstimateRequest& request);

  // Job events (section 4.1, "information collected by CISNE on runtime").
  // `snapshot` is the queue/cluster state at the event, without the job
  // itself in `waiting` (a started job may be among `running`: it is left
  // out of its own SharedTasksCount). Unknown job ids on start, finish and
  // cancel are NotFound; a start before the submit, a start on no node, a
  // finish before the start or a non-finite CPU time are InvalidArgument.
  // Pending jobs live in HistDB, so they survive a restart. Events are
  // serialized, so the state checks below hold under concurrent events.
  //
  // OnSubmitted: AlreadyExists while `job.job_id` is pending (waiting or
  // running); an id may be submitted again once it finished or was cancelled.
  absl::Status OnSubmitted(const JobSpec& job, const ClusterSnapshot& snapshot);
  // FailedPrecondition if the job already started.
  absl::Status OnStarted(int64_t job_id, int64_t start_time, const std::vector<int32_t>& nodes,
                         const ClusterSnapshot& snapshot);
  // `cpu_time_per_task` < 0 when unknown; more than (finish - start) +
  // kCpuTimeSlackSeconds is InvalidArgument (a task uses at most one CPU).
  // FailedPrecondition ("has not started") for a job that never started.
  // Appends the finished record to HistDB and feeds the interval
  // calibration with the estimates made for this job.
  // With `scored`, appends the estimates last made for this job, one per
  // kernel and time, against the times observed, and the user's requested
  // time as the user_estimate kernel's run time beside them. Only a forecast
  // is scored (and calibrates the intervals): an estimate made before the job
  // started, for the submit time, procs and requested time it was submitted
  // with; none when the job was never so estimated under its id, or its
  // estimates were forgotten. Nothing is scored unless the record is stored.
  absl::Status OnFinished(int64_t job_id, int64_t finish_time, double cpu_time_per_task,
                          std::vector<ScoredEstimate>* scored = nullptr);
  // Drops a job that left the queue without running (cancelled).
  absl::Status OnCancelled(int64_t job_id);

  // CPU time (all tasks) HistDB expects `job` to use: getCPUtime of
  // Algorithm 1 line 3, falling back to coarser templates, then to the
  // requested time x procs.
  absl::StatusOr<double> ExpectedCpuTime(const JobSpec& job) const;

  const EstimatorOptions& options() const { return options_; }
  HistDb& db() const { return db_; }

 private:
  struct Calibrator {
    std::deque<double> residuals;  // log1p(observed) - log1p(predicted)
    int since_refresh = 0;
    double q_lo = 0, q_hi = 0;
    bool ready = false;
  };
  // [kernel][wait, exec, turnaround][point, lo, hi]
  using Predictions = std::array<std::array<std::array<double, 3>, 3>, kNumKernels>;

  // The estimates last made for a job under its id, and what they were
  // made for: OnFinished scores them only when they match the job it saw.
  struct Remembered {
    int64_t submit_time = 0;
    int32_t procs = 0;
    int64_t requested_time = -1;
    int64_t estimated_at = 0;  // the snapshot's now
    Predictions predictions;
  };

  absl::StatusOr<KernelEstimate> Run(Kernel kernel, const EstimateRequest& request);
  // Validated, computed and given its interval; not remembered.
  absl::StatusOr<KernelEstimate> EstimateOne(Kernel kernel, const EstimateRequest& request);
  void ApplyInterval(Kernel kernel, KernelEstimate* e);
  // Remembers `estimates` (made together, for one request) for the job's
  // finish; not for a job without an id or one already started.
  void Remember(const EstimateRequest& request,
                std::initializer_list<std::pair<Kernel, const KernelEstimate*>> estimates);

  HistDb& db_;
  EstimatorOptions options_;
  // Held by each job event across reading and writing the job's pending
  // record; taken before mu_.
  absl::Mutex events_mu_;
  absl::Mutex mu_;
  std::array<std::array<Calibrator, 3>, kNumKernels> calibrators_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, Remembered> predictions_ ABSL_GUARDED_BY(mu_);
};

// Validates a request: procs >= 1, a snapshot with nodes, running jobs' node
// indices inside it, waiting jobs with procs in [1, the snapshot's nodes] (a
// larger one could never start; the target's own procs beyond the nodes is
// FailedPrecondition from the kernels: that is the answer), the job
// submitted at most kMaxWaitSeconds before the snapshot's now, and the job
// itself not in the snapshot (CheckSelfInSnapshot). InvalidArgument
// otherwise, naming the job.
absl::Status ValidateRequest(const EstimateRequest& request);

// The job a request or event is about (`what`: "estimated", "submitted",
// "started") in the snapshot that goes with it; ids <= 0 name no job and are
// not looked for. An estimate and a submit see the cluster without the job:
// listed there too, it would be simulated twice (or, waiting, dropped from
// its place in the queue) or its own CPU time counted ahead of it. A start's
// snapshot (`started` not null) may hold the job among the running jobs,
// where it now is (the broker's does; OnStarted leaves it out of its own
// SharedTasksCount), but only as the event says: started at
// started->start_time on the nodes started->nodes; never among the waiting
// jobs. InvalidArgument naming the job otherwise.
absl::Status CheckSelfInSnapshot(const char* what, int64_t job_id,
                                 const ClusterSnapshot& snapshot,
                                 const RunningJob* started = nullptr);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_ESTIMATOR_H_
