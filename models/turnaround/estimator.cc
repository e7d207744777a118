#include "models/turnaround/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "models/turnaround/cluster_model.h"

namespace sojourn::turnaround {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Runtime assumed for a job with neither history nor a requested time.
constexpr double kUnknownRuntime = 3600;
// Jobs whose estimates are kept for interval calibration and scoring until
// they finish (about 0.5 kB each).
constexpr size_t kMaxRemembered = 100000;

// Per-estimate cache of HistDB reads, so that an estimate reads each template
// at most once.
class HistoryView {
 public:
  HistoryView(const HistDb& db, int window) : db_(db), window_(window) {}

  absl::StatusOr<TemplateStats> Stats(const TemplateKey& key) {
    auto it = stats_.find(key);
    if (it != stats_.end()) return it->second;
    ASSIGN_OR_RETURN(TemplateStats s, db_.Stats(key));
    stats_.emplace(key, s);
    return s;
  }

  absl::StatusOr<const std::vector<JobRecord>*> Records(const TemplateKey& key, int limit) {
    auto it = records_.find(key);
    if (it != records_.end() && it->second.first >= limit) return &it->second.second;
    ASSIGN_OR_RETURN(std::vector<JobRecord> recs, db_.Recent(key, limit));
    auto& slot = records_[key];
    slot.first = limit;
    slot.second = std::move(recs);
    return &slot.second;
  }
  absl::StatusOr<const std::vector<JobRecord>*> Records(const TemplateKey& key) {
    return Records(key, window_);
  }

  // Most specific template of `job` with at least one record (the paper's
  // getAppl match, Algorithm 1 line 5, with coarser fallbacks).
  absl::StatusOr<std::optional<TemplateKey>> AppTemplate(const JobSpec& job) {
    for (int level = 0; level < kNumTemplateLevels; ++level) {
      TemplateKey key = TemplateKey::For(job, static_cast<TemplateLevel>(level));
      ASSIGN_OR_RETURN(TemplateStats s, Stats(key));
      if (s.count > 0) return std::optional<TemplateKey>(key);
    }
    return std::optional<TemplateKey>();
  }

  // getCPUtime(HistDB, Appl, Policy), Algorithm 1 line 3: all tasks.
  absl::StatusOr<double> CpuTime(const JobSpec& job) {
    for (int level = 0; level < kNumTemplateLevels; ++level) {
      ASSIGN_OR_RETURN(TemplateStats s, Stats(TemplateKey::For(job, static_cast<TemplateLevel>(level))));
      if (s.cpu_count > 0) return s.mean_cpu_per_task() * job.procs;
      if (s.count > 0) return s.mean_exec() * job.procs * (job.cpu_fraction > 0 ? job.cpu_fraction : 1.0);
    }
    if (job.requested_time > 0) {
      return static_cast<double>(job.requested_time) * job.procs *
             (job.cpu_fraction > 0 ? job.cpu_fraction : 1.0);
    }
    return 0.0;
  }

  // Sum over `waiting` but the job `skip_id` (the job of an event, should a
  // caller list it; ids <= 0 name no job: 0 is the proto default).
  absl::StatusOr<double> CpuAhead(const std::vector<JobSpec>& waiting, int64_t skip_id) {
    double sum = 0;
    for (const JobSpec& w : waiting) {
      if (skip_id > 0 && w.job_id == skip_id) continue;
      ASSIGN_OR_RETURN(double c, CpuTime(w));
      sum += c;
    }
    return sum;
  }

 private:
  const HistDb& db_;
  int window_;
  absl::flat_hash_map<TemplateKey, TemplateStats> stats_;
  absl::flat_hash_map<TemplateKey, std::pair<int, std::vector<JobRecord>>> records_;
};

double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return kNaN;
  const size_t k = static_cast<size_t>(std::clamp(q, 0.0, 1.0) * (v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

double WaitSince(const EstimateRequest& req, double start) {
  const double now = static_cast<double>(req.snapshot.now);
  return std::max(0.0, start - now) + std::max<double>(0, req.snapshot.now - req.job.submit_time);
}

// ---------------------------------------------------------------------------
// Historical kernel: Algorithms 1 and 2.

// The wait a record gives runs from the estimated job's submit; a job that
// has been waiting since before the snapshot (the service estimates queued
// jobs; replay estimates each at its submit, where this is 0) has that time
// behind it, as the simulation kernels count it (WaitSince): the wait from
// the snapshot on comes after it.
void AddTimeWaited(const EstimateRequest& req, KernelEstimate* e) {
  const double waited = std::max<double>(0, req.snapshot.now - req.job.submit_time);
  if (waited == 0) return;
  for (TimeEstimate* i : {&e->wait, &e->turnaround}) {
    i->point += waited;
    // An interval moves with it; none (NaN, or 0 / 0: ApplyInterval's cue)
    // stays none.
    if (i->lo != 0 || i->hi != 0) {
      i->lo += waited;
      i->hi += waited;
    }
  }
}

absl::StatusOr<KernelEstimate> RunHistorical(const EstimateRequest& req, HistoryView& view,
                                             const EstimatorOptions& opt) {
  KernelEstimate e;
  // Algorithm 1 lines 1-4 (shared with Algorithm 2, as the paper does).
  ASSIGN_OR_RETURN(double cpu_ahead, view.CpuAhead(req.snapshot.waiting, req.job.job_id));
  ASSIGN_OR_RETURN(std::optional<TemplateKey> key, view.AppTemplate(req.job));
  if (!key) {
    // No history at all: the work ahead spread over the cluster, then the
    // requested time.
    const double nodes = std::max<size_t>(1, req.snapshot.nodes.size());
    e.wait.point = cpu_ahead / nodes;
    e.exec.point = req.job.requested_time > 0 ? req.job.requested_time : kUnknownRuntime;
    e.turnaround.point = e.wait.point + e.exec.point;
    e.wait.lo = e.wait.hi = kNaN;
    AddTimeWaited(req, &e);
    return e;
  }
  ASSIGN_OR_RETURN(const std::vector<JobRecord>* recs, view.Records(*key));
  e.from_history = true;
  e.level = key->level;
  // Algorithm 1 line 5: the record with the closest CPUtime_ahead (newest
  // first, so ties go to the most recent run).
  const JobRecord* similar = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const JobRecord& r : *recs) {
    const double d = std::fabs(cpu_ahead - r.cpu_ahead);
    if (d < best) best = d, similar = &r;
  }
  e.wait.point = std::max<int64_t>(0, similar->wait_time);
  // Algorithm 2 line 5: SimilarJobList within the threshold.
  const double thr = opt.similarity_threshold * cpu_ahead;
  std::vector<const JobRecord*> list;
  for (const JobRecord& r : *recs) {
    if (std::fabs(cpu_ahead - r.cpu_ahead) <= thr) list.push_back(&r);
  }
  if (list.empty()) list.push_back(similar);
  // Lines 6-7: the record whose CPUtime_backwards is closest to the average.
  double avg = 0;
  for (const JobRecord* r : list) avg += r->cpu_backwards;
  avg /= list.size();
  const JobRecord* similar2 = list.front();
  best = std::numeric_limits<double>::infinity();
  for (const JobRecord* r : list) {
    const double d = std::fabs(avg - r->cpu_backwards);
    if (d < best) best = d, similar2 = r;
  }
  e.exec.point = std::max<int64_t>(0, similar2->exec_time);
  e.turnaround.point = e.wait.point + e.exec.point;
  e.matched = static_cast<int>(list.size());
  // Fallback interval: spread of the nearest records in CPUtime_ahead.
  std::vector<const JobRecord*> nearest;
  for (const JobRecord& r : *recs) nearest.push_back(&r);
  const size_t k = std::min(nearest.size(), std::max<size_t>(10, list.size()));
  std::partial_sort(nearest.begin(), nearest.begin() + k, nearest.end(),
                    [&](const JobRecord* x, const JobRecord* y) {
                      return std::fabs(cpu_ahead - x->cpu_ahead) < std::fabs(cpu_ahead - y->cpu_ahead);
                    });
  std::vector<double> w, x, t;
  for (size_t i = 0; i < k; ++i) {
    w.push_back(std::max<int64_t>(0, nearest[i]->wait_time));
    x.push_back(std::max<int64_t>(0, nearest[i]->exec_time));
    t.push_back(w.back() + x.back());
  }
  const double a = (1 - opt.interval_coverage) / 2;
  e.wait.lo = std::min(e.wait.point, Quantile(w, a));
  e.wait.hi = std::max(e.wait.point, Quantile(w, 1 - a));
  e.exec.lo = std::min(e.exec.point, Quantile(x, a));
  e.exec.hi = std::max(e.exec.point, Quantile(x, 1 - a));
  e.turnaround.lo = std::min(e.turnaround.point, Quantile(t, a));
  e.turnaround.hi = std::max(e.turnaround.point, Quantile(t, 1 - a));
  AddTimeWaited(req, &e);
  return e;
}

// ---------------------------------------------------------------------------
// Simulation engine: Algorithm 3, with a pluggable RemTime / CPUtime_cur.

struct SimJob {
  JobSpec spec;
  double cpu_fraction = 1;  // CPU(J)
  std::vector<int> nodes;
  double start = -1;
  double exec_cur = 0;  // ExecTime_cur
  double cpu_cur = 0;   // CPUtime_cur, per task
  double exec_total = kUnknownRuntime;  // ExecTime_total (isolated), per task
  double cpu_total = kUnknownRuntime;   // CPUtime_total, per task
  bool from_history = false;
  TemplateLevel level = TemplateLevel::kUserExecutableProcs;
  const void* profile = nullptr;  // model specific
};

// Remaining time of a job that outlived its predicted length: the user's
// requested time if it is still ahead (Tsafrir et al.), else nothing.
double OverrunRemaining(const SimJob& j) {
  const double req = static_cast<double>(j.spec.requested_time);
  return req > j.exec_cur ? req - j.exec_cur : 0.0;
}

class RuntimeModel {
 public:
  virtual ~RuntimeModel() = default;
  // Application characterization of `j` (section 4.2).
  virtual absl::Status Init(SimJob& j) = 0;
  // RemTime(J) in the current cluster state (Algorithm 3 line 4).
  virtual double RemTime(const SimJob& j, const ClusterModel& c) const = 0;
  // CPUtime_cur(J) over [t0, t0 + dt] (Algorithm 3 line 7).
  virtual void Advance(SimJob& /*j*/, double /*dt*/, const ClusterModel& /*c*/) const {}
};

struct SimOutcome {
  bool ok = false;
  double start = 0;
  double finish = 0;
  bool from_history = false;
  TemplateLevel level = TemplateLevel::kUserExecutableProcs;
};

absl::StatusOr<SimOutcome> SimulateTarget(const EstimateRequest& req, RuntimeModel& model) {
  const ClusterSnapshot& snap = req.snapshot;
  ClusterModel cluster(static_cast<int>(snap.nodes.size()), snap.policy);
  for (int n = 0; n < cluster.size(); ++n) {
    cluster.SetLocal(n, snap.nodes[n].local_cpu, snap.nodes[n].local_tasks);
  }
  const double now = static_cast<double>(snap.now);
  // Algorithm 3 line 1: dummy copies of the queues and the cluster.
  std::vector<SimJob> jobs;
  jobs.reserve(snap.running.size() + snap.waiting.size() + 1);
  std::vector<int> running;
  // The waiting jobs in queue order, as the job selection sees them (a job's
  // size, requested time and CPU fraction do not change once characterized;
  // rebuilding this on every event from the scattered SimJobs was most of an
  // estimate's time behind a long queue).
  std::vector<QueuedJob> queue;
  auto enqueue = [&](SimJob j) {
    const double req_time = j.spec.requested_time > 0 ? j.spec.requested_time : j.exec_total;
    queue.push_back({static_cast<int>(jobs.size()), j.spec.procs, req_time, j.cpu_fraction});
    jobs.push_back(std::move(j));
  };
  for (const RunningJob& r : snap.running) {
    SimJob j;
    j.spec = r.spec;
    j.nodes.assign(r.nodes.begin(), r.nodes.end());
    j.start = static_cast<double>(r.start_time);
    j.exec_cur = std::max(0.0, now - j.start);
    RETURN_IF_ERROR(model.Init(j));
    j.cpu_cur = r.cpu_time_cur >= 0 ? r.cpu_time_cur
                                    : std::min(j.cpu_total, j.exec_cur * j.cpu_fraction);
    running.push_back(static_cast<int>(jobs.size()));
    cluster.Place(running.back(), j.nodes, j.cpu_fraction);
    jobs.push_back(std::move(j));
  }
  // ValidateRequest refused a snapshot listing the target itself.
  for (const JobSpec& w : snap.waiting) {
    // Characterizing a job reads HistDB: poll for cancellation here too.
    if (req.cancelled && jobs.size() % 256 == 0 && req.cancelled()) {
      return absl::CancelledError("turnaround estimate cancelled (client gone or deadline passed)");
    }
    SimJob j;
    j.spec = w;
    RETURN_IF_ERROR(model.Init(j));
    enqueue(std::move(j));
  }
  const int target = static_cast<int>(jobs.size());
  {
    SimJob j;
    j.spec = req.job;
    RETURN_IF_ERROR(model.Init(j));
    enqueue(std::move(j));
  }
  SimOutcome out;
  out.from_history = jobs[target].from_history;
  out.level = jobs[target].level;
  if (req.job.procs > cluster.size()) return out;

  double t = now;  // Algorithm 3 line 2
  std::vector<PlacedJob> placed;
  auto schedule = [&]() {
    // Algorithm 3 lines 8-13, with the system's job and node selection.
    // Nothing can start when no waiting job fits the free nodes (FCFS: the
    // head; EASY: any job), which is most steps of a saturated cluster.
    if (queue.empty() || cluster.free_nodes() == 0) return;
    {
      const int free = cluster.free_nodes();
      bool any = false;
      if (cluster.policy().job_selection == JobSelection::kFcfs) {
        for (const QueuedJob& q : queue) {
          if (q.procs > cluster.size()) continue;  // skipped by the policy
          any = q.procs <= free;
          break;
        }
      } else {
        for (const QueuedJob& q : queue) {
          if (q.procs <= free) {
            any = true;
            break;
          }
        }
      }
      if (!any) return;
    }
    placed.clear();
    const bool fcfs = cluster.policy().job_selection == JobSelection::kFcfs;
    for (int k : running) {
      if (fcfs) break;  // reservations are for EASY only
      const SimJob& j = jobs[k];
      const double req_time = j.spec.requested_time > 0 ? j.spec.requested_time : j.exec_total;
      placed.push_back({k, &j.nodes, j.start + req_time});
    }
    std::vector<StartDecision> started = SelectJobsToStart(cluster, queue, placed, t);
    if (started.empty()) return;
    std::vector<char> gone(queue.size(), 0);
    for (StartDecision& d : started) {
      SimJob& j = jobs[queue[d.queue_index].key];
      j.nodes = std::move(d.nodes);
      j.start = t;
      running.push_back(queue[d.queue_index].key);
      gone[d.queue_index] = 1;
    }
    size_t w = 0;
    for (size_t k = 0; k < queue.size(); ++k) {
      if (!gone[k]) queue[w++] = queue[k];
    }
    queue.resize(w);
  };
  schedule();
  std::vector<double> rem;
  for (int guard = 0; guard < 1000000; ++guard) {
    // Each event costs O(running + waiting), so polling here is free; a
    // snapshot of tens of thousands of jobs takes seconds, past most
    // clients' deadlines.
    if (req.cancelled && req.cancelled()) {
      return absl::CancelledError("turnaround estimate cancelled (client gone or deadline passed)");
    }
    SimJob& tj = jobs[target];
    if (tj.start >= 0 && cluster.policy().mpl_limit <= 1) {
      // Nobody can join the target's nodes any more: its RemTime is final.
      out.ok = true;
      out.start = tj.start;
      out.finish = t + std::max(0.0, model.RemTime(tj, cluster));
      return out;
    }
    if (running.empty()) return out;  // the target can never start
    // Lines 4-6: the next job to finish.
    rem.resize(running.size());
    size_t next = 0;
    for (size_t k = 0; k < running.size(); ++k) {
      rem[k] = std::max(0.0, model.RemTime(jobs[running[k]], cluster));
      if (rem[k] < rem[next]) next = k;
    }
    const double dt = rem[next];
    // Line 7: CPUtime_cur of every job over [t0, ti] in the state of that
    // interval (before the finishing job leaves).
    for (int k : running) {
      model.Advance(jobs[k], dt, cluster);
      jobs[k].exec_cur += dt;
    }
    t += dt;  // line 15
    const int done = running[next];
    running.erase(running.begin() + next);
    cluster.Remove(done, jobs[done].nodes, jobs[done].cpu_fraction);
    if (done == target) {
      out.ok = true;
      out.start = jobs[target].start;
      out.finish = t;
      return out;
    }
    schedule();
  }
  return out;
}

// Characterization shared by the Simulation kernel (and the fallback of the
// others), section 4.2: ExecTime_total(J) in isolation from HistDB (CPU time
// over the declared CPU(J) of each past run, else its observed time), CPU(J)
// declared or from isolated runs, CPUtime_total = ExecTime_total x CPU(J).
absl::Status Characterize(SimJob& j, HistoryView& view) {
  const JobSpec& s = j.spec;
  double frac = s.cpu_fraction > 0 ? std::min(1.0, s.cpu_fraction) : -1;
  double exec = -1;
  for (int level = 0; level < kNumTemplateLevels; ++level) {
    ASSIGN_OR_RETURN(TemplateStats st, view.Stats(TemplateKey::For(s, static_cast<TemplateLevel>(level))));
    if (st.count == 0) continue;
    if (!j.from_history) {
      j.from_history = true;
      j.level = static_cast<TemplateLevel>(level);
      exec = st.mean_isolated_exec();
    }
    if (frac < 0 && st.isolated_cpu_count > 0) frac = st.mean_isolated_cpu_fraction();
    if (frac > 0) break;
  }
  if (frac <= 0) frac = 1.0;
  j.cpu_fraction = frac;
  if (exec < 0) exec = s.requested_time > 0 ? s.requested_time : kUnknownRuntime;
  j.exec_total = exec;
  j.cpu_total = exec * frac;
  return absl::OkStatus();
}

// Simulation kernel's analytical model (section 4.2.2-4.2.3).
class AnalyticModel final : public RuntimeModel {
 public:
  AnalyticModel(HistoryView& view, RemTimeMethod rem, CpuTimeMethod cpu)
      : view_(view), rem_(rem), cpu_(cpu) {}

  absl::Status Init(SimJob& j) override { return Characterize(j, view_); }

  double RemTime(const SimJob& j, const ClusterModel& c) const override {
    const double cpu_rem = j.cpu_total - j.cpu_cur;  // eq. (1)
    if (cpu_rem <= 0) return OverrunRemaining(j);
    if (rem_ == RemTimeMethod::kProp && j.cpu_cur > 0 && j.exec_cur > 0) {
      return j.exec_cur * cpu_rem / j.cpu_cur;  // eq. (2)
    }
    const double isol = j.cpu_total > 0 ? j.exec_total * cpu_rem / j.cpu_total : 0;  // eq. (3)
    if (j.nodes.empty()) return isol;
    switch (rem_) {
      case RemTimeMethod::kProp:
        return isol;
      case RemTimeMethod::kMpl:
        return isol * std::max(1, c.MplMax(j.nodes));  // eq. (4)-(5)
      case RemTimeMethod::kCpu:
        // eq. (6)-(8): CPU(J)/CPU_feas(J) = max(1, CPU_max(J)).
        return isol * std::max(1.0, c.CpuMax(j.nodes));
    }
    return isol;
  }

  void Advance(SimJob& j, double dt, const ClusterModel& c) const override {
    if (j.nodes.empty() || dt <= 0) return;
    if (cpu_ == CpuTimeMethod::kMpl) {
      // eq. (9)-(10)
      j.cpu_cur += dt * j.cpu_total / (std::max(1, c.MplMax(j.nodes)) * std::max(j.exec_total, 1e-9));
    } else {
      // eq. (11)-(12): CPU_feas = min(CPU, CPU / CPU_max).
      const double cmax = c.CpuMax(j.nodes);
      j.cpu_cur += dt * std::min(j.cpu_fraction, cmax > 0 ? j.cpu_fraction / cmax : j.cpu_fraction);
    }
  }

 private:
  HistoryView& view_;
  RemTimeMethod rem_;
  CpuTimeMethod cpu_;
};

// Hybrid kernel (section 4.3): the Simulation engine (Algorithm 3) with
// RemTime from Algorithm 4 over the application's history.
//
// Algorithm 4 averages the execution times of the application's runs that
// match the current SharedTasksCount: runs made in isolation when no task
// shares the job's nodes (lines 3-6), runs with the same SharedTasksCount
// otherwise (lines 8-9). It defines no value when that set is empty (the
// average of lines 5 and 9 is over nothing). The Hybrid replaces the
// analytical RemTime of the Simulation kernel by this search ("instead of the
// analytical model", section 4.3), so where the search finds nothing, and for
// an application without history, RemTime is the Simulation kernel's own
// (section 4.2.2, same characterization and CPUtime_cur tracking, and its
// rule for a job past its CPU time): on such jobs the Hybrid is the
// Simulation kernel. Runs under a different SharedTasksCount are never used
// as if they were under this one.
class HybridModel final : public RuntimeModel {
 public:
  struct Profile {
    double iso_sum = 0;  // isolated runs (line 4)
    int iso_n = 0;
    // Co-scheduled runs by their SharedTasksCount at start (line 8).
    absl::flat_hash_map<int, std::pair<double, int>> by_shared;  // count -> (sum, n)
    std::vector<double> sorted_exec;
    std::vector<double> suffix_sum;  // sum of sorted_exec[i..]
  };

  HybridModel(HistoryView& view, RemTimeMethod rem, CpuTimeMethod cpu)
      : view_(view), analytic_(view, rem, cpu) {}

  absl::Status Init(SimJob& j) override {
    // The Simulation kernel's characterization, used where Algorithm 4 has
    // no matching run.
    RETURN_IF_ERROR(analytic_.Init(j));
    ASSIGN_OR_RETURN(std::optional<TemplateKey> key, view_.AppTemplate(j.spec));
    if (!key) return absl::OkStatus();
    auto it = profiles_.find(*key);
    if (it == profiles_.end()) {
      ASSIGN_OR_RETURN(const std::vector<JobRecord>* recs, view_.Records(*key));
      auto p = std::make_unique<Profile>();
      for (const JobRecord& r : *recs) {
        const double x = std::max<int64_t>(0, r.exec_time);
        if (r.isolated()) {
          p->iso_sum += x, ++p->iso_n;
        } else if (r.shared_tasks > 0) {
          // A run with no shared task but local CPU on its nodes was neither
          // isolated nor at any SharedTasksCount > 0: it matches neither line.
          auto& slot = p->by_shared[r.shared_tasks];
          slot.first += x;
          ++slot.second;
        }
        p->sorted_exec.push_back(x);
      }
      std::sort(p->sorted_exec.begin(), p->sorted_exec.end());
      p->suffix_sum.assign(p->sorted_exec.size() + 1, 0);
      for (size_t i = p->sorted_exec.size(); i-- > 0;) {
        p->suffix_sum[i] = p->suffix_sum[i + 1] + p->sorted_exec[i];
      }
      it = profiles_.emplace(*key, std::move(p)).first;
    }
    j.profile = it->second.get();
    j.from_history = true;
    j.level = key->level;
    return absl::OkStatus();
  }

  double RemTime(const SimJob& j, const ClusterModel& c) const override {
    const Profile* p = static_cast<const Profile*>(j.profile);
    if (p == nullptr || p->sorted_exec.empty()) return analytic_.RemTime(j, c);
    // Line 1: SharedTasksCount now (a waiting job is estimated as isolated
    // until it is placed).
    const int shared = j.nodes.empty() ? 0 : c.SharedTasks(j.nodes);
    double mean;
    if (shared == 0) {
      if (p->iso_n == 0) return analytic_.RemTime(j, c);  // no isolated run
      mean = p->iso_sum / p->iso_n;  // lines 3-5
    } else {
      auto it = p->by_shared.find(shared);  // line 8
      if (it == p->by_shared.end()) return analytic_.RemTime(j, c);  // no such run
      mean = it->second.first / it->second.second;  // line 9
    }
    const double r = mean - j.exec_cur;  // lines 6 and 13
    return r >= 0 ? r : Overrun(j, *p);
  }

  // CPUtime_cur (eq. 9-12) is kept for the analytical fallback.
  void Advance(SimJob& j, double dt, const ClusterModel& c) const override {
    analytic_.Advance(j, dt, c);
  }

 private:
  // Lines 10-11 return 0 ("should have finished"); a job still running has
  // not, so sojourn uses the mean of the application's longer past runs minus
  // the elapsed time, then the requested time.
  static double Overrun(const SimJob& j, const Profile& p) {
    auto pos = std::upper_bound(p.sorted_exec.begin(), p.sorted_exec.end(), j.exec_cur);
    const size_t i = pos - p.sorted_exec.begin();
    const size_t n = p.sorted_exec.size() - i;
    if (n > 0) return p.suffix_sum[i] / n - j.exec_cur;
    return OverrunRemaining(j);
  }

  HistoryView& view_;
  AnalyticModel analytic_;
  absl::flat_hash_map<TemplateKey, std::unique_ptr<Profile>> profiles_;
};

// Baselines: a fixed predicted length per job, dedicated execution.
class FixedLengthModel final : public RuntimeModel {
 public:
  FixedLengthModel(HistoryView& view, Kernel kernel) : view_(view), kernel_(kernel) {}

  absl::Status Init(SimJob& j) override {
    const JobSpec& s = j.spec;
    const double req = s.requested_time > 0 ? static_cast<double>(s.requested_time) : -1;
    double total = req;
    if (kernel_ == Kernel::kLastTwo) {
      // Tsafrir, Etsion, Feitelson (TPDS 2007): mean of the user's last two
      // runtimes, never above the user's estimate.
      ASSIGN_OR_RETURN(const std::vector<JobRecord>* recs,
                       view_.Records(TemplateKey::For(s, TemplateLevel::kUser), 2));
      if (!recs->empty()) {
        double sum = 0;
        const size_t n = std::min<size_t>(2, recs->size());
        for (size_t i = 0; i < n; ++i) sum += std::max<int64_t>(0, (*recs)[i].exec_time);
        total = sum / n;
        if (req > 0) total = std::min(total, req);
        j.from_history = true;
        j.level = TemplateLevel::kUser;
      }
    } else if (kernel_ == Kernel::kTemplateMean) {
      // Smith, Foster, Taylor: mean over the template (user, executable, size).
      ASSIGN_OR_RETURN(TemplateStats st,
                       view_.Stats(TemplateKey::For(s, TemplateLevel::kUserExecutableProcs)));
      if (st.count > 0) {
        total = st.mean_exec();
        j.from_history = true;
      }
    }
    if (total < 0) total = kUnknownRuntime;
    j.exec_total = total;
    j.cpu_fraction = s.cpu_fraction > 0 ? std::min(1.0, s.cpu_fraction) : 1.0;
    j.cpu_total = total * j.cpu_fraction;
    return absl::OkStatus();
  }

  double RemTime(const SimJob& j, const ClusterModel&) const override {
    const double r = j.exec_total - j.exec_cur;
    return r > 0 ? r : OverrunRemaining(j);
  }

 private:
  HistoryView& view_;
  Kernel kernel_;
};

absl::StatusOr<KernelEstimate> RunSimulated(Kernel kernel, const EstimateRequest& req,
                                            HistoryView& view, const EstimatorOptions& opt) {
  std::unique_ptr<RuntimeModel> model;
  switch (kernel) {
    case Kernel::kSimulation:
      model = std::make_unique<AnalyticModel>(view, opt.remtime, opt.cputime);
      break;
    case Kernel::kHybrid:
      model = std::make_unique<HybridModel>(view, opt.remtime, opt.cputime);
      break;
    default:
      model = std::make_unique<FixedLengthModel>(view, kernel);
      break;
  }
  ASSIGN_OR_RETURN(SimOutcome out, SimulateTarget(req, *model));
  KernelEstimate e;
  e.from_history = out.from_history;
  e.level = out.level;
  if (!out.ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", req.job.job_id, " (", req.job.procs, " tasks) can never start on ",
                     req.snapshot.nodes.size(), " nodes"));
  }
  e.wait.point = WaitSince(req, out.start);
  e.exec.point = std::max(0.0, out.finish - out.start);
  e.turnaround.point = e.wait.point + e.exec.point;
  e.wait.lo = e.wait.hi = kNaN;
  return e;
}

}  // namespace

const char* KernelName(Kernel k) {
  switch (k) {
    case Kernel::kHistorical: return "historical";
    case Kernel::kSimulation: return "simulation";
    case Kernel::kHybrid: return "hybrid";
    case Kernel::kUserEstimate: return "user_estimate";
    case Kernel::kLastTwo: return "last_two";
    case Kernel::kTemplateMean: return "template_mean";
  }
  return "?";
}

absl::Status CheckSelfInSnapshot(const char* what, int64_t job_id,
                                 const ClusterSnapshot& snapshot, const RunningJob* started) {
  if (job_id <= 0) return absl::OkStatus();
  auto listed = [what, job_id, started](const char* where) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", job_id, " is the job ", what, " and is also among the snapshot's ", where,
        started == nullptr ? " jobs (the snapshot must not hold the job itself)"
                           : " jobs (a job started is no longer waiting)"));
  };
  for (const RunningJob& r : snapshot.running) {
    if (r.spec.job_id != job_id) continue;
    if (started == nullptr) return listed("running");
    std::vector<int32_t> listed_nodes = r.nodes, event_nodes = started->nodes;
    std::sort(listed_nodes.begin(), listed_nodes.end());
    std::sort(event_nodes.begin(), event_nodes.end());
    if (r.start_time != started->start_time || listed_nodes != event_nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", job_id, " is the job ", what, " at ", started->start_time, " on nodes [",
          absl::StrJoin(started->nodes, ","), "], but the snapshot's running jobs list it started at ",
          r.start_time, " on nodes [", absl::StrJoin(r.nodes, ","), "]"));
    }
  }
  for (const JobSpec& w : snapshot.waiting) {
    if (w.job_id == job_id) return listed("waiting");
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const EstimateRequest& request) {
  const ClusterSnapshot& s = request.snapshot;
  if (request.job.procs < 1) return absl::InvalidArgumentError("job needs at least one task");
  if (s.nodes.empty()) return absl::InvalidArgumentError("cluster snapshot has no nodes");
  // Subtracted, not added: a submit near INT64_MIN must not overflow.
  if (request.job.submit_time < s.now && s.now - request.job.submit_time > kMaxWaitSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", request.job.job_id, ": submitted at ", request.job.submit_time, ", ",
        s.now - request.job.submit_time, " s before the snapshot's now ", s.now,
        "; a job estimated may have waited at most ", kMaxWaitSeconds, " s (a year)"));
  }
  RETURN_IF_ERROR(CheckSelfInSnapshot("estimated", request.job.job_id, s));
  const int64_t nodes = static_cast<int64_t>(s.nodes.size());
  for (const RunningJob& r : s.running) {
    for (int32_t n : r.nodes) {
      if (n < 0 || n >= nodes) {
        return absl::InvalidArgumentError(
            absl::StrCat("running job ", r.spec.job_id, " is on node ", n, " outside the snapshot"));
      }
    }
  }
  for (const JobSpec& w : s.waiting) {
    if (w.procs < 1) return absl::InvalidArgumentError(absl::StrCat("waiting job ", w.job_id, " has no task"));
    // What the kernels answer for the job estimated (FailedPrecondition, "can
    // never start") holds for a waiting job too; in the snapshot it is a
    // contradiction, not a question: the job would never leave the queue
    // (under FCFS holding every job behind it), so its queue is not one a
    // scheduler of these nodes keeps. The broker leaves such jobs out.
    if (w.procs > nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "waiting job ", w.job_id, " needs ", w.procs, " nodes (one task per node) and the "
          "snapshot has ", nodes, ": it could never start"));
    }
  }
  return absl::OkStatus();
}

TurnaroundEstimator::TurnaroundEstimator(HistDb& db, const EstimatorOptions& options)
    : db_(db), options_(options) {}

absl::StatusOr<KernelEstimate> TurnaroundEstimator::Run(Kernel kernel, const EstimateRequest& req) {
  HistoryView view(db_, options_.history_window);
  if (kernel == Kernel::kHistorical) return RunHistorical(req, view, options_);
  return RunSimulated(kernel, req, view, options_);
}

absl::StatusOr<KernelEstimate> TurnaroundEstimator::EstimateOne(Kernel kernel,
                                                                const EstimateRequest& request) {
  RETURN_IF_ERROR(ValidateRequest(request));
  if (request.cancelled && request.cancelled()) {
    return absl::CancelledError("turnaround estimate cancelled (client gone or deadline passed)");
  }
  ASSIGN_OR_RETURN(KernelEstimate e, Run(kernel, request));
  ApplyInterval(kernel, &e);
  return e;
}

absl::StatusOr<KernelEstimate> TurnaroundEstimator::EstimateWith(Kernel kernel,
                                                                 const EstimateRequest& request) {
  ASSIGN_OR_RETURN(KernelEstimate e, EstimateOne(kernel, request));
  Remember(request, {{kernel, &e}});
  return e;
}

absl::StatusOr<TurnaroundResult> TurnaroundEstimator::Estimate(const EstimateRequest& request) {
  TurnaroundResult r;
  ASSIGN_OR_RETURN(r.historical, EstimateOne(Kernel::kHistorical, request));
  ASSIGN_OR_RETURN(r.simulation, EstimateOne(Kernel::kSimulation, request));
  ASSIGN_OR_RETURN(r.hybrid, EstimateOne(Kernel::kHybrid, request));
  // All three or none: the kernels are scored on the same jobs.
  Remember(request, {{Kernel::kHistorical, &r.historical},
                     {Kernel::kSimulation, &r.simulation},
                     {Kernel::kHybrid, &r.hybrid}});
  return r;
}

void TurnaroundEstimator::ApplyInterval(Kernel kernel, KernelEstimate* e) {
  absl::MutexLock lock(&mu_);
  TimeEstimate* parts[3] = {&e->wait, &e->exec, &e->turnaround};
  for (int m = 0; m < 3; ++m) {
    TimeEstimate& t = *parts[m];
    const Calibrator& c = calibrators_[static_cast<int>(kernel)][m];
    if (c.ready) {
      const double base = std::log1p(std::max(0.0, t.point));
      t.lo = std::max(0.0, std::expm1(base + c.q_lo));
      t.hi = std::max(t.lo, std::expm1(base + c.q_hi));
    } else if (std::isnan(t.lo) || std::isnan(t.hi) || (t.lo == 0 && t.hi == 0 && t.point > 0)) {
      t.lo = t.point / 2;
      t.hi = t.point * 2;
    }
  }
}

void TurnaroundEstimator::Remember(
    const EstimateRequest& request,
    std::initializer_list<std::pair<Kernel, const KernelEstimate*>> estimates) {
  const JobSpec& job = request.job;
  if (job.job_id < 0) return;
  // An estimate for a job already running is made in hindsight (the broker
  // leaves the job out of the snapshot, so its wait is counted from now):
  // it must not replace the forecast made before the start.
  if (absl::StatusOr<JobRecord> pending = db_.GetPending(job.job_id);
      pending.ok() && pending->start_time >= 0) {
    return;
  }
  absl::MutexLock lock(&mu_);
  // Estimates of jobs that never report back (what-if requests under an id,
  // jobs never submitted) must not accumulate without bound.
  if (predictions_.size() >= kMaxRemembered && !predictions_.contains(job.job_id)) {
    predictions_.clear();
  }
  auto [it, inserted] = predictions_.try_emplace(job.job_id);
  Remembered& r = it->second;
  if (inserted || r.submit_time != job.submit_time || r.procs != job.procs ||
      r.requested_time != job.requested_time) {
    // Another job under this id: the other kernels' estimates were not for it.
    for (auto& k : r.predictions) {
      for (auto& m : k) m.fill(kNaN);
    }
    r.submit_time = job.submit_time;
    r.procs = job.procs;
    r.requested_time = job.requested_time;
  }
  r.estimated_at = request.snapshot.now;
  for (const auto& [kernel, e] : estimates) {
    const TimeEstimate* parts[3] = {&e->wait, &e->exec, &e->turnaround};
    for (int m = 0; m < 3; ++m) {
      r.predictions[static_cast<int>(kernel)][m] = {parts[m]->point, parts[m]->lo, parts[m]->hi};
    }
  }
}

absl::StatusOr<double> TurnaroundEstimator::ExpectedCpuTime(const JobSpec& job) const {
  HistoryView view(db_, options_.history_window);
  return view.CpuTime(job);
}

namespace {

// "waiting (submitted at T)" or "running (started at T)", for messages.
std::string PendingState(const JobRecord& r) {
  return r.start_time < 0 ? absl::StrCat("waiting (submitted at ", r.spec.submit_time, ")")
                          : absl::StrCat("running (started at ", r.start_time, ")");
}

}  // namespace

absl::Status TurnaroundEstimator::OnSubmitted(const JobSpec& job, const ClusterSnapshot& snapshot) {
  if (job.job_id < 0) return absl::InvalidArgumentError("job events need a job id");
  absl::MutexLock events(&events_mu_);
  // A second submit used to replace the pending record, losing its start.
  if (absl::StatusOr<JobRecord> pending = db_.GetPending(job.job_id); pending.ok()) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job.job_id, " is already ",
                                                 PendingState(*pending),
                                                 "; it cannot be submitted again before it "
                                                 "finishes or is cancelled"));
  } else if (!absl::IsNotFound(pending.status())) {
    return pending.status();
  }
  HistoryView view(db_, options_.history_window);
  JobRecord r;
  r.spec = job;
  ASSIGN_OR_RETURN(r.cpu_ahead, view.CpuAhead(snapshot.waiting, job.job_id));
  r.queue_len_submit = static_cast<int32_t>(snapshot.waiting.size());
  r.job_selection = snapshot.policy.job_selection;
  r.node_selection = snapshot.policy.node_selection;
  return db_.PutPending(r);
}

absl::Status TurnaroundEstimator::OnStarted(int64_t job_id, int64_t start_time,
                                            const std::vector<int32_t>& nodes,
                                            const ClusterSnapshot& snapshot) {
  absl::MutexLock events(&events_mu_);
  ASSIGN_OR_RETURN(JobRecord r, db_.GetPending(job_id));
  if (r.start_time >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already started at ", r.start_time, " (a job starts once)"));
  }
  if (start_time < r.spec.submit_time) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, " started at ", start_time,
                                                   ", before its submit time ",
                                                   r.spec.submit_time));
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, " started on no node"));
  }
  HistoryView view(db_, options_.history_window);
  r.start_time = start_time;
  r.wait_time = std::max<int64_t>(0, start_time - r.spec.submit_time);
  ASSIGN_OR_RETURN(r.cpu_backwards, view.CpuAhead(snapshot.waiting, job_id));
  r.queue_len_start = static_cast<int32_t>(snapshot.waiting.size());
  r.cluster_nodes = static_cast<int32_t>(std::min<size_t>(snapshot.nodes.size(), INT32_MAX));
  // Cluster state at start: the tasks and local load on the job's nodes.
  std::vector<int> tasks(snapshot.nodes.size(), 0);
  for (const RunningJob& other : snapshot.running) {
    if (other.spec.job_id == job_id) continue;
    for (int32_t n : other.nodes) {
      if (n >= 0 && n < static_cast<int32_t>(tasks.size())) ++tasks[n];
    }
  }
  int64_t shared = 0;  // 64 bits: MPL_local comes from the caller
  r.max_local_cpu = 0;
  for (int32_t n : nodes) {
    if (n < 0 || n >= static_cast<int32_t>(tasks.size())) continue;
    shared += tasks[n] + int64_t{std::max(0, snapshot.nodes[n].local_tasks)};
    r.max_local_cpu = std::max(r.max_local_cpu, snapshot.nodes[n].local_cpu);
  }
  r.shared_tasks = static_cast<int32_t>(std::min<int64_t>(shared, INT32_MAX));
  return db_.PutPending(r);
}

absl::Status TurnaroundEstimator::OnFinished(int64_t job_id, int64_t finish_time,
                                             double cpu_time_per_task,
                                             std::vector<ScoredEstimate>* scored) {
  absl::MutexLock events(&events_mu_);
  ASSIGN_OR_RETURN(JobRecord r, db_.GetPending(job_id));
  if (r.start_time < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " has not started (submitted at ", r.spec.submit_time,
        "); report its start first, or cancel it"));
  }
  if (finish_time < r.start_time) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, " finished at ", finish_time,
                                                   ", before its start time ", r.start_time));
  }
  if (!std::isfinite(cpu_time_per_task)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": CPU time per task must be finite"));
  }
  r.exec_time = std::max<int64_t>(0, finish_time - r.start_time);
  // A task uses at most one CPU: more CPU seconds than its run time are a
  // wrong measure, and stored they would stretch every later estimate.
  RETURN_IF_ERROR(CheckCpuTimePerTask(job_id, cpu_time_per_task, r.exec_time));
  r.cpu_time_per_task = cpu_time_per_task;
  // Stored first: a finish the history did not take is sent again (the
  // broker's outbox), and only then are its estimates scored.
  RETURN_IF_ERROR(db_.PutFinished(r, job_id));
  absl::MutexLock lock(&mu_);
  auto it = predictions_.find(job_id);
  if (it == predictions_.end()) return absl::OkStatus();
  const Remembered remembered = it->second;
  predictions_.erase(it);
  // Only a forecast of this job counts: made before it started, for what it
  // was submitted with.
  if (remembered.estimated_at > r.start_time || remembered.submit_time != r.spec.submit_time ||
      remembered.procs != r.spec.procs || remembered.requested_time != r.spec.requested_time) {
    return absl::OkStatus();
  }
  const double observed[3] = {static_cast<double>(r.wait_time), static_cast<double>(r.exec_time),
                              static_cast<double>(r.wait_time + r.exec_time)};
  const double a = (1 - options_.interval_coverage) / 2;
  bool any = false;
  for (int k = 0; k < kNumKernels; ++k) {
    for (int m = 0; m < 3; ++m) {
      const auto& [p, lo, hi] = remembered.predictions[k][m];
      if (std::isnan(p)) continue;
      any = true;
      if (scored != nullptr) scored->push_back({static_cast<Kernel>(k), m, p, lo, hi, observed[m]});
      Calibrator& c = calibrators_[k][m];
      c.residuals.push_back(std::log1p(observed[m]) - std::log1p(std::max(0.0, p)));
      if (static_cast<int>(c.residuals.size()) > options_.calibration_window)
        c.residuals.pop_front();
      ++c.since_refresh;
      if (static_cast<int>(c.residuals.size()) >= options_.min_calibration &&
          (!c.ready || c.since_refresh >= 50)) {
        std::vector<double> v(c.residuals.begin(), c.residuals.end());
        c.q_lo = Quantile(v, a);
        c.q_hi = Quantile(v, 1 - a);
        c.ready = true;
        c.since_refresh = 0;
      }
    }
  }
  // The user's requested time beside the kernels, on the same jobs (unless
  // the user_estimate kernel itself was estimated and scored above).
  const bool user_scored =
      !std::isnan(remembered.predictions[static_cast<int>(Kernel::kUserEstimate)][1][0]);
  if (scored != nullptr && any && !user_scored && r.spec.requested_time > 0) {
    const double requested = static_cast<double>(r.spec.requested_time);
    scored->push_back({Kernel::kUserEstimate, 1, requested, requested, requested, observed[1]});
  }
  return absl::OkStatus();
}

absl::Status TurnaroundEstimator::OnCancelled(int64_t job_id) {
  absl::MutexLock events(&events_mu_);
  RETURN_IF_ERROR(db_.GetPending(job_id).status());  // NotFound for a job never submitted
  {
    absl::MutexLock lock(&mu_);
    predictions_.erase(job_id);
  }
  return db_.ErasePending(job_id);
}

}  // namespace sojourn::turnaround
