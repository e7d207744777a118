// Each kernel on small crafted histories, with answers derived by hand from
// the paper's algorithms and equations.
#include "models/turnaround/estimator.h"

#include <cmath>

#include "gtest/gtest.h"

namespace sojourn::turnaround {
namespace {

JobSpec Job(int64_t id, int32_t user, int32_t exe, int32_t procs, int64_t requested = -1,
            double cpu_fraction = -1) {
  JobSpec j;
  j.job_id = id;
  j.user = user;
  j.executable = exe;
  j.procs = procs;
  j.queue = 1;
  j.requested_time = requested;
  j.cpu_fraction = cpu_fraction;
  return j;
}

JobRecord Hist(const JobSpec& spec, int64_t wait, int64_t exec, double cpu_per_task = -1,
               double cpu_ahead = 0, double cpu_backwards = 0, int shared = 0) {
  JobRecord r;
  r.spec = spec;
  r.wait_time = wait;
  r.exec_time = exec;
  r.cpu_time_per_task = cpu_per_task;
  r.cpu_ahead = cpu_ahead;
  r.cpu_backwards = cpu_backwards;
  r.shared_tasks = shared;
  return r;
}

ClusterSnapshot Dedicated(int nodes, JobSelection js = JobSelection::kFcfs, int mpl = 1) {
  ClusterSnapshot s;
  s.now = 1000;
  s.nodes.resize(nodes);
  s.policy.job_selection = js;
  s.policy.mpl_limit = mpl;
  return s;
}

RunningJob Running(const JobSpec& spec, int64_t start, std::vector<int32_t> nodes,
                   double cpu_cur = -1) {
  RunningJob r;
  r.spec = spec;
  r.start_time = start;
  r.nodes = std::move(nodes);
  r.cpu_time_cur = cpu_cur;
  return r;
}

class EstimatorTest : public ::testing::Test {
 protected:
  void Put(const JobRecord& r) { ASSERT_TRUE(db_.Put(r).ok()); }
  KernelEstimate Run(Kernel k, const EstimateRequest& req, EstimatorOptions opt = {}) {
    TurnaroundEstimator est(db_, opt);
    auto e = est.EstimateWith(k, req);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : KernelEstimate{};
  }
  InMemoryHistDb db_;
};

// Algorithms 1-2. Two waiting jobs of an application whose history says 100
// CPU-s per task -> CPUtime_ahead = 200. Alg. 1: the closest CPUtime_ahead is
// 196 (wait 50). Alg. 2: within 5 % (190..210) are 196, 205, 207 with
// CPUtime_backwards 1000, 400, 600 -> average 666.7 -> closest 600 (exec 250).
TEST_F(EstimatorTest, HistoricalFollowsAlgorithms1And2) {
  const JobSpec other = Job(-1, 2, 9, 1);
  Put(Hist(other, 0, 100, 100));
  const JobSpec app = Job(-1, 1, 7, 2);
  Put(Hist(app, 5, 100, -1, 0, 0));
  Put(Hist(app, 50, 300, -1, 196, 1000));
  Put(Hist(app, 70, 200, -1, 205, 400));
  Put(Hist(app, 80, 250, -1, 207, 600));
  Put(Hist(app, 400, 900, -1, 500, 0));
  EstimateRequest req{Job(100, 1, 7, 2), Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.waiting = {Job(50, 2, 9, 1), Job(51, 2, 9, 1)};
  KernelEstimate e = Run(Kernel::kHistorical, req);
  EXPECT_TRUE(e.from_history);
  EXPECT_EQ(e.level, TemplateLevel::kUserExecutableProcs);
  EXPECT_DOUBLE_EQ(e.wait.point, 50);
  EXPECT_DOUBLE_EQ(e.exec.point, 250);
  EXPECT_DOUBLE_EQ(e.turnaround.point, 300);
  EXPECT_EQ(e.matched, 3);
  EXPECT_LE(e.turnaround.lo, e.turnaround.point);
  EXPECT_GE(e.turnaround.hi, e.turnaround.point);
}

// A job estimated while it waits (the service estimates queued jobs) has the
// time since its submit behind it: the record's wait runs from the snapshot,
// as the simulation kernels count it (it was ignored: 0 extra wait for a job
// queued for hours). With and without history; replay estimates at submit.
TEST_F(EstimatorTest, HistoricalCountsTheTimeAlreadyWaited) {
  const JobSpec app = Job(-1, 1, 7, 2);
  Put(Hist(app, 50, 300, -1, 196, 1000));
  Put(Hist(app, 70, 200, -1, 205, 400));
  EstimateRequest req{Job(100, 1, 7, 2), Dedicated(4)};
  req.snapshot.waiting = {Job(50, 1, 7, 2)};
  req.job.submit_time = req.snapshot.now;
  const KernelEstimate at_submit = Run(Kernel::kHistorical, req);
  req.job.submit_time = req.snapshot.now - 600;
  const KernelEstimate later = Run(Kernel::kHistorical, req);
  EXPECT_DOUBLE_EQ(later.wait.point, at_submit.wait.point + 600);
  EXPECT_DOUBLE_EQ(later.turnaround.point, at_submit.turnaround.point + 600);
  EXPECT_DOUBLE_EQ(later.exec.point, at_submit.exec.point);
  EXPECT_DOUBLE_EQ(later.turnaround.lo, at_submit.turnaround.lo + 600);
  EXPECT_DOUBLE_EQ(later.turnaround.hi, at_submit.turnaround.hi + 600);
  // The simulation kernel counts it too (WaitSince).
  req.job.submit_time = req.snapshot.now;
  const double sim_at_submit = Run(Kernel::kSimulation, req).wait.point;
  req.job.submit_time = req.snapshot.now - 600;
  EXPECT_DOUBLE_EQ(Run(Kernel::kSimulation, req).wait.point, sim_at_submit + 600);
  // No history of the job: the work ahead over the cluster, after the wait.
  EstimateRequest none{Job(101, 3, 5, 1), Dedicated(4)};
  none.job.submit_time = none.snapshot.now - 900;
  const KernelEstimate n = Run(Kernel::kHistorical, none);
  EXPECT_FALSE(n.from_history);
  EXPECT_DOUBLE_EQ(n.wait.point, 900);
}

// With no record of the application, the Historical kernel falls back to the
// coarser template (same user, any executable).
TEST_F(EstimatorTest, HistoricalFallsBackToCoarserTemplate) {
  Put(Hist(Job(-1, 1, 8, 3), 40, 600));
  EstimateRequest req{Job(100, 1, 7, 2), Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  KernelEstimate e = Run(Kernel::kHistorical, req);
  EXPECT_EQ(e.level, TemplateLevel::kUser);
  EXPECT_DOUBLE_EQ(e.wait.point, 40);
  EXPECT_DOUBLE_EQ(e.exec.point, 600);
}

// Algorithm 3 on a dedicated 4-node cluster: R (4 nodes, 500 CPU-s per task,
// CPU 100 %) has run 100 s -> RemTime 400; the target (2 nodes, 300 CPU-s)
// starts when R ends: wait 400, exec 300.
TEST_F(EstimatorTest, SimulationOnDedicatedCluster) {
  const JobSpec r = Job(1, 3, 3, 4, -1, 1.0);
  Put(Hist(r, 0, 500, 500));
  const JobSpec t = Job(2, 1, 7, 2, -1, 1.0);
  Put(Hist(t, 0, 300, 300));
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(r, 900, {0, 1, 2, 3})};
  KernelEstimate e = Run(Kernel::kSimulation, req);
  EXPECT_NEAR(e.wait.point, 400, 1e-6);
  EXPECT_NEAR(e.exec.point, 300, 1e-6);
  EXPECT_NEAR(e.turnaround.point, 700, 1e-6);
}

// Local load of 0.5 CPU (one local task) on every node. RemTime MPL (eq. 5):
// x MPL_max = 2 -> wait 800, exec 600. RemTime CPU (eq. 6-8): x CPU_max = 1.5
// -> wait 600, exec 450.
TEST_F(EstimatorTest, SimulationRemTimeMplAndCpu) {
  const JobSpec r = Job(1, 3, 3, 4, -1, 1.0);
  Put(Hist(r, 0, 500, 500));
  const JobSpec t = Job(2, 1, 7, 2, -1, 1.0);
  Put(Hist(t, 0, 300, 300));
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  for (NodeState& n : req.snapshot.nodes) n = {0.5, 1};
  req.snapshot.running = {Running(r, 900, {0, 1, 2, 3}, 100)};
  EstimatorOptions opt;
  opt.remtime = RemTimeMethod::kMpl;
  KernelEstimate mpl = Run(Kernel::kSimulation, req, opt);
  EXPECT_NEAR(mpl.wait.point, 800, 1e-6);
  EXPECT_NEAR(mpl.exec.point, 600, 1e-6);
  opt.remtime = RemTimeMethod::kCpu;
  KernelEstimate cpu = Run(Kernel::kSimulation, req, opt);
  EXPECT_NEAR(cpu.wait.point, 600, 1e-6);
  EXPECT_NEAR(cpu.exec.point, 450, 1e-6);
}

// Time sharing on one node with MPL 2, RemTime CPU and CPUtime CPU (eq. 11-12):
// A has 50 CPU-s left, the target needs 100; together CPU_max = 2, so A ends
// after 100 s, when the target has used 50 CPU-s; alone it needs 50 s more.
TEST_F(EstimatorTest, SimulationAdvancesCpuTimeWhileSharing) {
  const JobSpec a = Job(1, 3, 3, 1, -1, 1.0);
  Put(Hist(a, 0, 50, 50));
  const JobSpec t = Job(2, 1, 7, 1, -1, 1.0);
  Put(Hist(t, 0, 100, 100));
  EstimateRequest req{t, Dedicated(1, JobSelection::kFcfs, 2)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(a, 1000, {0}, 0)};
  EstimatorOptions opt;
  opt.remtime = RemTimeMethod::kCpu;
  opt.cputime = CpuTimeMethod::kCpu;
  KernelEstimate e = Run(Kernel::kSimulation, req, opt);
  EXPECT_NEAR(e.wait.point, 0, 1e-6);
  EXPECT_NEAR(e.exec.point, 150, 1e-6);
  // MPL variants (eq. 5 and 9-10) give the same here: MPL_max = 2.
  opt.remtime = RemTimeMethod::kMpl;
  opt.cputime = CpuTimeMethod::kMpl;
  e = Run(Kernel::kSimulation, req, opt);
  EXPECT_NEAR(e.exec.point, 150, 1e-6);
}

// Algorithm 3 with EASY: R holds 2 of 4 nodes until 100; the head A needs 4.
// FCFS: the target (2 nodes, 50 s) waits for A: start 200. EASY: it ends
// before A's reservation and backfills now.
TEST_F(EstimatorTest, SimulationFcfsVersusEasy) {
  const JobSpec r = Job(1, 3, 3, 2, 100, 1.0);
  Put(Hist(r, 0, 100, 100));
  const JobSpec a = Job(2, 4, 4, 4, 100, 1.0);
  Put(Hist(a, 0, 100, 100));
  const JobSpec t = Job(3, 1, 7, 2, 50, 1.0);
  Put(Hist(t, 0, 50, 50));
  for (JobSelection js : {JobSelection::kFcfs, JobSelection::kEasyBackfilling}) {
    EstimateRequest req{t, Dedicated(4, js)};
    req.job.submit_time = req.snapshot.now;
    req.snapshot.running = {Running(r, 1000, {0, 1})};
    req.snapshot.waiting = {a};
    KernelEstimate e = Run(Kernel::kSimulation, req);
    EXPECT_NEAR(e.wait.point, js == JobSelection::kFcfs ? 200 : 0, 1e-6);
    EXPECT_NEAR(e.exec.point, 50, 1e-6);
  }
}

// FCFS under a multiprogramming limit starts queue heads while they fit: on
// 4 nodes with MPL 2, A, B and C (2 tasks each) start at once and the target D
// still finds 2 nodes with a free slot (C shares nodes with A, D with B). The
// queue handed to the job selection used to be cut where the sizes summed
// past the free nodes (right for MPL 1, too early above it), so D waited for
// the first job to end.
TEST_F(EstimatorTest, SimulationFcfsStartsEveryHeadThatFitsUnderMpl) {
  const JobSpec a = Job(2, 4, 4, 2, 100, 1.0);
  const JobSpec b = Job(3, 4, 4, 2, 100, 1.0);
  const JobSpec c = Job(4, 4, 4, 2, 100, 1.0);
  const JobSpec d = Job(5, 4, 4, 2, 100, 1.0);
  Put(Hist(a, 0, 100, 100));
  EstimateRequest req{d, Dedicated(4, JobSelection::kFcfs, 2)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.waiting = {a, b, c};
  KernelEstimate e = Run(Kernel::kSimulation, req);
  EXPECT_NEAR(e.wait.point, 0, 1e-6);
  // With MPL 1 only two fit; D waits for the first two to end (100 s).
  EstimateRequest one{d, Dedicated(4, JobSelection::kFcfs, 1)};
  one.job.submit_time = one.snapshot.now;
  one.snapshot.waiting = {a, b, c};
  EXPECT_NEAR(Run(Kernel::kSimulation, one).wait.point, 100, 1e-6);
}

// Algorithm 4 on a dedicated cluster: R's isolated runs average 400 and it has
// run 100 s -> RemTime 300; the target's isolated runs average 300 (the
// shared run of 1000 s is not used).
TEST_F(EstimatorTest, HybridUsesIsolatedHistory) {
  const JobSpec r = Job(1, 3, 3, 4);
  Put(Hist(r, 0, 300));
  Put(Hist(r, 0, 500));
  const JobSpec t = Job(2, 1, 7, 2);
  Put(Hist(t, 0, 200));
  Put(Hist(t, 0, 400));
  Put(Hist(t, 0, 1000, -1, 0, 0, 2));
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(r, 900, {0, 1, 2, 3})};
  KernelEstimate e = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(e.wait.point, 300, 1e-6);
  EXPECT_NEAR(e.exec.point, 300, 1e-6);
  // R has outlived its mean (450 > 400): the mean of its longer runs (500).
  req.snapshot.running = {Running(r, 550, {0, 1, 2, 3})};
  e = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(e.wait.point, 50, 1e-6);
}

// Algorithm 4 lines 8-9: sharing one node (MPL 2), both jobs see
// SharedTasksCount 1 and use their runs with one co-resident task.
TEST_F(EstimatorTest, HybridMatchesSharedTasksCount) {
  const JobSpec r = Job(1, 3, 3, 1);
  Put(Hist(r, 0, 100));
  Put(Hist(r, 0, 300, -1, 0, 0, 1));
  const JobSpec t = Job(2, 1, 7, 1);
  Put(Hist(t, 0, 50));
  Put(Hist(t, 0, 120, -1, 0, 0, 1));
  Put(Hist(t, 0, 900, -1, 0, 0, 3));
  EstimateRequest req{t, Dedicated(1, JobSelection::kFcfs, 2)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(r, 1000, {0})};
  KernelEstimate e = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(e.wait.point, 0, 1e-6);
  EXPECT_NEAR(e.exec.point, 120, 1e-6);
}

// Algorithm 4 lines 3-6 average the application's isolated runs; with none
// the average is over nothing, and the Hybrid uses the Simulation kernel's
// RemTime (section 4.3 replaces only that function). The target's one run
// was co-scheduled (SharedTasksCount 3, 500 s) but used 200 CPU-s per task
// at CPU(J) = 1, i.e. 200 s in isolation (section 4.2). Alone on an idle
// cluster: MPL_max = 1, RemTime = 200 (eq. 3, 5), not the 500 s of a run
// slowed by three co-resident tasks.
TEST_F(EstimatorTest, HybridWithoutIsolatedRunsUsesSimulationRemTime) {
  const JobSpec t = Job(2, 1, 7, 2, -1, 1.0);
  Put(Hist(t, 0, 500, 200, 0, 0, 3));
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  KernelEstimate sim = Run(Kernel::kSimulation, req);
  KernelEstimate hyb = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(sim.exec.point, 200, 1e-6);
  EXPECT_NEAR(hyb.exec.point, 200, 1e-6);
  EXPECT_NEAR(hyb.wait.point, 0, 1e-6);
  EXPECT_TRUE(hyb.from_history);
}

// Algorithm 4 line 8 wants runs with the same SharedTasksCount. Node 0 has a
// local task (CPU 0.5), node 1 none: the 2-task target sees SharedTasksCount
// 1. Its runs: isolated, 100 s (100 CPU-s); 4 co-resident tasks, 400 s (100
// CPU-s). No run with count 1 -> Simulation RemTime: ExecTime_total = 100 s
// in isolation (both runs: 100 CPU-s / CPU(J) 1), x MPL_max = 2 (eq. 5) ->
// 200 s; neither the isolated 100 s nor the 400 s of another count. With a
// run at count 1 (250 s) the history answers: 250 s.
TEST_F(EstimatorTest, HybridWithoutSameSharedTasksCountUsesSimulationRemTime) {
  const JobSpec t = Job(2, 1, 7, 2, -1, 1.0);
  Put(Hist(t, 0, 100, 100));
  Put(Hist(t, 0, 400, 100, 0, 0, 4));
  EstimateRequest req{t, Dedicated(2)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.nodes[0] = {0.5, 1};
  KernelEstimate sim = Run(Kernel::kSimulation, req);
  KernelEstimate hyb = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(sim.exec.point, 200, 1e-6);
  EXPECT_NEAR(hyb.exec.point, 200, 1e-6);
  Put(Hist(t, 0, 250, 125, 0, 0, 1));
  hyb = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(hyb.exec.point, 250, 1e-6);
}

// Where Algorithm 4 has no run, the whole RemTime is the Simulation kernel's,
// including its rule for a job past its CPU time. R ran 150 s and used 150
// CPU-s per task; its runs were both co-scheduled (4 tasks: 400 s and 600 s,
// 100 CPU-s each -> 100 s in isolation). Alone now (no isolated run):
// CPUtime_rem = 100 - 150 < 0 (eq. 1) and R has no requested time, so R ends
// now and the target, which needs all 4 nodes, starts at once (wait 0), as in
// the Simulation kernel; the co-scheduled runs (mean 500 s) are not used.
TEST_F(EstimatorTest, HybridFallbackIsSimulationForOverrunningJob) {
  const JobSpec r = Job(1, 3, 3, 4, -1, 1.0);
  Put(Hist(r, 0, 400, 100, 0, 0, 4));
  Put(Hist(r, 0, 600, 100, 0, 0, 4));
  JobSpec t = Job(2, 1, 7, 4, 50, 1.0);
  t.queue = 2;  // no history at any level: 50 s requested
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(r, 850, {0, 1, 2, 3}, 150)};
  KernelEstimate hyb = Run(Kernel::kHybrid, req);
  KernelEstimate sim = Run(Kernel::kSimulation, req);
  EXPECT_NEAR(sim.wait.point, 0, 1e-6);
  EXPECT_NEAR(hyb.wait.point, 0, 1e-6);
  EXPECT_NEAR(hyb.exec.point, 50, 1e-6);
}

// No history at any template level: the Hybrid is the Simulation kernel.
// Requested 300 s, one local task on each node: x MPL_max = 2 -> 600 s.
TEST_F(EstimatorTest, HybridWithoutHistoryIsSimulation) {
  const JobSpec t = Job(2, 1, 7, 2, 300, 1.0);
  EstimateRequest req{t, Dedicated(2)};
  req.job.submit_time = req.snapshot.now;
  for (NodeState& n : req.snapshot.nodes) n = {0.5, 1};
  KernelEstimate sim = Run(Kernel::kSimulation, req);
  KernelEstimate hyb = Run(Kernel::kHybrid, req);
  EXPECT_NEAR(sim.exec.point, 600, 1e-6);
  EXPECT_NEAR(hyb.exec.point, 600, 1e-6);
  EXPECT_FALSE(hyb.from_history);
}

// Baselines inside the same queue simulation. R requested 1000 s, ran 100;
// the target requested 500 s on all 4 nodes.
TEST_F(EstimatorTest, Baselines) {
  const JobSpec r = Job(1, 3, 3, 4, 1000);
  const JobSpec t = Job(2, 1, 7, 4, 500);
  Put(Hist(Job(-1, 1, 5, 1), 0, 999));  // the user's older job
  Put(Hist(Job(-1, 1, 7, 4), 0, 100));  // last two of user 1: 100 and 300
  Put(Hist(Job(-1, 1, 6, 2), 0, 300));
  EstimateRequest req{t, Dedicated(4)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(r, 900, {0, 1, 2, 3})};
  KernelEstimate user = Run(Kernel::kUserEstimate, req);
  EXPECT_NEAR(user.wait.point, 900, 1e-6);
  EXPECT_NEAR(user.exec.point, 500, 1e-6);
  KernelEstimate last_two = Run(Kernel::kLastTwo, req);
  EXPECT_NEAR(last_two.exec.point, 200, 1e-6);   // (100 + 300) / 2
  EXPECT_NEAR(last_two.wait.point, 900, 1e-6);   // user 3 has no history
  KernelEstimate tmpl = Run(Kernel::kTemplateMean, req);
  EXPECT_NEAR(tmpl.exec.point, 100, 1e-6);       // only (1, 7, 4) run
}

// Job events build the HistDB record of Table 1: CPUtime_ahead at submit,
// CPUtime_backwards and SharedTasksCount at start, times at finish.
TEST_F(EstimatorTest, JobEventsRecordQueueAndClusterState) {
  Put(Hist(Job(-1, 2, 9, 1), 0, 100, 80));  // 80 CPU-s per task
  TurnaroundEstimator est(db_, {});
  ClusterSnapshot s = Dedicated(4, JobSelection::kFcfs, 2);
  s.nodes[1] = {0.3, 1};
  s.waiting = {Job(50, 2, 9, 1), Job(51, 2, 9, 1), Job(52, 2, 9, 1)};
  JobSpec job = Job(7, 1, 7, 2);
  job.submit_time = 1000;
  ASSERT_TRUE(est.OnSubmitted(job, s).ok());
  s.waiting.pop_back();
  s.running = {Running(Job(60, 2, 9, 1), 900, {1})};
  ASSERT_TRUE(est.OnStarted(7, 1100, {0, 1}, s).ok());
  ASSERT_TRUE(est.OnFinished(7, 1500, 350).ok());
  EXPECT_EQ(db_.GetPending(7).status().code(), absl::StatusCode::kNotFound);
  auto recs = db_.Recent(TemplateKey::For(job, TemplateLevel::kUserExecutableProcs), 5);
  ASSERT_EQ(recs->size(), 1u);
  const JobRecord& r = (*recs)[0];
  EXPECT_DOUBLE_EQ(r.cpu_ahead, 240);
  EXPECT_DOUBLE_EQ(r.cpu_backwards, 160);
  EXPECT_EQ(r.queue_len_submit, 3);
  EXPECT_EQ(r.queue_len_start, 2);
  EXPECT_EQ(r.shared_tasks, 2);  // one parallel + one local task on node 1
  EXPECT_DOUBLE_EQ(r.max_local_cpu, 0.3);
  EXPECT_EQ(r.wait_time, 100);
  EXPECT_EQ(r.exec_time, 400);
  EXPECT_DOUBLE_EQ(r.cpu_time_per_task, 350);
  EXPECT_EQ(est.OnStarted(99, 1, {0}, s).code(), absl::StatusCode::kNotFound);
}

// A job id is submitted and started once while pending: a second submit used
// to replace the record (its start lost, the finish then refused), a second
// start was taken too. Finishing a job that never started says so. Once
// finished, the id may be submitted again.
TEST_F(EstimatorTest, JobEventsRefuseRepeatedSubmitAndStart) {
  TurnaroundEstimator est(db_, {});
  ClusterSnapshot s = Dedicated(4);
  JobSpec job = Job(7, 1, 7, 2);
  job.submit_time = 1000;
  ASSERT_TRUE(est.OnSubmitted(job, s).ok());
  absl::Status again = est.OnSubmitted(job, s);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("job 7 is already waiting (submitted at 1000)"),
            std::string::npos) << again;
  absl::Status early = est.OnFinished(7, 1500, 100);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_NE(early.message().find("job 7 has not started"), std::string::npos) << early;
  ASSERT_TRUE(est.OnStarted(7, 1100, {0, 1}, s).ok());
  again = est.OnSubmitted(job, s);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("job 7 is already running (started at 1100)"), std::string::npos)
      << again;
  absl::Status restart = est.OnStarted(7, 1200, {2, 3}, s);
  EXPECT_EQ(restart.code(), absl::StatusCode::kFailedPrecondition) << restart;
  EXPECT_NE(restart.message().find("job 7 already started at 1100"), std::string::npos) << restart;
  ASSERT_TRUE(est.OnFinished(7, 1500, 300).ok());
  auto recs = db_.Recent(TemplateKey::For(job, TemplateLevel::kUserExecutableProcs), 5);
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].wait_time, 100);  // the first start, not the refused one
  EXPECT_EQ((*recs)[0].exec_time, 400);
  EXPECT_TRUE(est.OnSubmitted(job, s).ok());
}

// A task uses at most one CPU: CPU seconds per task beyond the run time
// (finish - start) + 1 s are refused and nothing is stored; up to it (and
// unknown, -1) they are taken.
TEST_F(EstimatorTest, FinishRefusesMoreCpuTimeThanRunTime) {
  TurnaroundEstimator est(db_, {});
  ClusterSnapshot s = Dedicated(4);
  JobSpec job = Job(7, 1, 7, 2);
  job.submit_time = 1000;
  ASSERT_TRUE(est.OnSubmitted(job, s).ok());
  ASSERT_TRUE(est.OnStarted(7, 1100, {0, 1}, s).ok());
  for (double cpu : {1e15, 401.5}) {
    absl::Status st = est.OnFinished(7, 1500, cpu);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << cpu;
    EXPECT_NE(st.message().find("run time of 400 s"), std::string::npos) << st;
  }
  EXPECT_EQ(db_.size(), 0);
  EXPECT_TRUE(db_.GetPending(7).ok());
  ASSERT_TRUE(est.OnFinished(7, 1500, 401).ok());
  EXPECT_EQ(db_.size(), 1);
  job.job_id = 8;
  ASSERT_TRUE(est.OnSubmitted(job, s).ok());
  ASSERT_TRUE(est.OnStarted(8, 1100, {0, 1}, s).ok());
  EXPECT_TRUE(est.OnFinished(8, 1100, -1).ok());
}

// A record holding an absurd CPU time (written before finishes were checked)
// is read as at most its run time + 1 s: one job of the application waits
// ahead of the target, which then waits 101 s, not 1e15 s (such a record
// once gave a wait of 1.4e11 h); the Hybrid goes by the run's 100 s.
TEST_F(EstimatorTest, AbsurdCpuTimeInHistoryIsBounded) {
  const JobSpec app = Job(-1, 2, 9, 1, -1, 1.0);
  Put(Hist(app, 0, 100, 1e15));
  auto stats = db_.Stats(TemplateKey::For(app, TemplateLevel::kUserExecutableProcs));
  EXPECT_DOUBLE_EQ(stats->mean_cpu_per_task(), 101);
  EXPECT_DOUBLE_EQ(stats->mean_isolated_exec(), 101);
  EXPECT_DOUBLE_EQ(stats->mean_isolated_cpu_fraction(), 1);
  JobSpec t = Job(2, 1, 7, 1, 50, 1.0);
  t.queue = 2;  // no history at any level
  EstimateRequest req{t, Dedicated(1)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.waiting = {Job(5, 2, 9, 1, -1, 1.0)};
  EXPECT_NEAR(Run(Kernel::kHistorical, req).wait.point, 101, 1e-6);  // getCPUtime
  EXPECT_NEAR(Run(Kernel::kSimulation, req).wait.point, 101, 1e-6);  // ExecTime_total
  EXPECT_NEAR(Run(Kernel::kHybrid, req).wait.point, 100, 1e-6);      // its isolated run
}

// The job estimated must not also be in its snapshot (job ids > 0): it used
// to be dropped from its place in the queue, and simulated twice when
// running. Ids <= 0 name no job: a target and waiting jobs without ids (0,
// the proto default, as `sojourn turnaround --job-id` sends) are all
// simulated; the waiting job used to be dropped as if it were the target.
TEST_F(EstimatorTest, RejectsTargetListedInItsSnapshot) {
  TurnaroundEstimator est(db_, {});
  EstimateRequest req{Job(5, 1, 7, 1, 50, 1.0), Dedicated(1)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.waiting = {Job(5, 1, 7, 1, 50, 1.0)};
  absl::Status st = est.Estimate(req).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("job 5 is the job estimated"), std::string::npos) << st;
  EXPECT_NE(st.message().find("waiting"), std::string::npos) << st;
  req.snapshot.waiting.clear();
  req.snapshot.running = {Running(Job(5, 1, 7, 1, 50, 1.0), 990, {0})};
  st = est.Estimate(req).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("running"), std::string::npos) << st;
  req.snapshot.running.clear();
  for (int64_t id : {0, -1}) {
    req.job.job_id = id;
    req.snapshot.waiting = {Job(id, 3, 3, 1, 100, 1.0)};
    auto e = est.Estimate(req);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_NEAR(e->simulation.wait.point, 100, 1e-6) << id;
    EXPECT_NEAR(e->historical.wait.point, 100, 1e-6) << id;
  }
}

// Running jobs beyond the multiprogramming limit (two on the only node under
// MPL 1) are what the cluster runs, e.g. placed under another limit: they
// are simulated as they are, and the target waits for both. Both progress
// at half speed (eq. 4-5, 11-12) until R1 ends at 200 s with R2 half done;
// alone R2 needs 100 s more.
TEST_F(EstimatorTest, SimulatesRunningJobsBeyondTheMplLimit) {
  EstimateRequest req{Job(3, 1, 7, 1, 50, 1.0), Dedicated(1)};
  req.job.submit_time = req.snapshot.now;
  req.snapshot.running = {Running(Job(1, 3, 3, 1, 100, 1.0), 1000, {0}),
                          Running(Job(2, 4, 4, 1, 200, 1.0), 1000, {0})};
  KernelEstimate e = Run(Kernel::kSimulation, req);
  EXPECT_NEAR(e.wait.point, 300, 1e-6);
  EXPECT_NEAR(e.exec.point, 50, 1e-6);
}

// Intervals: before calibration [p/2, 2p]; after `min_calibration` outcomes
// whose truth is always 201 s for a 100 s prediction, every log-residual is
// log(202/101) = log 2, so the interval collapses onto 201 s.
TEST_F(EstimatorTest, IntervalsCalibrateOnOutcomes) {
  const JobSpec app = Job(-1, 1, 7, 1, 1000);
  Put(Hist(app, 0, 100, 100));
  EstimatorOptions opt;
  opt.min_calibration = 5;
  TurnaroundEstimator est(db_, opt);
  ClusterSnapshot s = Dedicated(4);
  for (int i = 0; i <= 5; ++i) {
    JobSpec j = app;
    j.job_id = 100 + i;
    j.submit_time = s.now;
    auto e = est.Estimate({j, s});
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_DOUBLE_EQ(e->hybrid.exec.point, 100);
    if (i < 5) {
      EXPECT_DOUBLE_EQ(e->hybrid.exec.lo, 50);
      EXPECT_DOUBLE_EQ(e->hybrid.exec.hi, 200);
    } else {
      EXPECT_NEAR(e->hybrid.exec.lo, 201, 1e-6);
      EXPECT_NEAR(e->hybrid.exec.hi, 201, 1e-6);
      EXPECT_NEAR(e->historical.exec.lo, 201, 1e-6);
    }
    // Record the outcome under another user so the history stays the same.
    JobSpec recorded = j;
    recorded.user = 99;
    ASSERT_TRUE(est.OnSubmitted(recorded, s).ok());
    ASSERT_TRUE(est.OnStarted(j.job_id, s.now, {0}, s).ok());
    ASSERT_TRUE(est.OnFinished(j.job_id, s.now + 201, 201).ok());
  }
}

// A HistDb whose next Put fails (a full disk), for the order of storing and
// scoring.
class FailingPutHistDb final : public HistDb {
 public:
  absl::Status Put(const JobRecord& r) override {
    if (fail_next_put) {
      fail_next_put = false;
      return absl::ResourceExhaustedError("disk full");
    }
    return db.Put(r);
  }
  absl::StatusOr<bool> PutBatch(const std::vector<JobRecord>& records,
                                const std::string& batch_id) override {
    return db.PutBatch(records, batch_id);
  }
  absl::StatusOr<std::vector<JobRecord>> Recent(const TemplateKey& key, int limit) const override {
    return db.Recent(key, limit);
  }
  absl::StatusOr<TemplateStats> Stats(const TemplateKey& key) const override {
    return db.Stats(key);
  }
  int64_t size() const override { return db.size(); }
  absl::StatusOr<HistoryPage> Scan(const std::string& cursor, int limit) const override {
    return db.Scan(cursor, limit);
  }
  absl::Status PutPending(const JobRecord& r) override { return db.PutPending(r); }
  absl::StatusOr<JobRecord> GetPending(int64_t id) const override { return db.GetPending(id); }
  absl::Status ErasePending(int64_t id) override { return db.ErasePending(id); }

  InMemoryHistDb db;
  bool fail_next_put = false;
};

// OnFinished scores (and calibrates on) forecasts only: the estimates made
// under the job's id before it started, for what it was submitted with, all
// three kernels of one request, once the finished record is stored.
TEST_F(EstimatorTest, FinishScoresOnlyForecastsOfTheJob) {
  FailingPutHistDb db;
  const JobSpec app = Job(-1, 1, 7, 1, 1000);
  ASSERT_TRUE(db.Put(Hist(app, 0, 100, 100)).ok());
  TurnaroundEstimator est(db, {});
  const ClusterSnapshot s = Dedicated(2);  // now 1000
  auto job = [&](int64_t id, int32_t procs) {
    JobSpec j = app;
    j.job_id = id;
    j.procs = procs;
    j.submit_time = s.now;
    return j;
  };
  auto run = [&](const JobSpec& j, int64_t start, int64_t finish,
                 std::vector<ScoredEstimate>* scored) {
    EXPECT_TRUE(est.OnSubmitted(j, s).ok());
    EXPECT_TRUE(est.OnStarted(j.job_id, start, {0}, s).ok());
    return est.OnFinished(j.job_id, finish, 50, scored);
  };

  // Job 1, estimated at its submit: its first finish is not stored (and
  // scores nothing); the finish sent again scores each kernel once.
  auto e1 = est.Estimate({job(1, 1), s});
  ASSERT_TRUE(e1.ok()) << e1.status();
  std::vector<ScoredEstimate> scored;
  db.fail_next_put = true;
  EXPECT_EQ(run(job(1, 1), 1010, 1110, &scored).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(scored.empty());
  ASSERT_TRUE(est.OnFinished(1, 1110, 50, &scored).ok());
  ASSERT_EQ(scored.size(), 3 * 3 + 1);
  for (const ScoredEstimate& x : scored) {
    const double observed[3] = {10, 100, 110};
    EXPECT_EQ(x.observed, observed[x.quantity]);
    if (x.kernel == Kernel::kUserEstimate) {
      EXPECT_EQ(x.quantity, 1);
      EXPECT_EQ(x.predicted, 1000);  // the requested time
    } else if (x.kernel == Kernel::kHistorical && x.quantity == 1) {
      EXPECT_EQ(x.predicted, e1->historical.exec.point);
    }
  }
  scored.clear();
  EXPECT_EQ(est.OnFinished(1, 1110, 50, &scored).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(scored.empty());

  // Job 2, estimated only once it ran: hindsight, not remembered.
  ASSERT_TRUE(est.OnSubmitted(job(2, 1), s).ok());
  ASSERT_TRUE(est.OnStarted(2, 1000, {0}, s).ok());
  ClusterSnapshot later = s;
  later.now = 1005;
  ASSERT_TRUE(est.Estimate({job(2, 1), later}).ok());
  ASSERT_TRUE(est.OnFinished(2, 1100, 50, &scored).ok());
  EXPECT_TRUE(scored.empty());

  // Job 3: a what-if under its id for 2 procs replaced the forecast for 1.
  ASSERT_TRUE(est.Estimate({job(3, 1), s}).ok());
  ASSERT_TRUE(est.Estimate({job(3, 2), s}).ok());
  ASSERT_TRUE(run(job(3, 1), 1000, 1100, &scored).ok());
  EXPECT_TRUE(scored.empty());

  // Job 4: a request that failed (3 procs on 2 nodes: the simulation
  // kernels refuse it) remembers nothing, so the forecast before it stands.
  ASSERT_TRUE(est.Estimate({job(4, 1), s}).ok());
  EXPECT_FALSE(est.Estimate({job(4, 3), s}).ok());
  ASSERT_TRUE(run(job(4, 1), 1000, 1100, &scored).ok());
  EXPECT_EQ(scored.size(), 3 * 3 + 1);
}

// Malformed requests are rejected.
TEST_F(EstimatorTest, RejectsMalformedRequest) {
  TurnaroundEstimator est(db_, {});
  EstimateRequest req{Job(1, 1, 1, 0), Dedicated(2)};
  EXPECT_EQ(est.Estimate(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.job.procs = 1;
  req.snapshot.running = {Running(Job(2, 1, 1, 1), 0, {5})};
  EXPECT_EQ(est.Estimate(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.snapshot.running.clear();
  req.job.procs = 3;  // larger than the cluster
  EXPECT_EQ(est.EstimateWith(Kernel::kSimulation, req).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A request whose `cancelled` says so stops with CANCELLED; the simulation
// polls it once per event, so a client that gave up mid-simulation stops it.
TEST_F(EstimatorTest, CancelledRequestsStop) {
  const JobSpec r = Job(1, 3, 3, 1, 100, 1.0);
  Put(Hist(r, 0, 100, 100));
  EstimateRequest req{Job(2, 1, 7, 1, 50, 1.0), Dedicated(1)};
  req.job.submit_time = req.snapshot.now;
  for (int i = 0; i < 20; ++i) req.snapshot.waiting.push_back(Job(10 + i, 3, 3, 1, 100, 1.0));
  req.snapshot.running = {Running(r, 990, {0})};
  TurnaroundEstimator est(db_, EstimatorOptions{});
  int polls = 0;
  req.cancelled = [&polls] { return ++polls > 5; };  // gives up after a few events
  auto e = est.EstimateWith(Kernel::kSimulation, req);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kCancelled) << e.status();
  EXPECT_EQ(polls, 6);
  req.cancelled = [] { return false; };
  auto ok = est.EstimateWith(Kernel::kSimulation, req);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_NEAR(ok->wait.point, 21 * 100 - 10, 1e-6);  // 20 jobs ahead plus R's last 90 s
  req.cancelled = [] { return true; };
  EXPECT_EQ(est.Estimate(req).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace sojourn::turnaround
