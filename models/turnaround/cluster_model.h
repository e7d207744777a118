// The cluster as the scheduler sees it (paper 002, sections 3 and 4.2): per
// node the local load (CPU_local, MPL_local) and the parallel tasks placed on
// it (CPU_paral, MPL_paral), the Normal and Uniform node selection policies
// under a multiprogramming limit, and FCFS / EASY-backfilling job selection.
// Used by both the kernels' internal simulation (Algorithm 3) and the off-line
// simulator (section 5), so that both schedule identically.
#ifndef SOJOURN_MODELS_TURNAROUND_CLUSTER_MODEL_H_
#define SOJOURN_MODELS_TURNAROUND_CLUSTER_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "models/turnaround/job.h"

namespace sojourn::turnaround {

// A job whose CPU(J) is at least this is computation bound, else
// communication bound (the Uniform policy mixes the two kinds on a node).
inline constexpr double kCpuBoundThreshold = 0.5;

struct SimNode {
  double local_cpu = 0;  // CPU_local(n)
  int local_tasks = 0;   // MPL_local(n)
  double paral_cpu = 0;  // CPU_paral(n)
  // Keys of the parallel jobs with a task here (MPL_paral = size). Inline
  // for the usual one or two: each estimate builds a cluster and places
  // every running job, and a heap vector per node was a third of the time.
  absl::InlinedVector<int, 2> jobs;
  int cpu_bound_tasks = 0;
  int paral_tasks() const { return static_cast<int>(jobs.size()); }
  // CPU_paral(n) + CPU_local(n), the node's term of equation (8).
  double cpu_load() const { return paral_cpu + local_cpu; }
};

// Not thread-safe; one instance per simulation.
class ClusterModel {
 public:
  ClusterModel(int num_nodes, const SchedulingPolicy& policy);

  int size() const { return static_cast<int>(nodes_.size()); }
  const SimNode& node(int n) const { return nodes_[n]; }
  const SchedulingPolicy& policy() const { return policy_; }
  void SetLocal(int n, double cpu, int tasks);

  // Places one task of job `key` on each of `nodes` (may exceed the MPL
  // limit: a snapshot reflects what the real cluster did).
  void Place(int key, const std::vector<int>& nodes, double cpu_fraction);
  void Remove(int key, const std::vector<int>& nodes, double cpu_fraction);

  // Nodes with at least one free parallel slot (MPL_paral < limit).
  int free_nodes() const { return free_nodes_; }

  // Node Selection Policy (section 3). Returns `procs` distinct nodes with a
  // free slot, or an empty vector if there are not enough. `excluded` (may be
  // null) marks nodes that must not be used.
  std::vector<int> SelectNodes(int procs, double cpu_fraction,
                               const std::vector<char>* excluded) const;
  // The Normal policy alone (tests compare it with a full sort).
  std::vector<int> SelectNormalForTest(int procs, const std::vector<char>* excluded) const {
    return procs <= 0 ? std::vector<int>{} : SelectNormal(procs, excluded);
  }

  // Equation (4): max over nodes(J) of MPL_paral(n) + MPL_local(n), at most
  // INT_MAX (negative MPL_local counts as 0).
  int MplMax(const std::vector<int>& nodes) const;
  // Equation (8): max over nodes(J) of CPU_paral(n) + CPU_local(n).
  double CpuMax(const std::vector<int>& nodes) const;
  // Algorithm 4 line 1: tasks (other parallel tasks and local tasks) sharing
  // some node with a job placed on `nodes`, at most INT_MAX.
  int SharedTasks(const std::vector<int>& nodes) const;

 private:
  std::vector<int> SelectNormal(int procs, const std::vector<char>* excluded) const;
  std::vector<int> SelectUniform(int procs, double cpu_fraction,
                                 const std::vector<char>* excluded) const;
  bool HasSlot(int n) const { return nodes_[n].paral_tasks() < policy_.mpl_limit; }

  SchedulingPolicy policy_;
  std::vector<SimNode> nodes_;
  int free_nodes_ = 0;
  int local_cpu_nodes_ = 0;  // nodes with CPU_local != 0
  // Bit n set iff node n has a free slot (HasSlot), for SelectNormal's scan
  // of a dedicated cluster: it visits the free nodes only.
  std::vector<uint64_t> free_bits_;
  void SetFreeBit(int n, bool free) {
    const uint64_t bit = uint64_t{1} << (n & 63);
    if (free) free_bits_[n >> 6] |= bit;
    else free_bits_[n >> 6] &= ~bit;
  }
};

// The Normal policy by its definition: every eligible node (a free slot, not
// excluded) sorted by (CPU load, parallel tasks, index), the first `procs`
// taken, returned in index order; empty if there are fewer. ClusterModel
// selects the same nodes faster (a bitmap walk on a dedicated cluster,
// nth_element otherwise); this is the reference its test and benchmark
// compare with.
std::vector<int> SelectNormalByFullSort(const ClusterModel& cluster, int procs,
                                        const std::vector<char>* excluded);

// A waiting job as the job selection policy sees it.
struct QueuedJob {
  int key = -1;
  int procs = 1;
  double requested_time = 0;  // used for EASY reservations, as a real scheduler does
  double cpu_fraction = 1;
};

// A running job as the job selection policy sees it.
struct PlacedJob {
  int key = -1;
  const std::vector<int>* nodes = nullptr;
  double expected_end = 0;  // start + requested time (never before `now`)
};

struct StartDecision {
  int queue_index = -1;
  std::vector<int> nodes;
};

// Job Selection Policy (section 3) at time `now`: FCFS starts queue heads
// while they fit; EASY then backfills later jobs that neither delay the
// head's reservation (computed from the running jobs' expected ends) nor use
// its reserved nodes. Started jobs are placed in `cluster`; the decisions are
// returned in start order. Jobs larger than the cluster are never started.
std::vector<StartDecision> SelectJobsToStart(ClusterModel& cluster,
                                             const std::vector<QueuedJob>& queue,
                                             const std::vector<PlacedJob>& running, double now);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_CLUSTER_MODEL_H_
