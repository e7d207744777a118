// Tests of PredictFromStats, the entry point of the predictor and sojourn-eval.
#include "models/availability/predict.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "models/availability/tr.h"

namespace sojourn::availability {
namespace {

void Add(const std::vector<int>& v, SojournStats* s) {
  std::vector<HostState> w;
  for (int x : v) w.push_back(static_cast<HostState>(x));
  AccumulateWindow(w.data(), w.size(), s);
}

// The prediction is exactly EstimateKernel + TrCurve, with MTTF in seconds.
TEST(PredictFromStatsTest, EqualsKernelPlusCurve) {
  SojournStats stats;
  stats.step_seconds = 300;
  Add({1, 1, 1, 3}, &stats);
  Add({1, 1, 1, 1}, &stats);
  Add({1, 2, 2, 2}, &stats);
  Add({2, 1, 1, 1}, &stats);
  for (bool aware : {false, true}) {
    for (bool first : {false, true}) {
      const EstimatorOptions opt{aware, first};
      const TrPrediction p = PredictFromStats(stats, HostState::kS1, 3, opt);
      const auto tr = TrCurve(EstimateKernel(stats, opt), HostState::kS1, 3);
      EXPECT_EQ(p.tr, tr);
      EXPECT_DOUBLE_EQ(p.mttf_seconds, MttfSteps(tr) * 300);
      EXPECT_EQ(p.windows_used, 4);
      EXPECT_FALSE(p.low_history);
    }
  }
  // Censoring-aware with the first-sojourn kernel: TR(3) = 2/3 (see kernel_test).
  const TrPrediction p = PredictFromStats(stats, HostState::kS1, 3, EstimatorOptions{});
  EXPECT_NEAR(p.tr[2], 2.0 / 3, 1e-15);
  EXPECT_NEAR(p.mttf_seconds, (1 + 1 + 1) * 300.0, 1e-9);
}

// A failed initial state predicts TR 0 and MTTF 0; no data means low history.
TEST(PredictFromStatsTest, FailureInitAndLowHistory) {
  SojournStats stats;
  stats.step_seconds = 60;
  Add({1, 1, 3}, &stats);
  const TrPrediction failed = PredictFromStats(stats, HostState::kS4, 5, EstimatorOptions{});
  EXPECT_EQ(failed.tr, std::vector<double>(5, 0.0));
  EXPECT_EQ(failed.mttf_seconds, 0.0);
  const TrPrediction few = PredictFromStats(stats, HostState::kS1, 5, EstimatorOptions{});
  EXPECT_TRUE(few.low_history);  // one window
  EXPECT_EQ(few.tr.size(), 5u);
  EXPECT_DOUBLE_EQ(few.tr[1], 0.0);  // the only window failed at step 2
  Add({1, 1, 1}, &stats);
  Add({1, 1, 1}, &stats);
  EXPECT_FALSE(PredictFromStats(stats, HostState::kS1, 5, EstimatorOptions{}).low_history);
  EXPECT_TRUE(PredictFromStats(stats, HostState::kS2, 5, EstimatorOptions{}).low_history);
  const TrPrediction empty = PredictFromStats(SojournStats{}, HostState::kS1, 4, EstimatorOptions{});
  EXPECT_TRUE(empty.low_history);
  EXPECT_EQ(empty.tr, std::vector<double>(4, 1.0));
}

// Shrinkage: the prior's windows count as opt.prior_windows windows. Host: one
// window failing at step 2; prior: 4 windows surviving 2 steps. With weight w
// the first-sojourn hazard at 2 is 1 / (1 + w), so TR(2) = w / (1 + w).
TEST(PredictFromStatsTest, ShrinkageTowardsPrior) {
  SojournStats host, prior;
  Add({1, 1, 3}, &host);
  for (int i = 0; i < 4; ++i) Add({1, 1, 1}, &prior);
  EstimatorOptions opt = BasicEstimatorOptions();
  EXPECT_DOUBLE_EQ(PredictFromStats(host, HostState::kS1, 2, opt, &prior).tr[1], 0.0);  // off
  opt.prior_windows = 1;
  EXPECT_DOUBLE_EQ(PredictFromStats(host, HostState::kS1, 2, opt, &prior).tr[1], 0.5);
  opt.prior_windows = 3;
  const TrPrediction p = PredictFromStats(host, HostState::kS1, 2, opt, &prior);
  EXPECT_DOUBLE_EQ(p.tr[1], 0.75);
  EXPECT_EQ(p.windows_used, 1);  // the host's own windows
  EXPECT_DOUBLE_EQ(PredictFromStats(host, HostState::kS1, 2, opt, nullptr).tr[1], 0.0);
}

// The empirical window frequency and the blend with it.
TEST(PredictFromStatsTest, WindowFrequencyAndBlend) {
  SojournStats stats;
  Add({1, 1, 3, 3}, &stats);  // fails at step 2
  Add({1, 2, 1, 5}, &stats);  // fails at step 3
  Add({1, 2, 2, 2}, &stats);
  Add({1, 1, 1, 1}, &stats);
  Add({2, 2, 2, 2}, &stats);
  EXPECT_EQ(WindowFrequencyCurve(stats, HostState::kS1, 5),
            (std::vector<double>{1.0, 0.75, 0.5, 0.5, 0.5}));
  EXPECT_EQ(WindowFrequencyCurve(stats, HostState::kS2, 2), (std::vector<double>{1.0, 1.0}));
  EXPECT_TRUE(WindowFrequencyCurve(stats, HostState::kS3, 2).empty());
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.first_sojourn_kernel = false;
  const auto smp = PredictFromStats(stats, HostState::kS1, 3, opt).tr;
  opt.frequency_weight = 0.25;
  const auto blend = PredictFromStats(stats, HostState::kS1, 3, opt).tr;
  const std::vector<double> freq = {1.0, 0.75, 0.5};
  for (int m = 0; m < 3; ++m) EXPECT_DOUBLE_EQ(blend[m], 0.75 * smp[m] + 0.25 * freq[m]);
}

// Age conditioning: recent windows (bucket 1) failed at step 2, settled ones
// (bucket 0) survived. With age_prior_windows = 0 each bucket stands alone;
// with 2 the bucket gets all first sojourns scaled to 2 windows: recent =
// {fail x2} + {fail x1, survive x1} -> TR(2) = 1/4; settled -> 3/4.
TEST(PredictFromStatsTest, AgeConditionedFirstSojourn) {
  SojournStats stats;
  const std::vector<HostState> fail = {HostState::kS1, HostState::kS1, HostState::kS3};
  const std::vector<HostState> live = {HostState::kS1, HostState::kS1, HostState::kS1};
  for (int i = 0; i < 2; ++i) {
    AccumulateWindow(fail.data(), 3, 1.0, &stats, 1);
    AccumulateWindow(live.data(), 3, 1.0, &stats, 0);
  }
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recent_age_seconds = 3600;
  opt.age_prior_windows = 0;
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 0).tr[1], 0.0);
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 3600).tr[1], 1.0);
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, -1).tr[1], 0.5);
  opt.age_prior_windows = 2;
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 1800).tr[1], 0.25);
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 7200).tr[1], 0.75);
  opt.recent_age_seconds = 0;  // off: the age is ignored
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 0).tr[1], 0.5);
}

// A third (long) class: settled windows (1 h .. 1 day) fail, long ones (at
// least a day) survive, recent ones survive half the time.
TEST(PredictFromStatsTest, LongAgeClass) {
  SojournStats stats;
  const std::vector<HostState> fail = {HostState::kS1, HostState::kS1, HostState::kS3};
  const std::vector<HostState> live = {HostState::kS1, HostState::kS1, HostState::kS1};
  for (int i = 0; i < 2; ++i) {
    AccumulateWindow(fail.data(), 3, 1.0, &stats, kAgeSettled);
    AccumulateWindow(live.data(), 3, 1.0, &stats, kAgeLong);
  }
  AccumulateWindow(fail.data(), 3, 1.0, &stats, kAgeRecent);
  AccumulateWindow(live.data(), 3, 1.0, &stats, kAgeRecent);
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recent_age_seconds = 3600;
  opt.long_age_seconds = 86400;
  opt.age_prior_windows = 0;
  auto tr = [&](int64_t age) { return PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, age).tr[1]; };
  EXPECT_DOUBLE_EQ(tr(0), 0.5);
  EXPECT_DOUBLE_EQ(tr(3600), 0.0);
  EXPECT_DOUBLE_EQ(tr(86399), 0.0);
  EXPECT_DOUBLE_EQ(tr(86400), 1.0);
  EXPECT_DOUBLE_EQ(tr(-1), 0.5);  // unknown age: all 6 windows
  // Shrinkage towards all first sojourns (3 of 6 survive) with weight 2.
  opt.age_prior_windows = 2;
  EXPECT_DOUBLE_EQ(tr(10 * 86400), (2 + 2 * 0.5) / 4);
  // Without the long class the long windows are settled: 2 of 4 survive.
  opt.age_prior_windows = 0;
  opt.long_age_seconds = 0;
  EXPECT_DOUBLE_EQ(tr(86400), 0.0);  // the long windows were filed apart
  EXPECT_EQ(AgeClassOf(5, 3, 0), kAgeSettled);
  EXPECT_EQ(AgeClassOf(2, 3, 24), kAgeRecent);
  EXPECT_EQ(AgeClassOf(23, 3, 24), kAgeSettled);
  EXPECT_EQ(AgeClassOf(24, 3, 24), kAgeLong);
  EXPECT_EQ(AgeClassOf(24, 3, 2), kAgeSettled);  // long limit below recent: no long class
}

// per_class_age_prior: the prior's long-class first sojourns count as many
// pseudo-windows as all its first sojourns of the state.
TEST(PredictFromStatsTest, PerClassAgePrior) {
  const std::vector<HostState> fail = {HostState::kS1, HostState::kS1, HostState::kS3};
  const std::vector<HostState> live = {HostState::kS1, HostState::kS1, HostState::kS1};
  SojournStats prior;
  for (int i = 0; i < 9; ++i) AccumulateWindow(fail.data(), 3, 1.0, &prior, kAgeSettled);
  AccumulateWindow(live.data(), 3, 1.0, &prior, kAgeLong);
  SojournStats host;  // one long window of its own, which failed
  AccumulateWindow(fail.data(), 3, 1.0, &host, kAgeLong);
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recent_age_seconds = 3600;
  opt.long_age_seconds = 86400;
  opt.age_prior_windows = 0;
  opt.prior_windows = 4;
  auto tr = [&]() { return PredictFromStats(host, HostState::kS1, 2, opt, &prior, 86400).tr[1]; };
  // The prior's 10 windows weigh 4: its one long window weighs 0.4.
  EXPECT_NEAR(tr(), 0.4 / 1.4, 1e-12);
  // Per class: the long class gets all 4 pseudo-windows, all surviving.
  opt.per_class_age_prior = true;
  EXPECT_NEAR(tr(), 4.0 / 5.0, 1e-12);
}

class CollectStatsTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMon = 1704067200;  // Monday 2024-01-01 00:00 UTC
  // Hourly S1 series over 14 days with S3 at Tue Jan 9 10:00.
  void SetUp() override {
    series_.start_unix = kMon;
    series_.step_seconds = 3600;
    series_.states.assign(14 * 24, HostState::kS1);
    series_.states[8 * 24 + 10] = HostState::kS3;
  }
  StateSeries series_;
  const int64_t end_ = kMon + 9 * 86400;  // Wed Jan 10 00:00
  const WindowSpec weekday_9_{DayType::kWeekday, 9 * 3600, 2 * 3600, 0, 0};
};

// Weekday 9:00-11:00 windows before Jan 10: Jan 9, 8, 5, 4, 3, 2, 1; the
// newest fails at step 1.
TEST_F(CollectStatsTest, CollectsSameClockWindows) {
  const SojournStats s = CollectStats(series_, weekday_9_, end_, BasicEstimatorOptions());
  EXPECT_EQ(s.num_windows, 7);
  EXPECT_EQ(s.step_seconds, 3600);
  EXPECT_EQ(s.window_steps, 2);
  EXPECT_EQ(s.first_failure[1], (CountByLength{{1, 1.0}}));
  EXPECT_DOUBLE_EQ(s.first[1].censored.at(2), 6.0);
  // Excluding the newest window's start index removes the failure.
  const size_t jan9 = 8 * 24 + 9;
  const SojournStats e = CollectStats(series_, weekday_9_, end_, BasicEstimatorOptions(),
                                      [&](size_t start) { return start == jan9; });
  EXPECT_EQ(e.num_windows, 6);
  EXPECT_TRUE(e.first_failure[1].empty());
}

// Recency: weights 0.5^k for the k-th newest window (half-life 1 window).
TEST_F(CollectStatsTest, RecencyWeighting) {
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recency_half_life_windows = 1;
  const SojournStats s = CollectStats(series_, weekday_9_, end_, opt);
  EXPECT_DOUBLE_EQ(s.first_failure[1].at(1), 1.0);
  EXPECT_DOUBLE_EQ(s.total_weight, 2.0 - std::pow(0.5, 6));
}

// Borrowing: 2 weekend windows (Jan 6, 7) < 3, so the 7 weekday windows are
// added with weight 0.5; neighbours add 8:00 and 10:00 windows.
TEST_F(CollectStatsTest, OtherDayTypeAndNeighbourStartTimes) {
  WindowSpec weekend = weekday_9_;
  weekend.day_type = DayType::kWeekend;
  EstimatorOptions opt = BasicEstimatorOptions();
  EXPECT_DOUBLE_EQ(CollectStats(series_, weekend, end_, opt).total_weight, 2.0);
  opt.borrow_below_windows = 3;
  opt.other_day_type_weight = 0.5;
  const SojournStats b = CollectStats(series_, weekend, end_, opt);
  EXPECT_DOUBLE_EQ(b.total_weight, 2.0 + 0.5 * 7);
  EXPECT_DOUBLE_EQ(b.first_failure[1].at(1), 0.5);
  opt.borrow_below_windows = 2;  // not fewer than 2: no borrowing
  EXPECT_DOUBLE_EQ(CollectStats(series_, weekend, end_, opt).total_weight, 2.0);

  EstimatorOptions nb = BasicEstimatorOptions();
  nb.neighbor_window_weight = 0.25;
  const SojournStats n = CollectStats(series_, weekday_9_, end_, nb);
  EXPECT_DOUBLE_EQ(n.total_weight, 7 + 0.25 * 14);
  // Jan 9 8:00 fails at step 2; Jan 9 10:00 starts in S3.
  EXPECT_DOUBLE_EQ(n.first_failure[1].at(2), 0.25);
  EXPECT_DOUBLE_EQ(n.initial[3], 0.25);
}

// Level-corrected borrowing keeps the borrowed windows apart; merged back at
// the same level they are exactly the issue 7 borrowing.
TEST_F(CollectStatsTest, LevelCorrectedBorrowingKeepsBorrowedWindowsApart) {
  WindowSpec weekend = weekday_9_;
  weekend.day_type = DayType::kWeekend;
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.borrow_below_windows = 3;
  opt.other_day_type_weight = 0.5;
  opt.level_corrected_borrowing = true;
  const SojournStats apart = CollectStats(series_, weekend, end_, opt);
  EXPECT_DOUBLE_EQ(apart.total_weight, 2.0);
  EXPECT_EQ(apart.num_windows, 9);
  ASSERT_EQ(apart.borrowed.size(), 1u);
  EXPECT_DOUBLE_EQ(apart.borrowed[0].total_weight, 0.5 * 7);
  EXPECT_EQ(apart.borrowed[0].num_windows, 7);
  EXPECT_DOUBLE_EQ(apart.borrowed[0].first_failure[1].at(1), 0.5);
  EXPECT_TRUE(apart.first_failure[1].empty());
  opt.level_corrected_borrowing = false;
  const SojournStats merged = CollectStats(series_, weekend, end_, opt);
  EXPECT_TRUE(merged.borrowed.empty());
  EXPECT_EQ(FlattenBorrowed(apart, 1.0), merged);
  // Without a prior (no level to correct to) both predict the same.
  opt.level_corrected_borrowing = true;
  EXPECT_EQ(PredictFromStats(apart, HostState::kS1, 2, opt).tr,
            PredictFromStats(merged, HostState::kS1, 2, opt).tr);
}

// With age conditioning, the 11:00 window of Jan 9 starts right after the S3
// at 10:00 (recent); every other 11:00 window is settled.
TEST_F(CollectStatsTest, FilesFirstSojournsByAge) {
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recent_age_seconds = 3 * 3600;
  WindowSpec spec = weekday_9_;
  spec.start_second_of_day = 11 * 3600;
  const SojournStats s = CollectStats(series_, spec, end_, opt);
  EXPECT_EQ(s.num_windows, 7);
  EXPECT_DOUBLE_EQ(s.initial_by_age[1][1], 1.0);
  EXPECT_DOUBLE_EQ(s.initial_by_age[0][1], 6.0);
  EXPECT_DOUBLE_EQ(s.first_by_age[0][1].censored.at(2), 6.0);
  EXPECT_EQ(CollectStats(series_, spec, end_, BasicEstimatorOptions()).initial_by_age[1][1], 0.0);
}

// With a long class (1 day): Jan 1 11:00 is 11 h into the series, so its age
// is unknown (it may be a day or more); Jan 2-5 and 8 are long, Jan 9 recent.
TEST_F(CollectStatsTest, FilesFirstSojournsIntoThreeAgeClasses) {
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.recent_age_seconds = 3 * 3600;
  opt.long_age_seconds = 86400;
  WindowSpec spec = weekday_9_;
  spec.start_second_of_day = 11 * 3600;
  const SojournStats s = CollectStats(series_, spec, end_, opt);
  EXPECT_EQ(s.num_windows, 7);
  EXPECT_DOUBLE_EQ(s.initial_by_age[kAgeRecent][1], 1.0);
  EXPECT_DOUBLE_EQ(s.initial_by_age[kAgeLong][1], 5.0);
  EXPECT_DOUBLE_EQ(s.initial_by_age[kAgeSettled][1], 0.0);
  EXPECT_DOUBLE_EQ(s.first_by_age[kAgeLong][1].censored.at(2), 5.0);
  // Merge and equality see the third class.
  SojournStats twice = s;
  twice.Merge(s);
  EXPECT_DOUBLE_EQ(twice.initial_by_age[kAgeLong][1], 10.0);
  EXPECT_FALSE(twice == s);
  SojournStats other = s;
  other.first_by_age[kAgeLong][1].censored[2] = 4.0;
  EXPECT_FALSE(other == s);
}

// The option presets: the paper's estimator is counting with pooled first
// sojourns and no extension; the defaults only add extensions to the basic one.
TEST(EstimatorOptionsTest, Presets) {
  const EstimatorOptions paper = PaperEstimatorOptions();
  EXPECT_FALSE(paper.censoring_aware);
  EXPECT_FALSE(paper.first_sojourn_kernel);
  EXPECT_EQ(paper.prior_windows, 0);
  EXPECT_EQ(paper.neighbor_window_weight, 0);
  EXPECT_EQ(paper.recent_age_seconds, 0);
  EXPECT_EQ(paper.borrow_below_windows, 0);
  const EstimatorOptions def;
  EXPECT_TRUE(def.censoring_aware);
  EXPECT_TRUE(def.first_sojourn_kernel);
  // Without a prior and an age, the default prediction equals the basic one
  // on the same statistics.
  SojournStats stats;
  Add({1, 1, 3}, &stats);
  Add({1, 2, 1}, &stats);
  Add({1, 1, 1}, &stats);
  EXPECT_EQ(PredictFromStats(stats, HostState::kS1, 2, def).tr,
            PredictFromStats(stats, HostState::kS1, 2, BasicEstimatorOptions()).tr);
}

// Empirical-Bayes strength on a synthetic population with known dispersion:
// p_h ~ Beta(kappa mu, kappa (1 - mu)), y_h ~ Binomial(n_h, p_h).
TEST(BetaBinomialConcentrationTest, RecoversKnownKappa) {
  std::mt19937_64 rng(7);
  for (double kappa : {2.0, 8.0}) {
    const double mu = 0.8;
    std::gamma_distribution<double> ga(kappa * mu, 1.0), gb(kappa * (1 - mu), 1.0);
    std::vector<std::pair<double, double>> hosts;
    for (int h = 0; h < 4000; ++h) {
      const double a = ga(rng), b = gb(rng);
      const int n = 10 + h % 21;  // unequal sizes 10..30
      std::binomial_distribution<int> bin(n, a / (a + b));
      hosts.emplace_back(n, bin(rng));
    }
    const double est = BetaBinomialConcentration(hosts);
    EXPECT_NEAR(est, kappa, 0.15 * kappa) << "kappa " << kappa;
  }
  // Homogeneous hosts (p = 0.8 for all): no dispersion beyond the binomial,
  // so (nearly) complete pooling.
  std::vector<std::pair<double, double>> same;
  std::binomial_distribution<int> bin(20, 0.8);
  for (int h = 0; h < 2000; ++h) same.emplace_back(20, bin(rng));
  EXPECT_GT(BetaBinomialConcentration(same), 200);
  // Perfectly separated hosts (always up / always down): the minimum, 1.
  EXPECT_DOUBLE_EQ(BetaBinomialConcentration({{10, 10}, {10, 0}, {10, 10}, {10, 0}}), 1.0);
  // Not estimable: one host, or every window survived.
  EXPECT_EQ(BetaBinomialConcentration({{10, 7}}), 0);
  EXPECT_EQ(BetaBinomialConcentration({{10, 10}, {5, 5}}), 0);
}

// The builder pools the hosts and estimates the strength from their own
// windows' full-window survival.
TEST(PopulationPriorBuilderTest, PoolsAndEstimatesStrength) {
  SojournStats a, b, c;
  // (own_up_windows, own_up_survived) as CollectStats counts them.
  a.own_up_windows = 3;
  a.own_up_survived = 2;
  b.own_up_windows = 2;
  b.own_up_survived = 2;
  c.own_up_windows = 3;
  c.own_up_survived = 1;
  Add({1, 1, 1}, &a);
  Add({1, 1, 3}, &a);
  Add({2, 2, 2}, &a);
  Add({1, 1, 1}, &b);
  Add({1, 1, 1}, &b);
  Add({1, 3, 3}, &c);
  Add({2, 1, 5}, &c);
  Add({1, 1, 1}, &c);
  Add({5, 5, 5}, &c);  // starts in a failure: not a window of the survival count
  PopulationPriorBuilder builder;
  for (const SojournStats* s : {&a, &b, &c}) builder.Add(*s);
  const SojournStats prior = builder.Build();
  SojournStats sum = a;
  sum.Merge(b);
  sum.Merge(c);
  sum.prior_strength = prior.prior_strength;
  EXPECT_EQ(prior, sum);
  EXPECT_EQ(builder.hosts(), 3);
  EXPECT_DOUBLE_EQ(prior.prior_strength,
                   BetaBinomialConcentration({{3, 2}, {2, 2}, {3, 1}}));
  EXPECT_GT(prior.prior_strength, 0);
  // With empirical_bayes_prior the estimated strength replaces prior_windows.
  SojournStats own;
  own.step_seconds = 300;
  Add({1, 1, 1}, &own);
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.prior_windows = 6;
  double strength = 0;
  ShrinkStats(own, opt, &prior, &strength);
  EXPECT_EQ(strength, 6);
  opt.empirical_bayes_prior = true;
  const SojournStats shrunk = ShrinkStats(own, opt, &prior, &strength);
  EXPECT_DOUBLE_EQ(strength, prior.prior_strength);
  EXPECT_DOUBLE_EQ(shrunk.total_weight, own.total_weight + prior.prior_strength);
  // prior_windows = 0 still disables shrinkage.
  opt.prior_windows = 0;
  ShrinkStats(own, opt, &prior, &strength);
  EXPECT_EQ(strength, 0);
}

// Exact ages: StateAges, the exact-age table of CollectStats, and a
// prediction that depends on the host's age as the residual life does.
// The builder levels borrowed windows by the failure rate of the borrowing
// hosts' own windows over that of their borrowed ones (Haldane-Anscombe
// corrected), and ShrinkStats applies the ratio to the host's borrowed windows.
TEST(PopulationPriorBuilderTest, LevelsBorrowedWindows) {
  // Host A borrowed. Own: 3 quiet windows (2 up steps each) and one failing
  // after 1 step: 1 failure in 7 up steps. Borrowed: 2 failing after 1 step
  // and 2 quiet: 2 failures in 6 up steps.
  SojournStats a;
  for (int k = 0; k < 3; ++k) Add({1, 1, 1}, &a);
  Add({1, 3}, &a);
  SojournStats borrowed;
  Add({1, 3}, &borrowed);
  Add({1, 3}, &borrowed);
  Add({1, 1, 1}, &borrowed);
  Add({1, 1, 1}, &borrowed);
  a.num_windows += borrowed.num_windows;
  a.borrowed.push_back(borrowed);
  double f = 0, e = 0;
  CountFailures(a, &f, &e);
  EXPECT_DOUBLE_EQ(f, 1);
  EXPECT_DOUBLE_EQ(e, 7);
  // Host B did not borrow; its (high) failure rate must not enter the ratio.
  SojournStats b;
  Add({1, 3}, &b);
  Add({1, 3}, &b);
  PopulationPriorBuilder builder;
  builder.Add(a);
  builder.Add(b);
  const SojournStats prior = builder.Build();
  const double ratio = (1.5 / 7) / (2.5 / 6);
  EXPECT_NEAR(prior.borrow_hazard_ratio, ratio, 1e-12);
  EXPECT_TRUE(prior.borrowed.empty());
  // The counts are in windows of average weight: the same windows borrowed
  // with weight 0.5 (as CollectStats' other_day_type_weight) give the same
  // ratio, the 0.5 of the correction still being half a window's failure.
  SojournStats light = a;
  light.borrowed[0] = SojournStats();
  light.borrowed[0].Merge(borrowed, 0.5);
  PopulationPriorBuilder light_builder;
  light_builder.Add(light);
  light_builder.Add(b);
  EXPECT_NEAR(light_builder.Build().borrow_hazard_ratio, ratio, 1e-12);
  EXPECT_EQ(prior.num_windows, 10);
  // The prior's first sojourns: A's own failure, B's two, and A's borrowed
  // failure hazard at length 1 (2 of 4) times the ratio, in a cohort of 4.
  EXPECT_NEAR(prior.first[1].completed.at({3, 1}), 1 + 2 + 4 * 0.5 * ratio, 1e-12);
  // ShrinkStats levels the host's borrowed windows by the prior's ratio.
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.level_corrected_borrowing = true;
  double strength = 0;
  const SojournStats alone = ShrinkStats(a, opt, &prior, &strength);
  EXPECT_EQ(strength, 0);  // no shrinkage with prior_windows = 0
  EXPECT_TRUE(alone.borrowed.empty());
  EXPECT_NEAR(alone.first[1].completed.at({3, 1}), 1 + 2 * ratio, 1e-12);
  EXPECT_EQ(alone.num_windows, 8);
  // The lower failure level of the cell raises the TR above the unlevelled one.
  EXPECT_GT(PredictFromStats(a, HostState::kS1, 2, opt, &prior).tr[1],
            PredictFromStats(a, HostState::kS1, 2, opt).tr[1]);
}

// A history that grows (sojourn-eval's prior as of each window start): the
// windows collected between consecutive moments (CollectStats' after_unix)
// add up to those up to the last moment, and a builder fed each host's new
// windows (AddTo) builds the prior of the hosts' whole statistics. Checked on
// random hosts with the default options, without borrowing's level
// correction, without the neighbouring start times and with exact ages.
TEST(PopulationPriorBuilderTest, GrowingHistoriesEqualWholeOnes) {
  constexpr int64_t kMon = 1704067200;  // Monday 2024-01-01 00:00 UTC
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<StateSeries> hosts;
  for (double p_leave : {0.03, 0.1, 0.25}) {
    StateSeries s;
    s.start_unix = kMon + static_cast<int64_t>(u(rng) * 3) * 86400;  // different first days
    s.step_seconds = 1800;
    HostState cur = HostState::kS1;
    for (int k = 0; k < 35 * 48; ++k) {
      if (u(rng) < p_leave) cur = static_cast<HostState>(1 + static_cast<int>(u(rng) * 4.999));
      s.states.push_back(cur);
    }
    hosts.push_back(s);
  }
  std::vector<EstimatorOptions> options(4);
  options[1].level_corrected_borrowing = false;
  options[2].neighbor_window_weight = 0;
  options[3].exact_age_first_sojourn = true;
  int checked = 0;
  for (const EstimatorOptions& opt : options) {
    for (const DayType dt : {DayType::kWeekday, DayType::kWeekend}) {
      const WindowSpec spec{dt, 9 * 3600, 5 * 3600, 0, 0};
      PopulationPriorBuilder growing;
      std::vector<SojournStats> summed(hosts.size());
      int64_t before = std::numeric_limits<int64_t>::min();
      // A moment a day, at 09:00, 11:30 or 14:00 (where the 09:00 windows
      // end: a window ending at a moment belongs to the step up to it).
      for (int d = 0; d < 38; ++d) {
        const int64_t at = kMon + d * 86400 + 9 * 3600 + (d % 3) * 9000;
        for (size_t h = 0; h < hosts.size(); ++h) {
          const SojournStats more = CollectStats(hosts[h], spec, at, opt, nullptr, before);
          summed[h].Merge(more, 1.0, true);
          growing.AddTo(h, more);
        }
        before = at;
        PopulationPriorBuilder whole;
        std::vector<SojournStats> upto;
        for (size_t h = 0; h < hosts.size(); ++h) {
          upto.push_back(CollectStats(hosts[h], spec, at, opt));
          ASSERT_EQ(summed[h], upto.back()) << "host " << h << " at " << at;
          whole.Add(upto.back());
        }
        if (upto[0].num_windows == 0) continue;
        const SojournStats a = growing.Build(opt.level_corrected_borrowing);
        const SojournStats b = whole.Build(opt.level_corrected_borrowing);
        ASSERT_NEAR(a.prior_strength, b.prior_strength, 1e-9 * std::max(1.0, b.prior_strength));
        ASSERT_NEAR(a.borrow_hazard_ratio, b.borrow_hazard_ratio, 1e-12);
        ASSERT_EQ(a.num_windows, b.num_windows);
        EstimatorOptions eb = opt;
        eb.empirical_bayes_prior = true;  // the strength matters too
        for (const EstimatorOptions& o : {opt, eb}) {
          for (HostState init : {HostState::kS1, HostState::kS2}) {
            const auto pa = PredictFromStats(upto[0], init, 10, o, &a, 3600).tr;
            const auto pb = PredictFromStats(upto[0], init, 10, o, &b, 3600).tr;
            for (size_t m = 0; m < pa.size(); ++m) ASSERT_NEAR(pa[m], pb[m], 1e-12);
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
  // Without after_unix nothing changes; an after_unix at the end gives nothing.
  const WindowSpec spec{DayType::kWeekday, 9 * 3600, 5 * 3600, 0, 0};
  const int64_t end = kMon + 20 * 86400;
  EXPECT_EQ(CollectStats(hosts[1], spec, end, EstimatorOptions{}, nullptr, end).num_windows, 0);
  EXPECT_GT(CollectStats(hosts[1], spec, end, EstimatorOptions{}).num_windows, 10);
}

// PredictFromStats shrinks only the tables its prediction reads; it must give
// exactly the two-step ShrinkStats + PredictFromShrunk (which shrinks every
// table) for every initial state, age, load band, host ratio and option set,
// including borrowed windows, a prior that still holds borrowed windows, and
// a state seen only as a window's first sojourn (whose ordinary row falls back
// to its first sojourns).
TEST(PredictFromStatsTest, EqualsShrinkingEveryTable) {
  constexpr int64_t kMon = 1704067200;  // Monday 2024-01-01 00:00 UTC
  std::mt19937 rng(7);
  auto random_series = [&](double p_leave) {
    StateSeries s;
    s.start_unix = kMon;
    s.step_seconds = 1800;
    HostState cur = HostState::kS1;
    std::uniform_real_distribution<double> u(0, 1);
    for (int k = 0; k < 28 * 48; ++k) {
      if (u(rng) < p_leave) cur = static_cast<HostState>(1 + static_cast<int>(u(rng) * 4.999));
      s.states.push_back(cur);
    }
    return s;
  };
  std::vector<StateSeries> hosts;
  for (double p : {0.05, 0.1, 0.2, 0.3}) hosts.push_back(random_series(p));
  // S2 only ever at a window start: S1 all day, S2 for the hour before 9:00.
  StateSeries only_first;
  only_first.start_unix = kMon;
  only_first.step_seconds = 1800;
  only_first.states.assign(28 * 48, HostState::kS1);
  for (int d = 0; d < 28; ++d) {
    only_first.states[d * 48 + 16] = only_first.states[d * 48 + 17] = only_first.states[d * 48 + 18] =
        HostState::kS2;
  }
  hosts.push_back(only_first);
  const int64_t end = kMon + 21 * 86400;
  const WindowSpec spec{DayType::kWeekend, 9 * 3600, 4 * 3600, 0, 0};

  std::vector<EstimatorOptions> options(8);
  options[1].per_class_age_prior = true;
  options[2].exact_age_first_sojourn = true;
  options[2].load_band_first_sojourn = false;
  options[3].first_sojourn_kernel = false;
  options[4].censoring_aware = false;
  options[5].frequency_weight = 0.3;
  options[6].host_frailty = false;
  options[6].level_corrected_borrowing = false;
  options[7].recent_age_seconds = 0;
  int compared = 0;
  for (const EstimatorOptions& opt : options) {
    std::vector<SojournStats> stats;
    PopulationPriorBuilder builder;
    for (const StateSeries& h : hosts) {
      stats.push_back(CollectStats(h, spec, end, opt));
      builder.Add(stats.back());
    }
    const SojournStats built = builder.Build();
    // A prior that still holds borrowed windows (not from the builder).
    SojournStats unbuilt;
    for (const SojournStats& st : stats) unbuilt.Merge(st);
    unbuilt.borrow_hazard_ratio = 0.7;
    ASSERT_EQ(unbuilt.borrowed.empty(), !opt.level_corrected_borrowing);
    const std::vector<const SojournStats*> priors = {nullptr, &built, &unbuilt};
    for (const SojournStats* prior : priors) {
      for (SojournStats st : stats) {
        for (double theta : {1.0, 0.4, 2.5}) {
          st.prior_hazard_ratio = theta;
          double strength = 0;
          const SojournStats shrunk = ShrinkStats(st, opt, prior, &strength);
          for (HostState init : {HostState::kS1, HostState::kS2, HostState::kS3}) {
            for (int64_t age : {int64_t{-1}, int64_t{1800}, int64_t{8 * 3600}, int64_t{30 * 3600}}) {
              for (const FirstSojournRatio band : {FirstSojournRatio{}, FirstSojournRatio{1.6, 0.7}}) {
                const TrPrediction one = PredictFromStats(st, init, 8, opt, prior, age, band);
                const TrPrediction two =
                    PredictFromShrunk(shrunk, init, 8, opt, prior, strength, age, band);
                ASSERT_EQ(one.tr, two.tr) << "options " << (&opt - options.data());
                ASSERT_EQ(one.mttf_seconds, two.mttf_seconds);
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 8 * 3 * 5 * 3 * 3 * 4 * 2);
  const SojournStats s = CollectStats(only_first, spec, end, EstimatorOptions{});
  EXPECT_TRUE(s.ordinary[2].empty());
  EXPECT_FALSE(s.first[2].empty());

  // Where that fallback decides the curve: S1 moves to S2 after one step, and
  // S2, never seen as an ordinary sojourn, fails after two (its first
  // sojourns), so TR(3) from S1 is 0, not the 1 of an S2 that never leaves.
  SojournStats hand;
  hand.step_seconds = 300;
  hand.first[1].completed[{2, 1}] = 1;
  hand.first[2].completed[{3, 2}] = 1;
  hand.initial[1] = hand.initial[2] = 1;
  hand.num_windows = 2;
  double strength = 0;
  const EstimatorOptions opt;
  EXPECT_EQ(PredictFromStats(hand, HostState::kS1, 3, opt).tr,
            PredictFromShrunk(ShrinkStats(hand, opt, nullptr, &strength), HostState::kS1, 3, opt,
                              nullptr, strength, -1)
                .tr);
  EXPECT_EQ(PredictFromStats(hand, HostState::kS1, 3, opt).tr, (std::vector<double>{1, 1, 0}));
}

TEST(ExactAgeTest, StateAgesAndResidualLife) {
  const std::vector<HostState> st = {HostState::kS1, HostState::kS1, HostState::kS5,
                                     HostState::kS1, HostState::kS1, HostState::kS1};
  EXPECT_EQ(StateAges(st), (std::vector<int64_t>{-1, -1, 0, 0, 1, 2}));
  for (size_t k = 0; k < st.size(); ++k) {
    EXPECT_EQ(StateAges(st)[k], InitialAgeSteps(st, k, 100)) << k;
  }
  // Sojourns of state 1 last exactly 6 steps. Windows of 2 steps started at
  // ages 0..4: the first sojourn ends inside the window iff age >= 4.
  SojournStats stats;
  stats.step_seconds = 60;
  for (int age = 0; age <= 4; ++age) {
    std::vector<HostState> w;
    for (int k = 0; k <= 2; ++k) w.push_back(age + k < 6 ? HostState::kS1 : HostState::kS3);
    AccumulateWindow(w.data(), w.size(), 1.0, &stats, -1, age);
  }
  ASSERT_EQ(stats.first_by_exact_age[1].size(), 5u);
  EXPECT_EQ(stats.first_by_exact_age[1].at(4).completed.at({3, 2}), 1.0);
  EXPECT_EQ(stats.first_by_exact_age[1].at(0).censored.at(2), 1.0);
  EstimatorOptions opt = BasicEstimatorOptions();
  opt.exact_age_first_sojourn = true;
  opt.age_prior_windows = 0;
  // Age 1: total lengths 2, 3 are below 6 -> TR(2) = 1. Age 4: the sojourn
  // ends at 6 = 4 + 2 -> TR(1) = 1, TR(2) = 0. Age 3: ends at step 3.
  EXPECT_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 1 * 60).tr,
            (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 4 * 60).tr,
            (std::vector<double>{1.0, 0.0}));
  // Without the switch the age does not matter (no 2-class split either).
  opt.exact_age_first_sojourn = false;
  EXPECT_EQ(PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 1 * 60).tr,
            PredictFromStats(stats, HostState::kS1, 2, opt, nullptr, 4 * 60).tr);
}

}  // namespace
}  // namespace sojourn::availability
