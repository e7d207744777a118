// Tests of sojourn accumulation (completed, censored and first sojourns).
#include "models/availability/sojourn_stats.h"

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::availability {
namespace {

std::vector<HostState> W(std::vector<int> v) {
  std::vector<HostState> out;
  for (int s : v) out.push_back(static_cast<HostState>(s));
  return out;
}

void Add(const std::vector<int>& v, SojournStats* s, double weight = 1.0) {
  const auto w = W(v);
  AccumulateWindow(w.data(), w.size(), weight, s);
}

using Completed = CompletedTable;
using Censored = CountByLength;

// 1 1 2 2 2 1 3 3: first S1 sojourn -> 2 after 2 steps, an S2 sojourn -> 1
// after 3, an S1 sojourn -> 3 after 1; nothing after the failure.
TEST(AccumulateWindowTest, SplitsFirstAndOrdinarySojourns) {
  SojournStats s;
  Add({1, 1, 2, 2, 2, 1, 3, 3}, &s);
  EXPECT_EQ(s.num_windows, 1);
  EXPECT_EQ(s.window_steps, 7);
  EXPECT_EQ(s.initial[1], 1.0);
  EXPECT_EQ(s.first[1].completed, (Completed{{{2, 2}, 1.0}}));
  EXPECT_TRUE(s.first[1].censored.empty());
  EXPECT_EQ(s.ordinary[2].completed, (Completed{{{1, 3}, 1.0}}));
  EXPECT_EQ(s.ordinary[1].completed, (Completed{{{3, 1}, 1.0}}));
  EXPECT_TRUE(s.ordinary[1].censored.empty());
  EXPECT_TRUE(s.ordinary[3].empty());
}

// A sojourn still running at the window end is censored at (n-1) - entry.
TEST(AccumulateWindowTest, CensorsUnfinishedSojourns) {
  SojournStats s;
  Add({2, 2, 1, 1, 1}, &s);
  EXPECT_EQ(s.first[2].completed, (Completed{{{1, 2}, 1.0}}));
  EXPECT_EQ(s.ordinary[1].censored, (Censored{{2, 1.0}}));
  Add({1, 1, 1}, &s);
  EXPECT_EQ(s.first[1].censored, (Censored{{2, 1.0}}));
  Add({2, 1}, &s);  // entered at the last point: censored at 0
  EXPECT_EQ(s.ordinary[1].censored, (Censored{{0, 1.0}, {2, 1.0}}));
  EXPECT_EQ(s.num_windows, 3);
  EXPECT_EQ(s.initial[1], 1.0);
  EXPECT_EQ(s.initial[2], 2.0);
}

// A window starting in a failure state only counts its initial state.
TEST(AccumulateWindowTest, FailureAtStartRecordsOnlyInitialState) {
  SojournStats s;
  Add({5, 1, 1, 2}, &s);
  EXPECT_EQ(s.initial[5], 1.0);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_TRUE(s.first[i].empty());
    EXPECT_TRUE(s.ordinary[i].empty());
  }
}

// Weights scale every count; Merge adds statistics.
TEST(AccumulateWindowTest, WeightsAndMerge) {
  SojournStats a, b, both;
  Add({1, 2, 2, 4}, &a, 0.5);
  Add({2, 2, 1}, &b);
  Add({1, 2, 2, 4}, &both, 0.5);
  Add({2, 2, 1}, &both);
  EXPECT_EQ(a.first[1].completed, (Completed{{{2, 1}, 0.5}}));
  EXPECT_EQ(a.ordinary[2].completed, (Completed{{{4, 2}, 0.5}}));
  EXPECT_DOUBLE_EQ(a.total_weight, 0.5);
  SojournStats merged = a;
  merged.Merge(b);
  EXPECT_TRUE(merged == both);
  EXPECT_DOUBLE_EQ(merged.first[2].total_completed(), 1.0);
  EXPECT_DOUBLE_EQ(merged.ordinary[1].total_censored(), 1.0);
}

// Age of the initial state: equal points before the index, capped; -1 when
// the series begins inside the run before reaching the cap.
TEST(InitialAgeStepsTest, CountsEqualPointsBefore) {
  const auto w = W({1, 1, 2, 2, 2, 1});
  EXPECT_EQ(InitialAgeSteps(w, 4, 10), 2);
  EXPECT_EQ(InitialAgeSteps(w, 4, 1), 1);
  EXPECT_EQ(InitialAgeSteps(w, 5, 10), 0);
  EXPECT_EQ(InitialAgeSteps(w, 1, 10), -1);
  EXPECT_EQ(InitialAgeSteps(w, 1, 1), 1);
  EXPECT_EQ(InitialAgeSteps(w, 0, 3), -1);
  EXPECT_EQ(InitialAgeSteps(w, 0, 0), 0);
}

// Age buckets file the first sojourn a second time; unknown age does not.
TEST(AccumulateWindowTest, AgeBuckets) {
  SojournStats s;
  const auto a = W({1, 1, 2, 2});
  AccumulateWindow(a.data(), a.size(), 1.0, &s, 1);
  AccumulateWindow(a.data(), a.size(), 2.0, &s, 0);
  AccumulateWindow(a.data(), a.size(), 4.0, &s, -1);
  EXPECT_EQ(s.first[1].completed, (Completed{{{2, 2}, 7.0}}));
  EXPECT_EQ(s.first_by_age[1][1].completed, (Completed{{{2, 2}, 1.0}}));
  EXPECT_EQ(s.first_by_age[0][1].completed, (Completed{{{2, 2}, 2.0}}));
  EXPECT_DOUBLE_EQ(s.initial_by_age[1][1], 1.0);
  EXPECT_DOUBLE_EQ(s.initial_by_age[0][1], 2.0);
  EXPECT_TRUE(s.first_by_age[0][2].empty());  // ordinary sojourns are not filed
}

// AddSorted's hinted insertions give what adding entry by entry gives: keys
// interleaved with, equal to, before and after the destination's, into empty
// and non-empty tables, scaled and not.
TEST(AddSortedTest, EqualsAddingEachEntry) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> to(1, 5), len(0, 60), size(0, 40);
  std::uniform_real_distribution<double> count(0.0, 3.0);
  for (int round = 0; round < 300; ++round) {
    CompletedTable src, dst;
    CountByLength src_c, dst_c;
    for (int k = size(rng); k > 0; --k) src[{to(rng), len(rng)}] = count(rng);
    for (int k = size(rng); k > 0; --k) dst[{to(rng), len(rng)}] = count(rng);
    for (int k = size(rng); k > 0; --k) src_c[len(rng)] = count(rng);
    for (int k = size(rng); k > 0; --k) dst_c[len(rng)] = count(rng);
    const double scale = round % 3 == 0 ? 1.0 : count(rng);
    std::map<std::pair<int, int>, double> want(dst.begin(), dst.end());
    std::map<int, double> want_c(dst_c.begin(), dst_c.end());
    for (const auto& [key, c] : src) want[key] += scale * c;
    for (const auto& [key, c] : src_c) want_c[key] += scale * c;
    AddSorted(src, scale, &dst);
    AddSorted(src_c, scale, &dst_c);
    const std::map<std::pair<int, int>, double> got(dst.begin(), dst.end());
    const std::map<int, double> got_c(dst_c.begin(), dst_c.end());
    EXPECT_EQ(got, want) << round;
    EXPECT_EQ(got_c, want_c) << round;
  }
  // A sorted vector of pairs is a source too.
  CountByLength dst{{2, 1.0}, {5, 1.0}};
  const std::vector<std::pair<int, double>> v = {{1, 1.0}, {2, 2.0}, {3, 3.0}, {9, 9.0}};
  AddSorted(v, 0.5, &dst);
  EXPECT_EQ(dst, (CountByLength{{1, 0.5}, {2, 2.0}, {3, 1.5}, {5, 1.0}, {9, 4.5}}));
}

}  // namespace
}  // namespace sojourn::availability
