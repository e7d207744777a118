#include "models/usage/usage_model.h"

#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/models/usage/synthetic.h"

namespace sojourn::usage {
namespace {

using testing::Daily;
using testing::MakeSeries;
using testing::Office;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A host with only two hours of data answers with persistence, not an error.
TEST(UsageModelTest, ShortHistoryGetsPersistence) {
  UsageSeries s = MakeSeries(
      1, [](int, int) { return kNaN; }, [](int, int) { return kNaN; });
  for (int b = 100; b < 124; ++b) {
    s.cpu[b] = 0.3;
    s.mem[b] = 0.6;
  }
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(124));
  auto f = m.PredictUsage(Resource::kCpu, 2);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->method.method, Forecaster::kPersist);
  EXPECT_FALSE(f->method.by_selector);
  ASSERT_EQ(f->use.size(), 24u);
  EXPECT_DOUBLE_EQ(f->use[23], 0.3);
  EXPECT_EQ(f->start_unix, s.UnixOfBin(124));
  auto yes = m.CanRun(0.6, 0.3, 4);
  ASSERT_TRUE(yes.ok());
  EXPECT_TRUE(yes->can_run) << yes->reason;
  EXPECT_EQ(yes->method, "cpu=persist mem=persist");
  auto no = m.CanRun(0.8, 0.3, 4);
  ASSERT_TRUE(no.ok());
  EXPECT_FALSE(no->can_run);
  EXPECT_NE(no->reason.find("cpu: predicted free 0.70 < 0.80"), std::string::npos) << no->reason;
  // Free 0.7 against a need just above it: the digits that tell them apart
  // (it said "0.70 < 0.70").
  auto close = m.CanRun(0.7001, 0.3, 4);
  ASSERT_TRUE(close.ok());
  EXPECT_FALSE(close->can_run);
  EXPECT_NE(close->reason.find("cpu: predicted free 0.7000 < 0.7001"), std::string::npos)
      << close->reason;
  // Constant forecast that satisfies the request: capped at 72 h.
  auto how = m.HowLong(0.5, 0.2);
  ASSERT_TRUE(how.ok());
  EXPECT_DOUBLE_EQ(how->hours, 72.0);
  EXPECT_TRUE(how->capped);
  auto never = m.HowLong(0.5, 0.5);
  ASSERT_TRUE(never.ok());
  EXPECT_DOUBLE_EQ(never->hours, 0.0);
  EXPECT_EQ(never->limited_by, "mem");
}

// A host whose use is a 0/1 state (an availability matrix: down = full use)
// answers threshold questions with the more likely state of each forecast
// bin; a continuous host answers with the forecast value.
TEST(UsageModelTest, BinaryUseAnswersWithTheLikelyState) {
  // 10 h of data; the last 4 h (bins 72..119) are last4's window.
  auto desktop = [](int down_bins, double up_value) {
    return MakeSeries(
        1,
        [=](int, int b) {
          if (b >= 120) return kNaN;
          return b >= 72 && b < 72 + down_bins ? 1.0 : up_value;
        },
        [](int, int b) { return b < 120 ? 0.0 : kNaN; });
  };
  // Down 1 h of the last 4: last4 forecasts use 0.25, i.e. probability 0.25
  // of being down, and "up" is the likely state.
  const UsageSeries one = desktop(12, 0.0);
  ASSERT_TRUE(IsBinaryUse(one.cpu, 120));
  const UsageModel m1 = UsageModel::Build(one, {}, one.UnixOfBin(120));
  EXPECT_DOUBLE_EQ(m1.PredictUsage(Resource::kCpu, 1)->use[0], 0.25);  // the forecast itself
  auto yes = m1.CanRun(0.9, 0, 1);
  ASSERT_TRUE(yes.ok());
  EXPECT_TRUE(yes->can_run) << yes->reason;
  EXPECT_EQ(yes->method, "cpu=last4");
  EXPECT_DOUBLE_EQ(m1.HowLong(0.9, 0)->hours, 72.0);
  // Down 3 h of the last 4: "down" is the likely state.
  const UsageSeries three = desktop(36, 0.0);
  const UsageModel m3 = UsageModel::Build(three, {}, three.UnixOfBin(120));
  auto no = m3.CanRun(0.1, 0, 1);
  ASSERT_TRUE(no.ok());
  EXPECT_FALSE(no->can_run);
  EXPECT_NE(no->reason.find("cpu: predicted in use (probability 0.75) at +0h00m (last4)"),
            std::string::npos)
      << no->reason;
  EXPECT_DOUBLE_EQ(m3.HowLong(0.1, 0)->hours, 0.0);
  // The same shape with a little use while up is not a 0/1 state: the
  // forecast (12 + 36 * 0.04) / 48 = 0.28 leaves free 0.72 < 0.9.
  const UsageSeries busy = desktop(12, 0.04);
  ASSERT_FALSE(IsBinaryUse(busy.cpu, 120));
  const UsageModel mc = UsageModel::Build(busy, {}, busy.UnixOfBin(120));
  auto cont = mc.CanRun(0.9, 0, 1);
  ASSERT_TRUE(cont.ok());
  EXPECT_FALSE(cont->can_run);
  EXPECT_NE(cont->reason.find("cpu: predicted free 0.72 < 0.90"), std::string::npos)
      << cont->reason;
}

// On a host busy from 9:00 to 17:00 every day, CanRun and HowLong see the
// 9:00 rise coming (the selector answers with a pattern-aware forecaster).
TEST(UsageModelTest, SeesTheMorningRiseComing) {
  const UsageSeries s = MakeSeries(
      40, [](int, int b) { return Daily(b); }, [](int, int) { return 0.2; });
  const int64_t now = s.UnixOfBin(35 * kBinsPerDay + 6 * kBinsPerHour);  // Tuesday 06:00
  const UsageModel m = UsageModel::Build(s, {}, now);
  auto how = m.HowLong(0.5, 0.5);
  ASSERT_TRUE(how.ok());
  EXPECT_DOUBLE_EQ(how->hours, 3.0);
  EXPECT_EQ(how->limited_by, "cpu");
  EXPECT_FALSE(how->capped);
  EXPECT_TRUE(m.CanRun(0.5, 0.5, 3)->can_run);
  auto four = m.CanRun(0.5, 0.5, 4);
  EXPECT_FALSE(four->can_run);
  EXPECT_NE(four->reason.find("+3h00m"), std::string::npos) << four->reason;
  const MethodChoice c = m.Choose(Resource::kCpu, 48);
  EXPECT_TRUE(c.by_selector);
  EXPECT_TRUE(c.method == Forecaster::kUpa || c.method == Forecaster::kSameTimeYesterday)
      << ForecasterName(c.method);
  EXPECT_DOUBLE_EQ(c.recent_error, 0.0);
}

// The best-of selector answers with the forecaster of lowest recent error on
// a host where the level drifts without a daily pattern (persistence wins).
TEST(UsageModelTest, BestOfPicksLowestRecentError) {
  std::mt19937 rng(3);
  std::normal_distribution<double> step(0.0, 0.02);
  double level = 0.5;
  std::vector<double> walk;
  for (int i = 0; i < 30 * kBinsPerDay; ++i) {
    level = std::min(0.95, std::max(0.05, level + step(rng)));
    walk.push_back(level);
  }
  const UsageSeries s = MakeSeries(
      30, [&](int d, int b) { return walk[d * kBinsPerDay + b]; },
      [](int, int b) { return Daily(b, 0.7, 0.1); });
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(s.bins()));
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    const RecentScores scores = m.Recent(r, 48);
    double best = 1;
    for (const RecentScore& sc : scores) {
      ASSERT_GE(sc.points, 24);
      best = std::min(best, sc.error);
    }
    const MethodChoice c = m.Choose(r, 48);
    EXPECT_TRUE(c.by_selector);
    EXPECT_DOUBLE_EQ(c.recent_error, best);
    EXPECT_DOUBLE_EQ(scores[static_cast<int>(c.method)].error, best);
  }
  // A random walk: persistence beats yesterday's value.
  const RecentScores cpu = m.Recent(Resource::kCpu, 48);
  EXPECT_LT(cpu[static_cast<int>(Forecaster::kPersist)].error,
            cpu[static_cast<int>(Forecaster::kSameTimeYesterday)].error);
  EXPECT_NE(m.Choose(Resource::kCpu, 48).method, Forecaster::kSameTimeYesterday);
  // Daily memory pattern: the pattern-aware forecasters beat persistence.
  const RecentScores mem = m.Recent(Resource::kMemory, 48);
  EXPECT_LT(mem[static_cast<int>(Forecaster::kSameTimeYesterday)].error,
            mem[static_cast<int>(Forecaster::kPersist)].error);
}

// Without the selector the data-age rule answers (LUPA's behaviour).
TEST(UsageModelTest, SelectorOffUsesDataAgeRule) {
  const UsageSeries s = MakeSeries(
      30, [](int d, int b) { return Office(d, b); }, [](int, int) { return 0.2; });
  UsageModelOptions o;
  o.use_selector = false;
  const UsageModel m = UsageModel::Build(s, o, s.UnixOfBin(29 * kBinsPerDay + 12 * kBinsPerHour));
  const MethodChoice c = m.Choose(Resource::kCpu, 24);
  EXPECT_EQ(c.method, Forecaster::kUpa);
  EXPECT_FALSE(c.by_selector);
  EXPECT_TRUE(std::isnan(c.recent_error));
}

// Memory is not checked (and the reason says so) when the host has no
// memory data; bad arguments are InvalidArgument.
TEST(UsageModelTest, MissingMemoryAndBadArguments) {
  const UsageSeries s = MakeSeries(
      3, [](int, int) { return 0.1; }, [](int, int) { return kNaN; });
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(s.bins()));
  auto a = m.CanRun(0.5, 0.5, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->can_run);
  EXPECT_NE(a->reason.find("mem: no memory data"), std::string::npos) << a->reason;
  // Memory alone, with no memory data: nothing could be checked, so no answer.
  for (const absl::Status& s : {m.CanRun(0, 0.5, 2).status(), m.HowLong(0, 0.5).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("no mem data"), std::string::npos) << s;
  }
  EXPECT_EQ(m.PredictUsage(Resource::kMemory, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.PredictUsage(Resource::kCpu, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // A positive horizon shorter than a step is one step, not an empty answer.
  EXPECT_EQ(m.PredictUsage(Resource::kCpu, 1e-300)->use.size(), 1u);
  EXPECT_EQ(m.PredictUsage(Resource::kCpu, 73).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.CanRun(1.5, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.HowLong(0.2, -1).status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing asked for: refused, not a trivial yes / 72 h with no forecast.
  const auto nothing = m.CanRun(0, 0, 1);
  EXPECT_EQ(nothing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nothing.status().message().find("nothing to check"), std::string::npos)
      << nothing.status();
  EXPECT_EQ(m.HowLong(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m.PredictUsage(Resource::kCpu, 72).ok());
}

// A host with samples but no CPU data in the last day: HowLong and CanRun
// refuse as PredictUsage does ("not enough history yet"), where they used to
// answer "0.00h, limited by cpu" / "no" with an empty method.
TEST(UsageModelTest, NoRecentCpuDataIsRefusedAlike) {
  const UsageSeries s = MakeSeries(
      3, [](int day, int b) { return day == 0 && b < kBinsPerDay / 2 ? 0.1 : kNaN; },
      [](int, int) { return 0.2; });
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(s.bins()));
  const auto usage = m.PredictUsage(Resource::kCpu, 1);
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(usage.status().message().find("not enough history yet"), std::string::npos)
      << usage.status();
  const auto how = m.HowLong(0.5, 0);
  EXPECT_EQ(how.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(how.status().message().find("not enough history yet: no cpu data"),
            std::string::npos)
      << how.status();
  const auto can = m.CanRun(0.5, 0, 2);
  EXPECT_EQ(can.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(can.status().message().find("not enough history yet: no cpu data"),
            std::string::npos)
      << can.status();
  // Memory alone needs no CPU data.
  const auto mem_only = m.HowLong(0, 0.5);
  ASSERT_TRUE(mem_only.ok()) << mem_only.status();
  EXPECT_DOUBLE_EQ(mem_only->hours, 72.0);
}

// A host whose only samples are in the current 5 minutes (it has just
// started reporting) is answered by persistence of them, as a host with
// under 4 hours of data is, not refused for "no cpu data".
TEST(UsageModelTest, OnlyTheCurrentBinIsPersisted) {
  const UsageSeries s = MakeSeries(
      1, [](int, int b) { return b == kBinsPerDay - 1 ? 0.3 : kNaN; },
      [](int, int b) { return b == kBinsPerDay - 1 ? 0.6 : kNaN; });
  const int64_t now = s.UnixOfBin(s.bins() - 1) + 60;  // inside the last bin
  const UsageModel m = UsageModel::Build(s, {}, now);
  const auto cpu = m.PredictUsage(Resource::kCpu, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(cpu->use.size(), 24u);
  for (double v : cpu->use) EXPECT_DOUBLE_EQ(v, 0.3);
  EXPECT_EQ(cpu->method.method, Forecaster::kPersist);
  EXPECT_NE(cpu->method.why.find("only the current 5 minutes"), std::string::npos);
  const auto how = m.HowLong(0.5, 0);
  ASSERT_TRUE(how.ok()) << how.status();
  EXPECT_DOUBLE_EQ(how->hours, 72.0);  // 0.3 leaves 0.7 free, above 0.5
  // Once that bin is history and nothing came after, the answer is persistence of it.
  const UsageModel later = UsageModel::Build(s, {}, s.UnixOfBin(s.bins()) + 60);
  EXPECT_TRUE(later.PredictUsage(Resource::kCpu, 1).ok());
}

// A model rebuilt from the serialized pattern analysis answers the same.
TEST(UsageModelTest, RebuildsFromStoredPatterns) {
  const UsageSeries s = MakeSeries(
      30, [](int d, int b) { return Office(d, b); },
      [](int d, int b) { return Office(d, b, 0.6, 0.3); });
  const int64_t now = s.UnixOfBin(28 * kBinsPerDay + 7 * kBinsPerHour);
  const UsageModel a = UsageModel::Build(s, {}, now);
  auto stored = HostPatterns::Parse(a.patterns().Serialize());
  ASSERT_TRUE(stored.ok());
  const UsageModel b(s, *stored, {}, now);
  EXPECT_EQ(a.PredictUsage(Resource::kMemory, 10)->use, b.PredictUsage(Resource::kMemory, 10)->use);
  EXPECT_EQ(a.HowLong(0.3, 0.3)->hours, b.HowLong(0.3, 0.3)->hours);
}

}  // namespace
}  // namespace sojourn::usage
