// Policies of paper 000 section 8.4 on crafted hosts; every expected figure
// is derived by hand in the comments (piecewise-linear TR, trapezoid integral).
#include "models/scheduling/policy.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace sojourn::scheduling {
namespace {

std::shared_ptr<const TrCurve> Curve(std::vector<double> tr, int64_t step = 3600) {
  return std::make_shared<TrCurve>(step, std::move(tr));
}

HostInput Host(const std::string& name, double mhz, std::shared_ptr<const TrCurve> tr,
               double load = 0, int state = 1) {
  HostInput h;
  h.host = name;
  h.cpu_mhz = mhz;
  h.tr = std::move(tr);
  h.load = LoadForecast::Constant(load);
  h.state = state;
  return h;
}

Job JobOf(double seconds) {
  Job j;
  j.task_length_seconds = seconds;
  return j;
}

// TR through (0,1), (1h,0.5), (2h,0.25): linear in between, flat after.
TEST(TrCurveTest, InterpolatesAndIntegrates) {
  TrCurve c(3600, {0.5, 0.25});
  EXPECT_DOUBLE_EQ(c.At(0), 1.0);
  EXPECT_DOUBLE_EQ(c.At(1800), 0.75);
  EXPECT_DOUBLE_EQ(c.At(3600), 0.5);
  EXPECT_DOUBLE_EQ(c.At(5400), 0.375);
  EXPECT_DOUBLE_EQ(c.At(99999), 0.25);
  // 1800 (1 + 0.75) / 2 = 1575; 3600 (1 + 0.5) / 2 = 2700; + 3600 (0.5 + 0.25) / 2 = 4050.
  EXPECT_DOUBLE_EQ(c.Integral(1800), 1575);
  EXPECT_DOUBLE_EQ(c.Integral(3600), 2700);
  EXPECT_DOUBLE_EQ(c.Integral(7200), 4050);
  EXPECT_DOUBLE_EQ(c.Integral(1e9), 4050);  // restricted to the horizon
  EXPECT_DOUBLE_EQ(c.Mttf(), 4050);
  EXPECT_DOUBLE_EQ(c.horizon_seconds(), 7200);
}

// JCT = TL / [CR (1 - L)]: CR = 2000 / 1000 = 2, L = 0.5 -> 3600 / 1 = 3600.
// TR = 1, 1, 0, 0 hourly: MTTF = 3600 + 3600 + 1800 = 9000; ETL = 9000 * 2 * 0.5.
TEST(FiguresTest, JctMttfEtl) {
  HostInput h = Host("h", 2000, Curve({1, 1, 0, 0}), 0.5);
  HostFigures f = ComputeFigures(JobOf(3600), h, 1000);
  EXPECT_DOUBLE_EQ(f.relative_speed, 2.0);
  ASSERT_TRUE(f.jct_seconds && f.mttf_seconds && f.etl_seconds && f.predicted_load);
  EXPECT_DOUBLE_EQ(*f.jct_seconds, 3600);
  EXPECT_DOUBLE_EQ(*f.mttf_seconds, 9000);
  EXPECT_DOUBLE_EQ(*f.etl_seconds, 9000);
  EXPECT_DOUBLE_EQ(*f.predicted_load, 0.5);
  EXPECT_DOUBLE_EQ(*f.tr_at_duration, 1.0);
}

// Eq. 7 on TR = 1, 1, 0, 0 (hourly), CR = 1:
//  L = 0:   I(x) = 3600 -> x = 3600.
//  L = 0.5: I(x) = 7200 -> x = 7200.
//  L = 0.5, TL = 4000: I(x) = 8000; in the third hour TR = 1 - u/3600, so
//    I(7200 + u) = 7200 + u - u^2/7200 = 8000 -> u = (7200 - sqrt(28.8e6)) / 2.
//  L = 0.5, TL = 5000: I(x) = 10000 > MTTF 9000 -> no solution in the horizon.
TEST(FiguresTest, JctfSolvesEquation7) {
  TrCurve c(3600, {1, 1, 0, 0});
  auto j = SolveJctf(3600, c, 1.0, LoadForecast::Constant(0), 0, 1);
  ASSERT_TRUE(j);
  EXPECT_NEAR(*j, 3600, 1e-3);
  j = SolveJctf(3600, c, 1.0, LoadForecast::Constant(0.5), 0, 1);
  ASSERT_TRUE(j);
  EXPECT_NEAR(*j, 7200, 1e-3);
  j = SolveJctf(4000, c, 1.0, LoadForecast::Constant(0.5), 0, 1);
  ASSERT_TRUE(j);
  EXPECT_NEAR(*j, 7200 + (7200 - std::sqrt(28.8e6)) / 2, 1e-3);
  EXPECT_FALSE(SolveJctf(5000, c, 1.0, LoadForecast::Constant(0.5), 0, 1));
}

// Two hosts, reference 2000 MHz, no load:
//  steady: 1000 MHz (CR 0.5), TR = 1 for 4 h: MTTF 14400.
//  flaky:  3000 MHz (CR 1.5), TR = 0.5, 0, 0, 0: MTTF = 2700 + 900 = 3600.
// TL = 2 h: steady JCT = 14400 = MTTF (not exceeding) -> rule jctf.
//   steady JCTF: 0.5 I(x) = 7200 -> x = 14400; flaky: 1.5 I(x) = 7200 needs
//   I = 4800 > 3600 -> none. steady first; condor puts flaky (faster) first.
TEST(ProactiveTest, SmallestJctfWhenSomeHostOutlivesTheJob) {
  std::vector<HostInput> hosts = {Host("flaky", 3000, Curve({0.5, 0, 0, 0})),
                                  Host("steady", 1000, Curve({1, 1, 1, 1}))};
  RankOptions opt;
  opt.reference_mhz = 2000;
  auto r = RankHosts(Policy::kProactive, JobOf(7200), hosts, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rule, "jctf");
  ASSERT_EQ(r->hosts.size(), 2u);
  EXPECT_EQ(r->hosts[0].host, "steady");
  EXPECT_EQ(r->hosts[0].rank, 1);
  EXPECT_EQ(r->hosts[0].rule, "jctf");
  EXPECT_NEAR(*r->hosts[0].figures.jctf_seconds, 14400, 1e-3);
  EXPECT_DOUBLE_EQ(*r->hosts[0].figures.jct_seconds, 14400);
  EXPECT_EQ(r->hosts[1].host, "flaky");
  EXPECT_EQ(r->hosts[1].rank, 2);
  EXPECT_FALSE(r->hosts[1].figures.jctf_seconds.has_value());
  EXPECT_DOUBLE_EQ(*r->hosts[1].figures.mttf_seconds, 3600);
  EXPECT_DOUBLE_EQ(*r->hosts[1].figures.jct_seconds, 4800);

  auto c = RankHosts(Policy::kCondor, JobOf(7200), hosts, opt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rule, "clock_rate");
  EXPECT_EQ(c->hosts[0].host, "flaky");
}

// TL = 10 h: steady JCT 72000 > 14400, flaky JCT 24000 > 3600 -> rule etl.
// ETL steady = 14400 * 0.5 = 7200, flaky = 3600 * 1.5 = 5400 -> steady first.
TEST(ProactiveTest, LargestEtlWhenEveryJobOutlivesItsHost) {
  std::vector<HostInput> hosts = {Host("flaky", 3000, Curve({0.5, 0, 0, 0})),
                                  Host("steady", 1000, Curve({1, 1, 1, 1}))};
  RankOptions opt;
  opt.reference_mhz = 2000;
  auto r = RankHosts(Policy::kProactive, JobOf(36000), hosts, opt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rule, "etl");
  EXPECT_EQ(r->hosts[0].host, "steady");
  EXPECT_DOUBLE_EQ(*r->hosts[0].figures.etl_seconds, 7200);
  EXPECT_DOUBLE_EQ(*r->hosts[1].figures.etl_seconds, 5400);
  EXPECT_NE(r->hosts[0].reason.find("ETL"), std::string::npos);
}

// The reference defaults to the hosts' average clock rate (2000 here: the
// median of two is their mean).
TEST(ProactiveTest, ReferenceIsTheMeanClockRate) {
  std::vector<HostInput> hosts = {Host("a", 1000, Curve({1})), Host("b", 3000, Curve({1}))};
  auto r = RankHosts(Policy::kProactive, JobOf(600), hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hosts[0].host, "b");
  EXPECT_DOUBLE_EQ(r->hosts[0].figures.relative_speed, 1.5);
  EXPECT_DOUBLE_EQ(r->hosts[1].figures.relative_speed, 0.5);
}

// The median of the usable hosts: one host claiming 1e6 MHz (accepted at
// registration), or an expired one, used to make every other host's JCT
// hundreds of times longer through the mean.
TEST(ProactiveTest, ReferenceIgnoresOutliersAndUnusableHosts) {
  std::vector<HostInput> hosts = {Host("a", 1000, Curve({1})), Host("b", 2000, Curve({1})),
                                  Host("fake", 1e6, Curve({1}))};
  EXPECT_DOUBLE_EQ(MedianClockRate(hosts), 2000);
  auto r = RankHosts(Policy::kProactive, JobOf(600), hosts);
  ASSERT_TRUE(r.ok());
  for (const RankedHost& h : r->hosts) {
    if (h.host == "b") {
      EXPECT_DOUBLE_EQ(h.figures.relative_speed, 1.0);
    }
  }
  hosts[2].unusable_reason = "heartbeat expired";
  hosts.push_back(Host("c", 3000, Curve({1})));
  EXPECT_DOUBLE_EQ(MedianClockRate(hosts), 2000);  // of 1000, 2000, 3000
  hosts.pop_back();
  EXPECT_DOUBLE_EQ(MedianClockRate(hosts), 1500);  // of 1000, 2000
  for (HostInput& h : hosts) h.unusable_reason = "down";
  EXPECT_DOUBLE_EQ(MedianClockRate(hosts), 2000);  // none usable: all of them
  EXPECT_DOUBLE_EQ(MedianClockRate({}), 0);
}

// Every policy lists every host; unusable ones with the reason.
TEST(RankTest, ExplainsUnusableHosts) {
  std::vector<HostInput> hosts;
  hosts.push_back(Host("ok", 2000, Curve({1, 1})));
  hosts.push_back(Host("down", 2000, Curve({0, 0}), 0, 5));
  HostInput expired = Host("expired", 2000, nullptr);
  expired.unusable_reason = "heartbeat expired";
  hosts.push_back(expired);
  HostInput small = Host("small", 2000, Curve({1, 1}));
  small.total_mem_mb = 1024;
  hosts.push_back(small);
  hosts.push_back(Host("x-blind", 1000, nullptr));
  Job job = JobOf(3600);
  job.memory_mb = 2048;
  for (Policy p : {Policy::kProactive, Policy::kCondor, Policy::kRoundRobin, Policy::kTr}) {
    auto r = RankHosts(p, job, hosts);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->hosts.size(), 5u);
    EXPECT_EQ(r->hosts[0].host, "ok") << PolicyName(p);
    std::map<std::string, std::string> why;
    for (const RankedHost& h : r->hosts) {
      if (!h.eligible) {
        EXPECT_EQ(h.rank, 0);
        why[h.host] = h.reason;
      }
    }
    EXPECT_NE(why["down"].find("S5"), std::string::npos);
    EXPECT_NE(why["expired"].find("heartbeat"), std::string::npos);
    EXPECT_NE(why["small"].find("MiB"), std::string::npos);
    if (p == Policy::kProactive || p == Policy::kTr) {
      EXPECT_NE(why["x-blind"].find("no TR"), std::string::npos);
      EXPECT_EQ(r->usable, 1);
    } else {
      EXPECT_EQ(why.count("x-blind"), 0u);  // failure-oblivious: matched on the heartbeat
      EXPECT_EQ(r->usable, 2);
    }
  }
}

// A job no host can run: a ranking with a reason per host, none usable.
TEST(RankTest, NoHostCanRunTheJob) {
  std::vector<HostInput> hosts = {Host("a", 1500, Curve({1})), Host("b", 2500, Curve({1}))};
  hosts[0].cpu_cores = 2;
  hosts[1].cpu_cores = 4;
  Job job = JobOf(3600);
  job.cpu_share = 8;
  job.min_cpu_mhz = 0;
  auto r = RankHosts(Policy::kProactive, job, hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usable, 0);
  EXPECT_TRUE(r->rule.empty());
  ASSERT_EQ(r->hosts.size(), 2u);
  for (const RankedHost& h : r->hosts) {
    EXPECT_FALSE(h.eligible);
    EXPECT_NE(h.reason.find("CPUs"), std::string::npos);
  }
  job.cpu_share = 1;
  job.min_cpu_mhz = 3000;
  r = RankHosts(Policy::kCondor, job, hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usable, 0);
  for (const RankedHost& h : r->hosts) EXPECT_NE(h.reason.find("MHz"), std::string::npos);
  job.min_cpu_mhz = 0;
  job.only_hosts = {"nowhere"};
  r = RankHosts(Policy::kRoundRobin, job, hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usable, 0);
  for (const RankedHost& h : r->hosts) EXPECT_NE(h.reason.find("allowed"), std::string::npos);
}

// Round robin rotates the usable hosts in name order.
TEST(RankTest, RoundRobinRotates) {
  std::vector<HostInput> hosts = {Host("c", 1, nullptr), Host("a", 1, nullptr),
                                  Host("b", 1, nullptr), Host("z", 1, nullptr, 0, 3)};
  for (uint64_t k = 0; k < 4; ++k) {
    RankOptions o;
    o.round_robin_offset = k;
    auto r = RankHosts(Policy::kRoundRobin, JobOf(60), hosts, o);
    ASSERT_TRUE(r.ok());
    const char* expect[3][3] = {{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(r->hosts[i].host, expect[k % 3][i]);
    EXPECT_EQ(r->hosts[3].host, "z");
  }
}

// Omniscient takes the true earliest finish; without the future, nothing.
TEST(RankTest, OmniscientUsesTheOracle) {
  std::vector<HostInput> hosts = {Host("a", 1, nullptr), Host("b", 1, nullptr),
                                  Host("c", 1, nullptr)};
  hosts[0].oracle_completion_seconds = 500;
  hosts[1].oracle_completion_seconds = 100;
  hosts[2].oracle_completion_seconds = std::numeric_limits<double>::infinity();
  auto r = RankHosts(Policy::kOmniscient, JobOf(60), hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hosts[0].host, "b");
  EXPECT_EQ(r->hosts[1].host, "a");
  EXPECT_EQ(r->hosts[2].host, "c");
  hosts[1].oracle_completion_seconds.reset();
  r = RankHosts(Policy::kOmniscient, JobOf(60), hosts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usable, 2);
}

TEST(RankTest, RejectsBadJobsAndPolicies) {
  EXPECT_FALSE(RankHosts(Policy::kCondor, JobOf(0), {}).ok());
  EXPECT_FALSE(RankHosts(Policy::kCondor, JobOf(-1), {}).ok());
  Job j = JobOf(10);
  j.memory_mb = -1;
  EXPECT_FALSE(RankHosts(Policy::kCondor, j, {}).ok());
  EXPECT_FALSE(ParsePolicy("astrology").ok());
  EXPECT_EQ(*ParsePolicy(""), Policy::kProactive);
  for (Policy p : ExperimentPolicies()) EXPECT_EQ(*ParsePolicy(PolicyName(p)), p);
  EXPECT_EQ(*ParsePolicy("tr"), Policy::kTr);
}

}  // namespace
}  // namespace sojourn::scheduling
