// Tests of the load-band conditioning of the first sojourn (load_band.h): the
// band of a sample, the band series of ClassifyToGrid, the standardised exits
// by band of a state series (against counts done by hand), the cause-specific
// hazard scaling, and its effect on the TR curve.
#include "models/availability/load_band.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "models/availability/frailty.h"
#include "models/availability/predict.h"

namespace sojourn::availability {
namespace {

using S = HostState;

TEST(LoadBandOfTest, HalvesOfTheStatesRange) {
  const ClassifierConfig cfg;  // Th1 0.2, Th2 0.6
  EXPECT_EQ(LoadBandOf(S::kS1, 0.0, cfg), 0);
  EXPECT_EQ(LoadBandOf(S::kS1, 0.099, cfg), 0);
  EXPECT_EQ(LoadBandOf(S::kS1, 0.1, cfg), 1);
  EXPECT_EQ(LoadBandOf(S::kS1, 0.19, cfg), 1);
  EXPECT_EQ(LoadBandOf(S::kS2, 0.2, cfg), 0);
  EXPECT_EQ(LoadBandOf(S::kS2, 0.39, cfg), 0);
  EXPECT_EQ(LoadBandOf(S::kS2, 0.4, cfg), 1);
  // A transient spike above Th2 kept in S1/S2 by the grace period.
  EXPECT_EQ(LoadBandOf(S::kS1, 0.9, cfg), 1);
  EXPECT_EQ(LoadBandOf(S::kS3, 0.05, cfg), kLoadBandUnknown);
  EXPECT_EQ(LoadBandOf(S::kS5, 0.05, cfg), kLoadBandUnknown);
  EXPECT_EQ(LoadBandOf(S::kS1, std::numeric_limits<double>::quiet_NaN(), cfg), kLoadBandUnknown);
}

TEST(LoadBandOfTest, ClassifyToGridKeepsTheLastSamplesBand) {
  ClassifierConfig cfg;
  cfg.revocation_gap_seconds = 900;
  std::vector<HostSample> samples;
  for (double load : {0.05, 0.15, 0.3, 0.5, 0.05}) {
    HostSample s;
    s.unix_seconds = static_cast<int64_t>(samples.size()) * 300;
    s.cpu_load = load;
    samples.push_back(s);
  }
  // A gap past the revocation gap, then one more sample.
  HostSample late;
  late.unix_seconds = 3000;
  late.cpu_load = 0.15;
  samples.push_back(late);
  const StateSeries series = ClassifyToGrid(samples, cfg, 300, 0);
  ASSERT_EQ(series.states.size(), 11u);
  ASSERT_EQ(series.load_band.size(), series.states.size());
  // 1500..2100: the 1200 sample within the gap; 2400, 2700: S5.
  const std::vector<uint8_t> want = {0, 1, 0, 1, 0, 0, 0, 0, kLoadBandUnknown, kLoadBandUnknown, 1};
  EXPECT_EQ(series.load_band, want);
  EXPECT_EQ(series.states[7], S::kS1);
  EXPECT_EQ(series.states[8], S::kS5);
}

// A weekday-only series on a 1-hour grid starting 1970-01-05 00:00 (a
// Monday), UTC: the exits by band are checked against counts by hand.
StateSeries MondaySeries(const std::vector<S>& states, const std::vector<uint8_t>& bands) {
  StateSeries s;
  s.start_unix = 4 * 86400;
  s.step_seconds = 3600;
  s.states = states;
  s.load_band = bands;
  return s;
}

TEST(CountBandExposureTest, ObservedAndExpectedByHand) {
  // Hours 0..5 (one stratum per hour, no age strata): S1 low, S1 high, S3,
  // S1 low, S1 low, S1 low.
  const StateSeries series = MondaySeries({S::kS1, S::kS1, S::kS3, S::kS1, S::kS1, S::kS1},
                                          {0, 1, kLoadBandUnknown, 0, 0, 0});
  // Cap 2 steps, history to the last point: starts t = 0..3.
  const BandExposure e = CountBandExposure(series, series.start_unix + 5 * 3600, 0, 2, 0, 0);
  // Every start is its own stratum (hours differ), so E = O: each band is
  // compared only with its own stratum.
  const int s1 = 0, fail = 1, other = 0;
  EXPECT_DOUBLE_EQ(e.observed[0][s1][1][fail], 1);  // t = 1 fails at t = 2
  EXPECT_DOUBLE_EQ(e.expected[0][s1][1][fail], 1);
  EXPECT_DOUBLE_EQ(e.observed[0][s1][0][fail], 1);  // t = 0 fails at t = 2 (2 steps)
  EXPECT_DOUBLE_EQ(e.expected[0][s1][0][fail], 1);
  EXPECT_DOUBLE_EQ(e.observed[0][s1][0][other], 0);
  EXPECT_DOUBLE_EQ(e.observed[1][s1][0][fail], 0);  // no weekend
  EXPECT_DOUBLE_EQ(e.Ratio(0, s1, 1, fail), 1.0);
  // A start in a failure state or of unknown band counts for nothing.
  EXPECT_DOUBLE_EQ(e.observed[0][1][0][fail] + e.observed[0][1][1][fail], 0);
}

TEST(CountBandExposureTest, BandsOfOneStratumAreComparedWithEachOther) {
  // Ten days, each: 09:00 in S1. On odd days the load is high at 09:00 and
  // the host fails at 10:00; on even days it is low and stays up.
  std::vector<S> states;
  std::vector<uint8_t> bands;
  for (int d = 0; d < 10; ++d) {
    for (int h = 0; h < 24; ++h) {
      const bool odd = d % 2 == 1;
      S st = S::kS1;
      if (odd && h == 10) st = S::kS3;
      states.push_back(st);
      bands.push_back(st == S::kS3 ? kLoadBandUnknown : (odd && h == 9) ? 1 : 0);
    }
  }
  StateSeries series = MondaySeries(states, bands);
  series.start_unix = 4 * 86400;  // Monday; days 5, 6 are a weekend
  const int64_t end = series.start_unix + static_cast<int64_t>(states.size() - 1) * 3600;
  const BandExposure e = CountBandExposure(series, end, 0, 1, 0, 0);
  // Weekday 09:00 stratum: odd weekdays (1, 3, 7, 9) are high and fail after
  // 1 step; even weekdays (0, 2, 4, 8) are low and do not (censored at 1).
  // Rate = 4 / 8 per step; E_high = 4 * 0.5 = 2, E_low = 2; O_high = 4.
  // Other hours' starts that reach the 10:00 failure: 08:00 is not followed
  // for 2 steps (cap 1). The 09:00 starts are the only failures.
  EXPECT_DOUBLE_EQ(e.observed[0][0][1][1], 4);
  EXPECT_DOUBLE_EQ(e.expected[0][0][1][1], 2);
  EXPECT_DOUBLE_EQ(e.observed[0][0][0][1], 0);
  EXPECT_DOUBLE_EQ(e.expected[0][0][0][1], 2);
  EXPECT_DOUBLE_EQ(e.Ratio(0, 0, 1, 1), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(e.Ratio(0, 0, 0, 1), 1.0 / 3.0);
  // Within a day type and state, sum of O = sum of E (indirect standardisation).
  for (int dt = 0; dt < 2; ++dt) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_NEAR(e.observed[dt][0][0][c] + e.observed[dt][0][1][c],
                  e.expected[dt][0][0][c] + e.expected[dt][0][1][c], 1e-9);
    }
  }
  const FirstSojournRatio high = e.RatioOf(0, S::kS1, 1);
  EXPECT_DOUBLE_EQ(high.failure, 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(high.other, 1.0);
  EXPECT_EQ(e.RatioOf(0, S::kS3, 1), FirstSojournRatio{});
  EXPECT_EQ(e.RatioOf(0, S::kS1, kLoadBandUnknown), FirstSojournRatio{});
  // Merging doubles the counts.
  BandExposure twice = e;
  twice.Merge(e);
  EXPECT_DOUBLE_EQ(twice.observed[0][0][1][1], 8);
  // Without a band series there is nothing to count.
  series.load_band.clear();
  const BandExposure none = CountBandExposure(series, end, 0, 1, 0, 0);
  EXPECT_DOUBLE_EQ(none.observed[0][0][1][1] + none.expected[0][0][1][1], 0);
}

TEST(ScaleCauseHazardsTest, ScalesBothCauses) {
  StateSojourns s;
  s.completed[{3, 1}] = 1;  // failure hazard 0.1
  s.completed[{2, 1}] = 2;  // other-up hazard 0.2
  s.censored[1] = 7;        // censoring 0.7
  const StateSojourns out = ScaleCauseHazards(s, 2.0, 0.5);
  EXPECT_DOUBLE_EQ(out.completed.at({3, 1}), 2);
  EXPECT_DOUBLE_EQ(out.completed.at({2, 1}), 1);
  EXPECT_DOUBLE_EQ(out.censored.at(1), 7);
  // theta_other = 1 is ScaleFailureHazards.
  const StateSojourns a = ScaleCauseHazards(s, 1.5, 1.0), b = ScaleFailureHazards(s, 1.5);
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.censored, b.censored);
  // Capped: the failures get only the room left by the others and censoring.
  const StateSojourns capped = ScaleCauseHazards(s, 10.0, 1.0);
  EXPECT_NEAR(capped.completed.at({3, 1}), 1.0, 1e-12);
}

TEST(PredictWithBandTest, RatiosMoveTheCurve) {
  // Windows of 6 steps: the host sits in S1 and sometimes fails.
  SojournStats stats;
  stats.step_seconds = 300;
  const std::vector<std::vector<S>> windows = {
      {S::kS1, S::kS1, S::kS1, S::kS1, S::kS1, S::kS1, S::kS1},
      {S::kS1, S::kS1, S::kS3, S::kS3, S::kS3, S::kS3, S::kS3},
      {S::kS1, S::kS2, S::kS2, S::kS1, S::kS1, S::kS1, S::kS1},
      {S::kS1, S::kS1, S::kS1, S::kS1, S::kS2, S::kS3, S::kS3}};
  for (const auto& w : windows) AccumulateWindow(w.data(), w.size(), &stats);
  EstimatorOptions opt;
  opt.recent_age_seconds = 0;
  ASSERT_TRUE(opt.load_band_first_sojourn);
  const double base = PredictFromStats(stats, S::kS1, 6, opt).tr.back();
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, S::kS1, 6, opt, nullptr, -1, {}).tr.back(), base);
  const double worse = PredictFromStats(stats, S::kS1, 6, opt, nullptr, -1, {2.0, 1.0}).tr.back();
  const double better = PredictFromStats(stats, S::kS1, 6, opt, nullptr, -1, {0.5, 1.0}).tr.back();
  EXPECT_LT(worse, base - 1e-3);
  EXPECT_GT(better, base + 1e-3);
  // Switched off, the ratios are ignored.
  opt.load_band_first_sojourn = false;
  EXPECT_DOUBLE_EQ(PredictFromStats(stats, S::kS1, 6, opt, nullptr, -1, {2.0, 1.0}).tr.back(),
                   base);
}

}  // namespace
}  // namespace sojourn::availability
