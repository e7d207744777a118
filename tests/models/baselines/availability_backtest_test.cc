// Tests of the availability backtest protocol (issue 7) on small synthetic
// traces whose empirical TR is known by construction.
#include "models/baselines/availability_backtest.h"

#include <cmath>
#include <new>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/availability/frailty.h"
#include "models/availability/predict.h"
#include "models/availability/state.h"
#include "models/availability/window.h"

namespace sojourn::backtest {
namespace {

constexpr int64_t kMonday = 1704067200;  // 2024-01-01 00:00 UTC, a Monday

// Hourly availability-matrix style host: up (a sample with load 0) unless
// down(hour index) says otherwise.
template <typename DownFn>
HostTrace HourlyHost(const std::string& name, int days, DownFn down) {
  HostTrace t;
  t.host = name;
  t.period_seconds = 3600;
  for (int k = 0; k < days * 24; ++k) {
    if (down(k)) continue;
    HostSample s;
    s.unix_seconds = kMonday + int64_t{k} * 3600;
    s.cpu_load = 0;
    t.samples.push_back(s);
  }
  return t;
}

BacktestConfig HourlyConfig() {
  BacktestConfig c;
  c.step_seconds = 3600;
  c.classifier.revocation_gap_seconds = 1800;
  c.outage_fraction = 0;
  c.threads = 1;
  return c;
}

size_t MethodIndex(const BacktestResult& r, const std::string& name) {
  for (size_t i = 0; i < r.methods.size(); ++i) {
    if (r.methods[i] == name) return i;
  }
  ADD_FAILURE() << "no method " << name;
  return 0;
}

// A host that is always up: empirical TR 1 everywhere and zero error for
// window_frequency (and for sojourn's SMP, which sees no transition).
TEST(AvailabilityBacktestTest, AlwaysUpHostHasPerfectFrequency) {
  std::vector<HostTrace> traces = {HourlyHost("up", 28, [](int) { return false; })};
  auto r = RunBacktest(traces, HourlyConfig());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->cells.empty());
  const size_t wf = MethodIndex(*r, "window_frequency");
  const size_t smp = MethodIndex(*r, "smp");
  ASSERT_EQ(r->methods, AllMethods());
  for (const CellResult& c : r->cells) {
    EXPECT_EQ(c.n_survived, c.n_test);
    EXPECT_DOUBLE_EQ(c.pred[wf], 1.0);
    EXPECT_NEAR(c.pred[smp], 1.0, 1e-9);
    // Every baseline (time series on a constant series, HTCondor without any
    // completed interval, BOINC always on) predicts survival too.
    for (size_t m = 0; m < r->methods.size(); ++m)
      EXPECT_NEAR(c.pred[m], 1.0, 1e-9) << r->methods[m];
  }
  MethodSummary s = SummarizeMethod(*r, wf, false, 3);
  EXPECT_DOUBLE_EQ(s.acc_grand, 1.0);
  EXPECT_DOUBLE_EQ(s.acc_worst, 1.0);
  EXPECT_DOUBLE_EQ(s.brier, 0.0);
  EXPECT_EQ(s.cells_dropped, 0);
  EXPECT_FALSE(r->busy[0]);
}

// An exception thrown on a worker thread (std::bad_alloc on a trace too big
// for memory; here the progress callback throws it) reaches the caller,
// which can report it, instead of ending the process in std::terminate. Each
// thread count: with 2, whichever of the two threads meets it.
TEST(AvailabilityBacktestTest, WorkerExceptionsReachTheCaller) {
  std::vector<HostTrace> traces;
  for (int h = 0; h < 6; ++h) {
    traces.push_back(HourlyHost("h" + std::to_string(h), 28, [h](int k) { return k % 37 == h; }));
  }
  for (int threads : {1, 2}) {
    for (const double at : {0.0, 0.5}) {
      BacktestConfig c = HourlyConfig();
      c.threads = threads;
      c.progress = [at](double done) {
        if (done > at) throw std::bad_alloc();
      };
      EXPECT_THROW((void)RunBacktest(traces, c), std::bad_alloc) << threads << " threads, at " << at;
    }
  }
}

// The population's failures by local day: steps from an up point, with the
// step into a failure counted as a failure and steps from a failure point not
// counted; the day a step belongs to is that of its first point; a day is a
// training day of a host before its split day (here day 1 of 0..2).
TEST(AvailabilityBacktestTest, CountsThePopulationsFailuresByDay) {
  std::vector<HostTrace> traces = {
      HourlyHost("a", 3, [](int k) { return k == 12; }),
      HourlyHost("b", 3, [](int k) { return k == 30 || k == 31; })};
  auto r = RunBacktest(traces, HourlyConfig());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->days.size(), 3u);
  const int64_t monday = kMonday / 86400;
  // a: day 0 has 23 up steps (12:00 is down) and the failure 11:00 -> 12:00;
  // b: day 1 has 22 (06:00 and 07:00 down) and the failure 05:00 -> 06:00;
  // the last day has no step from its last point (23 each).
  const double up[3] = {23 + 24, 24 + 22, 23 + 23};
  const double failures[3] = {1, 1, 0};
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(r->days[d].day, monday + d);
    EXPECT_EQ(r->days[d].day_type, 0);
    EXPECT_EQ(r->days[d].hosts, 2);
    EXPECT_EQ(r->days[d].train_hosts, d == 0 ? 2 : 0) << d;
    EXPECT_DOUBLE_EQ(r->days[d].up_steps, up[d]) << d;
    EXPECT_DOUBLE_EQ(r->days[d].failures, failures[d]) << d;
  }
  // The spread over all three days, the training day alone and the two test
  // days, by the definitions of DayDispersion.
  auto check = [&](DayRole role, std::vector<int> ds) {
    double u = 0, f = 0;
    for (int d : ds) {
      u += up[d];
      f += failures[d];
    }
    const double rate = f / u;
    double ss = 0, chi2 = 0;
    for (int d : ds) {
      ss += (failures[d] / up[d] - rate) * (failures[d] / up[d] - rate);
      chi2 += (failures[d] - up[d] * rate) * (failures[d] - up[d] * rate) / (up[d] * rate);
    }
    const DayDispersion got = SummarizeDays(r->days, 0, role, 3600);
    SCOPED_TRACE(DayRoleName(role));
    EXPECT_EQ(got.days, static_cast<int>(ds.size()));
    EXPECT_NEAR(got.rate_per_up_hour, rate, 1e-12);
    if (ds.size() > 1) {
      EXPECT_NEAR(got.sd_rate_per_up_hour, std::sqrt(ss / (ds.size() - 1)), 1e-12);
      EXPECT_NEAR(got.overdispersion, chi2 / (ds.size() - 1), 1e-12);
    } else {
      EXPECT_EQ(got.sd_rate_per_up_hour, 0);
    }
  };
  check(DayRole::kAll, {0, 1, 2});
  check(DayRole::kTrain, {0});
  check(DayRole::kTest, {1, 2});
  // No weekend day in the trace; a 30-minute step halves the hours.
  EXPECT_EQ(SummarizeDays(r->days, 1, DayRole::kAll, 3600).days, 0);
  EXPECT_NEAR(SummarizeDays(r->days, 0, DayRole::kAll, 1800).rate_per_up_hour, 2 * 2.0 / 139, 1e-12);
}

// 28 days from a Monday: the first 14 train, the last 14 test (10 weekdays,
// 4 weekend days), so every weekday cell of a 1 h window has 10 test windows.
TEST(AvailabilityBacktestTest, SplitsAtTheMidpointDay) {
  std::vector<HostTrace> traces = {HourlyHost("up", 28, [](int) { return false; })};
  auto r = RunBacktest(traces, HourlyConfig());
  ASSERT_TRUE(r.ok());
  for (const CellResult& c : r->cells) {
    if (c.hours != 1 || c.hour == 23) continue;  // hour 23 of the last day has no room
    EXPECT_EQ(c.n_test, c.day_type == 0 ? 10 : 4) << c.hour;
  }
}

// Down every day at 12:00: windows from 10:00 survive 1 h (points 11:00) but
// not 2 h (point 12:00 is S5); the frequency predicts this exactly and the
// host is busy (one failure per day).
TEST(AvailabilityBacktestTest, DailyFailureIsLearnedExactly) {
  std::vector<HostTrace> traces = {HourlyHost("noon", 28, [](int k) { return k % 24 == 12; })};
  auto r = RunBacktest(traces, HourlyConfig());
  ASSERT_TRUE(r.ok());
  const size_t wf = MethodIndex(*r, "window_frequency");
  const size_t last = MethodIndex(*r, "last");
  const size_t aq = MethodIndex(*r, "avail_quantile");
  const size_t of = MethodIndex(*r, "on_fraction");
  int seen = 0;
  for (const CellResult& c : r->cells) {
    if (c.hour != 10) continue;
    ++seen;
    EXPECT_DOUBLE_EQ(c.emp(), c.hours == 1 ? 1.0 : 0.0) << c.hours;
    EXPECT_DOUBLE_EQ(c.pred[wf], c.emp()) << c.hours;
    // LAST sees an up host at the window start and predicts survival.
    EXPECT_DOUBLE_EQ(c.pred[last], 1.0);
    // Every past interval lasted 23 h (13:00 to 12:00); up for 21 h at 10:00,
    // so HTCondor's survival is 1 for one more hour and 0 for two.
    EXPECT_DOUBLE_EQ(c.pred[aq], c.emp()) << c.hours;
    // BOINC: about 23/24 of the time on.
    EXPECT_GT(c.pred[of], 0.9);
    EXPECT_LT(c.pred[of], 1.0);
  }
  EXPECT_EQ(seen, 2 * 10);  // weekday + weekend, 10 lengths
  EXPECT_TRUE(r->busy[0]);
  // Cells with emp = 0 are dropped from the relative error, not from Brier.
  MethodSummary s = SummarizeMethod(*r, wf, false, 3);
  EXPECT_GT(s.cells_dropped, 0);
  EXPECT_DOUBLE_EQ(s.brier, 0.0);
}

// A host whose load alternates between S1 (0.1) and S2 (0.4) every hour and
// that is busy (S3) every day at 14:00, like a VM with a nightly batch job.
// From 10:00, a 2 h window never sees the job. Estimated from the 10 h
// windows, the time-homogeneous SMP spreads the 14:00 failure over every S2
// visit and predicts a 2 h window to fail about half the time; estimated from
// the 2 h windows (windows_per_length, the default, as the predictor service
// cuts them for a 2 h request) it predicts survival. At the longest length
// both read the same windows and agree.
TEST(AvailabilityBacktestTest, WindowsOfEachLengthSeeTheClock) {
  HostTrace t;
  t.host = "batch";
  t.period_seconds = 3600;
  for (int k = 0; k < 28 * 24; ++k) {
    HostSample s;
    s.unix_seconds = kMonday + int64_t{k} * 3600;
    s.cpu_load = k % 24 == 14 ? 0.9 : k % 2 == 0 ? 0.1 : 0.4;
    s.free_mem_mb = 4096;
    t.samples.push_back(s);
  }
  std::vector<HostTrace> traces = {t};
  BacktestConfig c = HourlyConfig();
  c.classifier.revocation_gap_seconds = 5400;  // hourly samples are continuous
  c.methods = {"smp", "smp_paper", "window_frequency"};
  ASSERT_TRUE(c.windows_per_length);
  auto per_length = RunBacktest(traces, c);
  c.windows_per_length = false;
  auto longest = RunBacktest(traces, c);
  ASSERT_TRUE(per_length.ok() && longest.ok());
  ASSERT_EQ(per_length->cells.size(), longest->cells.size());
  int checked = 0;
  for (size_t k = 0; k < per_length->cells.size(); ++k) {
    const CellResult& a = per_length->cells[k];
    const CellResult& b = longest->cells[k];
    ASSERT_EQ(std::make_tuple(a.day_type, a.hour, a.hours, a.init),
              std::make_tuple(b.day_type, b.hour, b.hours, b.init));
    if (a.hours == c.max_window_hours) {
      for (size_t m = 0; m < a.pred.size(); ++m) EXPECT_NEAR(a.pred[m], b.pred[m], 1e-12);
    }
    if (a.hour != 10) continue;
    // The 10 h windows from 10:00 meet the job at 14:00 (step 4).
    EXPECT_DOUBLE_EQ(a.emp(), a.hours < 4 ? 1.0 : 0.0) << a.hours;
    if (a.hours != 2) continue;
    ++checked;
    EXPECT_DOUBLE_EQ(a.pred[2], 1.0);          // window_frequency, either way
    EXPECT_DOUBLE_EQ(b.pred[2], 1.0);
    EXPECT_GT(a.pred[0], 0.95) << "smp from 2 h windows";
    EXPECT_LT(b.pred[0], 0.8) << "smp from 10 h windows";
    EXPECT_GT(a.pred[1], 0.95) << "smp_paper from 2 h windows";
    EXPECT_LT(b.pred[1], 0.8) << "smp_paper from 10 h windows";
  }
  EXPECT_EQ(checked, 2);  // weekday and weekend, initial state S1 (10:00 is even)
}

// A lab host in New York that is taken every day at 18:00 on its wall clock,
// sampled hourly for 28 days from Sunday 2024-02-25: the 14 training days are
// in winter time (UTC-5), the 14 test days from Sunday 2024-03-10, when
// daylight saving time starts, in summer time (UTC-4). On the zone's clock
// the training days predict every test window exactly; on the winter offset
// the test days' failure comes an hour early and the 16:00 windows that
// always survived in training now fail.
TEST(AvailabilityBacktestTest, TimeZoneFollowsTheLabsClockAcrossDaylightSavingTime) {
  absl::StatusOr<availability::LocalClock> ny = availability::LocalClock::Zone("America/New_York");
  ASSERT_TRUE(ny.ok()) << ny.status();
  constexpr int64_t kStart = 1708837200;  // 2024-02-25 00:00 EST
  const int64_t dst_day = 19792;           // 2024-03-10
  HostTrace t;
  t.host = "lab";
  t.period_seconds = 3600;
  // To 2024-03-23 23:00 EDT, the last hour of the 28th day.
  for (int64_t at = kStart; at <= ny->UnixAt(dst_day + 13, 23 * 3600); at += 3600) {
    if (availability::LocalSecondOfDay(at, *ny) == 18 * 3600) continue;  // taken
    HostSample s;
    s.unix_seconds = at;
    s.cpu_load = 0;
    t.samples.push_back(s);
  }
  std::vector<HostTrace> traces = {t};
  BacktestConfig c = HourlyConfig();
  c.methods = {"window_frequency"};
  c.clock = *ny;
  auto zoned = RunBacktest(traces, c);
  c.clock = -5 * 3600;
  auto winter = RunBacktest(traces, c);
  ASSERT_TRUE(zoned.ok() && winter.ok());

  // The zone's days: 2024-03-10 has 23 hours (02:00 is skipped), 22 of them
  // up with a step after them; the day before has 24, 23 up.
  int seen_days = 0;
  for (const DayCount& d : zoned->days) {
    if (d.day != dst_day && d.day != dst_day - 1) continue;
    ++seen_days;
    EXPECT_DOUBLE_EQ(d.up_steps, d.day == dst_day ? 22 : 23) << d.day;
    EXPECT_DOUBLE_EQ(d.failures, 1) << d.day;
    EXPECT_EQ(d.day_type, 1) << d.day;  // Saturday and Sunday
  }
  EXPECT_EQ(seen_days, 2);

  auto cells_of = [](const BacktestResult& r, int day_type, int hour, int hours) {
    std::vector<CellResult> out;
    for (const CellResult& cell : r.cells) {
      if (cell.day_type == day_type && cell.hour == hour && cell.hours == hours) {
        out.push_back(cell);
      }
    }
    return out;
  };
  int zoned_cells = 0;
  for (const CellResult& cell : zoned->cells) {
    ++zoned_cells;
    EXPECT_DOUBLE_EQ(cell.pred[0], cell.emp())
        << "day type " << cell.day_type << " " << cell.hour << ":00 " << cell.hours << " h";
  }
  EXPECT_GT(zoned_cells, 400);
  // Weekend test days: Mar 10 (no 02:00), 16, 17 and 23.
  ASSERT_EQ(cells_of(*zoned, 1, 2, 1).size(), 1u);
  EXPECT_EQ(cells_of(*zoned, 1, 2, 1)[0].n_test, 3);
  EXPECT_EQ(cells_of(*zoned, 1, 3, 1)[0].n_test, 4);
  // 16:00 for 1 h on the winter offset: survived in every training window,
  // fails in every test window (17:00 UTC-5 is 18:00 summer time).
  for (int dt = 0; dt < 2; ++dt) {
    const std::vector<CellResult> w = cells_of(*winter, dt, 16, 1);
    ASSERT_EQ(w.size(), 1u) << dt;
    EXPECT_DOUBLE_EQ(w[0].pred[0], 1.0);
    EXPECT_DOUBLE_EQ(w[0].emp(), 0.0);
    const std::vector<CellResult> z = cells_of(*zoned, dt, 16, 1);
    ASSERT_EQ(z.size(), 1u) << dt;
    EXPECT_DOUBLE_EQ(z[0].emp(), 1.0);
  }
}

// Samoa skipped Friday 2011-12-30 whole (Pacific/Apia went from UTC-10 to
// UTC+14). An always-up host sampled hourly from Saturday 2011-12-10 for 28
// local days is tested from 2011-12-24: 9 weekdays (not 10: the skipped
// Friday has no windows: its 00:00 would be Saturday's) and 4
// weekend days.
TEST(AvailabilityBacktestTest, ADayTheZoneSkippedHasNoTestWindows) {
  absl::StatusOr<availability::LocalClock> apia = availability::LocalClock::Zone("Pacific/Apia");
  ASSERT_TRUE(apia.ok()) << apia.status();
  const int64_t first_day = 15318;  // 2011-12-10, a Saturday
  HostTrace t;
  t.host = "up";
  t.period_seconds = 3600;
  for (int64_t at = apia->UnixAt(first_day, 0); at <= apia->UnixAt(first_day + 27, 23 * 3600);
       at += 3600) {
    HostSample s;
    s.unix_seconds = at;
    s.cpu_load = 0;
    t.samples.push_back(s);
  }
  BacktestConfig c = HourlyConfig();
  c.methods = {"window_frequency"};
  c.clock = *apia;
  auto r = RunBacktest({t}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  int seen = 0;
  for (const CellResult& cell : r->cells) {
    if (cell.hours != 1 || cell.hour != 0) continue;
    ++seen;
    EXPECT_EQ(cell.n_test, cell.day_type == 0 ? 9 : 4) << cell.day_type;
  }
  EXPECT_EQ(seen, 2);
}

// A day without samples on every host is a global monitoring outage: windows
// touching it are excluded instead of counted as failures.
TEST(AvailabilityBacktestTest, GlobalOutageWindowsAreExcluded) {
  auto gap = [](int k) { return k >= 20 * 24 && k < 21 * 24; };
  std::vector<HostTrace> traces = {HourlyHost("a", 28, gap), HourlyHost("b", 28, gap)};
  BacktestConfig c = HourlyConfig();
  c.outage_fraction = 0.5;
  c.outage_min_hosts = 2;
  auto with = RunBacktest(traces, c);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->outage_points, 24);
  EXPECT_EQ(with->outage_few_hosts_points, 0);
  for (const CellResult& cell : with->cells) EXPECT_EQ(cell.n_survived, cell.n_test);
  c.outage_fraction = 0;
  auto without = RunBacktest(traces, c);
  ASSERT_TRUE(without.ok());
  int failing = 0;
  for (const CellResult& cell : without->cells) failing += cell.n_survived < cell.n_test;
  EXPECT_GT(failing, 0);
}

int FailingCells(const BacktestResult& r, int host) {
  int failing = 0;
  for (const CellResult& cell : r.cells) failing += cell.host == host && cell.n_survived < cell.n_test;
  return failing;
}

// The outage rule counts the hosts present (from their first sample to their
// last), not every host of the trace: once six of twelve hosts have left, one
// of the other six going down is its own failure, not a global outage. A day
// when all twelve are silent still is one.
TEST(AvailabilityBacktestTest, OutageRuleCountsTheHostsPresent) {
  auto own_gap = [](int k) { return k >= 22 * 24 + 10 && k < 22 * 24 + 13; };
  auto all_gone = [](int k) { return k >= 5 * 24 && k < 6 * 24; };
  std::vector<HostTrace> traces;
  traces.push_back(HourlyHost("a", 28, [&](int k) { return all_gone(k) || own_gap(k); }));
  for (int h = 1; h < 6; ++h) traces.push_back(HourlyHost(absl::StrCat("stay", h), 28, all_gone));
  for (int h = 0; h < 6; ++h) {
    // Leaves the trace for good after day 10.
    traces.push_back(HourlyHost(absl::StrCat("leave", h), 28,
                                [&](int k) { return all_gone(k) || k >= 10 * 24; }));
  }
  BacktestConfig c = HourlyConfig();
  c.outage_fraction = 0.5;
  ASSERT_EQ(c.outage_min_hosts, 10);  // the default; 12 hosts present on day 5
  auto r = RunBacktest(traces, c);
  ASSERT_TRUE(r.ok());
  // Day 5 only. From day 10 six hosts are present, fewer than 10: the rule is
  // off there, and host a's gap on day 22 is its failure.
  EXPECT_EQ(r->outage_points, 24);
  EXPECT_EQ(r->outage_few_hosts_points, 18 * 24);  // days 10..27: 6 present
  EXPECT_GT(FailingCells(*r, 0), 0) << "host a's own 3 h gap on day 22 is a failure";
  for (int h = 1; h < 12; ++h) EXPECT_EQ(FailingCells(*r, h), 0) << h;

  // With the rule on for any number of hosts present, day 22 is still no
  // outage: 5 of the 6 present report (5 is below half of all 12 hosts, which
  // the rule counted before).
  c.outage_min_hosts = 1;
  auto any = RunBacktest(traces, c);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->outage_points, 24);
  EXPECT_EQ(any->outage_few_hosts_points, 0);
  EXPECT_GT(FailingCells(*any, 0), 0);
}

// With fewer hosts present than outage_min_hosts, a gap is the host's own
// revocation (S5): a single host that is off every evening is "all hosts
// silent" then, and the rule would turn each of its failures into an outage.
TEST(AvailabilityBacktestTest, FewHostsPresentKeepTheirGapsAsFailures) {
  auto evenings = [](int k) { return k % 24 >= 20 && k % 24 < 23; };
  std::vector<HostTrace> traces = {HourlyHost("alone", 28, evenings)};
  BacktestConfig c = HourlyConfig();
  c.outage_fraction = 0.5;
  auto r = RunBacktest(traces, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outage_points, 0);
  EXPECT_EQ(r->outage_few_hosts_points, r->grid_points);
  EXPECT_GT(FailingCells(*r, 0), 0);
  c.outage_min_hosts = 1;  // the rule on: every evening is an "outage"
  auto ruled = RunBacktest(traces, c);
  ASSERT_TRUE(ruled.ok());
  EXPECT_GT(ruled->outage_points, 0);
  EXPECT_EQ(FailingCells(*ruled, 0), 0);
}

// The aggregates follow issue 7's definitions on hand-made cells.
TEST(AvailabilityBacktestTest, SummaryDefinitions) {
  BacktestResult r;
  r.methods = {"m"};
  r.hosts = {"a", "b"};
  r.busy = {true, false};
  auto cell = [](int host, int hours, int hour, int n, int surv, double pred, double brier) {
    CellResult c;
    c.host = host;
    c.day_type = 0;
    c.hours = hours;
    c.hour = hour;
    c.n_test = n;
    c.n_survived = surv;
    c.pred = {pred};
    c.brier_sum = {brier};
    return c;
  };
  // (L=1, hour 0): errors 0.5 (host a: emp 0.5, pred 0.75) and 0 (host b) -> 0.25
  r.cells.push_back(cell(0, 1, 0, 4, 2, 0.75, 1.0));
  r.cells.push_back(cell(1, 1, 0, 4, 4, 1.0, 0.0));
  // (L=1, hour 1): error 0.1 -> group 0.1 ; L=1 average over hours = 0.175
  r.cells.push_back(cell(1, 1, 1, 5, 5, 0.9, 0.05));
  // (L=2, hour 0): error 0.2 ; L=2 average = 0.2
  r.cells.push_back(cell(1, 2, 0, 5, 5, 0.8, 0.2));
  // dropped: too few windows, and emp = 0
  r.cells.push_back(cell(0, 2, 0, 2, 2, 0.5, 0.5));
  r.cells.push_back(cell(0, 2, 1, 3, 0, 0.5, 0.75));
  MethodSummary s = SummarizeMethod(r, 0, false, 3);
  EXPECT_EQ(s.cells, 4);
  EXPECT_EQ(s.cells_dropped, 2);
  EXPECT_NEAR(s.acc_grand, 1 - (0.25 + 0.1 + 0.2) / 3, 1e-12);
  EXPECT_NEAR(s.acc_paper_style, 1 - 0.2, 1e-12);
  EXPECT_NEAR(s.acc_worst, 1 - 0.25, 1e-12);
  EXPECT_NEAR(s.brier, (1.0 + 0.05 + 0.2 + 0.5 + 0.75) / (4 + 4 + 5 + 5 + 2 + 3), 1e-12);
  MethodSummary busy = SummarizeMethod(r, 0, true, 3);
  EXPECT_EQ(busy.cells, 1);
  EXPECT_NEAR(busy.acc_grand, 0.5, 1e-12);
  auto by_len = SummarizeByLength(r, 0, 2, 3);
  EXPECT_NEAR(by_len[0][0].avg_rel_err, 0.175, 1e-12);
  EXPECT_NEAR(by_len[0][0].min_rel_err, 0.1, 1e-12);
  EXPECT_NEAR(by_len[0][0].max_rel_err, 0.25, 1e-12);
  EXPECT_EQ(by_len[0][0].n, 3);
  // Calibration in the large over every test window of the length, dropped
  // cells included: L = 1 has 4 + 4 + 5 windows, L = 2 has 5 + 2 + 3.
  EXPECT_EQ(by_len[0][0].windows, 13);
  EXPECT_NEAR(by_len[0][0].mean_pred, (4 * 0.75 + 4 * 1.0 + 5 * 0.9) / 13, 1e-12);
  EXPECT_NEAR(by_len[0][0].observed, (2 + 4 + 5) / 13.0, 1e-12);
  EXPECT_EQ(by_len[0][1].windows, 10);
  EXPECT_NEAR(by_len[0][1].mean_pred, (5 * 0.8 + 2 * 0.5 + 3 * 0.5) / 10, 1e-12);
  EXPECT_NEAR(by_len[0][1].observed, (5 + 2 + 0) / 10.0, 1e-12);
  EXPECT_EQ(by_len[1][0].windows, 0);  // no weekend cells
}

// A cell whose training windows all start in a failure state has no data for
// any method: it is dropped and counted, not scored.
TEST(AvailabilityBacktestTest, CellsWithoutUpHistoryAreDropped) {
  // Down at 03:00-04:00 on the first 14 (training) days only.
  std::vector<HostTrace> traces = {
      HourlyHost("h", 28, [](int k) { return k < 14 * 24 && k % 24 == 3; })};
  auto r = RunBacktest(traces, HourlyConfig());
  ASSERT_TRUE(r.ok());
  for (const CellResult& c : r->cells) EXPECT_NE(c.hour, 3);
  EXPECT_EQ(r->cells_without_history, 2 * 10);  // weekday + weekend, 10 lengths
}

// smp runs with BacktestConfig::smp_options: set to PaperLiteralOptions() it
// reproduces smp_paper cell by cell; the issue 7 options (shrinkage prior,
// age conditioning) run and give probabilities.
TEST(AvailabilityBacktestTest, SmpOptionsArePassedThrough) {
  std::mt19937_64 rng(5);
  std::vector<HostTrace> traces;
  for (int h = 0; h < 4; ++h) {
    std::vector<bool> down(28 * 24);
    for (size_t k = 0; k < down.size(); ++k) down[k] = std::bernoulli_distribution(0.08)(rng);
    traces.push_back(HourlyHost("r" + std::to_string(h), 28, [&](int k) { return down[k]; }));
  }
  BacktestConfig c = HourlyConfig();
  c.methods = {"smp", "smp_paper"};
  c.smp_options = PaperLiteralOptions();
  auto r = RunBacktest(traces, c);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->cells.empty());
  for (const CellResult& cell : r->cells) EXPECT_NEAR(cell.pred[0], cell.pred[1], 1e-12);
  c.smp_options = availability::EstimatorOptions{};
  c.smp_options.prior_windows = 2;
  c.smp_options.recent_age_seconds = 3 * 3600;
  for (const char* prior : {"hosts", "hours", "none"}) {
    c.smp_prior = prior;
    r = RunBacktest(traces, c);
    ASSERT_TRUE(r.ok());
    for (const CellResult& cell : r->cells) {
      EXPECT_GE(cell.pred[0], 0.0);
      EXPECT_LE(cell.pred[0], 1.0);
    }
  }
}

// Online host frailty (smp_online_frailty, the default): a host that failed
// often in its training half and never in its test half is judged by its
// history up to each test window, so smp predicts more survival for it than
// from the training half alone, and its Brier score is lower; a host that is
// as flaky in both halves gets about the same predictions. Without
// host_frailty the switch changes nothing.
TEST(AvailabilityBacktestTest, OnlineFrailtyFollowsTheHostsHistory) {
  std::mt19937_64 rng(11);
  std::vector<HostTrace> traces;
  const int days = 56;
  const double rates[] = {0.01, 0.02, 0.05, 0.08, 0.12, 0.15};
  for (int h = 0; h < 6; ++h) {
    std::vector<bool> down(days * 24);
    for (size_t k = 0; k < down.size(); ++k) down[k] = std::bernoulli_distribution(rates[h])(rng);
    traces.push_back(HourlyHost("h" + std::to_string(h), days, [down](int k) { return down[k]; }));
  }
  // Host 6: as flaky as host 5 in its training half, never down in its test half.
  std::vector<bool> reformed(days * 24);
  for (size_t k = 0; k < reformed.size() / 2; ++k) {
    reformed[k] = std::bernoulli_distribution(0.15)(rng);
  }
  traces.push_back(HourlyHost("reformed", days, [reformed](int k) { return reformed[k]; }));

  BacktestConfig c = HourlyConfig();
  c.methods = {"smp"};
  c.smp_online_frailty = false;
  auto training = RunBacktest(traces, c);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_TRUE(BacktestConfig{}.smp_online_frailty);  // the default
  c.smp_online_frailty = true;
  auto online = RunBacktest(traces, c);
  ASSERT_TRUE(online.ok()) << online.status();
  ASSERT_EQ(training->cells.size(), online->cells.size());
  ASSERT_GT(training->frailty_variance, 0);

  double brier_training[7] = {}, brier_online[7] = {};
  double pred_training[7] = {}, pred_online[7] = {};
  int n[7] = {};
  for (size_t k = 0; k < online->cells.size(); ++k) {
    const CellResult& a = training->cells[k];
    const CellResult& b = online->cells[k];
    ASSERT_EQ(std::tie(a.host, a.day_type, a.hour, a.hours, a.init),
              std::tie(b.host, b.day_type, b.hour, b.hours, b.init));
    if (a.hours < 2) continue;
    brier_training[a.host] += a.brier_sum[0];
    brier_online[a.host] += b.brier_sum[0];
    pred_training[a.host] += a.pred[0];
    pred_online[a.host] += b.pred[0];
    ++n[a.host];
  }
  ASSERT_GT(n[6], 0);
  // The reformed host: every length-2+ cell predicted at least as high, on
  // average clearly higher, with a lower Brier score.
  for (size_t k = 0; k < online->cells.size(); ++k) {
    const CellResult& a = training->cells[k];
    if (a.host == 6 && a.hours >= 2) {
      EXPECT_GE(online->cells[k].pred[0], a.pred[0] - 1e-12) << a.hour << " " << a.hours;
    }
  }
  EXPECT_GT(pred_online[6] / n[6], pred_training[6] / n[6] + 0.02);
  EXPECT_LT(brier_online[6], brier_training[6]);
  // The steady hosts move much less than the reformed one.
  for (int h = 0; h < 6; ++h) {
    ASSERT_GT(n[h], 0);
    EXPECT_LT(std::abs(pred_online[h] - pred_training[h]) / n[h],
              (pred_online[6] - pred_training[6]) / n[6] / 2)
        << h;
  }

  c.smp_options.host_frailty = false;
  c.smp_online_frailty = false;
  auto off_training = RunBacktest(traces, c);
  c.smp_online_frailty = true;
  auto off_online = RunBacktest(traces, c);
  ASSERT_TRUE(off_training.ok() && off_online.ok());
  ASSERT_EQ(off_training->cells.size(), off_online->cells.size());
  for (size_t k = 0; k < off_online->cells.size(); ++k) {
    EXPECT_EQ(off_training->cells[k].pred[0], off_online->cells[k].pred[0]);
  }
}

// smp's population as of each window start (smp_pool_at kWindow): each
// test window's smp prediction is the library's, as the predictor service
// computes it at a request: the host's training windows shrunk towards the
// pool of every host's windows that ended by the window start
// (PopulationPriorBuilder over CollectStats with that end), with host frailty
// the prior's failure hazards at the host's ratio from its exposure up to the
// start, against the HostFrailtyModel of every host's exposure up to the
// start. The hosts turn flaky in the test half, so the population as of the
// window start predicts lower survival than the training population.
TEST(AvailabilityBacktestTest, OnlinePopulationIsThePoolAtTheWindowStart) {
  constexpr int kDays = 42;
  std::mt19937_64 rng(5);
  std::vector<HostTrace> traces;
  std::vector<availability::StateSeries> series;
  const double flaky[] = {0.05, 0.08, 0.12, 0.2};
  for (int h = 0; h < 4; ++h) {
    std::vector<bool> down(kDays * 24);
    for (size_t k = 1; k + 1 < down.size(); ++k) {
      down[k] = std::bernoulli_distribution(k < down.size() / 2 ? 0.02 : flaky[h])(rng);
    }
    traces.push_back(HourlyHost("h" + std::to_string(h), kDays, [down](int k) { return down[k]; }));
    availability::StateSeries st;
    st.start_unix = kMonday;
    st.step_seconds = 3600;
    for (bool d : down) st.states.push_back(d ? availability::HostState::kS5 : availability::HostState::kS1);
    series.push_back(st);
  }
  EXPECT_EQ(BacktestConfig{}.smp_pool_at, BacktestConfig::PoolAt::kTraining);
  const int64_t split = kMonday + int64_t{kDays / 2} * 86400;
  // Host frailty's population as of the split (kPrior, and the training
  // population) or of the window start (kWindow).
  availability::HostFrailtyModel trained;
  for (const auto& st : series) trained.Add(availability::CountFailureExposure(st, split, 0));
  trained.Build();
  using PoolAt = BacktestConfig::PoolAt;
  for (const auto& [frailty, pool_at] : {std::pair{false, PoolAt::kWindow},
                                         std::pair{true, PoolAt::kPrior},
                                         std::pair{true, PoolAt::kWindow}}) {
    SCOPED_TRACE(std::string(frailty ? "host frailty, " : "no host frailty, ") +
                 (pool_at == PoolAt::kWindow ? "window" : "prior"));
    BacktestConfig c = HourlyConfig();
    c.methods = {"smp"};
    c.max_window_hours = 3;
    c.smp_options.host_frailty = frailty;
    c.smp_options.recent_age_seconds = 0;
    c.smp_options.load_band_first_sojourn = false;
    auto training = RunBacktest(traces, c);
    ASSERT_TRUE(training.ok()) << training.status();
    EXPECT_EQ(training->smp_pool_at, BacktestConfig::PoolAt::kTraining);
    c.smp_pool_at = pool_at;
    auto online = RunBacktest(traces, c);
    ASSERT_TRUE(online.ok()) << online.status();
    EXPECT_EQ(online->smp_pool_at, pool_at);
    ASSERT_EQ(training->cells.size(), online->cells.size());

    // The library pipeline for every scored test window of hosts 0 and 3.
    int compared = 0;
    for (const CellResult& cell : online->cells) {
      if (cell.host != 0 && cell.host != 3) continue;
      const availability::DayType dt =
          cell.day_type == 0 ? availability::DayType::kWeekday : availability::DayType::kWeekend;
      const availability::WindowSpec spec{dt, int64_t{cell.hour} * 3600,
                                          int64_t{cell.hours} * 3600, 0, 0};
      availability::SojournStats own =
          availability::CollectStats(series[cell.host], spec, split, c.smp_options);
      double sum = 0;
      int n = 0;
      for (int64_t day = kDays / 2; day < kDays; ++day) {
        const int64_t at = kMonday + day * 86400 + int64_t{cell.hour} * 3600;
        if (availability::DayTypeOf(at, 0) != dt) continue;
        const size_t s = static_cast<size_t>(day * 24 + cell.hour);
        if (s + cell.hours >= series[cell.host].states.size()) continue;
        if (static_cast<int>(series[cell.host].states[s]) != cell.init) continue;
        availability::PopulationPriorBuilder pool;
        availability::HostFrailtyModel model;
        std::vector<availability::FailureExposure> exposure;
        for (const auto& st : series) {
          pool.Add(availability::CollectStats(st, spec, at, c.smp_options));
          exposure.push_back(availability::CountFailureExposure(st, at, 0));
          model.Add(exposure.back());
        }
        model.Build();
        const availability::SojournStats prior = pool.Build(c.smp_options.level_corrected_borrowing);
        const availability::HostFrailtyModel& population = pool_at == PoolAt::kWindow ? model : trained;
        own.prior_hazard_ratio =
            frailty ? population.Theta(exposure[cell.host], cell.day_type) : 1.0;
        sum += availability::PredictFromStats(own, static_cast<availability::HostState>(cell.init),
                                              cell.hours, c.smp_options, &prior)
                   .tr.back();
        ++n;
      }
      ASSERT_EQ(n, cell.n_test) << cell.day_type << " " << cell.hour << " " << cell.hours;
      EXPECT_NEAR(cell.pred[0], sum / n, 1e-12)
          << cell.host << " " << cell.day_type << " " << cell.hour << " " << cell.hours;
      ++compared;
    }
    EXPECT_GT(compared, 200);

    // The flakier test days pull the population down.
    double pred_training = 0, pred_online = 0;
    for (size_t k = 0; k < online->cells.size(); ++k) {
      pred_training += training->cells[k].pred[0];
      pred_online += online->cells[k].pred[0];
    }
    EXPECT_LT(pred_online, pred_training - 0.001 * online->cells.size());

    // Host frailty from the training half only: only the prior is pooled
    // as of the window start, and the report says so.
    if (frailty && pool_at == PoolAt::kWindow) {
      BacktestConfig t = c;
      t.smp_online_frailty = false;
      auto trained_frailty = RunBacktest(traces, t);
      ASSERT_TRUE(trained_frailty.ok()) << trained_frailty.status();
      EXPECT_EQ(trained_frailty->smp_pool_at, PoolAt::kPrior);
    }
    // Not exact with recency weighting: the training population, and the
    // report says so.
    c.smp_options.recency_half_life_windows = 4;
    auto recency = RunBacktest(traces, c);
    ASSERT_TRUE(recency.ok()) << recency.status();
    EXPECT_EQ(recency->smp_pool_at, BacktestConfig::PoolAt::kTraining);
  }
}

// Unknown methods and bad grids are rejected.
TEST(AvailabilityBacktestTest, RejectsBadConfig) {
  std::vector<HostTrace> traces = {HourlyHost("up", 4, [](int) { return false; })};
  BacktestConfig c = HourlyConfig();
  c.methods = {"smp", "oracle"};
  EXPECT_FALSE(RunBacktest(traces, c).ok());
  c = HourlyConfig();
  c.step_seconds = 7;
  EXPECT_FALSE(RunBacktest(traces, c).ok());
  c = HourlyConfig();
  c.smp_population_days = 29;
  EXPECT_FALSE(RunBacktest(traces, c).ok());
}

// The population's level (smp_population_days): 8 hosts, 8 weeks from a
// Monday; quiet (no failure) in weeks 0-1, busy (each host down one hour a
// day) from week 2 on. The training days (weeks 0-3) show a level that
// carries over from the days before, so beta > 0; the test days all follow
// busy weeks, so smp predicts lower survival than without the level, and its
// Brier score is lower (the test windows do fail). Off by default: the
// default run fits nothing.
TEST(AvailabilityBacktestTest, PopulationLevelFollowsBusyWeeks) {
  std::vector<HostTrace> traces;
  for (int h = 0; h < 8; ++h) {
    traces.push_back(HourlyHost("h" + std::to_string(h), 56, [h](int k) {
      const int day = k / 24;
      return day >= 14 && k % 24 == (day * 7 + h * 5) % 24;
    }));
  }
  BacktestConfig c = HourlyConfig();
  c.methods = {"smp"};
  EXPECT_EQ(BacktestConfig{}.smp_population_days, 0);
  auto off = RunBacktest(traces, c);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->population_level_beta, 0);
  EXPECT_EQ(off->population_level_pairs, 0);
  c.smp_population_days = 7;
  auto on = RunBacktest(traces, c);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_GT(on->population_level_beta, 0.2);
  EXPECT_GE(on->population_level_pairs, 20);
  ASSERT_EQ(off->cells.size(), on->cells.size());
  double pred_off = 0, pred_on = 0, brier_off = 0, brier_on = 0;
  for (size_t k = 0; k < on->cells.size(); ++k) {
    if (on->cells[k].hours < 2) continue;
    pred_off += off->cells[k].pred[0];
    pred_on += on->cells[k].pred[0];
    brier_off += off->cells[k].brier_sum[0];
    brier_on += on->cells[k].brier_sum[0];
  }
  EXPECT_LT(pred_on, pred_off);
  EXPECT_LT(brier_on, brier_off);
}

// Noise injection changes nothing with zero injections and something with
// several on an always-up host.
TEST(AvailabilityBacktestTest, NoiseInjectionDiscrepancy) {
  std::vector<HostTrace> traces = {HourlyHost("up", 28, [](int) { return false; })};
  auto r = RunNoiseInjection(traces, HourlyConfig(), {0, 4}, {1, 3}, 17);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->discrepancy["window_frequency"][0][0], 0.0);
  EXPECT_DOUBLE_EQ(r->discrepancy["smp"][0][1], 0.0);
  EXPECT_GT(r->discrepancy["window_frequency"][1][0], 0.0);
  EXPECT_GT(r->discrepancy["smp"][1][1], 0.0);
  EXPECT_EQ(r->hosts["smp"][1][1], 1);
}

}  // namespace
}  // namespace sojourn::backtest
