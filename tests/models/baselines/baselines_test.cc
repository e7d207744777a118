// Tests of the baseline predictors: the time-series fits recover the
// coefficients of simulated processes (seeded), the HTCondor and BOINC
// estimators follow their definitions.
#include "models/baselines/baselines.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "Eigen/Dense"
#include "gtest/gtest.h"

namespace sojourn::baselines {
namespace {

// x[t] = a1 x[t-1] + a2 x[t-2] + b1 e[t-1] + e[t], with a mean offset.
std::vector<double> Simulate(double a1, double a2, double b1, int n, uint64_t seed,
                             double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> x(n, 0.0);
  double e_prev = 0, x1 = 0, x2 = 0;
  for (int t = -200; t < n; ++t) {  // burn-in
    const double e = noise(rng);
    const double v = a1 * x1 + a2 * x2 + b1 * e_prev + e;
    x2 = x1;
    x1 = v;
    e_prev = e;
    if (t >= 0) x[t] = v + mean;
  }
  return x;
}

// Least squares recovers the coefficients of a stationary AR(2).
TEST(BaselinesTest, ArFitRecoversAr2Coefficients) {
  std::vector<double> x = Simulate(0.6, -0.3, 0.0, 20000, 42, 5.0);
  TsSpec spec;
  spec.kind = TsKind::kAr;
  spec.p = 8;
  TsModel m = FitTsModel(spec, x);
  ASSERT_EQ(m.p(), 8);
  EXPECT_NEAR(m.mean(), 5.0, 0.05);
  EXPECT_NEAR(m.ar()[0], 0.6, 0.03);
  EXPECT_NEAR(m.ar()[1], -0.3, 0.03);
  for (int i = 2; i < 8; ++i) EXPECT_NEAR(m.ar()[i], 0.0, 0.03) << i;
}

// Hannan-Rissanen recovers an MA(1) coefficient with an MA(8) model.
TEST(BaselinesTest, MaFitRecoversMa1Coefficient) {
  std::vector<double> x = Simulate(0.0, 0.0, 0.5, 20000, 7);
  TsSpec spec;
  spec.kind = TsKind::kMa;
  TsModel m = FitTsModel(spec, x);
  ASSERT_EQ(m.q(), 8);
  EXPECT_EQ(m.p(), 0);
  EXPECT_NEAR(m.ma()[0], 0.5, 0.05);
  for (int j = 1; j < 8; ++j) EXPECT_NEAR(m.ma()[j], 0.0, 0.05) << j;
}

// Hannan-Rissanen recovers ARMA(1,1).
TEST(BaselinesTest, ArmaFitRecoversArma11) {
  std::vector<double> x = Simulate(0.7, 0.0, 0.3, 20000, 11);
  TsSpec spec;
  spec.kind = TsKind::kArma;
  spec.p = 1;
  spec.q = 1;
  TsModel m = FitTsModel(spec, x);
  ASSERT_EQ(m.p(), 1);
  ASSERT_EQ(m.q(), 1);
  EXPECT_NEAR(m.ar()[0], 0.7, 0.05);
  EXPECT_NEAR(m.ma()[0], 0.3, 0.05);
}

// An AR(1) forecast decays geometrically towards the mean.
TEST(BaselinesTest, ArForecastDecaysToMean) {
  std::vector<double> x = Simulate(0.8, 0.0, 0.0, 20000, 3, 2.0);
  TsSpec spec;
  spec.kind = TsKind::kAr;
  spec.p = 1;
  TsModel m = FitTsModel(spec, x);
  m.Observe(12.0);  // far above the mean
  std::vector<double> f = m.Forecast(50);
  const double a = m.ar()[0];
  EXPECT_NEAR(f[0] - m.mean(), a * (12.0 - m.mean()), 1e-9);
  EXPECT_NEAR(f[1] - m.mean(), a * a * (12.0 - m.mean()), 1e-9);
  EXPECT_NEAR(f[49], m.mean(), 0.01);
}

// LAST repeats the last value; BM picks a window of 1 for a random walk and the
// largest window for white noise.
TEST(BaselinesTest, LastAndBmFollowTheirDefinitions) {
  std::vector<double> walk = Simulate(1.0, 0.0, 0.0, 5000, 5);
  TsSpec last;
  last.kind = TsKind::kLast;
  TsModel l = FitTsModel(last, walk);
  EXPECT_EQ(l.Forecast(3), std::vector<double>(3, walk.back()));
  TsSpec bm;
  bm.kind = TsKind::kBm;
  EXPECT_EQ(FitTsModel(bm, walk).bm_window(), 1);
  std::vector<double> white = Simulate(0.0, 0.0, 0.0, 5000, 6);
  TsModel b = FitTsModel(bm, white);
  EXPECT_EQ(b.bm_window(), 8);
  double mean8 = 0;
  for (int i = 0; i < 8; ++i) mean8 += white[white.size() - 1 - i] / 8;
  EXPECT_NEAR(b.Forecast(1)[0], mean8, 1e-12);
}

// A constant series (an always-up host) and a very short series give finite
// forecasts equal to the constant.
TEST(BaselinesTest, DegenerateSeriesGiveFiniteForecasts) {
  for (TsKind k : {TsKind::kLast, TsKind::kBm, TsKind::kAr, TsKind::kMa, TsKind::kArma}) {
    TsSpec spec;
    spec.kind = k;
    TsModel c = FitTsModel(spec, std::vector<double>(500, 0.25));
    for (double v : c.Forecast(20)) EXPECT_NEAR(v, 0.25, 1e-6) << TsKindName(k);
    TsModel s = FitTsModel(spec, {0.1, 0.9, 0.2});
    for (double v : s.Forecast(20)) EXPECT_TRUE(std::isfinite(v)) << TsKindName(k);
    EXPECT_LE(s.p() + s.q(), 1) << TsKindName(k);
  }
}

// The largest modulus of the inverse roots of 1 - sum_i a[i] z^(i+1): the
// companion matrix's spectral radius.
double SpectralRadius(const std::vector<double>& a) {
  const int p = static_cast<int>(a.size());
  if (p == 0) return 0;
  Eigen::MatrixXd c = Eigen::MatrixXd::Zero(p, p);
  for (int i = 0; i < p; ++i) c(0, i) = a[i];
  for (int i = 1; i < p; ++i) c(i, i - 1) = 1;
  return c.eigenvalues().cwiseAbs().maxCoeff();
}

// Same-clock availability series as the backtest builds them (days of 0/1
// levels concatenated, with runs of downtime) and short random walks: least
// squares gives some of them an AR part with a root on or inside the unit
// circle (checked below, so the test is not vacuous); the fitted AR and ARMA
// models never have one, and their forecasts do not grow exponentially.
TEST(BaselinesTest, FittedModelsAreStationary) {
  std::mt19937_64 rng(20261127);
  int raw_nonstationary = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> x;
    if (trial % 2 == 0) {
      std::uniform_int_distribution<int> days(1, 6), run(1, 60);
      std::bernoulli_distribution down(0.3);
      for (int d = days(rng); d > 0; --d) {
        int t = 0;
        while (t < 121) {
          const int len = std::min(121 - t, run(rng));
          x.insert(x.end(), len, down(rng) ? 1.0 : 0.0);
          t += len;
        }
      }
    } else {
      std::normal_distribution<double> step(0.0, 1.0);
      double v = 0;
      for (int t = 0; t < 121; ++t) x.push_back(v += step(rng));
    }
    double mean = 0;
    for (double v : x) mean += v / x.size();
    if (SpectralRadius(FitArCoefficients(x, mean, 8)) >= 1) ++raw_nonstationary;
    for (TsKind k : {TsKind::kAr, TsKind::kArma}) {
      TsSpec spec;
      spec.kind = k;
      const TsModel m = FitTsModel(spec, x);
      EXPECT_LT(SpectralRadius(m.ar()), 1) << TsKindName(k) << " trial " << trial;
      // A stationary model's forecast decays towards the mean, after at most
      // polynomial transient growth (k r^k for a double root of modulus r
      // near 1); an explosive one's grows exponentially (1.01^600 = 390):
      // the second 600 steps stay within 4 times the first's extent.
      const std::vector<double> f = m.Forecast(1200);
      double early = 0, late = 0;
      for (int i = 0; i < 1200; ++i) {
        double& extent = i < 600 ? early : late;
        extent = std::max(extent, std::abs(f[i] - m.mean()));
      }
      EXPECT_LE(late, 4 * early + 1e-9) << TsKindName(k) << " trial " << trial;
    }
  }
  EXPECT_GT(raw_nonstationary, 0);
}

TEST(BaselinesTest, ForecastSurvivalSteps) {
  EXPECT_EQ(ForecastSurvivalSteps({0.1, 0.5, 0.7, 0.2}, 0.6), 2);
  EXPECT_EQ(ForecastSurvivalSteps({0.1, 0.5}, 0.6), 2);
  EXPECT_EQ(ForecastSurvivalSteps({0.9}, 0.6), 0);
}

// HTCondor: survival of intervals longer than the current up-time.
TEST(BaselinesTest, AvailIntervalSurvivalIsConditionalEmpiricalSurvival) {
  AvailIntervalSurvival s({10, 2, 6, 4});
  EXPECT_DOUBLE_EQ(s.Tr(3, 2), 2.0 / 3.0);  // {4,6,10} > 3, {6,10} > 5
  EXPECT_DOUBLE_EQ(s.Tr(0, 1), 1.0);        // all > 1
  EXPECT_DOUBLE_EQ(s.Tr(0, 10), 0.0);
  EXPECT_DOUBLE_EQ(s.Tr(12, 1), 1.0);  // longest-ever run
}

// Runs touching either end of the series are censored and left out.
TEST(BaselinesTest, CompletedUpIntervals) {
  std::vector<bool> up = {1, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1};
  EXPECT_EQ(CompletedUpIntervals(up), (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(CompletedUpIntervals({1, 1, 1}).empty());
}

// BOINC on-fraction: exponential decay with a 10-day time constant.
TEST(BaselinesTest, OnFractionDecaysWithTenDayConstant) {
  OnFraction f;
  EXPECT_DOUBLE_EQ(f.value(), 1.0);
  for (int i = 0; i < 240; ++i) f.Observe(false, 3600);  // 10 days off
  EXPECT_NEAR(f.value(), std::exp(-1.0), 1e-9);
  OnFraction g;
  for (int i = 0; i < 100; ++i) g.Observe(true, 3600);
  EXPECT_DOUBLE_EQ(g.Tr(), 1.0);
}

// The live estimates at a point see only the points up to it: the run in
// progress is the up-time, not an interval.
TEST(BaselinesTest, DeployedEstimatesSeeOnlyThePast) {
  // Runs: 0-1 (touches the start, censored), 3-5 (3 steps), 7-10 (4 steps),
  // 12-15 (in progress at t = 13; completed only by t = 16).
  const std::vector<bool> up = {1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0};
  DeployedEstimates e = DeployedEstimatesAt(up, 13, 2, 300);
  EXPECT_EQ(e.completed_intervals, 2);
  EXPECT_EQ(e.up_steps, 1);
  // Longer than 1: both; longer than 1 + 2: only the 4-step one.
  EXPECT_DOUBLE_EQ(e.avail_time_tr, 0.5);
  OnFraction f;
  for (int i = 1; i <= 13; ++i) f.Observe(up[i], 300);
  EXPECT_NEAR(e.on_fraction, f.value(), 1e-12);
  EXPECT_LT(e.on_fraction, 1.0);
  // The run 12-15 counts once it has ended.
  EXPECT_EQ(DeployedEstimatesAt(up, 16, 2, 300).completed_intervals, 3);
  // Down at t: no survival, no up-time.
  e = DeployedEstimatesAt(up, 11, 2, 300);
  EXPECT_EQ(e.avail_time_tr, 0.0);
  EXPECT_EQ(e.up_steps, 0);
  // Up longer than every past interval: HTCondor's statistics say 1.
  EXPECT_DOUBLE_EQ(DeployedEstimatesAt(up, 10, 100, 300).avail_time_tr, 1.0);
  // Down for a day after t (a silent host): no up-time, and the day counts
  // as off time in the on-fraction.
  e = DeployedEstimatesAt(up, 13, 2, 300, 86400);
  EXPECT_EQ(e.avail_time_tr, 0.0);
  EXPECT_EQ(e.up_steps, 0);
  EXPECT_EQ(e.completed_intervals, 2);
  EXPECT_NEAR(e.on_fraction, f.value() * std::exp(-0.1), 1e-12);
  // Out of range: the defaults, not a crash.
  EXPECT_EQ(DeployedEstimatesAt(up, up.size(), 2, 300).completed_intervals, 0);
}

// The one-pass walk equals the pieces it stands for, on random grids: the
// completed intervals of the prefix (CompletedUpIntervals), their survival at
// the up-time of the run in progress, and one OnFraction step per point.
TEST(BaselinesTest, DeployedEstimatesEqualThePiecesOnRandomGrids) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 300;
    const double p_up = (rng() % 100) / 100.0;
    std::vector<bool> up(n);
    for (size_t i = 0; i < n; ++i) up[i] = std::uniform_real_distribution<double>()(rng) < p_up;
    const size_t t = rng() % n;
    const int64_t m = 1 + rng() % 40;
    const DeployedEstimates e = DeployedEstimatesAt(up, t, m, 60);
    const std::vector<bool> prefix(up.begin(), up.begin() + static_cast<std::ptrdiff_t>(t) + 1);
    const AvailIntervalSurvival s(CompletedUpIntervals(prefix));
    ASSERT_EQ(e.completed_intervals, static_cast<int64_t>(s.num_intervals())) << trial;
    int64_t u = 0;
    if (up[t]) {
      while (u < static_cast<int64_t>(t) && up[t - u - 1]) ++u;
    }
    ASSERT_EQ(e.up_steps, u) << trial;
    ASSERT_DOUBLE_EQ(e.avail_time_tr, up[t] ? s.Tr(u, m) : 0.0) << trial;
    OnFraction f;
    for (size_t i = 1; i <= t; ++i) f.Observe(up[i], 60);
    ASSERT_NEAR(e.on_fraction, f.value(), 1e-12) << trial;
  }
}

// The keeper of a growing series answers as DeployedEstimatesAt at its last
// point, whatever that point is (it may still change), after every point,
// on random series with runs of every length.
TEST(BaselinesTest, DeployedEstimatesKeeperIsTheWalkAtTheLastPoint) {
  std::mt19937 rng(27);
  int up_now = 0, with_intervals = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const double p_stay = (rng() % 100) / 100.0;
    DeployedEstimatesKeeper keeper(300);
    std::vector<bool> up;
    bool next = rng() % 2 == 0;
    for (int i = 0; i < 400; ++i) {
      for (bool last : {false, true}) {
        std::vector<bool> series = up;
        series.push_back(last);
        const int64_t m = 1 + rng() % 40;
        const double down_after = rng() % 5 == 0 ? 3600.0 : 0.0;
        const DeployedEstimates want =
            DeployedEstimatesAt(series, series.size() - 1, m, 300, down_after);
        const DeployedEstimates got = keeper.At(last, m, down_after);
        ASSERT_EQ(got.completed_intervals, want.completed_intervals) << trial << " " << i;
        ASSERT_EQ(got.up_steps, want.up_steps) << trial << " " << i;
        ASSERT_EQ(got.avail_time_tr, want.avail_time_tr) << trial << " " << i;
        ASSERT_EQ(got.on_fraction, want.on_fraction) << trial << " " << i;
        up_now += want.up_steps > 0;
        with_intervals += want.completed_intervals > 2;
      }
      if (std::uniform_real_distribution<double>()(rng) >= p_stay) next = !next;
      keeper.Add(next);
      up.push_back(next);
      ASSERT_EQ(keeper.size(), up.size());
    }
  }
  EXPECT_GT(up_now, 1000);
  EXPECT_GT(with_intervals, 1000);
}

}  // namespace
}  // namespace sojourn::baselines
