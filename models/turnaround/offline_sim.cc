#include "models/turnaround/offline_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "models/turnaround/cluster_model.h"

namespace sojourn::turnaround {
namespace {

struct Run {
  int job = -1;
  std::vector<int> nodes;
  double start = 0;
  double remaining = 0;  // dedicated seconds left
  double cpu_used = 0;   // CPU seconds per task
  double rate = 1;
};

int64_t Sec(double t) { return static_cast<int64_t>(std::llround(t)); }

}  // namespace

absl::StatusOr<OfflineResult> RunOffline(const std::vector<OfflineJob>& jobs,
                                         const OfflineConfig& config, const OfflineHooks& hooks) {
  const double kInf = std::numeric_limits<double>::infinity();
  OfflineResult result;
  if (jobs.empty()) return result;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].spec.procs < 1 || jobs[i].spec.procs > config.nodes) {
      return absl::InvalidArgumentError(absl::StrCat("job ", jobs[i].spec.job_id, " needs ",
                                                     jobs[i].spec.procs, " nodes of ", config.nodes));
    }
    if (i > 0 && jobs[i].spec.submit_time < jobs[i - 1].spec.submit_time) {
      return absl::InvalidArgumentError("jobs must be sorted by submit time");
    }
  }
  double t = static_cast<double>(jobs.front().spec.submit_time);
  ClusterModel cluster(config.nodes, config.policy);
  std::unique_ptr<LocalLoadModel> local;
  if (config.local.loaded_fraction > 0) {
    local = std::make_unique<LocalLoadModel>(config.nodes, config.local, t);
    for (int n = 0; n < config.nodes; ++n) cluster.SetLocal(n, local->cpu(n), local->tasks(n));
  }
  std::vector<Run> running;
  std::vector<int> queue;
  size_t next_arrival = 0;
  // Each running job's CpuMax (equation 8), kept up to date as node loads
  // change instead of recomputed over all its nodes on every event: that
  // cost O(nodes) per local-load event, quadratic in the nodes over a run
  // (session 22). A maximum is one of its operands whatever the order, so
  // the kept value is the same double CpuMax returns. Per job key: the
  // maximum, how many of the job's nodes hold it, and whether it must be
  // recomputed (a job's start or end changes several nodes at once; the
  // last node at the maximum dropping below it).
  struct JobMax {
    double max = 0;
    int at_max = 0;
    bool stale = true;
  };
  std::vector<JobMax> job_max(jobs.size());
  auto node_load = [&](int n) { return cluster.node(n).cpu_load(); };
  auto touch_node = [&](int n) {
    for (int key : cluster.node(n).jobs) job_max[key].stale = true;
  };
  // Node n's load went from `before` to its current value.
  auto node_changed = [&](int n, double before) {
    const double after = node_load(n);
    if (after == before) return;
    for (int key : cluster.node(n).jobs) {
      JobMax& m = job_max[key];
      if (m.stale) continue;
      if (after > m.max) {
        m.max = after;
        m.at_max = 1;
      } else if (after == m.max) {
        ++m.at_max;  // `before` was below the maximum
      } else if (before == m.max && --m.at_max == 0) {
        m.stale = true;
      }
    }
  };

  auto snapshot = [&]() {
    ClusterSnapshot s;
    s.now = Sec(t);
    s.policy = config.policy;
    s.nodes.resize(config.nodes);
    for (int n = 0; n < config.nodes; ++n) {
      s.nodes[n].local_cpu = cluster.node(n).local_cpu;
      s.nodes[n].local_tasks = cluster.node(n).local_tasks;
    }
    s.running.reserve(running.size());
    for (const Run& r : running) {
      RunningJob rj;
      rj.spec = jobs[r.job].spec;
      rj.start_time = Sec(r.start);
      rj.nodes.assign(r.nodes.begin(), r.nodes.end());
      rj.cpu_time_cur = r.cpu_used;
      s.running.push_back(std::move(rj));
    }
    s.waiting.reserve(queue.size());
    for (int q : queue) s.waiting.push_back(jobs[q].spec);
    return s;
  };

  auto schedule = [&]() -> absl::Status {
    if (queue.empty() || cluster.free_nodes() == 0) return absl::OkStatus();
    {
      bool any = false;
      for (int k : queue) {
        if (jobs[k].spec.procs <= cluster.free_nodes()) {
          any = true;
          break;
        }
        if (config.policy.job_selection == JobSelection::kFcfs) break;
      }
      if (!any) return absl::OkStatus();
    }
    std::vector<QueuedJob> q;
    q.reserve(queue.size());
    for (int k : queue) {
      const OfflineJob& j = jobs[k];
      const double req = j.spec.requested_time > 0 ? j.spec.requested_time : j.runtime;
      q.push_back({k, j.spec.procs, req, j.cpu_fraction});
    }
    std::vector<PlacedJob> placed;
    placed.reserve(running.size());
    for (const Run& r : running) {
      const OfflineJob& j = jobs[r.job];
      const double req = j.spec.requested_time > 0 ? j.spec.requested_time : j.runtime;
      placed.push_back({r.job, &r.nodes, r.start + req});
    }
    std::vector<StartDecision> started = SelectJobsToStart(cluster, q, placed, t);
    if (started.empty()) return absl::OkStatus();
    std::vector<char> gone(queue.size(), 0);
    size_t first_new = running.size();
    for (StartDecision& d : started) {
      for (int n : d.nodes) touch_node(n);  // the new job shares these nodes
      Run r;
      r.job = q[d.queue_index].key;
      r.nodes = std::move(d.nodes);
      r.start = t;
      r.remaining = jobs[r.job].runtime;
      running.push_back(std::move(r));
      gone[d.queue_index] = 1;
    }
    size_t w = 0;
    for (size_t k = 0; k < queue.size(); ++k) {
      if (!gone[k]) queue[w++] = queue[k];
    }
    queue.resize(w);
    if (hooks.on_start) {
      ClusterSnapshot s = snapshot();
      for (size_t k = first_new; k < running.size(); ++k) {
        std::vector<int32_t> nodes(running[k].nodes.begin(), running[k].nodes.end());
        RETURN_IF_ERROR(hooks.on_start(jobs[running[k].job].spec, Sec(t), nodes, s));
      }
    }
    return absl::OkStatus();
  };

  while (next_arrival < jobs.size() || !running.empty() || !queue.empty()) {
    // Progress rates in the current state.
    double t_finish = kInf;
    size_t finishing = 0;
    for (size_t k = 0; k < running.size(); ++k) {
      Run& r = running[k];
      JobMax& m = job_max[r.job];
      if (m.stale) {
        m.max = 0;
        m.at_max = 0;
        for (int n : r.nodes) {
          const double v = node_load(n);
          if (v > m.max) {
            m.max = v;
            m.at_max = 1;
          } else if (v == m.max) {
            ++m.at_max;
          }
        }
        m.stale = false;
      }
      if (config.check_cpu_max && m.max != cluster.CpuMax(r.nodes)) {
        return absl::InternalError(absl::StrCat("job ", jobs[r.job].spec.job_id, ": kept CPU_max ",
                                                m.max, ", CpuMax ", cluster.CpuMax(r.nodes),
                                                " at ", t));
      }
      r.rate = 1.0 / std::max(1.0, m.max);
      const double end = t + r.remaining / r.rate;
      if (end < t_finish) t_finish = end, finishing = k;
    }
    const double t_arrival =
        next_arrival < jobs.size() ? static_cast<double>(jobs[next_arrival].spec.submit_time) : kInf;
    const double t_local = local ? local->next_event() : kInf;
    const double te = std::min({t_finish, t_arrival, t_local});
    if (te == kInf) {
      return absl::InternalError(absl::StrCat(queue.size(), " jobs can never start"));
    }
    const double dt = std::max(0.0, te - t);
    for (Run& r : running) {
      r.remaining -= r.rate * dt;
      r.cpu_used += jobs[r.job].cpu_fraction * r.rate * dt;  // CPU_feas, eq. (11)
    }
    t = te;
    if (++result.events % kOfflineTickEvents == 0 && hooks.on_tick) hooks.on_tick(t);
    if (te == t_finish) {
      Run done = std::move(running[finishing]);
      running.erase(running.begin() + finishing);
      cluster.Remove(done.job, done.nodes, jobs[done.job].cpu_fraction);
      for (int n : done.nodes) touch_node(n);  // the jobs left on them
      result.makespan = t - jobs.front().spec.submit_time;
      ++result.jobs;
      if (hooks.on_finish) {
        RETURN_IF_ERROR(hooks.on_finish(jobs[done.job].spec, Sec(t), done.cpu_used));
      }
      RETURN_IF_ERROR(schedule());
    } else if (te == t_arrival) {
      const int k = static_cast<int>(next_arrival++);
      if (hooks.on_submit) RETURN_IF_ERROR(hooks.on_submit(jobs[k].spec, snapshot()));
      queue.push_back(k);
      // Several jobs may arrive in the same second: schedule once for all.
      if (next_arrival >= jobs.size() || jobs[next_arrival].spec.submit_time > te) {
        RETURN_IF_ERROR(schedule());
      }
    } else {
      for (int n : local->Step()) {
        const double before = node_load(n);
        cluster.SetLocal(n, local->cpu(n), local->tasks(n));
        node_changed(n, before);
      }
    }
  }
  return result;
}

}  // namespace sojourn::turnaround
