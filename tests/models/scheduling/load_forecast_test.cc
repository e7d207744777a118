// The aggregated one-step-ahead load forecast (paper 000 section 8.4,
// footnote 1) on series whose answers are worked out by hand.
#include "models/scheduling/load_forecast.h"

#include "gtest/gtest.h"

namespace sojourn::scheduling {
namespace {

// n < 3: the mean. [0.1, 0.3, 0.5]: lag-1 covariance 0 -> phi 0 -> mean 0.3.
// [0.1, 0.1, 0.5, 0.5]: mu 0.3, deviations -.2 -.2 .2 .2, var 0.16, lag-1
// cov .04 - .04 + .04 = .04, phi 0.25 -> 0.3 + 0.25 * 0.2 = 0.35.
// Constant series: phi 0 (no variance) -> the value.
TEST(OneStepAheadTest, HandComputed) {
  EXPECT_FALSE(OneStepAhead({}).has_value());
  EXPECT_DOUBLE_EQ(*OneStepAhead({0.2, 0.4}), 0.3);
  EXPECT_NEAR(*OneStepAhead({0.1, 0.3, 0.5}), 0.3, 1e-12);
  EXPECT_NEAR(*OneStepAhead({0.1, 0.1, 0.5, 0.5}), 0.35, 1e-12);
  EXPECT_NEAR(*OneStepAhead({0.7, 0.7, 0.7}), 0.7, 1e-12);
}

// Samples every 600 s from 600 to 7200: load 0.1 up to 3600, 0.5 after.
// Horizon 1 h at t0 = 7200: blocks (0, 3600] -> 0.1 and (3600, 7200] -> 0.5,
// two blocks -> mean 0.3. Horizon 30 min: blocks of 1800 s, oldest first
// 0.1 (600..1800), 0.1, 0.5, 0.5 -> as above 0.35. Samples after t0 are ignored.
TEST(AggregatedLoadForecastTest, BlocksOfTheHorizon) {
  std::vector<HostSample> s;
  for (int64_t t = 600; t <= 9000; t += 600) {
    HostSample x;
    x.unix_seconds = t;
    x.cpu_load = t <= 3600 ? 0.1 : (t <= 7200 ? 0.5 : 1.0);
    s.push_back(x);
  }
  EXPECT_NEAR(*AggregatedLoadForecast(s, 7200, 3600), 0.3, 1e-12);
  EXPECT_NEAR(*AggregatedLoadForecast(s, 7200, 1800), 0.35, 1e-12);
  EXPECT_FALSE(AggregatedLoadForecast(s, 0, 3600).has_value());
  EXPECT_FALSE(AggregatedLoadForecast({}, 7200, 3600).has_value());
  LoadForecast f = LoadForecast::FromSamples(s, 7200, {1800, 3600});
  EXPECT_NEAR(f.At(1800), 0.35, 1e-12);
  EXPECT_NEAR(f.At(2700), 0.325, 1e-12);  // halfway between the horizons
  EXPECT_NEAR(f.At(10), 0.35, 1e-12);
  EXPECT_NEAR(f.At(1e6), 0.3, 1e-12);
}

TEST(LoadForecastTest, UnknownIsZero) {
  LoadForecast f;
  EXPECT_FALSE(f.known());
  EXPECT_DOUBLE_EQ(f.At(100), 0.0);
  EXPECT_DOUBLE_EQ(LoadForecast::Constant(1.7).At(5), 1.0);  // clamped
}

}  // namespace
}  // namespace sojourn::scheduling
