#include "models/turnaround/cluster_model.h"

#include <algorithm>
#include <limits>

namespace sojourn::turnaround {

ClusterModel::ClusterModel(int num_nodes, const SchedulingPolicy& policy)
    : policy_(policy), nodes_(static_cast<size_t>(std::max(num_nodes, 0))) {
  if (policy_.mpl_limit < 1) policy_.mpl_limit = 1;
  free_nodes_ = size();
  free_bits_.assign((nodes_.size() + 63) / 64, ~uint64_t{0});
  if (nodes_.size() % 64 != 0) free_bits_.back() = (uint64_t{1} << (nodes_.size() % 64)) - 1;
}

void ClusterModel::SetLocal(int n, double cpu, int tasks) {
  local_cpu_nodes_ += (cpu != 0) - (nodes_[n].local_cpu != 0);
  nodes_[n].local_cpu = cpu;
  nodes_[n].local_tasks = tasks;
}

void ClusterModel::Place(int key, const std::vector<int>& nodes, double cpu_fraction) {
  const bool cpu_bound = cpu_fraction >= kCpuBoundThreshold;
  for (int n : nodes) {
    SimNode& node = nodes_[n];
    const bool had_slot = HasSlot(n);
    node.jobs.push_back(key);
    node.paral_cpu += cpu_fraction;
    node.cpu_bound_tasks += cpu_bound;
    if (had_slot && !HasSlot(n)) {
      --free_nodes_;
      SetFreeBit(n, false);
    }
  }
}

void ClusterModel::Remove(int key, const std::vector<int>& nodes, double cpu_fraction) {
  const bool cpu_bound = cpu_fraction >= kCpuBoundThreshold;
  for (int n : nodes) {
    SimNode& node = nodes_[n];
    auto it = std::find(node.jobs.begin(), node.jobs.end(), key);
    if (it == node.jobs.end()) continue;
    const bool had_slot = HasSlot(n);
    node.jobs.erase(it);
    node.paral_cpu = std::max(0.0, node.paral_cpu - cpu_fraction);
    if (node.jobs.empty()) node.paral_cpu = 0;
    node.cpu_bound_tasks -= cpu_bound;
    if (!had_slot && HasSlot(n)) {
      ++free_nodes_;
      SetFreeBit(n, true);
    }
  }
}

std::vector<int> ClusterModel::SelectNodes(int procs, double cpu_fraction,
                                           const std::vector<char>* excluded) const {
  if (procs <= 0 || procs > free_nodes_) return {};
  if (policy_.node_selection == NodeSelection::kUniform) {
    std::vector<int> chosen = SelectUniform(procs, cpu_fraction, excluded);
    if (!chosen.empty()) return chosen;
  }
  return SelectNormal(procs, excluded);
}

// Normal: only the resource usage level matters; take the least loaded nodes
// that still respect the social contract (the MPL limit).
std::vector<int> ClusterModel::SelectNormal(int procs, const std::vector<char>* excluded) const {
  // The order is total (load, then parallel tasks, then index), so the
  // `procs` least loaded nodes are one set. In the common case (a dedicated
  // cluster, or many equally loaded nodes) they are the first `procs` of the
  // least key by index: one pass, no sort. Otherwise nth_element picks the
  // same set in linear time (partial_sort's heap was half of a replay's time
  // on a 1,024-node machine).
  auto eligible_node = [&](int n) {
    return HasSlot(n) && (excluded == nullptr || !(*excluded)[n]);
  };
  std::vector<int> chosen;
  chosen.reserve(static_cast<size_t>(procs));
  if (policy_.mpl_limit == 1 && local_cpu_nodes_ == 0) {
    // A dedicated cluster (a replayed log): a node with its one slot free
    // holds no task, so every eligible node has load 0 and no parallel task,
    // and the order is the index. The free nodes are visited through
    // free_bits_, and the scan stops at the `procs`-th.
    for (size_t w = 0; w < free_bits_.size(); ++w) {
      for (uint64_t bits = free_bits_[w]; bits != 0; bits &= bits - 1) {
        const int n = static_cast<int>(w * 64) + __builtin_ctzll(bits);
        if (excluded != nullptr && (*excluded)[n]) continue;
        chosen.push_back(n);
        if (static_cast<int>(chosen.size()) == procs) return chosen;
      }
    }
    chosen.clear();
    return chosen;
  }
  auto less_key = [&](int x, int y) {
    const double lx = nodes_[x].cpu_load(), ly = nodes_[y].cpu_load();
    if (lx != ly) return lx < ly;
    return nodes_[x].paral_tasks() < nodes_[y].paral_tasks();
  };
  int count = 0;
  int best = -1;     // a node of the least (load, tasks) key
  int at_best = 0;   // eligible nodes with that key
  for (int n = 0; n < size(); ++n) {
    if (!eligible_node(n)) continue;
    ++count;
    if (best < 0 || less_key(n, best)) {
      best = n;
      at_best = 1;
    } else if (!less_key(best, n)) {
      ++at_best;
    }
  }
  if (count < procs) return {};
  if (at_best >= procs) {
    for (int n = best; n < size() && static_cast<int>(chosen.size()) < procs; ++n) {
      if (eligible_node(n) && !less_key(best, n)) chosen.push_back(n);
    }
    return chosen;
  }
  std::vector<int> eligible;
  eligible.reserve(static_cast<size_t>(count));
  for (int n = 0; n < size(); ++n) {
    if (eligible_node(n)) eligible.push_back(n);
  }
  std::nth_element(eligible.begin(), eligible.begin() + (procs - 1), eligible.end(),
                   [&](int x, int y) {
                     if (less_key(x, y)) return true;
                     if (less_key(y, x)) return false;
                     return x < y;
                   });
  eligible.resize(procs);
  std::sort(eligible.begin(), eligible.end());
  return eligible;
}

std::vector<int> SelectNormalByFullSort(const ClusterModel& c, int procs,
                                        const std::vector<char>* excluded) {
  std::vector<int> eligible;
  for (int n = 0; n < c.size(); ++n) {
    if (c.node(n).paral_tasks() < c.policy().mpl_limit && (excluded == nullptr || !(*excluded)[n])) {
      eligible.push_back(n);
    }
  }
  if (procs <= 0 || static_cast<int>(eligible.size()) < procs) return {};
  std::sort(eligible.begin(), eligible.end(), [&](int x, int y) {
    const SimNode& a = c.node(x);
    const SimNode& b = c.node(y);
    if (a.cpu_load() != b.cpu_load()) return a.cpu_load() < b.cpu_load();
    if (a.paral_tasks() != b.paral_tasks()) return a.paral_tasks() < b.paral_tasks();
    return x < y;
  });
  eligible.resize(procs);
  std::sort(eligible.begin(), eligible.end());
  return eligible;
}

// Uniform: (a) put tasks of a different resource-bound kind together and
// (b) give every task of the job the same co-residents, so the tasks progress
// jointly. Nodes are grouped by the set of parallel jobs they hold.
std::vector<int> ClusterModel::SelectUniform(int procs, double cpu_fraction,
                                             const std::vector<char>* excluded) const {
  const bool cpu_bound = cpu_fraction >= kCpuBoundThreshold;
  // Group the eligible nodes by a hash of their (sorted) parallel jobs.
  std::vector<std::pair<uint64_t, int>> sig;
  sig.reserve(nodes_.size());
  for (int n = 0; n < size(); ++n) {
    if (!HasSlot(n) || (excluded != nullptr && (*excluded)[n])) continue;
    int ids[16];
    const int m = std::min<int>(16, nodes_[n].paral_tasks());
    for (int i = 0; i < m; ++i) ids[i] = nodes_[n].jobs[i];
    std::sort(ids, ids + m);
    uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(nodes_[n].paral_tasks());
    for (int i = 0; i < m; ++i) h = (h ^ static_cast<uint64_t>(ids[i] + 1)) * 1099511628211ull;
    sig.emplace_back(h, n);
  }
  std::sort(sig.begin(), sig.end());
  size_t best_begin = 0, best_end = 0;
  double best_score = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < sig.size();) {
    size_t j = i;
    while (j < sig.size() && sig[j].first == sig[i].first) ++j;
    if (static_cast<int>(j - i) >= procs) {
      const SimNode& any = nodes_[sig[i].second];
      const int same_kind = cpu_bound ? any.cpu_bound_tasks : any.paral_tasks() - any.cpu_bound_tasks;
      // Mixing kinds first, then fewer co-residents, then lower parallel CPU.
      const double score = (same_kind > 0 ? 1e6 : 0) + 1e3 * any.paral_tasks() + any.paral_cpu;
      if (score < best_score) best_score = score, best_begin = i, best_end = j;
    }
    i = j;
  }
  if (best_end == best_begin) return {};
  std::vector<int> chosen;
  chosen.reserve(best_end - best_begin);
  for (size_t i = best_begin; i < best_end; ++i) chosen.push_back(sig[i].second);
  std::partial_sort(chosen.begin(), chosen.begin() + procs, chosen.end(), [&](int x, int y) {
    if (nodes_[x].local_cpu != nodes_[y].local_cpu) return nodes_[x].local_cpu < nodes_[y].local_cpu;
    return x < y;
  });
  chosen.resize(procs);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

// The counts are summed in 64 bits and saturate at INT_MAX: MPL_local comes
// from a request (the predictor bounds it, a library caller may not), and
// local_tasks = INT_MAX plus one parallel task overflowed.
int ClusterModel::MplMax(const std::vector<int>& nodes) const {
  int64_t m = 0;
  for (int n : nodes) {
    m = std::max(m, int64_t{nodes_[n].paral_tasks()} + std::max(0, nodes_[n].local_tasks));
  }
  return static_cast<int>(std::min<int64_t>(m, std::numeric_limits<int>::max()));
}

double ClusterModel::CpuMax(const std::vector<int>& nodes) const {
  double m = 0;
  for (int n : nodes) m = std::max(m, nodes_[n].cpu_load());
  return m;
}

int ClusterModel::SharedTasks(const std::vector<int>& nodes) const {
  int64_t s = 0;
  for (int n : nodes) {
    s += std::max(0, nodes_[n].paral_tasks() - 1) + int64_t{std::max(0, nodes_[n].local_tasks)};
  }
  return static_cast<int>(std::min<int64_t>(s, std::numeric_limits<int>::max()));
}

std::vector<StartDecision> SelectJobsToStart(ClusterModel& cluster,
                                             const std::vector<QueuedJob>& queue,
                                             const std::vector<PlacedJob>& running, double now) {
  std::vector<StartDecision> started;
  size_t i = 0;
  // FCFS part: start heads in order while they fit.
  for (; i < queue.size(); ++i) {
    const QueuedJob& q = queue[i];
    if (q.procs > cluster.size()) continue;  // can never run here
    if (q.procs > cluster.free_nodes()) break;
    std::vector<int> nodes = cluster.SelectNodes(q.procs, q.cpu_fraction, nullptr);
    if (nodes.empty()) break;
    cluster.Place(q.key, nodes, q.cpu_fraction);
    started.push_back({static_cast<int>(i), std::move(nodes)});
  }
  if (cluster.policy().job_selection != JobSelection::kEasyBackfilling || i >= queue.size()) {
    return started;
  }
  // EASY: reservation for the blocked head from the expected ends of the
  // running jobs (requested times, as the real scheduler knows them).
  const QueuedJob& head = queue[i];
  const int limit = cluster.policy().mpl_limit;
  std::vector<int> slots(cluster.size());
  int free_count = 0;
  for (int n = 0; n < cluster.size(); ++n) {
    slots[n] = limit - cluster.node(n).paral_tasks();
    free_count += slots[n] > 0;
  }
  std::vector<std::pair<double, const std::vector<int>*>> ends;
  ends.reserve(running.size() + started.size());
  for (const PlacedJob& r : running) ends.emplace_back(std::max(now, r.expected_end), r.nodes);
  for (const StartDecision& d : started) {
    ends.emplace_back(now + std::max(0.0, queue[d.queue_index].requested_time), &d.nodes);
  }
  std::sort(ends.begin(), ends.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  double shadow = std::numeric_limits<double>::infinity();
  for (const auto& [end, nodes] : ends) {
    if (free_count >= head.procs) break;
    for (int n : *nodes) {
      if (++slots[n] == 1) ++free_count;
    }
    if (free_count >= head.procs) shadow = end;
  }
  if (free_count >= head.procs && shadow == std::numeric_limits<double>::infinity()) shadow = now;
  // Reserve for the head the nodes that free up by the shadow time, the
  // currently busy ones first, so the currently free nodes stay "extra".
  std::vector<char> reserved(cluster.size(), 0);
  {
    // Busy-now nodes in index order, then free-now ones (a stable partition,
    // in two passes rather than a stable_sort's allocations).
    int left = head.procs;
    for (int pass = 0; pass < 2 && left > 0; ++pass) {
      const bool want_free = pass == 1;
      for (int n = 0; n < cluster.size() && left > 0; ++n) {
        if (slots[n] <= 0) continue;
        if ((cluster.node(n).paral_tasks() < limit) != want_free) continue;
        reserved[n] = 1;
        --left;
      }
    }
  }
  // SelectNodes fails only when fewer than `procs` nodes are eligible (the
  // Uniform policy falls back to Normal, which fails only on the count), and
  // placing jobs only removes eligible nodes: once a size has failed, every
  // later job at least as large fails too, with the same exclusion. A queue
  // of thousands (a burst of submissions) tried each of them on every event.
  int fails_from[2] = {std::numeric_limits<int>::max(), std::numeric_limits<int>::max()};
  for (size_t j = i + 1; j < queue.size(); ++j) {
    const QueuedJob& q = queue[j];
    if (q.procs > cluster.free_nodes()) continue;
    const bool ends_in_time = now + std::max(0.0, q.requested_time) <= shadow;
    if (q.procs >= fails_from[ends_in_time]) continue;
    std::vector<int> nodes =
        cluster.SelectNodes(q.procs, q.cpu_fraction, ends_in_time ? nullptr : &reserved);
    if (nodes.empty()) {
      if (q.procs > 0) fails_from[ends_in_time] = q.procs;
      continue;
    }
    cluster.Place(q.key, nodes, q.cpu_fraction);
    started.push_back({static_cast<int>(j), std::move(nodes)});
  }
  return started;
}

}  // namespace sojourn::turnaround
