#include "models/usage/forecasters.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/models/usage/synthetic.h"

namespace sojourn::usage {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Two hand-made prototypes: A is flat zero, B is +0.3 in the first half of
// every day and -0.3 in the second (both zero-mean, variational).
UsagePatterns TwoPrototypes() {
  UsagePatterns p;
  p.options.normalization = Normalization::kVariational;
  p.prototypes.assign(2, std::vector<double>(kObjectBins, 0.0));
  for (int i = 0; i < kObjectBins; ++i) {
    p.prototypes[1][i] = (i % kBinsPerDay) < kBinsPerDay / 2 ? 0.3 : -0.3;
  }
  p.cluster_sizes = {3, 4};
  p.objects = 7;
  return p;
}

// History that follows prototype B around a level `a`, up to `now`.
std::vector<double> HistoryLikeB(int64_t now, double a) {
  std::vector<double> s(now);
  for (int64_t b = 0; b < now; ++b) s[b] = a + ((b % kBinsPerDay) < kBinsPerDay / 2 ? 0.3 : -0.3);
  return s;
}

// The nearest prototype to the last 24 h forecasts, re-centred on the mean of
// the last 24 h (section 2.2, variational normalisation).
TEST(ForecastersTest, UpaPicksNearestPrototypeAndRecentres) {
  const UsagePatterns p = TwoPrototypes();
  const int64_t now = 3 * kBinsPerDay + 6 * kBinsPerHour;  // 06:00
  const std::vector<double> s = HistoryLikeB(now, 0.4);
  std::vector<double> out(12 * kBinsPerHour);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kDiscard, &p, out.data()));
  // 06:00-12:00 is B's +0.3 half, 12:00-18:00 its -0.3 half, around 0.4.
  EXPECT_NEAR(out[0], 0.7, 1e-9);
  EXPECT_NEAR(out[6 * kBinsPerHour - 1], 0.7, 1e-9);
  EXPECT_NEAR(out[6 * kBinsPerHour], 0.1, 1e-9);
  // A flat history is nearest to A: the forecast is the recent mean.
  const std::vector<double> flat(now, 0.25);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, flat, now, out.size(), DowntimePolicy::kDiscard, &p, out.data()));
  for (double v : out) EXPECT_NEAR(v, 0.25, 1e-9);
}

// One flat variational prototype, down-time counted as full use.
UsagePatterns FlatFullUsePatterns() {
  UsagePatterns p;
  p.options.normalization = Normalization::kVariational;
  p.options.downtime = DowntimePolicy::kFullUse;
  p.prototypes.assign(1, std::vector<double>(kObjectBins, 0.0));
  p.cluster_sizes = {1};
  p.objects = 1;
  return p;
}

// A desktop's history up to 12:00 of day 3: down (no sample) from 12:00 the
// day before until 06:00, up and idle otherwise.
constexpr int64_t kDesktopNow = 3 * kBinsPerDay + 12 * kBinsPerHour;
std::vector<double> DesktopDownMostOfTheDay() {
  std::vector<double> s(kDesktopNow, 0.0);
  for (int64_t b = kDesktopNow - kBinsPerDay; b < kDesktopNow - 6 * kBinsPerHour; ++b) s[b] = kNaN;
  return s;
}

// The level a variational forecast starts from is the mean of the last 24 h,
// not the last observed value (section 2.2: "The average a is added to each
// element of the chosen prototypical element"). A desktop that was down (full
// use under kFullUse) for 18 of the last 24 hours and has been up (use 0) for
// the last 6 is forecast at a = 18/24 = 0.75 by a flat prototype, although
// its current use is 0.
TEST(ForecastersTest, UpaVariationalLevelIsTheRecentMeanNotTheLastValue) {
  UsagePatterns p = FlatFullUsePatterns();
  const int64_t now = kDesktopNow;
  const std::vector<double> s = DesktopDownMostOfTheDay();
  std::vector<double> out(4 * kBinsPerHour);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kFullUse, &p, out.data()));
  for (double v : out) EXPECT_NEAR(v, 0.75, 1e-9);
  // Persistence answers with the current use.
  ASSERT_TRUE(Forecast(Forecaster::kPersist, s, now, out.size(), DowntimePolicy::kFullUse, nullptr,
                       out.data()));
  EXPECT_NEAR(out[0], 0.0, 1e-9);
  // The paper-literal UPA keeps the paper's level whatever the residual
  // coefficient of the patterns.
  p.residual_phi = 0.9;
  ASSERT_TRUE(Forecast(Forecaster::kUpaPaper, s, now, out.size(), DowntimePolicy::kFullUse, &p,
                       out.data()));
  for (double v : out) EXPECT_NEAR(v, 0.75, 1e-9);
}

// sojourn's UPA adds the decaying residual of the matched prototype. The
// desktop of the previous test (level a = 0.75, current use 0) has the
// residual r = 0 - 0.75 at the last bin; with phi = 0.9 the forecast of bin
// now + j is 0.75 + 0.9^(j + 1) * r.
TEST(ForecastersTest, UpaAddsTheDecayingResidual) {
  UsagePatterns p = FlatFullUsePatterns();
  p.residual_phi = 0.9;
  const int64_t now = kDesktopNow;
  const std::vector<double> s = DesktopDownMostOfTheDay();
  std::vector<double> out(4 * kBinsPerHour);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kFullUse, &p, out.data()));
  EXPECT_NEAR(out[0], 0.75 - 0.9 * 0.75, 1e-12);  // 0.075
  EXPECT_NEAR(out[1], 0.75 - 0.81 * 0.75, 1e-12);
  for (size_t j = 0; j < out.size(); ++j) {
    EXPECT_NEAR(out[j], 0.75 - std::pow(0.9, j + 1) * 0.75, 1e-12) << j;
  }
  // phi = 0 is the paper's forecast.
  p.residual_phi = 0;
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kFullUse, &p, out.data()));
  for (double v : out) EXPECT_NEAR(v, 0.75, 1e-12);

  // Around prototype B (+0.3 / -0.3 halves) at level 0.4, with the last
  // known bin (05:45, B's +0.3 half) 0.2 above the series and the two bins
  // before `now` missing (kDiscard): the residual is three bins old, so bin
  // now + j gets r * phi^(j + 3) on top of the paper's a + 0.3.
  UsagePatterns two = TwoPrototypes();
  two.residual_phi = 0.5;
  const int64_t t = 3 * kBinsPerDay + 6 * kBinsPerHour;  // 06:00
  std::vector<double> h = HistoryLikeB(t, 0.4);
  h[t - 3] += 0.2;
  h[t - 2] = h[t - 1] = kNaN;
  // Recent mean over the 286 known bins: two bins of 0.7 missing, 0.2 added.
  const double a = (kBinsPerDay * 0.4 - 2 * 0.7 + 0.2) / 286;
  const double r = 0.9 - (a + 0.3);  // x - (B + a) at 05:45
  std::vector<double> o(12);
  ASSERT_TRUE(Forecast(Forecaster::kUpa, h, t, o.size(), DowntimePolicy::kDiscard, &two, o.data()));
  for (size_t j = 0; j < o.size(); ++j) {
    EXPECT_NEAR(o[j], a + 0.3 + r * std::pow(0.5, j + 3), 1e-12) << j;
  }
  ASSERT_TRUE(
      Forecast(Forecaster::kUpaPaper, h, t, o.size(), DowntimePolicy::kDiscard, &two, o.data()));
  for (double v : o) EXPECT_NEAR(v, a + 0.3, 1e-12);
}

// With k-step coefficients (the per-horizon variant) phi_k replaces phi^k up
// to the last fitted k, then the correction decays by phi per bin.
TEST(ForecastersTest, UpaWithKStepCoefficients) {
  UsagePatterns p = FlatFullUsePatterns();
  p.residual_phi = 0.9;
  p.residual_phi_by_step = {0.8, 0.5};
  const int64_t now = kDesktopNow;
  const std::vector<double> s = DesktopDownMostOfTheDay();
  std::vector<double> out(4);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kFullUse, &p, out.data()));
  const double r = -0.75;  // current use 0, paper level 0.75
  EXPECT_NEAR(out[0], 0.75 + 0.8 * r, 1e-12);
  EXPECT_NEAR(out[1], 0.75 + 0.5 * r, 1e-12);
  EXPECT_NEAR(out[2], 0.75 + 0.5 * 0.9 * r, 1e-12);
  EXPECT_NEAR(out[3], 0.75 + 0.5 * 0.81 * r, 1e-12);
}

// The residual coefficient is recovered from a series whose deviations from
// a daily pattern are AR(1) with a known coefficient.
TEST(ForecastersTest, FitResidualPhiRecoversAr1) {
  for (double phi : {0.0, 0.5, 0.9}) {
    std::mt19937 rng(7);
    std::normal_distribution<double> eps(0.0, 0.04);
    std::vector<double> s(30 * kBinsPerDay);
    double e = 0;
    for (size_t b = 0; b < s.size(); ++b) {
      e = phi * e + eps(rng);
      s[b] = 0.5 + ((b % kBinsPerDay) < kBinsPerDay / 2 ? 0.2 : -0.2) + e;
    }
    // The true pattern as the only prototype (variational: zero mean).
    UsagePatterns p;
    p.options.normalization = Normalization::kVariational;
    p.prototypes.assign(1, std::vector<double>(kObjectBins));
    for (int i = 0; i < kObjectBins; ++i) p.prototypes[0][i] = (i % kBinsPerDay) < 144 ? 0.2 : -0.2;
    p.cluster_sizes = {29};
    int pairs = 0;
    const double fit = FitResidualPhi(s, DowntimePolicy::kDiscard, p, s.size(), &pairs);
    EXPECT_EQ(pairs, 29 * kBinsPerDay);  // every now from bin 288 to the last bin (the target)
    EXPECT_NEAR(fit, phi, 0.03) << phi;
    // The pattern analysis fits it on its own prototypes.
    UsageSeries series;
    series.origin_unix = 1372636800;
    series.cpu = s;
    series.mem = s;
    auto analysed = AnalysePatterns(series, Resource::kCpu, {}, series.UnixOfBin(series.bins()));
    ASSERT_TRUE(analysed.ok()) << analysed.status();
    EXPECT_NEAR(analysed->residual_phi, phi, 0.05) << phi;
    EXPECT_GT(analysed->residual_pairs, 28 * kBinsPerDay);
  }
  // The k-step coefficients of an AR(1) residual are phi^k.
  {
    std::mt19937 rng(11);
    std::normal_distribution<double> eps(0.0, 0.04);
    std::vector<double> s(40 * kBinsPerDay);
    double e = 0;
    for (size_t b = 0; b < s.size(); ++b) {
      e = 0.9 * e + eps(rng);
      s[b] = 0.5 + e;
    }
    UsagePatterns flat;
    flat.options.normalization = Normalization::kVariational;
    flat.prototypes.assign(1, std::vector<double>(kObjectBins, 0.0));
    flat.cluster_sizes = {39};
    std::vector<double> by_step;
    const double fit =
        FitResidualPhi(s, DowntimePolicy::kDiscard, flat, s.size(), nullptr, 12, &by_step);
    ASSERT_EQ(by_step.size(), 12u);
    EXPECT_DOUBLE_EQ(by_step[0], fit);
    // The residual is measured from the 24 h mean, which absorbs a little of
    // the slow AR(1) component: a loose tolerance.
    for (int k : {1, 2, 6, 12}) EXPECT_NEAR(by_step[k - 1], std::pow(0.9, k), 0.05) << k;
  }
  // Too few pairs (less than a day of history): phi cannot be estimated and
  // is the options' unestimated_residual_phi (default: the deviation persists).
  UsagePatterns p = TwoPrototypes();
  std::vector<double> short_series(kBinsPerDay + 100, 0.3);
  int pairs = -1;
  EXPECT_EQ(FitResidualPhi(short_series, DowntimePolicy::kDiscard, p, short_series.size(), &pairs),
            kMaxResidualPhi);
  EXPECT_EQ(pairs, 100);
  {
    UsagePatterns paper = p;
    paper.options.unestimated_residual_phi = 0;
    EXPECT_EQ(FitResidualPhi(short_series, DowntimePolicy::kDiscard, paper, short_series.size()),
              0.0);
  }
  // Residuals all zero (the series is its pattern: e.g. a desktop never down
  // in training): no evidence either way, the same fallback.
  {
    UsagePatterns flat;
    flat.options.normalization = Normalization::kVariational;
    flat.prototypes.assign(1, std::vector<double>(kObjectBins, 0.0));
    flat.cluster_sizes = {9};
    std::vector<double> idle(10 * kBinsPerDay, 0.0);
    int n = 0;
    EXPECT_EQ(FitResidualPhi(idle, DowntimePolicy::kDiscard, flat, idle.size(), &n),
              kMaxResidualPhi);
    EXPECT_GT(n, kMinResidualPairs);
    flat.options.unestimated_residual_phi = 0.3;
    EXPECT_EQ(FitResidualPhi(idle, DowntimePolicy::kDiscard, flat, idle.size()), 0.3);
  }
  // Training data only: nothing at or after end_bin is read.
  std::vector<double> s(10 * kBinsPerDay, kNaN);
  for (int64_t b = 0; b < 5 * kBinsPerDay; ++b) s[b] = 0.3 + 0.01 * (b % 7);
  std::vector<double> s2 = s;
  for (int64_t b = 5 * kBinsPerDay; b < 10 * kBinsPerDay; ++b) s2[b] = 0.9;
  EXPECT_EQ(FitResidualPhi(s, DowntimePolicy::kFullUse, p, 5 * kBinsPerDay),
            FitResidualPhi(s2, DowntimePolicy::kFullUse, p, 5 * kBinsPerDay));
}

// Past the end of the 48 h object the forecast is chained; values are clamped.
TEST(ForecastersTest, UpaChainsPastTheObjectAndClamps) {
  const UsagePatterns p = TwoPrototypes();
  const int64_t now = 2 * kBinsPerDay + 20 * kBinsPerHour;  // 20:00: 4 h left in the object
  const std::vector<double> s = HistoryLikeB(now, 0.8);
  std::vector<double> out(30 * kBinsPerHour);
  ASSERT_TRUE(
      Forecast(Forecaster::kUpa, s, now, out.size(), DowntimePolicy::kDiscard, &p, out.data()));
  EXPECT_NEAR(out[0], 0.5, 1e-9);  // 20:00 is in the -0.3 half
  // Next day 00:00-12:00: +0.3 around the same level, 1.1 clamped to 1.
  EXPECT_NEAR(out[4 * kBinsPerHour], 1.0, 1e-9);
  EXPECT_NEAR(out[17 * kBinsPerHour], 0.5, 1e-9);
}

// UPA cannot answer without prototypes or without recent data.
TEST(ForecastersTest, UpaNeedsPatternsAndRecentData) {
  const UsagePatterns p = TwoPrototypes();
  std::vector<double> s(3 * kBinsPerDay, kNaN);
  std::vector<double> out(10);
  EXPECT_FALSE(
      Forecast(Forecaster::kUpa, s, s.size(), 10, DowntimePolicy::kDiscard, &p, out.data()));
  s.assign(s.size(), 0.2);
  EXPECT_FALSE(
      Forecast(Forecaster::kUpa, s, s.size(), 10, DowntimePolicy::kDiscard, nullptr, out.data()));
  const UsagePatterns empty;
  EXPECT_FALSE(
      Forecast(Forecaster::kUpa, s, s.size(), 10, DowntimePolicy::kDiscard, &empty, out.data()));
}

// The baselines of section 4.2 and issue 8.
TEST(ForecastersTest, Baselines) {
  std::vector<double> s(2 * kBinsPerDay);
  for (size_t b = 0; b < s.size(); ++b) s[b] = (b % kBinsPerDay) / 1000.0;
  const int64_t now = s.size();
  std::vector<double> out(3);
  ASSERT_TRUE(
      Forecast(Forecaster::kPersist, s, now, 3, DowntimePolicy::kDiscard, nullptr, out.data()));
  EXPECT_DOUBLE_EQ(out[2], 0.287);
  ASSERT_TRUE(
      Forecast(Forecaster::kLast4, s, now, 3, DowntimePolicy::kDiscard, nullptr, out.data()));
  EXPECT_NEAR(out[0], (0.240 + 0.287) / 2, 1e-12);  // mean of bins 240..287
  ASSERT_TRUE(Forecast(Forecaster::kSameTimeYesterday, s, now, 3, DowntimePolicy::kDiscard, nullptr,
                       out.data()));
  EXPECT_DOUBLE_EQ(out[0], 0.0);
  EXPECT_DOUBLE_EQ(out[2], 0.002);
  // Down-time as full use: a missing last bin persists as 1.0.
  s.back() = kNaN;
  ASSERT_TRUE(
      Forecast(Forecaster::kPersist, s, now, 3, DowntimePolicy::kFullUse, nullptr, out.data()));
  EXPECT_DOUBLE_EQ(out[0], 1.0);
  ASSERT_TRUE(
      Forecast(Forecaster::kPersist, s, now, 3, DowntimePolicy::kDiscard, nullptr, out.data()));
  EXPECT_DOUBLE_EQ(out[0], 0.286);
}

// Fraction of the 63 availability tests answered wrongly.
TEST(ForecastersTest, DecisionError) {
  std::vector<double> pred(kTestHorizonBins, 0.0), actual(kTestHorizonBins, 0.55);
  EXPECT_DOUBLE_EQ(DecisionError(pred.data(), pred.data()), 0.0);
  // Free 1.0 predicted, 0.45 actual: the tests with alpha >= 0.5 (5 of 9)
  // are wrong for every eta.
  EXPECT_NEAR(DecisionError(pred.data(), actual.data()), 35.0 / 63.0, 1e-12);
  // A spike at 100 minutes only affects eta = 120 and 240 min.
  std::vector<double> spike(kTestHorizonBins, 0.0);
  spike[20] = 0.95;
  EXPECT_NEAR(DecisionError(pred.data(), spike.data()), 18.0 / 63.0, 1e-12);
  actual[3] = kNaN;
  EXPECT_TRUE(std::isnan(DecisionError(pred.data(), actual.data())));
}

// Section 4.2: UPA after 21 days, last4 after 4 hours, else persistence.
TEST(ForecastersTest, DataAgeRule) {
  const UsagePatterns p = TwoPrototypes();
  std::vector<double> s(30 * kBinsPerDay, kNaN);
  const int64_t now = 25 * kBinsPerDay;
  for (int64_t b = now - 3 * kBinsPerHour; b < now; ++b) s[b] = 0.5;
  AdaptiveOptions o;
  EXPECT_EQ(DataAgeRule(s, now, now - 3 * kBinsPerHour, 12, DowntimePolicy::kDiscard, &p, o).method,
            Forecaster::kPersist);
  EXPECT_EQ(DataAgeRule(s, now, now - 5 * kBinsPerHour, 12, DowntimePolicy::kDiscard, &p, o).method,
            Forecaster::kLast4);
  EXPECT_EQ(DataAgeRule(s, now, now - 20 * kBinsPerDay, 12, DowntimePolicy::kDiscard, &p, o).method,
            Forecaster::kLast4);
  const MethodChoice upa = DataAgeRule(s, now, 0, 12, DowntimePolicy::kDiscard, &p, o);
  EXPECT_EQ(upa.method, Forecaster::kUpa);
  EXPECT_FALSE(upa.by_selector);
  EXPECT_EQ(DataAgeRule(s, now, 0, 12, DowntimePolicy::kDiscard, nullptr, o).method,
            Forecaster::kLast4);
  EXPECT_EQ(DataAgeRule(s, now, -1, 12, DowntimePolicy::kDiscard, &p, o).method,
            Forecaster::kPersist);
}

// Idle rule: idle for two hours and UPA predicts idleness -> last4.
TEST(ForecastersTest, IdleRule) {
  const UsagePatterns p = TwoPrototypes();
  const int64_t now = 25 * kBinsPerDay + 14 * kBinsPerHour;  // in B's -0.3 half
  std::vector<double> s(now, 0.0);
  const AdaptiveOptions o;
  // Flat idle history: nearest is A, which predicts 0 use -> idle rule fires.
  const MethodChoice idle = DataAgeRule(s, now, 0, 24, DowntimePolicy::kDiscard, &p, o);
  EXPECT_EQ(idle.method, Forecaster::kLast4);
  EXPECT_NE(idle.why.find("idle rule"), std::string::npos);
  // Busy in the last two hours: UPA.
  for (int64_t b = now - kBinsPerHour; b < now; ++b) s[b] = 0.5;
  EXPECT_EQ(DataAgeRule(s, now, 0, 24, DowntimePolicy::kDiscard, &p, o).method, Forecaster::kUpa);
  // Idle for two hours but UPA predicts use: history like B at level 0.31
  // (the -0.3 half is 0.01, idle) -> the next day's +0.3 half is busy.
  std::vector<double> b_hist = HistoryLikeB(25 * kBinsPerDay + 22 * kBinsPerHour, 0.31);
  const int64_t late = b_hist.size();
  const MethodChoice busy_ahead =
      DataAgeRule(b_hist, late, 0, 8 * kBinsPerHour, DowntimePolicy::kDiscard, &p, o);
  EXPECT_EQ(busy_ahead.method, Forecaster::kUpa);
}

// The selector picks the lowest recent error; ties go to the fallback; too
// few points fall back to the rule.
TEST(ForecastersTest, SelectBest) {
  MethodChoice rule;
  rule.method = Forecaster::kLast4;
  RecentScores scores;
  scores[0] = {0.10, 30};
  scores[1] = {0.05, 30};
  scores[2] = {0.02, 30};
  scores[3] = {0.02, 10};  // too few points
  MethodChoice c = SelectBest(scores, rule, 24);
  EXPECT_EQ(c.method, Forecaster::kPersist);
  EXPECT_TRUE(c.by_selector);
  EXPECT_DOUBLE_EQ(c.recent_error, 0.02);
  scores[1] = {0.02, 30};
  EXPECT_EQ(SelectBest(scores, rule, 24).method, Forecaster::kLast4);  // tie -> fallback
  for (auto& sc : scores) sc.points = 5;
  c = SelectBest(scores, rule, 24);
  EXPECT_EQ(c.method, Forecaster::kLast4);
  EXPECT_FALSE(c.by_selector);
}

// The table's window only holds replay points whose outcome is known by `now`.
TEST(ForecastersTest, RecentErrorTableWindow) {
  // Use 0 until bin 1000, 1 afterwards: persistence is right except at
  // points whose 4 h horizon crosses bin 1000.
  std::vector<double> s(2000, 0.0);
  for (size_t b = 1000; b < s.size(); ++b) s[b] = 1.0;
  SelectorOptions o;
  o.window_days = 1;
  o.step_bins = 1;
  RecentErrorTable t(s, DowntimePolicy::kDiscard, 0, s.size(), o,
                     [](int64_t) -> const UsagePatterns* { return nullptr; });
  const RecentScores before = t.Recent(900, kTestHorizonBins);
  EXPECT_EQ(before[2].points, kBinsPerDay - kTestHorizonBins + 1);
  EXPECT_DOUBLE_EQ(before[2].error, 0.0);
  EXPECT_EQ(before[0].points, 0);  // no prototypes: UPA never scored
  const RecentScores after = t.Recent(1100, kTestHorizonBins);
  EXPECT_GT(after[2].error, 0.0);
  // Judged on 10-minute questions, persistence missed the step far less often.
  const RecentScores short_q = t.Recent(1100, 2);
  EXPECT_LT(short_q[2].error, after[2].error);
  EXPECT_GT(short_q[2].error, 0.0);
}

// 0/1 resources answer threshold questions with the more likely state.
TEST(ForecastersTest, ThresholdAnswerOfBinaryUse) {
  EXPECT_TRUE(IsBinaryUse({0.0, kNaN, 1.0, 0.0}, 4));
  EXPECT_FALSE(IsBinaryUse({0.0, 0.5, 1.0}, 3));
  EXPECT_TRUE(IsBinaryUse({0.0, 1.0, 0.5}, 2));  // only bins before `end`
  EXPECT_FALSE(IsBinaryUse({kNaN, kNaN}, 2));     // nothing known
  EXPECT_FALSE(IsBinaryUse({}, 0));
  std::vector<double> f = {0.2, 0.5, 0.51, 0.9};
  ToThresholdAnswer(false, f.data(), 4);
  EXPECT_EQ(f, (std::vector<double>{0.2, 0.5, 0.51, 0.9}));
  ToThresholdAnswer(true, f.data(), 4);
  EXPECT_EQ(f, (std::vector<double>{0.0, 0.0, 1.0, 1.0}));
  // A probability of 0.3 of being down answers "yes" at every alpha once it
  // is an answer; as a use level it said "no" to alpha = 0.8 and 0.9.
  std::vector<double> p(kTestHorizonBins, 0.3), up(kTestHorizonBins, 0.0);
  EXPECT_GT(DecisionError(p.data(), up.data()), 0.0);
  ToThresholdAnswer(true, p.data(), kTestHorizonBins);
  EXPECT_EQ(DecisionError(p.data(), up.data()), 0.0);
}

// Per-eta errors and the eta a request's horizon maps to.
TEST(ForecastersTest, DecisionErrorsByEta) {
  std::vector<double> pred(kTestHorizonBins, 0.0), spike(kTestHorizonBins, 0.0);
  spike[20] = 0.95;  // 100 minutes ahead
  std::array<double, kEtaMinutes.size()> wrong;
  ASSERT_TRUE(DecisionErrorsByEta(pred.data(), spike.data(), &wrong));
  EXPECT_EQ(wrong, (std::array<double, 7>{0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(EtaIndexFor(1), 0);
  EXPECT_EQ(EtaIndexFor(2), 0);
  EXPECT_EQ(EtaIndexFor(12), 3);
  EXPECT_EQ(EtaIndexFor(47), 5);
  EXPECT_EQ(EtaIndexFor(864), 6);
}

}  // namespace
}  // namespace sojourn::usage
