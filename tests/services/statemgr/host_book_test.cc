#include "services/statemgr/host_book.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "common/server.h"
#include "common/thread_pool.h"
#include "gtest/gtest.h"
#include "services/statemgr/statemgr_service.h"
#include "services/statemgr/usage_keeper.h"
#include "tests/test_util.h"

namespace sojourn::statemgr {
namespace {

using availability::HostState;
using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

constexpr int64_t kMonday = 1700438400;  // 2023-11-20 00:00 UTC, a Monday

HostSample At(int64_t t, double load, double mem = 4000) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = mem;
  return s;
}

class HostBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SampleStore::Open(dir_.path(), false);
    ASSERT_THAT(s.status(), IsOk());
    store_ = std::move(*s);
    config_.default_period_seconds = 300;
    book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  }
  // `days` days of 5-minute samples of `host` from kMonday; load from fn(t).
  void Fill(const std::string& host, int days, double (*fn)(int64_t)) {
    std::vector<HostSample> v;
    for (int64_t t = kMonday; t < kMonday + days * 86400; t += 300) v.push_back(At(t, fn(t)));
    MetaUpdate meta;
    meta.period_seconds = 300;
    ASSERT_THAT(book_->Append(host, v, meta).status(), IsOk());
  }
  TempDir dir_;
  std::unique_ptr<SampleStore> store_;
  FakeClock clock_{absl::FromUnixSeconds(kMonday)};
  HostBookConfig config_;
  std::unique_ptr<HostBook> book_;
};

// A stored sample PushSamples would refuse (stamped years ahead, or a NaN
// load: written before the checks existed, or by hand) is left out at Load,
// so samples pushed after a restart are stored. Before, the future sample
// made every new one a "duplicate": acknowledged (the monitor dropped it from
// its spool) and never stored.
TEST_F(HostBookTest, LoadLeavesOutSamplesPushSamplesWouldRefuse) {
  HostMeta meta;
  meta.period_seconds = 300;
  ASSERT_THAT(store_->Append("h", {At(kMonday - 600, 0.1), At(kMonday - 300, 0.2)}, &meta),
              IsOk());
  HostSample nan_load = At(kMonday - 200, 0.0);
  nan_load.cpu_load = std::nan("");
  ASSERT_THAT(store_->Append("h", {nan_load, At(kMonday + 10 * 365 * 86400LL, 0.1)}, nullptr),
              IsOk());
  HostBook book(config_, *store_, clock_);
  int64_t skipped = -1;
  ASSERT_THAT(book.Load(&skipped), IsOk());
  EXPECT_EQ(skipped, 2);
  ASSERT_THAT(book.Info("h").status(), IsOk());
  EXPECT_EQ(book.Info("h")->samples, 2);
  EXPECT_EQ(book.Info("h")->last_unix, kMonday - 300);
  auto r = book.Append("h", {At(kMonday, 0.3)});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->persisted, 1);
  EXPECT_EQ(r->duplicates, 0);
  EXPECT_EQ(r->last_persisted_unix, kMonday);
}

// A stored meta with a period PushSamples refuses loads as "unknown" (the
// default period), not as a grid step of 2^62 seconds.
TEST_F(HostBookTest, LoadIgnoresOutOfRangeStoredPeriod) {
  HostMeta meta;
  meta.period_seconds = int64_t{1} << 62;
  ASSERT_THAT(store_->Append("h", {At(kMonday - 600, 0.1), At(kMonday - 300, 0.2)}, &meta),
              IsOk());
  HostBook book(config_, *store_, clock_);
  int64_t skipped = -1;
  ASSERT_THAT(book.Load(&skipped), IsOk());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(book.Info("h")->meta.period_seconds, 0);
  int64_t step = 0;
  ASSERT_THAT(book.Intervals("h", 0, 0, &step).status(), IsOk());
  EXPECT_EQ(step, 300);
}

// Re-sent samples are acknowledged as duplicates and not stored twice.
TEST_F(HostBookTest, DuplicatesAreNotStoredTwice) {
  auto r1 = book_->Append("h", {At(kMonday, 0.1), At(kMonday + 300, 0.1)});
  ASSERT_THAT(r1.status(), IsOk());
  EXPECT_EQ(r1->persisted, 2);
  auto r2 = book_->Append("h", {At(kMonday + 300, 0.1), At(kMonday + 600, 0.1)});
  ASSERT_THAT(r2.status(), IsOk());
  EXPECT_EQ(r2->persisted, 1);
  EXPECT_EQ(r2->duplicates, 1);
  EXPECT_EQ(r2->last_persisted_unix, kMonday + 600);
  EXPECT_EQ(book_->Info("h")->samples, 3);
}

// A gap longer than the revocation gap is recorded as a revocation (S5), and
// shows as an S5 interval between the two runs of samples.
TEST_F(HostBookTest, GapIsRecordedAsRevocation) {
  MetaUpdate meta;
  meta.period_seconds = 300;
  ASSERT_THAT(book_->Append("h", {At(kMonday, 0.1), At(kMonday + 300, 0.1)}, meta).status(),
              IsOk());
  ASSERT_THAT(book_->Append("h", {At(kMonday + 3600, 0.1), At(kMonday + 3900, 0.1)}).status(),
              IsOk());
  auto rev = store_->Revocations("h");
  ASSERT_THAT(rev.status(), IsOk());
  ASSERT_EQ(rev->size(), 1u);
  EXPECT_EQ((*rev)[0].first, kMonday + 300);
  EXPECT_EQ((*rev)[0].second, 3300);
  int64_t step = 0;
  auto intervals = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  EXPECT_EQ(step, 300);
  bool saw_s5 = false;
  for (const auto& i : *intervals) saw_s5 |= i.state == HostState::kS5;
  EXPECT_TRUE(saw_s5);
}

// A range of the grid is the whole grid's points in [start, end), at any
// alignment, before or after the grid, or open-ended (end 0); through the
// host's silence the points go on to the end (at most now): the newest
// sample's state until the revocation gap has passed, then S5.
TEST_F(HostBookTest, IntervalsOfARangeAreTheGridsPointsInIt) {
  MetaUpdate meta;
  meta.period_seconds = 300;
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t <= kMonday + 6000; t += 300) {
    if (t < kMonday + 1500 || t > kMonday + 3600) v.push_back(At(t, t % 900 == 0 ? 0.9 : 0.1));
  }
  ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  auto points = [](const std::vector<StateInterval>& intervals, int64_t step) {
    std::vector<std::pair<int64_t, HostState>> out;
    for (const auto& i : intervals) {
      for (int64_t t = i.start_unix; t < i.end_unix; t += step) out.emplace_back(t, i.state);
    }
    return out;
  };
  int64_t step = 0;
  auto all = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(all.status(), IsOk());
  ASSERT_EQ(step, 300);
  const auto grid = points(*all, step);
  ASSERT_EQ(grid.size(), 21u);
  for (int64_t start : {int64_t{0}, kMonday - 7, kMonday, kMonday + 1, kMonday + 299,
                        kMonday + 4000, kMonday + 6000, kMonday + 6001, int64_t{1} << 62}) {
    for (int64_t end : {int64_t{0}, kMonday, kMonday + 300, kMonday + 2999, kMonday + 3000,
                        kMonday + 6001, std::numeric_limits<int64_t>::max()}) {
      SCOPED_TRACE(absl::StrCat("[", start, ", ", end, ")"));
      std::vector<std::pair<int64_t, HostState>> want;
      for (const auto& p : grid) {
        if (p.first >= start && (end == 0 || p.first < end)) want.push_back(p);
      }
      int64_t s = 0;
      auto got = book_->Intervals("h", start, end, &s);
      ASSERT_THAT(got.status(), IsOk());
      EXPECT_EQ(points(*got, s), want);
    }
  }
  // Through the silence after kMonday + 6000, now 2000 s later: the gap is
  // 450 s (1.5 periods), so 6300 is the last state, 6600 on are S5.
  clock_.Set(absl::FromUnixSeconds(kMonday + 8000));
  auto silent = book_->Intervals("h", kMonday + 5700, kMonday + 9000, &step, true);
  ASSERT_THAT(silent.status(), IsOk());
  std::vector<std::pair<int64_t, HostState>> want = {{kMonday + 5700, grid[19].second},
                                                     {kMonday + 6000, grid[20].second},
                                                     {kMonday + 6300, grid[20].second}};
  for (int64_t t = kMonday + 6600; t <= kMonday + 8000; t += 300) {
    want.emplace_back(t, HostState::kS5);
  }
  EXPECT_EQ(points(*silent, step), want);
}

// One ancient sample beside current ones does not make a grid from 1970 (it
// would be gigabytes at a 1 s period): the grid covers the most recent
// max_grid_points periods (and at most an eighth more), and the ancient
// sample stays stored.
TEST_F(HostBookTest, GridIsBoundedWhateverTheOldestSample) {
  config_.max_grid_points = 1000;
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 1;
  std::vector<HostSample> v = {At(1, 0.1)};
  for (int64_t t = kMonday - 3000; t <= kMonday; ++t) v.push_back(At(t, 0.1));
  ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  EXPECT_EQ(book_->Info("h")->samples, static_cast<int64_t>(v.size()));
  EXPECT_EQ(book_->Info("h")->first_unix, 1);
  int64_t step = 0;
  auto intervals = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  EXPECT_EQ(step, 1);
  ASSERT_FALSE(intervals->empty());
  // The last 1000 periods, nothing before the last 1125, and no revocation
  // for the gap.
  EXPECT_GE(intervals->front().start_unix, kMonday - 1125);
  EXPECT_LE(intervals->front().start_unix, kMonday - 999);
  for (const auto& i : *intervals) EXPECT_NE(i.state, HostState::kS5);
}

// A host silent for longer than its revocation gap is S5 now.
TEST_F(HostBookTest, SilentHostIsRevokedNow) {
  Fill("h", 1, [](int64_t) { return 0.05; });
  clock_.Set(absl::FromUnixSeconds(kMonday + 86400));
  EXPECT_EQ(book_->Info("h")->state, HostState::kS1);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(book_->Info("h")->state, HostState::kS5);
}

// Window statistics come from the same clock window on the most recent days
// of the requested type; the other day type's windows are kept apart.
TEST_F(HostBookTest, WindowStatsUseSameClockWindowsOfTheDayType) {
  // Busy (S3) every day 10:00-11:00, idle otherwise; two weeks.
  Fill("h", 14, [](int64_t t) { return ((t % 86400) / 3600 == 10) ? 0.9 : 0.05; });
  availability::WindowSpec spec;
  spec.day_type = availability::DayType::kWeekday;
  spec.start_second_of_day = 9 * 3600;
  spec.length_seconds = 2 * 3600;
  auto r = book_->WindowStats("h", spec, 0, availability::PaperEstimatorOptions());
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_FALSE(r->whole_history_fallback);
  EXPECT_EQ(r->window_starts_unix.size(), 10u);  // 10 weekdays in 2 weeks
  EXPECT_EQ(r->stats.num_windows, 10);
  // sojourn's default adds the windows an hour earlier and later, weighted,
  // and borrows the 4 weekend windows at 9:00, kept apart (level-corrected
  // by the predictor) and counted in num_windows.
  auto with_neighbours = book_->WindowStats("h", spec, 0);
  ASSERT_THAT(with_neighbours.status(), IsOk());
  EXPECT_EQ(with_neighbours->stats.num_windows, 30 + 4);
  EXPECT_NEAR(with_neighbours->stats.total_weight,
              10 + 20 * availability::EstimatorOptions().neighbor_window_weight, 1e-9);
  ASSERT_EQ(with_neighbours->stats.borrowed.size(), 1u);
  EXPECT_EQ(with_neighbours->stats.borrowed[0].num_windows, 4);
  EXPECT_NEAR(with_neighbours->stats.borrowed[0].total_weight,
              4 * availability::EstimatorOptions().other_day_type_weight, 1e-9);
  for (int64_t start : r->window_starts_unix) {
    EXPECT_EQ(availability::DayTypeOf(start, 0), availability::DayType::kWeekday);
    EXPECT_EQ(start % 86400, 9 * 3600);
  }
  spec.day_type = availability::DayType::kWeekend;
  auto w = book_->WindowStats("h", spec, 0);
  ASSERT_THAT(w.status(), IsOk());
  EXPECT_EQ(w->window_starts_unix.size(), 4u);
}

// HTCondor's and BOINC's estimates of a window from the host's history up to
// its start: busy 10:00-11:00 every day, so every completed availability
// interval is 23 h (11:00 to 09:55), the run before the first busy hour
// touches the start and is not one.
TEST_F(HostBookTest, DeployedEstimatesSeeTheHistoryUpToTheWindowStart) {
  Fill("h", 14, [](int64_t t) { return ((t % 86400) / 3600 == 10) ? 0.9 : 0.05; });
  const int64_t last = kMonday + 14 * 86400 - 300;  // day 14, 23:55
  clock_.Set(absl::FromUnixSeconds(last + 60));
  availability::WindowSpec spec;
  spec.day_type = availability::DayType::kWeekday;
  spec.start_second_of_day = 9 * 3600;
  spec.length_seconds = 2 * 3600;
  auto plain = book_->WindowStats("h", spec, 0);
  ASSERT_THAT(plain.status(), IsOk());
  EXPECT_FALSE(plain->deployed.has_value());
  // Now: 13 intervals of 276 steps behind, up 155 steps (since 11:00).
  auto now = book_->WindowStats("h", spec, 0, availability::EstimatorOptions(), true);
  ASSERT_THAT(now.status(), IsOk());
  ASSERT_TRUE(now->deployed.has_value());
  EXPECT_EQ(now->deployed->completed_intervals, 13);
  EXPECT_EQ(now->deployed->up_steps, 155);
  EXPECT_DOUBLE_EQ(now->deployed->avail_time_tr, 1.0);  // 155 + 24 < 276
  EXPECT_GT(now->deployed->on_fraction, 0.95);
  EXPECT_LT(now->deployed->on_fraction, 0.98);
  spec.length_seconds = 12 * 3600;  // 155 + 144 > 276: no past interval lasted
  EXPECT_DOUBLE_EQ(
      book_->WindowStats("h", spec, 0, availability::EstimatorOptions(), true)->deployed->avail_time_tr,
      0.0);
  // Day 14 at 09:00: the 13th interval is still in progress (up 264 steps),
  // and what came after is not seen.
  spec.length_seconds = 2 * 3600;
  const int64_t nine = kMonday + 13 * 86400 + 9 * 3600;
  auto at9 = book_->WindowStats("h", spec, nine, availability::EstimatorOptions(), true);
  ASSERT_THAT(at9.status(), IsOk());
  EXPECT_EQ(at9->deployed->completed_intervals, 12);
  EXPECT_EQ(at9->deployed->up_steps, 264);
  EXPECT_DOUBLE_EQ(at9->deployed->avail_time_tr, 0.0);  // 264 + 24 > 276
  spec.length_seconds = 1800;
  EXPECT_DOUBLE_EQ(
      book_->WindowStats("h", spec, nine, availability::EstimatorOptions(), true)->deployed->avail_time_tr,
      1.0);  // 264 + 6 < 276
  // Day 14 at 10:30, in the busy hour: down, no survival.
  auto busy = book_->WindowStats("h", spec, nine + 5400, availability::EstimatorOptions(), true);
  ASSERT_THAT(busy.status(), IsOk());
  EXPECT_EQ(busy->deployed->completed_intervals, 13);
  EXPECT_EQ(busy->deployed->up_steps, 0);
  EXPECT_DOUBLE_EQ(busy->deployed->avail_time_tr, 0.0);
  // Silent past its revocation gap, the host is down now.
  clock_.Set(absl::FromUnixSeconds(last + 86400));
  auto silent = book_->WindowStats("h", spec, 0, availability::EstimatorOptions(), true);
  ASSERT_THAT(silent.status(), IsOk());
  EXPECT_DOUBLE_EQ(silent->deployed->avail_time_tr, 0.0);
  EXPECT_EQ(silent->deployed->up_steps, 0);
  // The silent day (from the last sample) is off time for BOINC.
  EXPECT_NEAR(silent->deployed->on_fraction, now->deployed->on_fraction * std::exp(-0.1), 1e-9);
}

// With the load band asked for, the book returns the host's band now (its
// last sample's) or at a past window start (the grid point's), and its exits
// by band; without it, neither.
TEST_F(HostBookTest, WindowStatsCarryTheLoadBand) {
  // Idle at 0.05 and busy from 10:00 to 11:00 every day: on even days above
  // Th2 (S3) after an hour at 0.15 (S1, upper band), on odd days in S2 after
  // an idle hour. So the 09:00 strata (same hour, same age class) hold both
  // bands, and only the upper band is followed by failures. 0.15 for the
  // last sample.
  Fill("h", 14, [](int64_t t) {
    const int64_t h = (t % 86400) / 3600;
    const bool even = ((t - kMonday) / 86400) % 2 == 0;
    if (t == kMonday + 14 * 86400 - 300) return 0.15;
    if (h == 10) return even ? 0.9 : 0.5;
    return even && h == 9 ? 0.15 : 0.05;
  });
  clock_.Set(absl::FromUnixSeconds(kMonday + 14 * 86400 - 300));
  availability::WindowSpec spec;
  spec.start_second_of_day = 9 * 3600;
  spec.length_seconds = 2 * 3600;
  availability::EstimatorOptions opt;
  ASSERT_TRUE(opt.load_band_first_sojourn);
  auto now = book_->WindowStats("h", spec, 0, opt);
  ASSERT_THAT(now.status(), IsOk());
  EXPECT_EQ(now->load_band, 1);
  ASSERT_TRUE(now->band_exposure.has_value());
  // The upper band precedes every failure: above its strata on weekdays,
  // the lower band below.
  EXPECT_GT(now->band_exposure->Ratio(0, 0, 1, 1), 1.0);
  EXPECT_LT(now->band_exposure->Ratio(0, 0, 0, 1), 1.0);
  // A past window starting at 08:00 on day 10 (lower band), and at 09:00.
  auto at8 = book_->WindowStats("h", spec, kMonday + 10 * 86400 + 8 * 3600, opt);
  auto at9 = book_->WindowStats("h", spec, kMonday + 10 * 86400 + 9 * 3600, opt);
  ASSERT_THAT(at8.status(), IsOk());
  ASSERT_THAT(at9.status(), IsOk());
  EXPECT_EQ(at8->load_band, 0);
  EXPECT_EQ(at9->load_band, 1);
  opt.load_band_first_sojourn = false;
  auto off = book_->WindowStats("h", spec, kMonday + 10 * 86400 + 9 * 3600, opt);
  ASSERT_THAT(off.status(), IsOk());
  EXPECT_EQ(off->load_band, availability::kLoadBandUnknown);
  EXPECT_FALSE(off->band_exposure.has_value());
}

// A host too new for any same-clock window still gets statistics, marked as
// a whole-history fallback; an unknown host is NOT_FOUND.
TEST_F(HostBookTest, NewHostFallsBackToWholeHistory) {
  ASSERT_THAT(book_->Append("new", {At(kMonday, 0.1), At(kMonday + 300, 0.1),
                                    At(kMonday + 600, 0.3)})
                  .status(),
              IsOk());
  availability::WindowSpec spec;
  spec.length_seconds = 7200;
  auto r = book_->WindowStats("new", spec, 0);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_TRUE(r->whole_history_fallback);
  EXPECT_EQ(r->stats.num_windows, 1);
  EXPECT_TRUE(absl::IsNotFound(book_->WindowStats("nope", spec, 0).status()));
}

// The whole-history fallback is the history up to the requested end: a
// window in the past does not learn from the failures that came after it,
// and an end before the first sample is refused.
TEST_F(HostBookTest, FallbackRespectsTheRequestedEnd) {
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 3 * 3600; t += 300) {
    v.push_back(At(t, t >= kMonday + 2 * 3600 ? 0.95 : 0.05));  // busy (S3) in hour 3
  }
  ASSERT_THAT(book_->Append("late-busy", v).status(), IsOk());
  availability::WindowSpec spec;
  spec.start_second_of_day = 20 * 3600;  // no same-clock window in 3 h of history
  spec.length_seconds = 1800;
  auto failures = [](const availability::SojournStats& s) {
    double n = 0;
    for (int i = 1; i <= 2; ++i) {
      for (const auto* m : {&s.ordinary[i], &s.first[i]}) {
        for (const auto& [key, count] : m->completed) {
          if (key.first >= 3) n += count;
        }
      }
    }
    return n;
  };
  auto all = book_->WindowStats("late-busy", spec, 0);
  ASSERT_THAT(all.status(), IsOk());
  ASSERT_TRUE(all->whole_history_fallback);
  EXPECT_GT(failures(all->stats), 0);
  auto early = book_->WindowStats("late-busy", spec, kMonday + 3600);
  ASSERT_THAT(early.status(), IsOk());
  ASSERT_TRUE(early->whole_history_fallback);
  EXPECT_GT(early->stats.num_windows, 0);
  EXPECT_LT(early->stats.num_windows, all->stats.num_windows);
  EXPECT_EQ(failures(early->stats), 0);  // the busy hour is after the end
  // Before the first sample there is no state to start in: refused, not
  // answered with the host's state now.
  auto before = book_->WindowStats("late-busy", spec, kMonday - 3600);
  EXPECT_EQ(before.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(before.status().message()),
              ::testing::HasSubstr("no state before " + std::to_string(kMonday - 3600)));
  EXPECT_THAT(book_->WindowStats("late-busy", spec, kMonday).status(), IsOk());
  // An end far in the future is the last sample (and returns at once).
  auto far = book_->WindowStats("late-busy", spec, INT64_MAX);
  ASSERT_THAT(far.status(), IsOk());
  EXPECT_EQ(far->stats.num_windows, all->stats.num_windows);
}

// Everything appended is back after a restart (Load from RocksDB).
TEST_F(HostBookTest, LoadRestoresHosts) {
  Fill("h", 2, [](int64_t) { return 0.3; });
  // Load leaves out samples stamped after the clock (plus the skew bound).
  clock_.Set(absl::FromUnixSeconds(kMonday + 2 * 86400));
  HostBook again(config_, *store_, clock_);
  ASSERT_THAT(again.Load(), IsOk());
  auto info = again.Info("h");
  ASSERT_THAT(info.status(), IsOk());
  EXPECT_EQ(info->samples, 2 * 288);
  EXPECT_EQ(info->meta.period_seconds, 300);
}

// The usage keeper resamples only the samples since its last build (a year
// of 6 s samples is 5 million to read back); its series is the whole
// history's all the same: after new samples in the same bin, in new bins,
// after a gap longer than a sample holds, after a new largest free memory
// (which renormalises every bin) and after the host's capacity becomes known.
TEST_F(HostBookTest, UsageKeeperExtendsItsSeriesAsTheWholeHistoryWould) {
  auto expect_same = [](const usage::UsageSeries& a, const usage::UsageSeries& b, int step) {
    ASSERT_EQ(a.origin_unix, b.origin_unix) << step;
    ASSERT_EQ(a.bins(), b.bins()) << step;
    for (int64_t i = 0; i < a.bins(); ++i) {
      const size_t k = static_cast<size_t>(i);
      for (auto [x, y] : {std::pair{a.cpu[k], b.cpu[k]}, std::pair{a.mem[k], b.mem[k]}}) {
        ASSERT_TRUE(std::isnan(x) ? std::isnan(y) : x == y) << step << " bin " << i;
      }
    }
  };
  UsageKeeper keeper(UsageKeeperConfig{}, *book_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 120;
  int64_t t = kMonday;
  auto push = [&](int64_t seconds, double mem) {
    std::vector<HostSample> v;
    for (int64_t end = t + seconds; t < end; t += 120) {
      v.push_back(At(t, (t / 3600) % 5 == 0 ? 0.8 : 0.1 + 0.01 * ((t / 120) % 7), mem));
    }
    ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  };
  push(3 * 86400, 3000);
  for (int step = 0; step < 7; ++step) {
    switch (step) {
      case 1: push(120, 2500); break;            // one more sample, inside the last bin
      case 2: t += 3 * 3600; push(86400, 2800); break;  // a gap no sample holds across
      case 3: push(7200, 5000); break;           // a new largest free memory
      case 4:                                    // the capacity becomes known
        meta.attributes = v1::HostAttributes();
        meta.attributes->set_total_mem_mb(8000);
        push(3600, 3500);
        break;
      case 5: push(240, 7000); break;
      case 6: push(3 * 86400, 1000); break;
      default: break;
    }
    clock_.Set(absl::FromUnixSeconds(t) + absl::Minutes(6 * (step + 1)));
    auto kept = keeper.Get("h");
    ASSERT_THAT(kept.status(), IsOk());
    UsageKeeper fresh(UsageKeeperConfig{}, *book_, *store_, clock_);
    auto whole = fresh.Get("h");
    ASSERT_THAT(whole.status(), IsOk());
    EXPECT_EQ(kept->total_mem_mb, whole->total_mem_mb) << step;
    expect_same(kept->model->series(), whole->model->series(), step);
  }
}

// Expects `a` and `b` to answer every question about host "h" alike: its
// info, series (whole, by range, truncated), intervals, and the window
// statistics of a 4 h window at 08:00 ending at each of `ends` (0 = now).
void ExpectSameAnswers(const HostBook& a, const HostBook& b, const std::string& when,
                     std::vector<int64_t> ends) {
  SCOPED_TRACE(when);
  auto ia = a.Info("h"), ib = b.Info("h");
  ASSERT_THAT(ia.status(), IsOk());
  ASSERT_THAT(ib.status(), IsOk());
  EXPECT_EQ(ia->samples, ib->samples);
  EXPECT_EQ(ia->first_unix, ib->first_unix);
  EXPECT_EQ(ia->last_unix, ib->last_unix);
  EXPECT_EQ(ia->state, ib->state);
  EXPECT_EQ(ia->state_since_unix, ib->state_since_unix);
  for (auto [from, to, max] : {std::tuple<int64_t, int64_t, size_t>{0, 0, 100000},
                               {kMonday + 86400 + 17, kMonday + 5 * 86400, 100000},
                               {kMonday + 2 * 86400, 0, 500},
                               {kMonday + 8 * 86400, 0, 500},
                               {kMonday + 10 * 86400 - 1800, 0, 100000}}) {
    bool ta = false, tb = false;
    auto sa = a.Series("h", from, to, max, &ta);
    auto sb = b.Series("h", from, to, max, &tb);
    ASSERT_THAT(sa.status(), IsOk());
    ASSERT_THAT(sb.status(), IsOk());
    ASSERT_EQ(sa->size(), sb->size()) << from;
    for (size_t i = 0; i < sa->size(); ++i) {
      ASSERT_EQ((*sa)[i].unix_seconds, (*sb)[i].unix_seconds) << i;
      ASSERT_EQ((*sa)[i].cpu_load, (*sb)[i].cpu_load) << i;
    }
    EXPECT_EQ(ta, tb) << from;
  }
  int64_t step_a = 0, step_b = 0;
  auto xa = a.Intervals("h", 0, 0, &step_a), xb = b.Intervals("h", 0, 0, &step_b);
  ASSERT_THAT(xa.status(), IsOk());
  ASSERT_THAT(xb.status(), IsOk());
  EXPECT_EQ(step_a, step_b);
  ASSERT_EQ(xa->size(), xb->size());
  for (size_t i = 0; i < xa->size(); ++i) {
    EXPECT_EQ((*xa)[i].state, (*xb)[i].state) << i;
    EXPECT_EQ((*xa)[i].start_unix, (*xb)[i].start_unix) << i;
    EXPECT_EQ((*xa)[i].end_unix, (*xb)[i].end_unix) << i;
  }
  availability::WindowSpec spec;
  spec.start_second_of_day = 8 * 3600;
  spec.length_seconds = 4 * 3600;
  for (int64_t end : ends) {
    auto wa = a.WindowStats("h", spec, end, availability::EstimatorOptions(), true);
    auto wb = b.WindowStats("h", spec, end, availability::EstimatorOptions(), true);
    ASSERT_THAT(wa.status(), IsOk());
    ASSERT_THAT(wb.status(), IsOk());
    EXPECT_TRUE(wa->stats == wb->stats) << end;
    EXPECT_EQ(wa->window_starts_unix, wb->window_starts_unix) << end;
    EXPECT_EQ(wa->load_forecast, wb->load_forecast) << end;
    EXPECT_FALSE(wa->load_forecast.empty()) << end;
    EXPECT_EQ(wa->info.state, wb->info.state) << end;
    EXPECT_EQ(wa->load_band, wb->load_band) << end;
    // What the book keeps counted as the grid grows (GridCounts).
    ASSERT_TRUE(wa->failure_exposure.has_value() && wb->failure_exposure.has_value());
    EXPECT_EQ(wa->failure_exposure->up_steps, wb->failure_exposure->up_steps) << end;
    EXPECT_EQ(wa->failure_exposure->failures, wb->failure_exposure->failures) << end;
    ASSERT_TRUE(wa->band_exposure.has_value() && wb->band_exposure.has_value());
    EXPECT_EQ(wa->band_exposure->observed, wb->band_exposure->observed) << end;
    EXPECT_EQ(wa->band_exposure->expected, wb->band_exposure->expected) << end;
    ASSERT_TRUE(wa->deployed.has_value() && wb->deployed.has_value());
    EXPECT_EQ(wa->deployed->completed_intervals, wb->deployed->completed_intervals) << end;
    EXPECT_EQ(wa->deployed->avail_time_tr, wb->deployed->avail_time_tr) << end;
    EXPECT_EQ(wa->deployed->on_fraction, wb->deployed->on_fraction) << end;
  }
}

// A backfill of two weeks in one batch keeps a day in memory, and gives the
// rest back: the vector held the whole batch's capacity (176 KB a host at
// 300 s, 1.8 GB at 10,000 hosts in the session 43 scale audit).
TEST_F(HostBookTest, ABackfillKeepsADayInMemoryAndFreesTheRest) {
  ASSERT_EQ(config_.memory_seconds, 86400);
  auto book = std::make_unique<HostBook>(config_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 300;
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 14 * 86400; t += 300) v.push_back(At(t, 0.05));
  clock_.Set(absl::FromUnixSeconds(kMonday + 14 * 86400));
  ASSERT_THAT(book->Append("h", v, meta).status(), IsOk());
  const HostBook::MemoryUse use = book->memory_use();
  EXPECT_EQ(use.samples, 288 + 1);  // the day before the newest, both ends
  EXPECT_LE(use.bytes, static_cast<int64_t>((2 * use.samples + 64) * sizeof(HostSample)));
  // Live samples after it grow it as a vector grows, and it stays bounded.
  for (int64_t t = kMonday + 14 * 86400; t < kMonday + 16 * 86400; t += 300) {
    ASSERT_THAT(book->Append("h", {At(t, 0.05)}, meta).status(), IsOk());
  }
  const HostBook::MemoryUse later = book->memory_use();
  EXPECT_LE(later.samples, 288 + 72 + 1);  // trimmed a quarter day over
  EXPECT_LE(later.bytes, static_cast<int64_t>((2 * later.samples + 64) * sizeof(HostSample)));
}

// A book that keeps one hour of samples in memory (older ones only in the
// store) answers every question as one that keeps them all: the host's
// counts, its series (read back from the store, whole, by range and
// truncated), its grid, the window statistics and load forecast of a window
// in the past, after a restart (loading 100 samples at a time) and after a
// change of period too.
TEST_F(HostBookTest, ASmallMemoryAnswersAsTheWholeHistory) {
  TempDir other_dir;
  auto other_store = SampleStore::Open(other_dir.path(), false);
  ASSERT_THAT(other_store.status(), IsOk());
  HostBookConfig small = config_;
  small.memory_seconds = 3600;
  small.load_chunk_samples = 100;
  config_.memory_seconds = 1'000'000'000;
  auto whole = std::make_unique<HostBook>(config_, *store_, clock_);
  auto lean = std::make_unique<HostBook>(small, **other_store, clock_);
  // Ten days of 5-minute samples in daily batches, with busy spells, a low
  // memory hour and a 3-hour gap (a revocation) on the fourth day.
  MetaUpdate meta;
  meta.period_seconds = 300;
  for (int day = 0; day < 10; ++day) {
    std::vector<HostSample> v;
    for (int64_t t = kMonday + day * 86400; t < kMonday + (day + 1) * 86400; t += 300) {
      if (t >= kMonday + 3 * 86400 + 7200 && t < kMonday + 3 * 86400 + 18000) continue;
      const int64_t hour = (t % 86400) / 3600;
      const double load = hour >= 9 && hour < 12 ? 0.7 : (hour == 14 ? 0.4 : 0.05);
      v.push_back(At(t, load, day == 6 && hour == 20 ? 100 : 4000));
    }
    ASSERT_THAT(whole->Append("h", v, meta).status(), IsOk());
    ASSERT_THAT(lean->Append("h", v, meta).status(), IsOk());
  }
  clock_.Set(absl::FromUnixSeconds(kMonday + 10 * 86400));
  const std::vector<int64_t> ends = {0, kMonday + 6 * 86400 + 8 * 3600};
  ExpectSameAnswers(*whole, *lean, "appended", ends);
  // A restart reads the store.
  whole = std::make_unique<HostBook>(config_, *store_, clock_);
  lean = std::make_unique<HostBook>(small, **other_store, clock_);
  ASSERT_THAT(whole->Load(), IsOk());
  ASSERT_THAT(lean->Load(), IsOk());
  ExpectSameAnswers(*whole, *lean, "loaded", ends);
  // A new period classifies the whole history again on the new grid.
  meta.period_seconds = 600;
  ASSERT_THAT(whole->Append("h", {At(kMonday + 10 * 86400, 0.05)}, meta).status(), IsOk());
  ASSERT_THAT(lean->Append("h", {At(kMonday + 10 * 86400, 0.05)}, meta).status(), IsOk());
  int64_t step = 0;
  auto intervals = lean->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  EXPECT_EQ(step, 600);
  EXPECT_EQ(intervals->front().start_unix, kMonday);
  ExpectSameAnswers(*whole, *lean, "new period", ends);
}

// A change of period keeps the older samples' gaps judged by the period they
// were sent at: a host replayed every 300 s, then fed every 30 s, keeps its
// history (with the new period's 60 s gap every 300 s step was an S5), also
// after a restart, while a silence of 300 s after the change is a revocation.
TEST_F(HostBookTest, APeriodChangeKeepsTheHistoryItsGaps) {
  ASSERT_EQ(config_.classifier.revocation_gap_seconds, 60);
  MetaUpdate meta;
  meta.period_seconds = 300;
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 2 * 86400; t += 300) v.push_back(At(t, 0.05));
  const int64_t last_slow = v.back().unix_seconds;
  ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  meta.period_seconds = 30;
  int64_t t = kMonday + 2 * 86400;
  std::vector<HostSample> fast;
  for (; t < kMonday + 2 * 86400 + 3600; t += 30) fast.push_back(At(t, 0.05));
  const int64_t silent_from = t - 30;
  t += 270;  // 300 s between two samples: a revocation at 30 s, not at 300 s
  for (const int64_t end = t + 600; t < end; t += 30) fast.push_back(At(t, 0.05));
  ASSERT_THAT(book_->Append("h", fast, meta).status(), IsOk());
  clock_.Set(absl::FromUnixSeconds(fast.back().unix_seconds));
  auto check = [&](const HostBook& book, const char* when) {
    SCOPED_TRACE(when);
    auto info = book.Info("h");
    ASSERT_THAT(info.status(), IsOk());
    EXPECT_EQ(info->meta.period_seconds, 30);
    EXPECT_EQ(info->meta.history_period_seconds, 300);
    EXPECT_EQ(info->meta.period_changed_unix, last_slow);
    EXPECT_EQ(info->revocation_gap_seconds, 60);  // now: the flag's, above 1.5 x 30 s
    int64_t step = 0;
    auto intervals = book.Intervals("h", 0, 0, &step);
    ASSERT_THAT(intervals.status(), IsOk());
    EXPECT_EQ(step, 30);
    std::vector<int64_t> revoked;
    for (const StateInterval& i : *intervals) {
      if (i.state == HostState::kS5) revoked.push_back(i.start_unix);
    }
    ASSERT_EQ(revoked.size(), 1u);  // only the 300 s after the change
    EXPECT_GT(revoked[0], silent_from);
    EXPECT_LE(revoked[0], silent_from + 90);
  };
  check(*book_, "appended");
  auto reloaded = std::make_unique<HostBook>(config_, *store_, clock_);
  ASSERT_THAT(reloaded->Load(), IsOk());
  check(*reloaded, "loaded");
}

// Retention (HostBook::Retain, statemgr --retention_days): the samples and
// revocations before the cut go from the store and from memory, and the book
// then answers every question as one loaded from the store afterwards (a
// restart): its counts, series, grid, the window statistics and what it kept
// counted as the grid grew, and the usage keeper's series. A host with
// nothing left after the cut stays known, without samples. A second pass
// with the same cut does nothing.
TEST_F(HostBookTest, RetentionAnswersAsARestartWould) {
  config_.memory_seconds = 3600;           // most samples only in the store
  config_.load_chunk_samples = 100;
  config_.keep_counts_from_points = 100;   // counts kept as the grid grows
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  UsageKeeper keeper(UsageKeeperConfig{}, *book_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 300;
  // 20 days of 5-minute samples in daily batches, busy every morning, with
  // 3-hour gaps (revocations) on days 3 and 12; "gone" stopped on day 4.
  for (int day = 0; day < 20; ++day) {
    std::vector<HostSample> v;
    for (int64_t t = kMonday + day * 86400; t < kMonday + (day + 1) * 86400; t += 300) {
      const int64_t in_day = t - kMonday - day * 86400;
      if ((day == 3 || day == 12) && in_day >= 7200 && in_day < 18000) continue;
      const int64_t hour = in_day / 3600;
      v.push_back(At(t, hour >= 9 && hour < 12 ? 0.7 : (hour == 14 ? 0.4 : 0.05),
                     day % 5 == 1 && hour == 20 ? 100 : 4000));
    }
    // Two batches, split where the gaps end: a revocation is recorded
    // between batches.
    const auto split = std::find_if(v.begin(), v.end(), [&](const HostSample& s) {
      return s.unix_seconds - kMonday - day * 86400 >= 18000;
    });
    for (const std::string host : {"h", "gone"}) {
      if (host == "gone" && day >= 4) continue;
      ASSERT_THAT(book_->Append(host, {v.begin(), split}, meta).status(), IsOk());
      ASSERT_THAT(book_->Append(host, {split, v.end()}, meta).status(), IsOk());
    }
    // Pushed without a period or attributes: no meta stored.
    if (day == 0) {
      ASSERT_THAT(book_->Append("no-meta", {v.front()}).status(), IsOk());
    }
    clock_.Set(absl::FromUnixSeconds(v.back().unix_seconds));
    availability::WindowSpec spec;
    spec.start_second_of_day = 8 * 3600;
    spec.length_seconds = 4 * 3600;
    ASSERT_THAT(book_->WindowStats("h", spec, 0, availability::EstimatorOptions(), true).status(),
                IsOk());
    ASSERT_THAT(keeper.Get("h").status(), IsOk());
  }
  auto before = book_->Info("h");
  ASSERT_THAT(before.status(), IsOk());
  ASSERT_EQ(before->first_unix, kMonday);
  // Cut in the middle of the first gap's day and after it.
  const int64_t cut = kMonday + 7 * 86400 + 3 * 3600 + 17;
  const RetainResult r = book_->Retain(cut);
  EXPECT_EQ(r.hosts, 3);
  EXPECT_EQ(r.failed_hosts, 0);
  const int64_t gone_samples = 4 * 288 - 36;
  const int64_t h_deleted = (cut - kMonday + 299) / 300 - 36;
  EXPECT_EQ(r.deleted_samples, h_deleted + gone_samples + 1);
  auto after = book_->Info("h");
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_EQ(after->first_unix, kMonday + 7 * 86400 + 3 * 3600 + 300);
  EXPECT_EQ(after->samples, before->samples - h_deleted);
  EXPECT_EQ(after->last_unix, before->last_unix);
  auto revocations = store_->Revocations("h");
  ASSERT_THAT(revocations.status(), IsOk());
  ASSERT_EQ(revocations->size(), 1u);  // day 12's only
  EXPECT_EQ(revocations->front().first, kMonday + 12 * 86400 + 7200 - 300);
  // Gone entirely: known, no samples, no series.
  auto gone = book_->Info("gone");
  ASSERT_THAT(gone.status(), IsOk());
  EXPECT_EQ(gone->samples, 0);
  EXPECT_EQ(gone->state, HostState::kS5);
  bool truncated = false;
  auto none = book_->Series("gone", 0, 0, 1000, &truncated);
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_TRUE(none->empty());
  // As after a restart, for windows from now and one in the past.
  const std::vector<int64_t> ends = {0, kMonday + 15 * 86400 + 8 * 3600};
  auto restarted = std::make_unique<HostBook>(config_, *store_, clock_);
  ASSERT_THAT(restarted->Load(), IsOk());
  ExpectSameAnswers(*book_, *restarted, "retained", ends);
  auto gone_restarted = restarted->Info("gone");
  ASSERT_THAT(gone_restarted.status(), IsOk());
  EXPECT_EQ(gone_restarted->samples, 0);
  auto names = [](const HostBook& b) {
    std::vector<std::string> out;
    for (const HostInfo& i : b.List()) out.push_back(i.host);
    return out;
  };
  EXPECT_EQ(names(*book_), names(*restarted));
  EXPECT_EQ(names(*book_).size(), 3u);
  // What a new watcher is told of each host: its state and since when.
  struct Collect : StateWatcher {
    std::map<std::string, std::pair<HostState, int64_t>> seen;
    void OnStateChange(const StateChange& c) override { seen[c.host] = {c.to, c.since_unix}; }
  } live, reloaded;
  book_->AddWatcher(&live, "", true);
  restarted->AddWatcher(&reloaded, "", true);
  book_->RemoveWatcher(&live);
  restarted->RemoveWatcher(&reloaded);
  EXPECT_EQ(live.seen, reloaded.seen);
  ASSERT_EQ(live.seen.count("h"), 1u);
  EXPECT_GE(live.seen["h"].second, cut);
  // The usage keeper's model, built before the pass, is not served after it
  // (its series starts over at the new first sample).
  auto kept = keeper.Get("h");
  ASSERT_THAT(kept.status(), IsOk());
  UsageKeeper fresh(UsageKeeperConfig{}, *restarted, *store_, clock_);
  auto whole = fresh.Get("h");
  ASSERT_THAT(whole.status(), IsOk());
  EXPECT_EQ(kept->model->series().origin_unix, whole->model->series().origin_unix);
  EXPECT_EQ(kept->model->series().bins(), whole->model->series().bins());
  EXPECT_GT(kept->model->series().origin_unix, kMonday + 6 * 86400);
  // Nothing left to do at the same cut; new samples go on as before.
  const RetainResult again = book_->Retain(cut);
  EXPECT_EQ(again.hosts, 0);
  EXPECT_EQ(again.deleted_samples, 0);
  ASSERT_THAT(book_->Append("h", {At(after->last_unix + 300, 0.05)}, meta).status(), IsOk());
  ASSERT_THAT(book_->Append("gone", {At(after->last_unix + 300, 0.05)}, meta).status(), IsOk());
  auto back = book_->Info("gone");
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->samples, 1);
  EXPECT_EQ(back->first_unix, after->last_unix + 300);
}

// Retain passes while samples arrive (a period change among them): the book
// ends as one loaded from the store, with no sample lost but those before
// the last cut. The samples in memory leave it during the passes (an hour of
// memory, 10-minute batches), which the pass reads back under the append
// lock.
TEST_F(HostBookTest, RetentionWhileSamplesArrive) {
  config_.memory_seconds = 3600;
  config_.keep_counts_from_points = 100;
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 60;
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 10 * 86400; t += 60) {
    v.push_back(At(t, (t / 3600) % 6 == 0 ? 0.9 : 0.05));
  }
  ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  int64_t t = v.back().unix_seconds + 60;
  clock_.Set(absl::FromUnixSeconds(kMonday + 60 * 86400));  // ahead of every sample
  std::atomic<bool> done{false};
  int64_t last_cut = 0;
  std::thread retainer([&] {
    for (int day = 1; !done.load(); day = day % 9 + 1) {
      const RetainResult r = book_->Retain(kMonday + day * 86400);
      EXPECT_EQ(r.failed_hosts, 0);
      last_cut = std::max(last_cut, kMonday + day * 86400);
    }
  });
  for (int batch = 0; batch < 2000; ++batch) {
    std::vector<HostSample> b;
    for (int i = 0; i < 10; ++i, t += meta.period_seconds) b.push_back(At(t, 0.1 + 0.001 * i));
    if (batch == 1000) meta.period_seconds = 120;  // a Refeed during the passes
    ASSERT_THAT(book_->Append("h", b, meta).status(), IsOk());
  }
  done = true;
  retainer.join();
  // The passes only ever cut at most 9 days: the last one's cut holds.
  const RetainResult r = book_->Retain(last_cut);
  EXPECT_EQ(r.failed_hosts, 0);
  auto restarted = std::make_unique<HostBook>(config_, *store_, clock_);
  ASSERT_THAT(restarted->Load(), IsOk());
  auto info = book_->Info("h");
  ASSERT_THAT(info.status(), IsOk());
  EXPECT_GE(info->first_unix, last_cut);
  EXPECT_EQ(info->last_unix, t - 120);
  ExpectSameAnswers(*book_, *restarted, "while samples arrive", {0});
}

// Samples stamped at the clock (a zero --max_clock_skew_seconds) pushed while
// passes run are all kept in memory, as a restart loads them: the pass checks
// the stored samples it reads against the clock plus the skew, as Load()
// does, not those PushSamples already accepted. (Found by review: a clock
// read once before the rebuild dropped the samples that came after it.)
TEST_F(HostBookTest, RetentionKeepsSamplesArrivingAtTheClock) {
  config_.max_clock_skew_seconds = 0;
  config_.memory_seconds = 3600;
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  MetaUpdate meta;
  meta.period_seconds = 60;
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 20 * 86400; t += 60) v.push_back(At(t, 0.1));
  ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
  int64_t t = v.back().unix_seconds + 60;
  clock_.Set(absl::FromUnixSeconds(t));
  std::atomic<bool> done{false};
  std::thread retainer([&] {
    for (int k = 1; !done.load(); ++k) {
      EXPECT_EQ(book_->Retain(kMonday + k * 600).failed_hosts, 0);
    }
  });
  for (int i = 0; i < 3000; ++i, t += 60) {
    clock_.Set(absl::FromUnixSeconds(t));
    ASSERT_THAT(book_->Append("h", {At(t, 0.1)}, meta).status(), IsOk());
  }
  done = true;
  retainer.join();
  auto restarted = std::make_unique<HostBook>(config_, *store_, clock_);
  ASSERT_THAT(restarted->Load(), IsOk());
  auto a = book_->Info("h"), b = restarted->Info("h");
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ(a->last_unix, t - 60);
  EXPECT_EQ(a->samples, b->samples);
  EXPECT_EQ(a->first_unix, b->first_unix);
  bool ta = false, tb = false;
  auto sa = book_->Series("h", 0, 0, 1u << 30, &ta);
  auto sb = restarted->Series("h", 0, 0, 1u << 30, &tb);
  ASSERT_THAT(sa.status(), IsOk());
  ASSERT_THAT(sb.status(), IsOk());
  EXPECT_EQ(sa->size(), sb->size());
}

// A pass asks `stop` between hosts and ends there (a shutdown); the next
// pass does the rest.
TEST_F(HostBookTest, RetentionStopsBetweenHosts) {
  for (const std::string host : {"a", "b", "c"}) {
    ASSERT_THAT(book_->Append(host, {At(kMonday, 0.1), At(kMonday + 86400, 0.1)}).status(),
                IsOk());
  }
  int asked = 0;
  const RetainResult first = book_->Retain(kMonday + 3600, [&] { return ++asked > 1; });
  EXPECT_EQ(first.hosts, 1);
  EXPECT_EQ(first.deleted_samples, 1);
  const RetainResult rest = book_->Retain(kMonday + 3600);
  EXPECT_EQ(rest.hosts, 2);
  EXPECT_EQ(rest.deleted_samples, 2);
  for (const std::string host : {"a", "b", "c"}) {
    auto info = book_->Info(host);
    ASSERT_THAT(info.status(), IsOk());
    EXPECT_EQ(info->samples, 1) << host;
  }
}

// RetentionCutoff: local midnight of the day `days` days back.
TEST(RetentionCutoffTest, WholeLocalDays) {
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400 + 5, 7, 0), kMonday);
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400, 7, 0), kMonday);
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400 - 1, 7, 0), kMonday - 86400);
  // UTC+2: local midnight is 22:00 UTC the day before.
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400 + 3600, 7, 7200), kMonday - 7200);
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400 - 7200 - 1, 7, 7200), kMonday - 86400 - 7200);
  // UTC-5.
  EXPECT_EQ(RetentionCutoff(kMonday + 7 * 86400 + 3 * 3600, 7, -5 * 3600),
            kMonday - 86400 + 5 * 3600);
  // Before 1970 (a clock far off): still a local midnight.
  EXPECT_EQ(RetentionCutoff(3600, 14, 0), -14 * 86400);
  EXPECT_EQ(RetentionCutoff(0, 1, 3600), -86400 - 3600);
}

// The failure exposure, the exits by band and HTCondor's and BOINC's
// estimates of a request for a window from now are counted as the grid grows
// (HostBook::GridCounts). They are the library's counts over the whole grid
// (the grid built here from the stored samples, as the book builds it) after
// batches of any size, trims of a bounded grid, a revocation and a change of
// period, for several window lengths and time zones, and for windows in the
// past.
TEST_F(HostBookTest, KeptExposureCountsAreTheWholeGridsCounts) {
  config_.max_grid_points = 3000;  // about 10 days at 300 s: trimmed as it grows
  config_.keep_counts_from_points = 100;  // counted anew before, kept after
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  std::mt19937_64 rng(27);
  std::uniform_int_distribution<int> batch(1, 400);
  std::normal_distribution<double> noise(0, 0.1);
  const availability::EstimatorOptions opt;
  ASSERT_TRUE(opt.host_frailty && opt.load_band_first_sojourn);
  MetaUpdate meta;
  meta.period_seconds = 300;
  int64_t t = kMonday;
  int compared = 0, exits = 0, intervals_seen = 0, downs = 0;
  while (t < kMonday + 24 * 86400) {
    if (t >= kMonday + 17 * 86400) meta.period_seconds = 120;
    std::vector<HostSample> v;
    for (int i = batch(rng); i > 0; --i, t += meta.period_seconds) {
      // A 3-hour silence (a revocation) on day 5.
      if (t >= kMonday + 5 * 86400 && t < kMonday + 5 * 86400 + 3 * 3600) continue;
      const int64_t hour = (t % 86400) / 3600;
      const double base = hour >= 9 && hour < 17 ? 0.3 : 0.08;
      v.push_back(At(t, std::clamp(base + noise(rng), 0.0, 1.0)));
    }
    if (v.empty()) continue;
    ASSERT_THAT(book_->Append("h", v, meta).status(), IsOk());
    clock_.Set(absl::FromUnixSeconds(v.back().unix_seconds));
    // The host's grid: its classifier with the revocation gap of its period
    // (HostBookConfig::classifier), bounded as the book bounds it.
    availability::ClassifierConfig c = config_.classifier;
    c.revocation_gap_seconds =
        std::max<int64_t>(c.revocation_gap_seconds, (meta.period_seconds * 3 + 1) / 2);
    availability::GridBuilder builder(c, meta.period_seconds, 0, config_.max_grid_points);
    bool truncated = false;
    auto samples = book_->Series("h", 0, 0, std::numeric_limits<size_t>::max(), &truncated);
    ASSERT_THAT(samples.status(), IsOk());
    // The samples sent at 300 s before the change to 120 s keep the 450 s gap.
    auto info = book_->Info("h");
    ASSERT_THAT(info.status(), IsOk());
    std::optional<int64_t> prev;
    for (const HostSample& s : *samples) {
      // The silence after a sample sent before the change: the old gap.
      const bool old_gap = prev.has_value() && info->meta.history_period_seconds > 0 &&
                           *prev <= info->meta.period_changed_unix;
      builder.SetRevocationGap(old_gap ? std::max<int64_t>(
                                             config_.classifier.revocation_gap_seconds,
                                             (info->meta.history_period_seconds * 3 + 1) / 2)
                                       : c.revocation_gap_seconds);
      builder.Add(s);
      prev = s.unix_seconds;
    }
    const availability::StateSeries grid = std::move(builder).Release();
    for (int64_t end : {int64_t{0}, v.back().unix_seconds - 2 * 86400}) {
      for (int64_t length : {3600, 3 * 3600}) {
        for (int offset : {0, 3600}) {
          SCOPED_TRACE(::testing::Message() << "at " << v.back().unix_seconds << " end " << end
                                            << " length " << length << " offset " << offset);
          availability::WindowSpec spec;
          spec.start_second_of_day = 9 * 3600;
          spec.length_seconds = length;
          spec.clock = offset;
          auto kept = book_->WindowStats("h", spec, end, opt, true);
          if (end > 0 && end < grid.start_unix) {  // before the kept grid: nothing to count
            EXPECT_EQ(kept.status().code(), absl::StatusCode::kFailedPrecondition);
            continue;
          }
          ASSERT_THAT(kept.status(), IsOk());
          ASSERT_TRUE(kept->failure_exposure.has_value());
          ASSERT_TRUE(kept->band_exposure.has_value());
          const int64_t upto = end > 0 ? end : v.back().unix_seconds;
          const availability::FailureExposure f =
              availability::CountFailureExposure(grid, upto, offset);
          const availability::BandExposure b = availability::CountBandExposure(
              grid, upto, offset, availability::WindowSteps(grid, spec), opt.recent_age_seconds,
              opt.long_age_seconds);
          ASSERT_EQ(kept->failure_exposure->up_steps, f.up_steps);
          ASSERT_EQ(kept->failure_exposure->failures, f.failures);
          ASSERT_EQ(kept->band_exposure->observed, b.observed);
          ASSERT_EQ(kept->band_exposure->expected, b.expected);
          // A host down at its last sample (S3/S4; the clock is at that
          // sample) has been down for a second since, for a window from now.
          ASSERT_TRUE(kept->deployed.has_value());
          const double down_after =
              end == 0 && availability::IsFailure(kept->info.state) ? 1.0 : 0.0;
          downs += down_after > 0;
          const int64_t at =
              upto < grid.start_unix
                  ? -1
                  : std::min<int64_t>((upto - grid.start_unix) / grid.step_seconds,
                                      static_cast<int64_t>(grid.states.size()) - 1);
          baselines::DeployedEstimates d;  // nothing seen before the window
          if (at >= 0) {
            std::vector<bool> up(static_cast<size_t>(at) + 1);
            for (size_t i = 0; i < up.size(); ++i) {
              up[i] = !availability::IsFailure(grid.states[i]);
            }
            d = baselines::DeployedEstimatesAt(up, static_cast<size_t>(at),
                                               availability::WindowSteps(grid, spec),
                                               static_cast<double>(grid.step_seconds),
                                               down_after);
          }
          ASSERT_EQ(kept->deployed->completed_intervals, d.completed_intervals);
          ASSERT_EQ(kept->deployed->up_steps, d.up_steps);
          ASSERT_EQ(kept->deployed->avail_time_tr, d.avail_time_tr);
          ASSERT_EQ(kept->deployed->on_fraction, d.on_fraction);
          ++compared;
          intervals_seen += d.completed_intervals > 0;
          exits += b.observed[0][0][1][1] > 0;
        }
      }
    }
  }
  int64_t step = 0;
  auto intervals = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  EXPECT_EQ(step, 120);
  EXPECT_GT(intervals->front().start_unix, kMonday + 10 * 86400);  // trimmed
  EXPECT_GT(compared, 300);
  EXPECT_GT(exits, 50);  // not all empty tables
  EXPECT_GT(intervals_seen, 100);
  EXPECT_GT(downs, 0);  // and some down at the last sample
}

}  // namespace
}  // namespace sojourn::statemgr

namespace sojourn::statemgr {
namespace {

// The whole-history fallback sees every failure of a short history, not only
// the first: a host that fails every few hours gets a low TR.
TEST_F(HostBookTest, FallbackCountsEveryFailure) {
  // 18 h of samples, S3 (a 10-minute spike) every 3 hours.
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + 18 * 3600; t += 300) {
    v.push_back(At(t, (t - kMonday) % (3 * 3600) < 600 && t > kMonday ? 0.95 : 0.05));
  }
  ASSERT_THAT(book_->Append("flaky", v).status(), IsOk());
  availability::WindowSpec spec;
  spec.start_second_of_day = 20 * 3600;  // no same-clock window in 18 h of history
  spec.length_seconds = 24 * 3600;       // longer than the history
  auto one = book_->WindowStats("flaky", spec, 0);
  ASSERT_THAT(one.status(), IsOk());
  EXPECT_TRUE(one->whole_history_fallback);
  spec.length_seconds = 2 * 3600;
  auto many = book_->WindowStats("flaky", spec, 0);
  ASSERT_THAT(many.status(), IsOk());
  EXPECT_TRUE(many->whole_history_fallback);
  EXPECT_GT(many->stats.num_windows, 10);
  double to_failure = 0;
  for (int i = 1; i <= 2; ++i) {
    for (const auto& [key, count] : many->stats.ordinary[i].completed) {
      if (key.first >= 3) to_failure += count;
    }
    for (const auto& [key, count] : many->stats.first[i].completed) {
      if (key.first >= 3) to_failure += count;
    }
  }
  EXPECT_GE(to_failure, 5);  // every spike seen by some window
}

}  // namespace
}  // namespace sojourn::statemgr

namespace sojourn::statemgr {
namespace {

// List gives each host's grid state, the start of its run (kept by the
// grid, not walked back) and the newest sample's load band, as a walk over
// Info's grid gives them; they follow a change of band and of state, and a
// host's silence.
TEST_F(HostBookTest, ListGivesTheStateItsStartAndLoadBand) {
  Fill("a", 1, [](int64_t) { return 0.05; });
  Fill("b", 2, [](int64_t) { return 0.3; });
  // c: S1 in the upper band (0.15 >= Th1 / 2), after a morning in S2.
  Fill("c", 1, [](int64_t t) { return (t - kMonday) < 6 * 3600 ? 0.4 : 0.15; });
  clock_.Set(absl::FromUnixSeconds(kMonday + 86400));
  auto check = [&]() {
    const auto list = book_->List();
    ASSERT_EQ(list.size(), 3u);
    for (const HostInfo& info : list) {
      SCOPED_TRACE(info.host);
      EXPECT_EQ(info.meta.period_seconds, 300);
      bool truncated = false;
      auto series = book_->Series(info.host, 0, INT64_MAX, SIZE_MAX, &truncated);
      ASSERT_THAT(series.status(), IsOk());
      const bool silent = absl::ToUnixSeconds(clock_.Now()) - info.last_unix > 450;
      EXPECT_EQ(info.revocation_gap_seconds, 450);
      if (silent) {
        EXPECT_EQ(info.state, availability::HostState::kS5);
        EXPECT_EQ(info.state_since_unix, info.last_unix);
        EXPECT_EQ(info.load_band, availability::kLoadBandUnknown);
        continue;
      }
      availability::ClassifierConfig c;  // the book's: its gap is 1.5 periods
      c.revocation_gap_seconds = 450;
      const availability::StateSeries grid = availability::ClassifyToGrid(*series, c, 300, 0);
      size_t k = grid.states.size() - 1;
      while (k > 0 && grid.states[k - 1] == grid.states.back()) --k;
      EXPECT_EQ(info.state, grid.states.back());
      EXPECT_EQ(info.state_since_unix, grid.start_unix + static_cast<int64_t>(k) * 300);
      EXPECT_EQ(info.load_band, availability::LoadBandOf(info.state, series->back().cpu_load, c));
    }
  };
  check();
  const auto brief = book_->List();
  EXPECT_EQ(brief[1].samples, 2 * 288);
  EXPECT_EQ(brief[0].state, availability::HostState::kS1);
  EXPECT_EQ(brief[0].load_band, 0);
  EXPECT_EQ(brief[0].state_since_unix, kMonday);
  EXPECT_EQ(brief[1].state, availability::HostState::kS2);
  EXPECT_EQ(brief[2].state, availability::HostState::kS1);
  EXPECT_EQ(brief[2].load_band, 1);
  EXPECT_EQ(brief[2].state_since_unix, kMonday + 6 * 3600);
  // a's load rises into S1's upper band, then into S2.
  ASSERT_THAT(book_->Append("a", {At(kMonday + 86400, 0.15)}).status(), IsOk());
  check();
  EXPECT_EQ(book_->List()[0].load_band, 1);
  EXPECT_EQ(book_->List()[0].state_since_unix, kMonday);
  ASSERT_THAT(book_->Append("a", {At(kMonday + 86400 + 300, 0.3)}).status(), IsOk());
  check();
  EXPECT_EQ(book_->List()[0].state, availability::HostState::kS2);
  EXPECT_EQ(book_->List()[0].state_since_unix, kMonday + 86400 + 300);
  // At Tuesday 00:10, b and c have been silent for 15 min, past their
  // revocation gap (1.5 periods, 450 s): S5 from their last sample. a has
  // been silent for 5 min.
  clock_.Set(absl::FromUnixSeconds(kMonday + 86400 + 600));
  check();
  EXPECT_EQ(book_->List()[0].state, availability::HostState::kS2);
  EXPECT_EQ(book_->List()[2].state, availability::HostState::kS5);
  EXPECT_EQ(book_->List()[2].state_since_unix, kMonday + 86400 - 300);
  EXPECT_EQ(book_->List()[2].load_band, availability::kLoadBandUnknown);
}

// A PushSamples stream of several messages sends the attributes in the
// first one only (a sender may): the later messages, without attributes,
// keep them (before: each replaced them with empty ones, so a replayed VM
// showed 0 MB of memory at the broker). Present attributes still replace
// the stored ones whole, in memory and in the store.
TEST_F(HostBookTest, MessageWithoutAttributesKeepsTheStoredOnes) {
  MetaUpdate first;
  first.period_seconds = 300;
  first.attributes.emplace();
  first.attributes->set_cpu_cores(4);
  first.attributes->set_total_mem_mb(8192);
  ASSERT_THAT(book_->Append("h", {At(kMonday, 0.1)}, first).status(), IsOk());
  MetaUpdate period_only;
  period_only.period_seconds = 300;
  ASSERT_THAT(book_->Append("h", {At(kMonday + 300, 0.1)}, period_only).status(), IsOk());
  ASSERT_THAT(book_->Append("h", {At(kMonday + 600, 0.1)}).status(), IsOk());
  ASSERT_THAT(book_->Info("h").status(), IsOk());
  EXPECT_EQ(book_->Info("h")->meta.attributes.total_mem_mb(), 8192);
  EXPECT_EQ(book_->Info("h")->meta.attributes.cpu_cores(), 4);
  EXPECT_EQ(book_->Info("h")->meta.period_seconds, 300);
  EXPECT_EQ(book_->Info("h")->samples, 3);
  {
    HostBook reloaded(config_, *store_, clock_);
    ASSERT_THAT(reloaded.Load(), IsOk());
    EXPECT_EQ(reloaded.Info("h")->meta.attributes.total_mem_mb(), 8192);
    EXPECT_EQ(reloaded.Info("h")->meta.period_seconds, 300);
  }
  // An explicit update replaces them whole (cpu_cores unset = unknown now);
  // the period, not sent, stays.
  MetaUpdate update;
  update.attributes.emplace();
  update.attributes->set_total_mem_mb(4096);
  ASSERT_THAT(book_->Append("h", {}, update).status(), IsOk());
  EXPECT_EQ(book_->Info("h")->meta.attributes.total_mem_mb(), 4096);
  EXPECT_EQ(book_->Info("h")->meta.attributes.cpu_cores(), 0);
  EXPECT_EQ(book_->Info("h")->meta.period_seconds, 300);
  HostBook reloaded(config_, *store_, clock_);
  ASSERT_THAT(reloaded.Load(), IsOk());
  EXPECT_EQ(reloaded.Info("h")->meta.attributes.total_mem_mb(), 4096);
  EXPECT_EQ(reloaded.Info("h")->meta.attributes.cpu_cores(), 0);
  EXPECT_EQ(reloaded.Info("h")->meta.period_seconds, 300);
}

}  // namespace
}  // namespace sojourn::statemgr

namespace sojourn::statemgr {
namespace {

// An attributes-only update of a NEW host (no sample yet) is acknowledged,
// so it is durable: the host and its attributes are listed and answer
// WindowStats the same before and after the store is closed and reopened
// (before: stored by its meta alone, which Load never read, so the host
// vanished at a restart).
TEST_F(HostBookTest, AttributesOnlyHostSurvivesRestart) {
  MetaUpdate update;
  update.attributes.emplace();
  update.attributes->set_cpu_mhz(1234);
  update.attributes->set_cpu_cores(8);
  update.attributes->set_total_mem_mb(999);
  auto appended = book_->Append("pxattr2", {}, update);
  ASSERT_THAT(appended.status(), IsOk());
  EXPECT_EQ(appended->persisted, 0);
  EXPECT_EQ(appended->last_persisted_unix, 0);
  availability::WindowSpec spec;
  spec.length_seconds = 3600;
  auto check = [&](HostBook& book) {
    const auto list = book.List();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].host, "pxattr2");
    EXPECT_EQ(list[0].samples, 0);
    EXPECT_EQ(list[0].state, HostState::kS5);
    EXPECT_DOUBLE_EQ(list[0].meta.attributes.cpu_mhz(), 1234);
    EXPECT_EQ(list[0].meta.attributes.cpu_cores(), 8);
    EXPECT_DOUBLE_EQ(list[0].meta.attributes.total_mem_mb(), 999);
    auto stats = book.WindowStats("pxattr2", spec, 0);
    ASSERT_THAT(stats.status(), IsOk());
    EXPECT_TRUE(stats->whole_history_fallback);
    EXPECT_EQ(stats->stats.num_windows, 0);
    EXPECT_EQ(stats->info.state, HostState::kS5);
  };
  ASSERT_NO_FATAL_FAILURE(check(*book_));
  // A restart: the book and the store closed, the directory reopened.
  book_.reset();
  store_.reset();
  auto reopened = SampleStore::Open(dir_.path(), false);
  ASSERT_THAT(reopened.status(), IsOk());
  store_ = std::move(*reopened);
  book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  int64_t skipped = -1;
  ASSERT_THAT(book_->Load(&skipped), IsOk());
  EXPECT_EQ(skipped, 0);
  ASSERT_NO_FATAL_FAILURE(check(*book_));
  // Its first samples after the restart are stored as any host's.
  auto first = book_->Append("pxattr2", {At(kMonday - 300, 0.1), At(kMonday, 0.1)});
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->persisted, 2);
  EXPECT_EQ(book_->Info("pxattr2")->samples, 2);
  EXPECT_EQ(book_->Info("pxattr2")->meta.attributes.cpu_cores(), 8);
}

// The gRPC service on a RocksDB store, restarted on the same directory the
// way the state manager restarts (everything closed, then opened and loaded
// again), on a FakeClock.
class StateManagerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start()); }
  void TearDown() override { Stop(); }
  void Start() {
    auto s = SampleStore::Open(dir_.path(), /*sync_writes=*/true);
    ASSERT_THAT(s.status(), IsOk());
    store_ = std::move(*s);
    config_.default_period_seconds = 300;
    book_ = std::make_unique<HostBook>(config_, *store_, clock_);
    ASSERT_THAT(book_->Load(), IsOk());
    usage_ = std::make_unique<UsageKeeper>(UsageKeeperConfig{}, *book_, *store_, clock_);
    metrics_ = std::make_unique<Metrics>("statemgr-test");
    service_ = std::make_unique<StateManagerService>(*book_, *usage_, pool_, *metrics_);
    auto server = GrpcServer::Start({}, {service_.get()}, *metrics_);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    stub_ = v1::StateManager::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void Stop() {
    stub_.reset();
    if (server_ != nullptr) {
      book_->CloseWatchers();
      server_->Shutdown(absl::Seconds(5));
    }
    server_.reset();
    service_.reset();
    metrics_.reset();
    usage_.reset();
    book_.reset();
    store_.reset();
  }
  grpc::Status Push(const std::vector<v1::PushSamplesRequest>& messages,
                    v1::PushSamplesResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = stub_->PushSamples(&ctx, resp);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::Status List(v1::ListHostsResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->ListHosts(&ctx, v1::ListHostsRequest(), resp);
  }
  grpc::Status WindowStats(const std::string& host, v1::GetWindowStatsResponse* resp) {
    grpc::ClientContext ctx;
    v1::GetWindowStatsRequest req;
    req.set_host(host);
    req.set_length_seconds(3600);
    return stub_->GetWindowStats(&ctx, req, resp);
  }
  grpc::Status Series(const std::string& host, int64_t start, int64_t end,
                      v1::GetSeriesResponse* resp) {
    grpc::ClientContext ctx;
    v1::GetSeriesRequest req;
    req.set_host(host);
    req.set_start_unix_seconds(start);
    req.set_end_unix_seconds(end);
    return stub_->GetSeries(&ctx, req, resp);
  }
  grpc::Status Intervals(const std::string& host, int64_t start, int64_t end) {
    grpc::ClientContext ctx;
    v1::GetStateIntervalsRequest req;
    req.set_host(host);
    req.set_start_unix_seconds(start);
    req.set_end_unix_seconds(end);
    v1::GetStateIntervalsResponse resp;
    return stub_->GetStateIntervals(&ctx, req, &resp);
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(kMonday)};
  HostBookConfig config_;
  ThreadPool pool_{2};
  std::unique_ptr<SampleStore> store_;
  std::unique_ptr<HostBook> book_;
  std::unique_ptr<UsageKeeper> usage_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<StateManagerService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::StateManager::Stub> stub_;
};

// The audit's case: PushSamples(host='pxattr2', attributes only) is OK with
// last_persisted{pxattr2: 0}; ListHosts and GetWindowStats answer the same
// before and after a restart on the same directory (before: NOT_FOUND after).
TEST_F(StateManagerServiceTest, AttributesOnlyPushSurvivesRestart) {
  v1::PushSamplesRequest req;
  req.set_host("pxattr2");
  req.mutable_attributes()->set_cpu_mhz(1234);
  req.mutable_attributes()->set_cpu_cores(8);
  req.mutable_attributes()->set_total_mem_mb(999);
  v1::PushSamplesResponse pushed;
  grpc::Status s = Push({req}, &pushed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(pushed.persisted_samples(), 0);
  ASSERT_EQ(pushed.last_persisted_unix_seconds().count("pxattr2"), 1u);
  EXPECT_EQ(pushed.last_persisted_unix_seconds().at("pxattr2"), 0);
  v1::ListHostsResponse list_before;
  ASSERT_TRUE(List(&list_before).ok());
  ASSERT_EQ(list_before.hosts_size(), 1);
  EXPECT_EQ(list_before.hosts(0).host(), "pxattr2");
  EXPECT_EQ(list_before.hosts(0).current_state(), v1::HOST_STATE_S5_REVOKED);
  EXPECT_EQ(list_before.hosts(0).attributes().cpu_cores(), 8);
  EXPECT_DOUBLE_EQ(list_before.hosts(0).attributes().cpu_mhz(), 1234);
  EXPECT_DOUBLE_EQ(list_before.hosts(0).attributes().total_mem_mb(), 999);
  v1::GetWindowStatsResponse stats_before;
  s = WindowStats("pxattr2", &stats_before);
  ASSERT_TRUE(s.ok()) << s.error_message();

  Stop();
  ASSERT_NO_FATAL_FAILURE(Start());

  v1::ListHostsResponse list_after;
  ASSERT_TRUE(List(&list_after).ok());
  EXPECT_EQ(list_after.SerializeAsString(), list_before.SerializeAsString())
      << "before: " << list_before.ShortDebugString()
      << "\nafter: " << list_after.ShortDebugString();
  v1::GetWindowStatsResponse stats_after;
  s = WindowStats("pxattr2", &stats_after);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(stats_after.SerializeAsString(), stats_before.SerializeAsString())
      << "before: " << stats_before.ShortDebugString()
      << "\nafter: " << stats_after.ShortDebugString();
}

// GetSeries checks its range as GetStateIntervals does: an end before the
// start, or a negative end, is INVALID_ARGUMENT naming end_unix_seconds
// (before: OK and empty). End 0 still means "up to the last sample", and an
// end equal to the start is an empty range, not an error.
TEST_F(StateManagerServiceTest, GetSeriesRefusesAnEndBeforeTheStart) {
  v1::PushSamplesRequest req;
  req.set_host("h1");
  req.set_period_seconds(300);
  for (int64_t t = kMonday - 3000; t <= kMonday; t += 300) {
    auto* p = req.add_samples();
    p->set_unix_seconds(t);
    p->set_cpu_load_ratio(0.1);
  }
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({req}, &pushed).ok());
  ASSERT_EQ(pushed.persisted_samples(), 11);
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  v1::GetSeriesResponse resp;
  grpc::Status s = Series("h1", now, now - 1000, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("end_unix_seconds is before start", 0), 0u)
      << s.error_message();
  s = Series("h1", 0, -5, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("end_unix_seconds must be >= 0"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find('\n'), std::string::npos);
  // GetStateIntervals agrees on both.
  EXPECT_EQ(Intervals("h1", now, now - 1000).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Intervals("h1", -10, -5).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // End 0: everything from the start on.
  resp.Clear();
  ASSERT_TRUE(Series("h1", 0, 0, &resp).ok());
  EXPECT_EQ(resp.samples_size(), 11);
  resp.Clear();
  ASSERT_TRUE(Series("h1", kMonday - 600, 0, &resp).ok());
  EXPECT_EQ(resp.samples_size(), 3);
  // [start, end): the end itself is left out; start == end is empty.
  resp.Clear();
  ASSERT_TRUE(Series("h1", kMonday - 600, kMonday, &resp).ok());
  EXPECT_EQ(resp.samples_size(), 2);
  resp.Clear();
  ASSERT_TRUE(Series("h1", kMonday, kMonday, &resp).ok());
  EXPECT_EQ(resp.samples_size(), 0);
}

}  // namespace
}  // namespace sojourn::statemgr
