// Tests of the five-state classifier (paper 000 section 4, section 7.2).
#include "models/availability/state.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::availability {
namespace {

HostSample Sample(int64_t t, double load, double free_mb = std::numeric_limits<double>::quiet_NaN()) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = free_mb;
  return s;
}

class StateClassifierTest : public ::testing::Test {
 protected:
  ClassifierConfig config_;  // paper defaults: 0.2, 0.6, 60 s grace, 256 MB, 60 s gap
};

// Load below Th1 is S1, between Th1 and Th2 (inclusive) is S2.
TEST_F(StateClassifierTest, ThresholdsSplitS1AndS2) {
  StateClassifier c(config_);
  EXPECT_EQ(c.Add(Sample(0, 0.10)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(6, 0.20)), HostState::kS2);
  EXPECT_EQ(c.Add(Sample(12, 0.45)), HostState::kS2);
  EXPECT_EQ(c.Add(Sample(18, 0.60)), HostState::kS2);
  EXPECT_EQ(c.Add(Sample(24, 0.19)), HostState::kS1);
}

// Load above Th2 becomes S3 only after lasting more than the 60 s grace
// period; with 6 s samples the run starts at the last sample below Th2.
TEST_F(StateClassifierTest, HighLoadBecomesS3AfterGracePeriod) {
  StateClassifier c(config_);
  EXPECT_EQ(c.Add(Sample(0, 0.1)), HostState::kS1);
  for (int64_t t = 6; t <= 60; t += 6) {
    EXPECT_EQ(c.Add(Sample(t, 0.9)), HostState::kS1) << t;  // high for t <= 60 s
  }
  EXPECT_EQ(c.Add(Sample(66, 0.9)), HostState::kS3);  // 66 s > 60 s
  EXPECT_EQ(c.Add(Sample(72, 0.9)), HostState::kS3);
  EXPECT_EQ(c.Add(Sample(78, 0.3)), HostState::kS2);  // the classifier reports the present
}

// Spikes shorter than the grace period keep the state before the spike (S1
// or S2), as section 4 defines.
TEST_F(StateClassifierTest, ShortSpikesKeepPreviousState) {
  StateClassifier c(config_);
  c.Add(Sample(0, 0.4));
  for (int64_t t = 6; t <= 30; t += 6) EXPECT_EQ(c.Add(Sample(t, 0.95)), HostState::kS2);
  EXPECT_EQ(c.Add(Sample(36, 0.05)), HostState::kS1);
  for (int64_t t = 42; t <= 90; t += 6) EXPECT_EQ(c.Add(Sample(t, 0.95)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(96, 0.1)), HostState::kS1);
}

// With 300 s samples (a sample is the load of the preceding interval), one
// sample above Th2 already lasted 300 s > 60 s.
TEST_F(StateClassifierTest, CoarseSampleAboveTh2IsS3) {
  StateClassifier c(config_);
  ClassifierConfig coarse = config_;
  coarse.revocation_gap_seconds = 900;
  StateClassifier d(coarse);
  EXPECT_EQ(d.Add(Sample(0, 0.1)), HostState::kS1);
  EXPECT_EQ(d.Add(Sample(300, 0.7)), HostState::kS3);
  // The first sample ever has no known preceding interval: not yet S3.
  EXPECT_EQ(c.Add(Sample(0, 0.9)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(30, 0.9)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(61, 0.9)), HostState::kS3);
}

// Free memory below the working set is S4 (even over high CPU); unknown free
// memory never gives S4.
TEST_F(StateClassifierTest, LowFreeMemoryIsS4UnknownIsNot) {
  StateClassifier c(config_);
  EXPECT_EQ(c.Add(Sample(0, 0.1, 1000)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(6, 0.1, 255)), HostState::kS4);
  EXPECT_EQ(c.Add(Sample(12, 0.1, 256)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(18, 0.3)), HostState::kS2);  // NaN free memory
  ClassifierConfig big = config_;
  big.guest_working_set_mb = 1e9;
  StateClassifier d(big);
  EXPECT_EQ(d.Add(Sample(0, 0.1)), HostState::kS1);
  EXPECT_EQ(d.Add(Sample(6, 0.1, 5000)), HostState::kS4);
}

// After more than the revocation gap without a sample the host is S5 until
// samples resume; the load history before the gap is forgotten.
TEST_F(StateClassifierTest, GapGivesS5UntilSamplesResume) {
  StateClassifier c(config_);
  EXPECT_EQ(c.StateAt(0), HostState::kS5);  // nothing seen yet
  c.Add(Sample(0, 0.9));
  c.Add(Sample(50, 0.9));
  EXPECT_EQ(c.StateAt(110), HostState::kS1);  // exactly 60 s: not yet a gap
  EXPECT_EQ(c.StateAt(111), HostState::kS5);
  // Resumes high: the run restarts at the resumed sample, so no S3 yet.
  EXPECT_EQ(c.Add(Sample(500, 0.9)), HostState::kS1);
  EXPECT_EQ(c.Add(Sample(506, 0.5)), HostState::kS2);
  // Out-of-order samples are ignored.
  EXPECT_EQ(c.Add(Sample(400, 0.05)), HostState::kS2);
  EXPECT_EQ(c.current(), HostState::kS2);
}

// Grid classification: points aligned to the origin, each with the state
// after the samples at or before it, S5 inside gaps.
TEST_F(StateClassifierTest, ClassifyToGridAlignsAndMarksGaps) {
  const std::vector<HostSample> samples = {Sample(3, 0.1), Sample(13, 0.5), Sample(23, 0.1),
                                           Sample(200, 0.1), Sample(205, 0.3)};
  const StateSeries s = ClassifyToGrid(samples, config_, 10, 0);
  EXPECT_EQ(s.start_unix, 10);
  EXPECT_EQ(s.step_seconds, 10);
  ASSERT_EQ(s.states.size(), 20u);  // 10, 20, ..., 200
  EXPECT_EQ(s.states[0], HostState::kS1);
  EXPECT_EQ(s.states[1], HostState::kS2);
  EXPECT_EQ(s.states[2], HostState::kS1);
  for (int k = 3; k <= 7; ++k) EXPECT_EQ(s.states[k], HostState::kS1) << k;  // t <= 83
  for (int k = 8; k <= 18; ++k) EXPECT_EQ(s.states[k], HostState::kS5) << k;  // 90..190
  EXPECT_EQ(s.states[19], HostState::kS1);
  // A grid origin that is not a multiple of the step, and negative times.
  const StateSeries t = ClassifyToGrid({Sample(-7, 0.1), Sample(20, 0.3)}, config_, 10, 5);
  EXPECT_EQ(t.start_unix, -5);
  ASSERT_EQ(t.states.size(), 3u);  // -5, 5, 15
  EXPECT_EQ(t.states[2], HostState::kS1);
  EXPECT_TRUE(ClassifyToGrid({}, config_, 10, 0).states.empty());
  EXPECT_TRUE(ClassifyToGrid(samples, config_, 0, 0).states.empty());
}

}  // namespace
}  // namespace sojourn::availability
