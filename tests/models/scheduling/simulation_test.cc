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

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/availability/frailty.h"
#include "models/availability/predict.h"
#include "models/availability/window.h"

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

// Hosts(days) and "c-bursty", revoked for an hour at a different clock time
// each day (hour 5 d mod 24 of day d; the hour before it in S1's upper load
// band), so that its age in its state, its failure level, its load band and
// the population all differ from host to host.
std::vector<HostTrace> ThreeHosts(int days) {
  std::vector<HostTrace> out = Hosts(days);
  HostTrace c;
  c.host = "c-bursty";
  c.period_seconds = 300;
  for (int64_t t = kMonday; t < kMonday + days * 86400; t += 300) {
    const int64_t day = (t - kMonday) / 86400;
    const int64_t hour = (t - kMonday) % 86400 / 3600;
    if (hour == (5 * day) % 24) continue;
    HostSample s;
    s.unix_seconds = t;
    // The hour before the outage at 0.15: still S1, in its upper load band.
    s.cpu_load = hour == (5 * day + 23) % 24 ? 0.15 : 0.0;
    c.samples.push_back(s);
  }
  out.push_back(std::move(c));
  return out;
}

struct SeenTr {
  size_t host;
  int64_t t;
  availability::HostState init;
  std::vector<double> tr;  // empty: no curve
};

ScheduleConfig ProactiveOnly() {
  ScheduleConfig cfg;
  cfg.clock_min_mhz = cfg.clock_max_mhz = 2000;
  cfg.warmup_days = 3;
  cfg.tail_days = 1;
  cfg.submissions = 12;
  cfg.seed = 5;
  cfg.policies = {Policy::kProactive};
  return cfg;
}

// With the estimator's population prior, frailty and age switched off, the
// service pipeline is exactly the host's own windows: those three are all
// it adds.
TEST(ScheduleExperimentTest, ServicePipelineAddsOnlyPriorFrailtyAndAge) {
  ScheduleConfig cfg = ProactiveOnly();
  cfg.estimator.prior_windows = 0;
  cfg.estimator.host_frailty = false;
  cfg.estimator.recent_age_seconds = 0;
  cfg.estimator.long_age_seconds = 0;
  cfg.service_pipeline = false;
  auto own = RunScheduleExperiment(ThreeHosts(14), cfg);
  cfg.service_pipeline = true;
  auto service = RunScheduleExperiment(ThreeHosts(14), cfg);
  ASSERT_TRUE(own.ok() && service.ok());
  const PolicyStats& a = own->summary.at("proactive");
  const PolicyStats& b = service->summary.at("proactive");
  EXPECT_EQ(a.failed, b.failed);
  EXPECT_EQ(a.restarts, b.restarts);
  EXPECT_DOUBLE_EQ(a.sum_makespan_s, b.sum_makespan_s);
  EXPECT_EQ(own->tr_computed, service->tr_computed);
}

// Every TR curve proactive uses is the predictor service's: the library's
// PredictFromStats on the host's own windows before the decision hour, with
// the same window pooled over every host as the prior, the host's frailty on
// the window's day type, and its age in its state at the decision time
// (services/predictor/availability_predictor.cc). And those additions move
// the curves: they are not the host's own-window curves.
TEST(ScheduleExperimentTest, ProactiveTrIsThePredictorServicePipeline) {
  ScheduleConfig cfg = ProactiveOnly();
  std::vector<SeenTr> seen;
  cfg.on_tr = [&](size_t host, int64_t t, availability::HostState init, const TrCurve* tr) {
    SeenTr s{host, t, init, {}};
    if (tr != nullptr) s.tr = tr->values();
    seen.push_back(std::move(s));
  };
  const std::vector<HostTrace> traces = ThreeHosts(14);
  auto r = RunScheduleExperiment(traces, cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(seen.size(), 10u);

  const availability::EstimatorOptions& opt = cfg.estimator;
  const int64_t origin = availability::LocalMidnight(kMonday, cfg.utc_offset_seconds);
  std::vector<availability::StateSeries> series;
  for (const HostTrace& h : traces) {
    series.push_back(
        availability::ClassifyToGrid(h.samples, cfg.classifier, cfg.step_seconds, origin));
  }
  const int M = static_cast<int>(cfg.horizon_seconds / cfg.step_seconds);
  int moved = 0, aged = 0, banded = 0;
  for (const SeenTr& s : seen) {
    const int64_t midnight = availability::LocalMidnight(s.t, cfg.utc_offset_seconds);
    const int64_t start = midnight + (s.t - midnight) / 3600 * 3600;
    availability::WindowSpec spec;
    spec.day_type = availability::DayTypeOf(start, cfg.utc_offset_seconds);
    spec.start_second_of_day = start - midnight;
    spec.length_seconds = cfg.horizon_seconds;
    spec.clock = cfg.utc_offset_seconds;
    availability::PopulationPriorBuilder builder;
    availability::HostFrailtyModel frailty;
    std::vector<availability::FailureExposure> exposure;
    availability::BandExposure band;
    for (const availability::StateSeries& hs : series) {
      band.Merge(availability::CountBandExposure(hs, start, cfg.utc_offset_seconds, M,
                                                 opt.recent_age_seconds, opt.long_age_seconds));
      availability::SojournStats st = availability::CollectStats(hs, spec, start, opt);
      if (st.num_windows > 0) builder.Add(st);
      exposure.push_back(availability::CountFailureExposure(hs, start, cfg.utc_offset_seconds));
      frailty.Add(exposure.back());
    }
    frailty.Build();
    const availability::SojournStats prior = builder.Build(opt.level_corrected_borrowing);
    availability::SojournStats own = availability::CollectStats(series[s.host], spec, start, opt);
    availability::SojournStats stats = own;
    stats.prior_hazard_ratio =
        frailty.Theta(exposure[s.host], spec.day_type == availability::DayType::kWeekend);
    // The state manager's age: since the first grid point of the current run.
    const availability::StateSeries& hs = series[s.host];
    int64_t k = (s.t - hs.start_unix) / hs.step_seconds;
    ASSERT_EQ(hs.states[k], s.init);
    ASSERT_TRUE(opt.load_band_first_sojourn);
    const availability::FirstSojournRatio ratio = band.RatioOf(
        spec.day_type == availability::DayType::kWeekend, s.init, hs.load_band[k]);
    banded += std::abs(ratio.failure - 1) > 1e-3;
    while (k > 0 && hs.states[k - 1] == s.init) --k;
    const int64_t age = s.t - (hs.start_unix + k * hs.step_seconds);
    aged += age >= opt.long_age_seconds;
    const std::vector<double> want =
        availability::PredictFromStats(stats, s.init, M, opt, &prior, age, ratio).tr;
    ASSERT_EQ(s.tr.size(), want.size());
    for (size_t m = 0; m < want.size(); ++m) {
      ASSERT_NEAR(s.tr[m], want[m], 1e-12) << "host " << s.host << " t " << s.t << " m " << m;
    }
    const std::vector<double> plain = availability::PredictFromStats(own, s.init, M, opt).tr;
    if (!plain.empty() && std::abs(plain.back() - want.back()) > 1e-3) ++moved;
  }
  EXPECT_GT(moved, 0);
  EXPECT_GT(aged, 0);  // some decisions see a host in its long age class
  EXPECT_GT(banded, 0);  // and some a load band that moves the first sojourn
}

}  // namespace
}  // namespace sojourn::scheduling
