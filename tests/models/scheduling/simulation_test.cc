// The section 8.4 experiment on two crafted hosts of equal speed and no load:
// "a-flaky" is revoked every day 10:00-14:00, "b-solid" never. Hand-derived:
//  * omniscient and proactive never fail (b-solid always finishes; a-flaky is
//    only chosen when its learnt TR shows no failure before the job ends),
//    and every job's makespan is its length (CR 1, load 0, no wait), so the
//    mean makespan is the mean length (0.5+1+2+3+4+5+6)/7 h;
//  * condor (equal clock rates: name order) picks a-flaky whenever it is up
//    and so fails jobs running into 10:00;
//  * no job is unscheduled (b-solid is always up).
#include "models/scheduling/simulation.h"

#include "gtest/gtest.h"

namespace sojourn::scheduling {
namespace {

constexpr int64_t kMonday = 1700438400;  // 2023-11-20 00:00 UTC

std::vector<HostTrace> Hosts(int days) {
  std::vector<HostTrace> out(2);
  out[0].host = "a-flaky";
  out[1].host = "b-solid";
  for (HostTrace& h : out) h.period_seconds = 300;
  for (int64_t t = kMonday; t < kMonday + days * 86400; t += 300) {
    HostSample s;
    s.unix_seconds = t;
    s.cpu_load = 0.0;
    out[1].samples.push_back(s);
    const int64_t sod = (t - kMonday) % 86400;
    if (sod < 10 * 3600 || sod >= 14 * 3600) out[0].samples.push_back(s);
  }
  return out;
}

TEST(ScheduleExperimentTest, ProactiveAvoidsTheDailyOutage) {
  ScheduleConfig cfg;
  cfg.clock_min_mhz = cfg.clock_max_mhz = 2000;
  cfg.warmup_days = 3;
  cfg.tail_days = 1;
  cfg.submissions = 40;
  cfg.seed = 7;
  auto r = RunScheduleExperiment(Hosts(12), cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hosts, 2);
  EXPECT_EQ(r->jobs, 40 * 7);
  const double mean_len = (0.5 + 1 + 2 + 3 + 4 + 5 + 6) / 7 * 3600;
  for (const char* p : {"proactive", "omniscient"}) {
    const PolicyStats& s = r->summary.at(p);
    EXPECT_EQ(s.jobs, 280) << p;
    EXPECT_EQ(s.unscheduled, 0) << p;
    EXPECT_EQ(s.failed, 0) << p;
    EXPECT_EQ(s.finished, 280) << p;
    EXPECT_NEAR(s.avg_makespan_s, mean_len, 1.0) << p;
    EXPECT_NEAR(s.slowdown_vs_omniscient, 0.0, 1e-3) << p;
  }
  const PolicyStats& condor = r->summary.at("condor");
  EXPECT_GT(condor.failed, 0);
  EXPECT_GT(condor.failure_rate, 0.0);
  EXPECT_GT(condor.avg_makespan_s, mean_len);
  EXPECT_GT(condor.slowdown_vs_omniscient, 0.0);
  EXPECT_DOUBLE_EQ(condor.unscheduled_rate, 0.0);
  // by_length has every length, and its jobs add up.
  int64_t jobs = 0;
  for (const auto& [h, s] : r->by_length.at("condor")) jobs += s.jobs;
  EXPECT_EQ(jobs, 280);
  EXPECT_EQ(r->by_length.at("proactive").size(), 7u);
  EXPECT_EQ(r->by_length.at("proactive").at(6.0).failed, 0);
}

// Same seed, same answer; a trace shorter than warm-up + tail is refused.
TEST(ScheduleExperimentTest, SeededAndValidated) {
  ScheduleConfig cfg;
  cfg.warmup_days = 3;
  cfg.tail_days = 1;
  cfg.submissions = 5;
  cfg.policies = {Policy::kCondor, Policy::kRoundRobin};
  auto a = RunScheduleExperiment(Hosts(8), cfg);
  auto b = RunScheduleExperiment(Hosts(8), cfg);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->summary.at("condor").sum_makespan_s, b->summary.at("condor").sum_makespan_s);
  EXPECT_EQ(a->summary.at("round_robin").failed, b->summary.at("round_robin").failed);
  EXPECT_TRUE(absl::IsInvalidArgument(RunScheduleExperiment(Hosts(4), cfg).status()));
  cfg.lengths_hours = {0};
  EXPECT_TRUE(absl::IsInvalidArgument(RunScheduleExperiment(Hosts(8), cfg).status()));
}

// Replicate r is the single run with seed + r, and the summary pools the
// replicates' counts (rates are of the pooled counts).
TEST(ScheduleExperimentTest, ReplicatesPoolIndependentSeeds) {
  ScheduleConfig cfg;
  cfg.warmup_days = 3;
  cfg.tail_days = 1;
  cfg.submissions = 6;
  cfg.seed = 11;
  std::vector<ScheduleResult> singles;
  for (uint64_t s : {11, 12, 13}) {
    cfg.seed = s;
    auto r = RunScheduleExperiment(Hosts(12), cfg);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->replicates.size(), 1u);
    singles.push_back(*std::move(r));
  }
  cfg.seed = 11;
  cfg.replicates = 3;
  auto pooled = RunScheduleExperiment(Hosts(12), cfg);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  ASSERT_EQ(pooled->replicates.size(), 3u);
  EXPECT_EQ(pooled->jobs, 3 * 6 * 7);
  for (const char* p : {"proactive", "condor", "round_robin", "omniscient"}) {
    int64_t jobs = 0, failed = 0, finished = 0;
    double sum = 0;
    for (size_t i = 0; i < 3; ++i) {
      const PolicyStats& one = singles[i].summary.at(p);
      const PolicyStats& rep = pooled->replicates[i].summary.at(p);
      EXPECT_EQ(pooled->replicates[i].seed, 11 + i);
      EXPECT_EQ(rep.failed, one.failed) << p << " replicate " << i;
      EXPECT_DOUBLE_EQ(rep.sum_makespan_s, one.sum_makespan_s) << p << " replicate " << i;
      EXPECT_DOUBLE_EQ(rep.failure_rate, one.failure_rate) << p << " replicate " << i;
      jobs += one.jobs;
      failed += one.failed;
      finished += one.finished;
      sum += one.sum_makespan_s;
    }
    const PolicyStats& all = pooled->summary.at(p);
    EXPECT_EQ(all.jobs, jobs) << p;
    EXPECT_EQ(all.failed, failed) << p;
    EXPECT_DOUBLE_EQ(all.sum_makespan_s, sum) << p;
    EXPECT_DOUBLE_EQ(all.avg_makespan_s, sum / finished) << p;
  }
  // The seeds differ, so the replicates do not all see the same submissions.
  EXPECT_NE(singles[0].summary.at("condor").sum_makespan_s +
                singles[1].summary.at("condor").sum_makespan_s,
            2 * singles[0].summary.at("condor").sum_makespan_s);
  cfg.replicates = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(RunScheduleExperiment(Hosts(12), cfg).status()));
}

}  // namespace
}  // namespace sojourn::scheduling
