// Tests of the five-state classifier (paper 000 section 4, section 7.2).
#include "models/availability/state.h"

#include <cmath>
#include <limits>
#include <random>
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

// The grid point by point, as ClassifyToGrid was written before GridBuilder:
// a reference that knows nothing of batches.
StateSeries ReferenceGrid(const std::vector<HostSample>& samples, const ClassifierConfig& cfg,
                          int64_t step, int64_t origin) {
  StateSeries out;
  out.step_seconds = step;
  if (samples.empty()) return out;
  auto floor_div = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  const int64_t k0 = -floor_div(origin - samples.front().unix_seconds, step);
  const int64_t k1 = floor_div(samples.back().unix_seconds - origin, step);
  out.start_unix = origin + k0 * step;
  StateClassifier classifier(cfg);
  size_t next = 0;
  double last_load = 0;
  for (int64_t k = k0; k <= k1; ++k) {
    const int64_t t = origin + k * step;
    while (next < samples.size() && samples[next].unix_seconds <= t) {
      if (samples[next].unix_seconds >= classifier.last_sample_unix().value_or(INT64_MIN)) {
        last_load = samples[next].cpu_load;
      }
      classifier.Add(samples[next]);
      ++next;
    }
    const HostState st = classifier.StateAt(t);
    out.states.push_back(st);
    out.load_band.push_back(LoadBandOf(st, last_load, cfg));
  }
  return out;
}

// Random series: loads around both thresholds, low memory now and then,
// steps from 0 (a repeated time) to past the revocation gap, the odd sample
// out of order.
std::vector<HostSample> RandomSamples(std::mt19937_64& rng, int n) {
  std::vector<HostSample> v;
  int64_t t = static_cast<int64_t>(rng() % 1000) - 500;
  for (int i = 0; i < n; ++i) {
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      t += 0;
    } else if (kind == 1) {
      t += 61 + static_cast<int64_t>(rng() % 400);
    } else {
      t += 1 + static_cast<int64_t>(rng() % 30);
    }
    const double load = static_cast<double>(rng() % 1000) / 1000.0;
    const double mem = rng() % 15 == 0 ? 100.0 : 4000.0;
    HostSample s = Sample(t, load, mem);
    // Out of order (ignored); not the last sample, whose time ends the grid.
    if (i + 1 < n && rng() % 50 == 0) s.unix_seconds -= 40;
    v.push_back(s);
  }
  return v;
}

void ExpectSameGrid(const StateSeries& got, const StateSeries& want, const std::string& what) {
  EXPECT_EQ(got.start_unix, want.start_unix) << what;
  EXPECT_EQ(got.step_seconds, want.step_seconds) << what;
  EXPECT_EQ(got.states, want.states) << what;
  EXPECT_EQ(got.load_band, want.load_band) << what;
}

// The state manager's grid grows sample by sample (GridBuilder); fed in any
// batches it is the grid of the whole series, and so is ClassifyToGrid's.
TEST_F(StateClassifierTest, GridBuilderInAnyBatchesIsTheWholeSeriesGrid) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<HostSample> v = RandomSamples(rng, 1 + static_cast<int>(rng() % 300));
    const int64_t step = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t origin = static_cast<int64_t>(rng() % 100) - 50;
    const StateSeries want = ReferenceGrid(v, config_, step, origin);
    const std::string what = "trial " + std::to_string(trial);
    ExpectSameGrid(ClassifyToGrid(v, config_, step, origin), want, what);
    GridBuilder b(config_, step, origin);
    std::vector<std::shared_ptr<const StateSeries>> snapshots;
    std::vector<StateSeries> copies;
    for (size_t i = 0; i < v.size(); ++i) {
      b.Add(v[i]);
      if (rng() % 10 == 0) {
        // A snapshot held while samples keep coming never changes.
        snapshots.push_back(b.Snapshot());
        copies.push_back(*snapshots.back());
      }
    }
    ExpectSameGrid(*b.Snapshot(), want, what);
    for (size_t i = 0; i < snapshots.size(); ++i) ExpectSameGrid(*snapshots[i], copies[i], what);
  }
}

// A bounded builder keeps the last max_points points (and at most an eighth
// more), equal to the unbounded grid's, and starts anew after a gap longer
// than the whole bound instead of filling it with S5.
TEST_F(StateClassifierTest, BoundedGridBuilderKeepsTheNewestPoints) {
  std::mt19937_64 rng(9);
  const std::vector<HostSample> v = RandomSamples(rng, 3000);
  GridBuilder bounded(config_, 7, 0, 100);
  GridBuilder whole(config_, 7, 0);
  for (const HostSample& s : v) {
    bounded.Add(s);
    whole.Add(s);
    const StateSeries& b = *bounded.Snapshot();
    const StateSeries& w = *whole.Snapshot();
    ASSERT_LE(b.states.size(), 112u);
    ASSERT_GE(b.states.size(), std::min<size_t>(100, w.states.size()));
    const size_t skip = w.states.size() - b.states.size();
    ASSERT_EQ(b.start_unix, w.start_unix + static_cast<int64_t>(skip) * 7);
    ASSERT_TRUE(std::equal(b.states.begin(), b.states.end(), w.states.begin() + skip));
    ASSERT_TRUE(std::equal(b.load_band.begin(), b.load_band.end(), w.load_band.begin() + skip));
  }
  // 1,000 steps of silence, then samples again: a new grid from the sample.
  const int64_t t = v.back().unix_seconds + 7000;
  bounded.Add(Sample(t, 0.1));
  bounded.Add(Sample(t + 7, 0.1));
  const StateSeries& b = *bounded.Snapshot();
  EXPECT_EQ(b.start_unix, (t + 6) / 7 * 7);
  EXPECT_LE(b.states.size(), 2u);
  for (HostState st : b.states) EXPECT_EQ(st, HostState::kS1);
}

// The start of the grid's last run (what the state manager reports as the
// state's start) is kept as points come: after every sample it equals a walk
// back over the grid, through redone points (samples at a grid point's own
// time), spikes, revocation gaps, trimming and restarts of a bounded grid.
TEST_F(StateClassifierTest, GridBuilderKeepsTheStartOfTheLastRun) {
  std::mt19937_64 rng(17);
  int redone_changes = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t step = 1 + static_cast<int64_t>(rng() % 20);
    const int64_t max_points = trial % 3 == 0 ? 0 : 5 + static_cast<int64_t>(rng() % 40);
    const int64_t origin = static_cast<int64_t>(rng() % 100) - 50;
    GridBuilder b(config_, step, origin, max_points);
    EXPECT_EQ(b.run_start_unix(), 0);
    int64_t t = static_cast<int64_t>(rng() % 1000) - 500;
    double load = 0.1;
    for (int i = 0; i < 400; ++i) {
      const int kind = static_cast<int>(rng() % 20);
      // Often at a grid point's own time, often again at the same time.
      if (kind < 4) {
        t += 0;
      } else if (kind == 4) {
        t += 61 + static_cast<int64_t>(rng() % (max_points > 0 ? 100 * step : 400));
      } else if (kind < 10) {
        // The next grid point (origin + k step).
        t = origin + ((t - origin) / step + 1) * step;
      } else {
        t += 1 + static_cast<int64_t>(rng() % 30);
      }
      // Loads stay a while, so runs are long.
      if (rng() % 4 == 0) load = static_cast<double>(rng() % 1000) / 1000.0;
      const std::shared_ptr<const StateSeries> before = b.Snapshot();
      b.Add(Sample(t, load, rng() % 30 == 0 ? 100.0 : 4000.0));
      const StateSeries& g = *b.Snapshot();
      if (g.states.empty()) {
        EXPECT_EQ(b.run_start_unix(), 0);
        continue;
      }
      if (before->states.size() == g.states.size() && before->start_unix == g.start_unix &&
          before->states.back() != g.states.back()) {
        ++redone_changes;
      }
      size_t k = g.states.size() - 1;
      while (k > 0 && g.states[k - 1] == g.states.back()) --k;
      ASSERT_EQ(b.run_start_unix(), g.start_unix + static_cast<int64_t>(k) * step)
          << "trial " << trial << " sample " << i << " t " << t;
    }
  }
  EXPECT_GT(redone_changes, 50);  // the redo paths were taken
}

}  // namespace
}  // namespace sojourn::availability
