#include "models/turnaround/cluster_model.h"

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sojourn::turnaround {
namespace {

using ::testing::ElementsAre;

SchedulingPolicy Policy(JobSelection js, NodeSelection ns = NodeSelection::kNormal, int mpl = 1) {
  SchedulingPolicy p;
  p.job_selection = js;
  p.node_selection = ns;
  p.mpl_limit = mpl;
  return p;
}

// Tiny queue on 4 nodes, R running on nodes 0-1 until t=100 (requested).
// Queue: A (4 nodes, 50 s), B (2 nodes, 50 s), C (2 nodes, 200 s).
// FCFS: A blocks the queue, nothing starts. EASY: A is reserved all 4 nodes
// at t=100; B ends by then and backfills, C would delay A and waits.
TEST(ClusterModelTest, FcfsVersusEasyOnTinyQueue) {
  const std::vector<QueuedJob> queue = {{10, 4, 50, 1}, {11, 2, 50, 1}, {12, 2, 200, 1}};
  const std::vector<int> r_nodes = {0, 1};
  for (JobSelection js : {JobSelection::kFcfs, JobSelection::kEasyBackfilling}) {
    ClusterModel cluster(4, Policy(js));
    cluster.Place(1, r_nodes, 1.0);
    const std::vector<PlacedJob> running = {{1, &r_nodes, 100}};
    std::vector<StartDecision> started = SelectJobsToStart(cluster, queue, running, 0);
    if (js == JobSelection::kFcfs) {
      EXPECT_TRUE(started.empty());
      EXPECT_EQ(cluster.free_nodes(), 2);
    } else {
      ASSERT_EQ(started.size(), 1u);
      EXPECT_EQ(started[0].queue_index, 1);
      EXPECT_THAT(started[0].nodes, ElementsAre(2, 3));
      EXPECT_EQ(cluster.free_nodes(), 0);
    }
  }
}

// EASY uses the extra nodes: 6 nodes, R on 0-1 until 100, head A needs 5.
// A gets nodes 0-1 (freed at 100) plus 2-4; node 5 is extra, so the long C
// (1 node, 200 s) backfills there, while the long B (2 nodes) cannot.
TEST(ClusterModelTest, EasyBackfillsLongJobOnExtraNodes) {
  ClusterModel cluster(6, Policy(JobSelection::kEasyBackfilling));
  const std::vector<int> r_nodes = {0, 1};
  cluster.Place(1, r_nodes, 1.0);
  const std::vector<QueuedJob> queue = {{10, 5, 50, 1}, {11, 2, 300, 1}, {12, 1, 200, 1}};
  std::vector<StartDecision> started = SelectJobsToStart(cluster, queue, {{1, &r_nodes, 100}}, 0);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].queue_index, 2);
  EXPECT_THAT(started[0].nodes, ElementsAre(5));
}

// FCFS starts heads in order while they fit.
TEST(ClusterModelTest, FcfsStartsHeadsInOrder) {
  ClusterModel cluster(4, Policy(JobSelection::kFcfs));
  const std::vector<QueuedJob> queue = {{10, 1, 50, 1}, {11, 2, 50, 1}, {12, 2, 50, 1}, {13, 1, 9, 1}};
  std::vector<StartDecision> started = SelectJobsToStart(cluster, queue, {}, 0);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].queue_index, 0);
  EXPECT_EQ(started[1].queue_index, 1);
}

// Normal picks the least loaded nodes; Uniform puts a communication-bound job
// with the computation-bound one, on nodes with identical co-residents.
TEST(ClusterModelTest, NormalVersusUniformNodeSelection) {
  for (NodeSelection ns : {NodeSelection::kNormal, NodeSelection::kUniform}) {
    ClusterModel cluster(4, Policy(JobSelection::kFcfs, ns, 2));
    cluster.Place(1, {0, 1}, 0.9);  // CPU bound
    cluster.Place(2, {2, 3}, 0.3);  // communication bound
    std::vector<int> chosen = cluster.SelectNodes(2, 0.3, nullptr);
    if (ns == NodeSelection::kNormal) {
      EXPECT_THAT(chosen, ElementsAre(2, 3));
    } else {
      EXPECT_THAT(chosen, ElementsAre(0, 1));
    }
  }
}

// The MPL limit is the social contract: no node takes more parallel tasks.
TEST(ClusterModelTest, RespectsMplLimit) {
  ClusterModel cluster(2, Policy(JobSelection::kFcfs, NodeSelection::kNormal, 2));
  cluster.Place(1, {0, 1}, 1.0);
  EXPECT_EQ(cluster.free_nodes(), 2);
  cluster.Place(2, {0, 1}, 1.0);
  EXPECT_EQ(cluster.free_nodes(), 0);
  EXPECT_TRUE(cluster.SelectNodes(1, 1.0, nullptr).empty());
  cluster.Remove(2, {0, 1}, 1.0);
  EXPECT_EQ(cluster.free_nodes(), 2);
}

// Equations (4) and (8) and SharedTasksCount on a crafted state.
TEST(ClusterModelTest, MplCpuAndSharedTasks) {
  ClusterModel cluster(3, Policy(JobSelection::kFcfs, NodeSelection::kNormal, 4));
  cluster.SetLocal(1, 0.4, 1);
  cluster.Place(1, {0, 1}, 0.5);
  cluster.Place(2, {1, 2}, 0.7);
  // node 0: paral 1 (0.5); node 1: paral 2 (1.2) + local 1 (0.4); node 2: 1 (0.7)
  EXPECT_EQ(cluster.MplMax({0, 1}), 3);
  EXPECT_DOUBLE_EQ(cluster.CpuMax({0, 1}), 1.6);
  EXPECT_DOUBLE_EQ(cluster.CpuMax({2}), 0.7);
  // For job 1 on {0,1}: node 0 none, node 1 one other task + one local.
  EXPECT_EQ(cluster.SharedTasks({0, 1}), 2);
}

// MPL_local near INT_MAX (a snapshot's NodeState.local_tasks) saturates
// instead of overflowing (2^31 - 1 local tasks + 1 parallel task was signed
// overflow, UBSan).
TEST(ClusterModelTest, HugeLocalTaskCountsSaturate) {
  ClusterModel cluster(2, Policy(JobSelection::kFcfs, NodeSelection::kNormal, 2));
  cluster.SetLocal(0, 0.5, std::numeric_limits<int>::max());
  cluster.SetLocal(1, 0.5, std::numeric_limits<int>::max());
  cluster.Place(1, {0, 1}, 1.0);
  cluster.Place(2, {0, 1}, 1.0);
  EXPECT_EQ(cluster.MplMax({0, 1}), std::numeric_limits<int>::max());
  EXPECT_EQ(cluster.SharedTasks({0, 1}), std::numeric_limits<int>::max());
  cluster.SetLocal(1, 0.5, 1000);
  EXPECT_EQ(cluster.MplMax({1}), 1002);
  EXPECT_EQ(cluster.SharedTasks({1}), 1001);
}

// SelectNormalByFullSort is the Normal policy as it was written first: every
// eligible node sorted by (load, parallel tasks, index), the first `procs`
// taken, in index order. The model now takes a one-pass route on a dedicated cluster (MPL 1, no local CPU;
// free nodes from a bitmap) and nth_element otherwise; both must choose the
// same nodes. Random clusters of 1 to 300 nodes, with and without local
// load, MPL 1 to 3, random placements, removals and exclusions.
TEST(ClusterModelTest, NormalSelectionEqualsTheFullSort) {
  std::mt19937_64 rng(7);
  int fast = 0, general = 0;
  for (int round = 0; round < 400; ++round) {
    const int size = 1 + static_cast<int>(rng() % 300);
    const int mpl = 1 + static_cast<int>(rng() % 3);
    const bool local = rng() % 2 == 0;
    ClusterModel cluster(size, Policy(JobSelection::kEasyBackfilling, NodeSelection::kNormal, mpl));
    if (local) {
      for (int n = 0; n < size; ++n) {
        if (rng() % 3 == 0) cluster.SetLocal(n, 0.25 * static_cast<double>(rng() % 4), 1);
      }
    }
    std::vector<std::pair<int, std::vector<int>>> placed;
    for (int step = 0; step < 60; ++step) {
      if (!placed.empty() && rng() % 3 == 0) {
        const size_t k = rng() % placed.size();
        cluster.Remove(placed[k].first, placed[k].second, 0.5);
        placed.erase(placed.begin() + static_cast<long>(k));
        continue;
      }
      const int procs = 1 + static_cast<int>(rng() % std::max(1, size / 3));
      std::vector<char> excluded(size, 0);
      for (int n = 0; n < size; ++n) excluded[n] = rng() % 5 == 0;
      const std::vector<char>* none = nullptr;
      const std::vector<char>* some = &excluded;
      for (const std::vector<char>* ex : {none, some}) {
        ASSERT_EQ(cluster.SelectNormalForTest(procs, ex), SelectNormalByFullSort(cluster, procs, ex))
            << "round " << round << " step " << step << " size " << size << " mpl " << mpl;
      }
      (mpl == 1 && !local ? fast : general)++;
      std::vector<int> nodes = cluster.SelectNodes(procs, 0.5, nullptr);
      if (nodes.empty()) continue;
      cluster.Place(step + 1, nodes, 0.5);
      placed.emplace_back(step + 1, nodes);
    }
    int free = 0;
    for (int n = 0; n < size; ++n) free += cluster.node(n).paral_tasks() < mpl;
    ASSERT_EQ(cluster.free_nodes(), free);
  }
  EXPECT_GT(fast, 1000);
  EXPECT_GT(general, 1000);
}

}  // namespace
}  // namespace sojourn::turnaround
