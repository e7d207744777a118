#include "models/turnaround/offline_sim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/turnaround/local_load.h"

namespace sojourn::turnaround {
namespace {

OfflineJob Job(int64_t id, int64_t submit, int procs, double runtime, double cpu = 1.0) {
  OfflineJob j;
  j.spec.job_id = id;
  j.spec.submit_time = submit;
  j.spec.procs = procs;
  j.spec.requested_time = static_cast<int64_t>(runtime);
  j.runtime = runtime;
  j.cpu_fraction = cpu;
  return j;
}

struct Times {
  int64_t start = -1, finish = -1;
  double cpu = -1;
};

std::map<int64_t, Times> RunJobs(const std::vector<OfflineJob>& jobs, const OfflineConfig& cfg) {
  std::map<int64_t, Times> t;
  OfflineHooks hooks;
  hooks.on_start = [&](const JobSpec& j, int64_t s, const std::vector<int32_t>&,
                       const ClusterSnapshot& snap) {
    t[j.job_id].start = s;
    // The started job is in the snapshot's running set.
    bool found = false;
    for (const RunningJob& r : snap.running) found |= r.spec.job_id == j.job_id;
    EXPECT_TRUE(found);
    return absl::OkStatus();
  };
  hooks.on_finish = [&](const JobSpec& j, int64_t f, double cpu) {
    t[j.job_id].finish = f;
    t[j.job_id].cpu = cpu;
    return absl::OkStatus();
  };
  auto r = RunOffline(jobs, cfg, hooks);
  EXPECT_TRUE(r.ok()) << r.status();
  return t;
}

// Space sharing (MPL 1): J2 waits for J1's nodes.
TEST(OfflineSimTest, FcfsSpaceSharing) {
  OfflineConfig cfg;
  cfg.nodes = 2;
  cfg.policy.mpl_limit = 1;
  cfg.local.loaded_fraction = 0;
  auto t = RunJobs({Job(1, 0, 2, 100), Job(2, 10, 1, 50)}, cfg);
  EXPECT_EQ(t[1].start, 0);
  EXPECT_EQ(t[1].finish, 100);
  EXPECT_EQ(t[2].start, 100);
  EXPECT_EQ(t[2].finish, 150);
  EXPECT_NEAR(t[1].cpu, 100, 1e-6);
}

// Time sharing (MPL 2): from t=10 both jobs share node 0 (CPU_max = 2), so
// both progress at half speed; J2 needs 100 s for its 50, J1 has 40 left at
// t=110 and ends at 150.
TEST(OfflineSimTest, TimeSharingSlowsCoscheduledJobs) {
  OfflineConfig cfg;
  cfg.nodes = 2;
  cfg.policy.mpl_limit = 2;
  cfg.local.loaded_fraction = 0;
  auto t = RunJobs({Job(1, 0, 2, 100), Job(2, 10, 1, 50)}, cfg);
  EXPECT_EQ(t[2].start, 10);
  EXPECT_EQ(t[2].finish, 110);
  EXPECT_EQ(t[1].finish, 150);
  EXPECT_NEAR(t[2].cpu, 50, 1e-6);  // CPU seconds used equal the dedicated work
}

// A job larger than the cluster is rejected.
TEST(OfflineSimTest, RejectsOversizedJob) {
  OfflineConfig cfg;
  cfg.nodes = 2;
  EXPECT_FALSE(RunOffline({Job(1, 0, 3, 10)}, cfg, {}).ok());
}

// The CPU_max RunOffline keeps for each running job as node loads change
// equals ClusterModel::CpuMax over the job's nodes at every event
// (check_cpu_max): time sharing (MPL 4), jobs starting and ending on shared
// nodes, local sessions starting and ending, both node selection policies.
TEST(OfflineSimTest, KeptCpuMaxEqualsTheScan) {
  for (NodeSelection nsp : {NodeSelection::kNormal, NodeSelection::kUniform}) {
    OfflineConfig cfg;
    cfg.nodes = 40;
    cfg.policy.node_selection = nsp;
    cfg.policy.mpl_limit = 4;
    cfg.local.loaded_fraction = 0.6;
    cfg.check_cpu_max = true;
    std::vector<OfflineJob> jobs;
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> procs(1, 30);
    std::uniform_real_distribution<double> runtime(600, 40000), cpu(0.1, 1.0);
    for (int i = 0; i < 120; ++i) {
      jobs.push_back(Job(i, 900 * i, procs(rng), runtime(rng), cpu(rng)));
    }
    auto r = RunOffline(jobs, cfg, OfflineHooks{});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->jobs, 120);
    EXPECT_GT(r->events, 1000);
  }
}

// on_tick comes every kOfflineTickEvents events with the simulated time,
// which never goes back (progress on long runs with nothing to estimate).
TEST(OfflineSimTest, TicksEveryFewThousandEvents) {
  OfflineConfig cfg;
  cfg.nodes = 200;
  cfg.policy.mpl_limit = 2;
  cfg.local.loaded_fraction = 0.75;
  std::vector<OfflineJob> jobs = {Job(1, 0, 50, 200000), Job(2, 1000, 100, 100000)};
  OfflineHooks hooks;
  std::vector<double> ticks;
  hooks.on_tick = [&](double now) { ticks.push_back(now); };
  auto r = RunOffline(jobs, cfg, hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  // 200 nodes x 75 % over about 2e5 s of 5760 s sessions: thousands of events.
  ASSERT_GT(r->events, 2 * kOfflineTickEvents);
  EXPECT_EQ(static_cast<int64_t>(ticks.size()), r->events / kOfflineTickEvents);
  for (size_t i = 1; i < ticks.size(); ++i) EXPECT_GE(ticks[i], ticks[i - 1]);
  EXPECT_GT(ticks.front(), 0);
}

// Local load: the loaded share is constant, sessions follow the
// hyper-exponential mean 0.4*3600 + 0.6*7200 = 5760 s, and a seed reproduces.
TEST(LocalLoadTest, Table2SessionsAreSeededAndStationary) {
  LocalLoadConfig cfg;
  cfg.seed = 42;
  LocalLoadModel a(64, cfg, 0), b(64, cfg, 0);
  auto loaded = [](const LocalLoadModel& m) {
    int n = 0;
    for (int i = 0; i < 64; ++i) n += m.tasks(i);
    return n;
  };
  EXPECT_EQ(loaded(a), 48);
  for (int step = 0; step < 500; ++step) {
    ASSERT_EQ(a.next_event(), b.next_event());
    a.Step();
    b.Step();
    ASSERT_EQ(loaded(a), 48);
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(a.cpu(i), b.cpu(i));
      if (a.tasks(i)) {
        ASSERT_GT(a.cpu(i), 0);
      }
    }
  }
  LocalLoadModel m(4, cfg, 0);
  double sum = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) sum += m.DrawSession();
  EXPECT_NEAR(sum / n, 5760, 5760 * 0.03);
}

// The model as it was before session 22: a session end lists every idle node
// and picks one. LocalLoadModel picks the same node from the same draw with a
// Fenwick tree; the two must produce the same sessions.
class ListScanLocalLoad {
 public:
  ListScanLocalLoad(int nodes, const LocalLoadConfig& config, double start)
      : config_(config), rng_(config.seed), cpu_(nodes, 0.0) {
    const int loaded = static_cast<int>(std::lround(config.loaded_fraction * nodes));
    std::vector<int> order(nodes);
    for (int i = 0; i < nodes; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    for (int i = 0; i < loaded; ++i) Start(order[i], start);
  }
  double next_event() const { return ends_.top().first; }
  double cpu(int n) const { return cpu_[n]; }
  std::vector<int> Step() {
    const auto [when, node] = ends_.top();
    ends_.pop();
    cpu_[node] = 0;
    std::vector<int> idle;
    for (size_t n = 0; n < cpu_.size(); ++n) {
      if (cpu_[n] <= 0) idle.push_back(static_cast<int>(n));
    }
    std::uniform_int_distribution<size_t> pick(0, idle.size() - 1);
    const int next = idle[pick(rng_)];
    Start(next, when);
    if (next == node) return {node};
    return {node, next};
  }

 private:
  void Start(int node, double now) {
    std::uniform_real_distribution<double> u(0, 1);
    double pick = u(rng_);
    const LocalProfile* profile = &Table2Profiles().back();
    for (const LocalProfile& p : Table2Profiles()) {
      if (pick < p.share) {
        profile = &p;
        break;
      }
      pick -= p.share;
    }
    std::normal_distribution<double> load(profile->cpu_mean, profile->cpu_sd);
    cpu_[node] = std::clamp(load(rng_), 0.01, 1.0);
    const double mean = u(rng_) < config_.weight1 ? config_.mean1_s : config_.mean2_s;
    std::exponential_distribution<double> e(1.0 / mean);
    ends_.emplace(now + e(rng_), node);
  }
  LocalLoadConfig config_;
  std::mt19937_64 rng_;
  std::vector<double> cpu_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>,
                      std::greater<std::pair<double, int>>>
      ends_;
};

TEST(LocalLoadTest, PicksTheNodesTheListScanPicked) {
  for (const auto& [nodes, fraction] :
       std::vector<std::pair<int, double>>{{1, 0.75}, {7, 0.75}, {64, 0.5}, {1000, 0.75},
                                           {1000, 0.999}, {1023, 0.1}, {1024, 0.75}}) {
    LocalLoadConfig cfg;
    cfg.seed = 7 + nodes;
    cfg.loaded_fraction = fraction;
    LocalLoadModel fast(nodes, cfg, 100);
    ListScanLocalLoad ref(nodes, cfg, 100);
    for (int step = 0; step < 3000; ++step) {
      ASSERT_EQ(fast.next_event(), ref.next_event()) << nodes << " step " << step;
      ASSERT_EQ(fast.Step(), ref.Step()) << nodes << " step " << step;
    }
    for (int i = 0; i < nodes; ++i) ASSERT_EQ(fast.cpu(i), ref.cpu(i)) << nodes << " node " << i;
  }
}

}  // namespace
}  // namespace sojourn::turnaround
