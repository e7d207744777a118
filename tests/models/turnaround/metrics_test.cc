#include "models/turnaround/metrics.h"

#include <cmath>

#include "gtest/gtest.h"

namespace sojourn::turnaround {
namespace {

// Equation (13): (|12-10| + |15-20| + |30-30|) / (10+20+30) = 7/60.
TEST(MetricsTest, DvFollowsEquation13) {
  EXPECT_NEAR(DvPercent({12, 15, 30}, {10, 20, 30}), 100.0 * 7 / 60, 1e-12);
  EXPECT_DOUBLE_EQ(DvPercent({1, 2}, {1, 2}), 0);
  EXPECT_TRUE(std::isnan(DvPercent({}, {})));
  EXPECT_TRUE(std::isnan(DvPercent({1}, {0})));
  EXPECT_TRUE(std::isnan(DvPercent({1, 2}, {1})));
}

// A prediction that is any increasing linear function of the truth has
// R^2 = 1; adjusted R^2 of X = (1,2,3,4), Y = (1,3,2,4): r = 0.8, r^2 = 0.64,
// adjusted 1 - 0.36 * 3 / 2 = 0.46.
TEST(MetricsTest, AdjustedR2) {
  EXPECT_NEAR(AdjustedR2({3, 5, 7, 9}, {1, 2, 3, 4}), 1.0, 1e-12);
  EXPECT_NEAR(AdjustedR2({1, 3, 2, 4}, {1, 2, 3, 4}), 0.46, 1e-12);
  EXPECT_TRUE(std::isnan(AdjustedR2({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(AdjustedR2({1, 2}, {1, 2})));
}

// Coverage counts the truths inside [lo, hi], bounds included.
TEST(MetricsTest, Coverage) {
  EXPECT_DOUBLE_EQ(Coverage({0, 5, 1}, {10, 6, 2}, {10, 7, 1}), 2.0 / 3);
  MetricAccumulator acc;
  acc.Add(12, 0, 20, 10);
  acc.Add(15, 16, 30, 20);
  acc.Add(30, 30, 30, 30);
  MetricSummary s = acc.Summary();
  EXPECT_EQ(s.n, 3);
  EXPECT_NEAR(s.dv, 100.0 * 7 / 60, 1e-12);
  EXPECT_DOUBLE_EQ(s.coverage, 1.0);
}

}  // namespace
}  // namespace sojourn::turnaround
