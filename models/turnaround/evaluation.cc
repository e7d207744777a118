#include "models/turnaround/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "models/turnaround/offline_sim.h"

namespace sojourn::turnaround {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Prediction {
  bool has = false;
  // [kernel][metric] metric 0 turnaround, 1 wait, 2 exec
  double point[kNumKernels][3];
  double lo[kNumKernels][3];
  double hi[kNumKernels][3];
  bool ok[kNumKernels];
};

class Scorer {
 public:
  Scorer(size_t jobs, const EvalConfig& config, int64_t total)
      : predictions_(jobs),
        config_(config),
        total_(total),
        begin_(SteadyClock::now()),
        last_progress_(begin_) {}

  absl::Status EstimateAll(size_t index, TurnaroundEstimator& est, const EstimateRequest& req) {
    Prediction& p = predictions_[index];
    p.has = true;
    queue_sum_ += req.snapshot.waiting.size();
    for (int k = 0; k < kNumKernels; ++k) {
      const auto t0 = SteadyClock::now();
      absl::StatusOr<KernelEstimate> e = est.EstimateWith(static_cast<Kernel>(k), req);
      const auto t1 = SteadyClock::now();
      costs_[k].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      p.ok[k] = e.ok();
      if (!e.ok()) {
        if (e.status().code() != absl::StatusCode::kFailedPrecondition) return e.status();
        ++failures_;
        continue;
      }
      const TimeEstimate* m[3] = {&e->turnaround, &e->wait, &e->exec};
      for (int i = 0; i < 3; ++i) {
        p.point[k][i] = m[i]->point;
        p.lo[k][i] = m[i]->lo;
        p.hi[k][i] = m[i]->hi;
      }
    }
    ++estimated_;
    // Every 5 % of the jobs, and at least every 10 s on a slow run (a large
    // machine costs about 0.05-0.3 us per node and estimate).
    const auto now = SteadyClock::now();
    if (config_.progress && total_ > 0 &&
        (estimated_ % std::max<int64_t>(1, total_ / 20) == 0 ||
         now - last_progress_ >= std::chrono::seconds(10))) {
      Progress(now, "");
    }
    return absl::OkStatus();
  }

  // Simulate: called every few thousand simulation events. Between two
  // arrivals, and after the last, nothing is estimated while the local load
  // and the running jobs are simulated; the line every 10 s goes on.
  void Tick(double sim_seconds) {
    const auto now = SteadyClock::now();
    if (config_.progress && total_ > 0 && now - last_progress_ >= std::chrono::seconds(10)) {
      Progress(now, absl::StrFormat(" (simulating %.0f s of the log)", sim_seconds - first_submit_));
    }
  }
  void set_first_submit(double t) { first_submit_ = t; }

  void Observe(size_t index, double wait, double exec) {
    const Prediction& p = predictions_[index];
    if (!p.has) return;
    ++scored_;
    const double obs[3] = {wait + exec, wait, exec};
    for (int k = 0; k < kNumKernels; ++k) {
      if (!p.ok[k]) continue;
      for (int i = 0; i < 3; ++i) acc_[k][i].Add(p.point[k][i], p.lo[k][i], p.hi[k][i], obs[i]);
    }
  }

  EvalReport Report() {
    EvalReport r;
    for (int k = 0; k < kNumKernels; ++k) {
      for (int i = 0; i < 3; ++i) r.summary[k][i] = acc_[k][i].Summary();
      std::vector<double>& c = costs_[k];
      if (!c.empty()) {
        double sum = 0;
        for (double x : c) sum += x;
        r.cost_us_mean[k] = sum / c.size();
        std::nth_element(c.begin(), c.begin() + c.size() / 2, c.end());
        r.cost_us_median[k] = c[c.size() / 2];
      }
    }
    r.jobs_estimated = estimated_;
    r.jobs_scored = scored_;
    r.estimate_failures = failures_;
    r.mean_queue_length = estimated_ ? static_cast<double>(queue_sum_) / estimated_ : 0;
    r.seconds = std::chrono::duration<double>(SteadyClock::now() - begin_).count();
    return r;
  }

 private:
  std::vector<Prediction> predictions_;
  const EvalConfig& config_;
  void Progress(SteadyClock::time_point now, const std::string& extra) {
    last_progress_ = now;
    config_.progress(absl::StrFormat("turnaround: %d/%d jobs estimated%s, %.0f s", estimated_,
                                     total_, extra,
                                     std::chrono::duration<double>(now - begin_).count()));
  }

  int64_t total_;
  SteadyClock::time_point begin_;
  SteadyClock::time_point last_progress_;
  double first_submit_ = 0;
  std::array<std::array<MetricAccumulator, 3>, kNumKernels> acc_;
  std::array<std::vector<double>, kNumKernels> costs_;
  int64_t estimated_ = 0, scored_ = 0, failures_ = 0;
  int64_t queue_sum_ = 0;
};

std::vector<SwfJob> SelectJobs(const SwfLog& log, int64_t max_jobs) {
  std::vector<SwfJob> jobs = log.jobs;
  if (max_jobs > 0 && static_cast<int64_t>(jobs.size()) > max_jobs) jobs.resize(max_jobs);
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const SwfJob& a, const SwfJob& b) { return a.submit_time < b.submit_time; });
  return jobs;
}

// Requested time for jobs whose log entry has none: the largest one in the log.
int64_t FillRequested(const std::vector<SwfJob>& jobs) {
  int64_t m = -1;
  for (const SwfJob& j : jobs) m = std::max(m, j.requested_time);
  if (m <= 0) {
    for (const SwfJob& j : jobs) m = std::max(m, j.run_time);
  }
  return m;
}

// With `estimate` false, only the job events reach the history (ReplayHistory).
absl::StatusOr<EvalReport> RunReplay(const SwfLog& log, const EvalConfig& config, HistDb& db,
                                     bool estimate = true) {
  std::vector<SwfJob> jobs = SelectJobs(log, config.max_jobs);
  int64_t max_procs = 1;
  for (const SwfJob& j : jobs) max_procs = std::max(max_procs, j.procs());
  const int cluster = static_cast<int>(log.header.cluster_size() > 0 ? log.header.cluster_size() : max_procs);
  const int64_t fill = FillRequested(jobs);
  std::vector<JobSpec> specs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    specs[i] = ToJobSpec(jobs[i]);
    if (specs[i].requested_time <= 0) specs[i].requested_time = fill;
    specs[i].procs = std::min(specs[i].procs, cluster);
    specs[i].job_id = static_cast<int64_t>(i);  // unique even if the log repeats numbers
  }
  // Same-second order: finishes free nodes first, then submits, cancels and
  // starts; a zero-length job finishes after its own start.
  enum Type { kFinish = 0, kSubmit = 1, kCancel = 2, kStart = 3, kInstantFinish = 4 };
  struct Event {
    int64_t time;
    int type;
    int idx;
  };
  std::vector<Event> events;
  events.reserve(jobs.size() * 3);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SwfJob& j = jobs[i];
    if (j.wait_time < 0) continue;  // never known to leave the queue
    const int idx = static_cast<int>(i);
    events.push_back({j.submit_time, kSubmit, idx});
    const int64_t start = j.submit_time + j.wait_time;
    if (j.run_time >= 0) {
      events.push_back({start, kStart, idx});
      events.push_back({start + j.run_time, j.run_time > 0 ? kFinish : kInstantFinish, idx});
    } else {
      events.push_back({start, kCancel, idx});
    }
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.type != b.type) return a.type < b.type;
    return a.idx < b.idx;
  });
  TurnaroundEstimator est(db, config.estimator);
  int64_t to_estimate = 0;
  for (const SwfJob& j : jobs) to_estimate += j.wait_time >= 0;
  // Without estimates nothing is scored: no prediction per job to keep.
  Scorer scorer(estimate ? jobs.size() : 0, config, to_estimate);
  auto last_progress = SteadyClock::now();
  int64_t finished = 0, to_finish = 0;
  for (const SwfJob& j : jobs) to_finish += j.has_turnaround();

  std::set<int> waiting;
  std::vector<int> running;  // job indices
  std::vector<std::vector<int32_t>> nodes_of(jobs.size());
  std::vector<char> used(cluster, 0);
  int64_t now = 0;
  auto snapshot = [&]() {
    ClusterSnapshot s;
    s.now = now;
    s.policy = config.policy;
    s.nodes.resize(cluster);
    s.running.reserve(running.size());
    for (int r : running) {
      RunningJob rj;
      rj.spec = specs[r];
      rj.start_time = jobs[r].submit_time + jobs[r].wait_time;
      rj.nodes = nodes_of[r];
      s.running.push_back(std::move(rj));
    }
    s.waiting.reserve(waiting.size());
    for (int w : waiting) s.waiting.push_back(specs[w]);
    return s;
  };
  for (const Event& ev : events) {
    now = ev.time;
    const int i = ev.idx;
    switch (ev.type) {
      case kSubmit: {
        EstimateRequest req{specs[i], snapshot()};
        if (estimate) RETURN_IF_ERROR(scorer.EstimateAll(i, est, req));
        RETURN_IF_ERROR(est.OnSubmitted(specs[i], req.snapshot));
        waiting.insert(i);
        break;
      }
      case kCancel:
        waiting.erase(i);
        RETURN_IF_ERROR(est.OnCancelled(i));
        break;
      case kStart: {
        waiting.erase(i);
        // The log has no node numbers: take the lowest free nodes (the log
        // may overlap jobs slightly; then nodes are shared).
        std::vector<int32_t>& nodes = nodes_of[i];
        for (int n = 0; n < cluster && static_cast<int>(nodes.size()) < specs[i].procs; ++n) {
          if (!used[n]) nodes.push_back(n);
        }
        for (int n = 0; static_cast<int>(nodes.size()) < specs[i].procs; ++n) {
          if (used[n]) nodes.push_back(n);
        }
        for (int32_t n : nodes) used[n] = 1;
        running.push_back(i);
        RETURN_IF_ERROR(est.OnStarted(i, now, nodes, snapshot()));
        break;
      }
      case kFinish:
      case kInstantFinish: {
        running.erase(std::find(running.begin(), running.end(), i));
        for (int32_t n : nodes_of[i]) used[n] = 0;
        // Other running jobs may share a node after an overlap in the log.
        for (int r : running) {
          for (int32_t n : nodes_of[r]) used[n] = 1;
        }
        // A log's CPU time beyond the run time (3 jobs of SDSC-SP2) is a
        // wrong measure the history refuses: unknown.
        const double cpu = jobs[i].avg_cpu_time >= 0 &&
                                   jobs[i].avg_cpu_time <= jobs[i].run_time + kCpuTimeSlackSeconds
                               ? jobs[i].avg_cpu_time
                               : -1;
        RETURN_IF_ERROR(est.OnFinished(i, now, cpu));
        if (estimate) {
          scorer.Observe(i, static_cast<double>(jobs[i].wait_time),
                         static_cast<double>(jobs[i].run_time));
        } else if (++finished % 1000 == 0 && config.progress) {
          // (With estimates, the scorer reports.)
          const auto t = SteadyClock::now();
          if (t - last_progress >= std::chrono::seconds(10)) {
            last_progress = t;
            config.progress(absl::StrFormat("replay: %d of %d jobs finished", finished, to_finish));
          }
        }
        break;
      }
    }
  }
  EvalReport report = scorer.Report();
  report.jobs_in_log = static_cast<int64_t>(jobs.size());
  report.cluster_nodes = cluster;
  return report;
}

absl::StatusOr<EvalReport> RunSimulate(const SwfLog& log, const EvalConfig& config, HistDb& db) {
  std::vector<SwfJob> all = SelectJobs(log, config.max_jobs);
  int64_t max_procs = 1;
  for (const SwfJob& j : all) max_procs = std::max(max_procs, j.procs());
  const double log_size =
      static_cast<double>(log.header.cluster_size() > 0 ? log.header.cluster_size() : max_procs);
  const int64_t fill = FillRequested(all);
  std::vector<OfflineJob> jobs;
  jobs.reserve(all.size());
  for (const SwfJob& j : all) {
    if (j.run_time < 0 || j.procs() <= 0) continue;  // never ran: nothing to simulate
    OfflineJob o;
    o.spec = ToJobSpec(j);
    o.spec.job_id = static_cast<int64_t>(jobs.size());
    o.spec.procs = std::clamp(
        static_cast<int>(std::ceil(j.procs() * config.nodes / log_size - 1e-9)), 1, config.nodes);
    if (o.spec.requested_time <= 0) o.spec.requested_time = fill;
    o.runtime = static_cast<double>(j.run_time);
    o.cpu_fraction = (j.avg_cpu_time > 0 && j.run_time > 0)
                         ? std::clamp(j.avg_cpu_time / j.run_time, 0.05, 1.0)
                         : 1.0;
    // The application characterization of section 4.2 (CPU % when run alone).
    o.spec.cpu_fraction = o.cpu_fraction;
    jobs.push_back(o);
  }
  if (config.local_load > 0 && !jobs.empty()) {
    // jobs are in submit order; the span lasts at least until the latest end.
    const double first = static_cast<double>(jobs.front().spec.submit_time);
    double last = first;
    for (const OfflineJob& o : jobs) {
      last = std::max(last, static_cast<double>(o.spec.submit_time) + o.runtime);
    }
    const LocalLoadConfig lc;
    const double mean_session = lc.weight1 * lc.mean1_s + (1 - lc.weight1) * lc.mean2_s;
    const double events = (last - first) * config.nodes * config.local_load / mean_session;
    if (events > kMaxLocalLoadEvents) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "simulate: the jobs span %.4g s (first submit to last end) on %d nodes at %.0f%% local "
          "load, about %.3g local-load session events, above the limit of %.3g; pass "
          "--local-load 0, fewer --nodes or --max-jobs",
          last - first, config.nodes, config.local_load * 100, events, kMaxLocalLoadEvents));
    }
  }
  OfflineConfig oc;
  oc.nodes = config.nodes;
  oc.policy = config.policy;
  oc.local.loaded_fraction = config.local_load;
  oc.local.seed = config.seed;
  TurnaroundEstimator est(db, config.estimator);
  Scorer scorer(jobs.size(), config, static_cast<int64_t>(jobs.size()));
  std::vector<int64_t> start(jobs.size(), -1);
  OfflineHooks hooks;
  if (!jobs.empty()) scorer.set_first_submit(static_cast<double>(jobs.front().spec.submit_time));
  hooks.on_tick = [&](double t) { scorer.Tick(t); };
  hooks.on_submit = [&](const JobSpec& job, const ClusterSnapshot& s) -> absl::Status {
    EstimateRequest req{job, s};
    RETURN_IF_ERROR(scorer.EstimateAll(job.job_id, est, req));
    return est.OnSubmitted(job, s);
  };
  hooks.on_start = [&](const JobSpec& job, int64_t t, const std::vector<int32_t>& nodes,
                       const ClusterSnapshot& s) -> absl::Status {
    start[job.job_id] = t;
    return est.OnStarted(job.job_id, t, nodes, s);
  };
  hooks.on_finish = [&](const JobSpec& job, int64_t t, double cpu) -> absl::Status {
    RETURN_IF_ERROR(est.OnFinished(job.job_id, t, cpu));
    scorer.Observe(job.job_id, static_cast<double>(start[job.job_id] - job.submit_time),
                   static_cast<double>(t - start[job.job_id]));
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(OfflineResult sim, RunOffline(jobs, oc, hooks));
  (void)sim;
  EvalReport report = scorer.Report();
  report.jobs_in_log = static_cast<int64_t>(all.size());
  report.cluster_nodes = config.nodes;
  return report;
}

}  // namespace

absl::StatusOr<EvalReport> RunEvaluation(const SwfLog& log, const EvalConfig& config, HistDb& db) {
  if (config.mode == EvalMode::kReplay) return RunReplay(log, config, db);
  if (config.nodes < 1) return absl::InvalidArgumentError("nodes must be >= 1");
  return RunSimulate(log, config, db);
}

absl::StatusOr<std::vector<JobRecord>> ReplayHistory(const SwfLog& log, const EvalConfig& config,
                                                     int64_t time_offset,
                                                     std::vector<int64_t>* lines) {
  InMemoryHistDb db;
  EvalConfig replay = config;
  replay.mode = EvalMode::kReplay;
  RETURN_IF_ERROR(RunReplay(log, replay, db, /*estimate=*/false).status());
  // RunReplay numbers the jobs by their place in this order.
  const std::vector<SwfJob> jobs = SelectJobs(log, config.max_jobs);
  std::vector<JobRecord> out;
  out.reserve(static_cast<size_t>(db.size()));
  if (lines != nullptr) lines->clear();
  std::string cursor;
  do {
    ASSIGN_OR_RETURN(HistoryPage page, db.Scan(cursor, 100000));
    for (JobRecord& r : page.records) {
      const SwfJob& j = jobs[static_cast<size_t>(r.spec.job_id)];
      r.spec.job_id = std::max<int64_t>(0, j.job_number);
      r.spec.requested_time = j.requested_time > 0 ? j.requested_time : -1;
      r.spec.submit_time += time_offset;
      r.start_time += time_offset;
      out.push_back(std::move(r));
      if (lines != nullptr) lines->push_back(j.line);
    }
    cursor = std::move(page.next_cursor);
  } while (!cursor.empty());
  return out;
}

}  // namespace sojourn::turnaround
