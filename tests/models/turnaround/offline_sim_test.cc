#include "models/turnaround/offline_sim.h"

#include <map>

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

}  // namespace
}  // namespace sojourn::turnaround
