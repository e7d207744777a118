// Tests of the kernel estimators: paper-literal transition counting vs the
// censoring-aware hazard estimate, and the first-sojourn kernel, on crafted
// windows with hand-derived expectations.
#include "models/availability/kernel.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/availability/predict.h"
#include "models/availability/tr.h"

namespace sojourn::availability {
namespace {

void Add(const std::vector<int>& v, SojournStats* s) {
  std::vector<HostState> w;
  for (int x : v) w.push_back(static_cast<HostState>(x));
  AccumulateWindow(w.data(), w.size(), s);
}

// Windows of 3 steps:
//   A 1 1 1 3   S1 (first) -> 3 after 3
//   B 1 1 1 1   S1 (first) censored at 3
//   C 1 2 2 2   S1 (first) -> 2 after 1, S2 censored at 2
//   D 2 1 1 1   S2 (first) -> 1 after 1, S1 censored at 2
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stats_.step_seconds = 6;
    Add({1, 1, 1, 3}, &stats_);
    Add({1, 1, 1, 1}, &stats_);
    Add({1, 2, 2, 2}, &stats_);
    Add({2, 1, 1, 1}, &stats_);
  }
  SojournStats stats_;
};

// Paper: K_ij(l) = n_ij(l) / n_i over completed sojourns (first ones pooled).
// S1: completed {->3 at 3, ->2 at 1} -> 1/2 each; S2: {->1 at 1} -> 1.
TEST_F(KernelTest, PaperLiteralCountsCompletedSojournsOnly) {
  EstimatorOptions opt{false, false};
  const SemiMarkovKernel k = EstimateKernel(stats_, opt);
  EXPECT_EQ(k.step_seconds, 6);
  EXPECT_DOUBLE_EQ(k.At(1, 3, 3), 0.5);
  EXPECT_DOUBLE_EQ(k.At(1, 2, 1), 0.5);
  EXPECT_DOUBLE_EQ(k.RowSum(1), 1.0);
  EXPECT_DOUBLE_EQ(k.At(2, 1, 1), 1.0);
  EXPECT_DOUBLE_EQ(k.Q(2, 1), 1.0);
  EXPECT_TRUE(k.first_rows.empty());
  // TR from S1: only the direct 1 -> 3 after 3 steps fails within 3 steps.
  const auto tr = TrCurveDirect(k, HostState::kS1, 3);
  EXPECT_DOUBLE_EQ(tr[0], 1.0);
  EXPECT_DOUBLE_EQ(tr[1], 1.0);
  EXPECT_DOUBLE_EQ(tr[2], 0.5);
}

// Censoring-aware, pooled first sojourns. S1 sojourns: completed 3(->3),
// 1(->2); censored 3, 2. R(1)=4, h_2(1)=1/4, S(1)=3/4; R(2)=3, S(2)=3/4;
// R(3)=2, h_3(3)=1/2 -> K_13(3) = 3/8. S2: completed 1(->1), censored 2:
// K_21(1) = 1/2.
TEST_F(KernelTest, CensoringAwareUsesCensoredSojourns) {
  EstimatorOptions opt{true, false};
  const SemiMarkovKernel k = EstimateKernel(stats_, opt);
  EXPECT_DOUBLE_EQ(k.At(1, 2, 1), 0.25);
  EXPECT_DOUBLE_EQ(k.At(1, 3, 3), 0.375);
  EXPECT_DOUBLE_EQ(k.At(1, 3, 2), 0.0);
  EXPECT_DOUBLE_EQ(k.RowSum(1), 0.625);
  EXPECT_DOUBLE_EQ(k.At(2, 1, 1), 0.5);
  EXPECT_DOUBLE_EQ(k.RowSum(2), 0.5);
  const auto tr = TrCurveDirect(k, HostState::kS1, 3);
  EXPECT_DOUBLE_EQ(tr[2], 1.0 - 0.375);
}

// First-sojourn kernel (censoring-aware): S1 first sojourns A, B, C give
// G_12(1) = 1/3 and G_13(3) = (2/3)(1/2) = 1/3; S2's first sojourn (D) gives
// G_21(1) = 1. The ordinary rows only have censored sojourns (S1 from D at 2,
// S2 from C at 2), so no transition is estimated there.
TEST_F(KernelTest, FirstSojournKernelSeparatesWindowStarts) {
  EstimatorOptions opt{true, true};
  const SemiMarkovKernel k = EstimateKernel(stats_, opt);
  ASSERT_EQ(k.first_rows.count(1), 1u);
  ASSERT_EQ(k.first_rows.count(2), 1u);
  EXPECT_DOUBLE_EQ(k.first_rows.at(1).at(2)[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(k.first_rows.at(1).at(3)[2], 1.0 / 3);
  EXPECT_DOUBLE_EQ(k.first_rows.at(2).at(1)[0], 1.0);
  EXPECT_EQ(k.rows.count(1), 0u);
  EXPECT_EQ(k.rows.count(2), 0u);
  // From S1: 1/3 fails at step 3; 1/3 moves to S2, which then never leaves.
  const auto tr = TrCurveDirect(k, HostState::kS1, 3);
  EXPECT_NEAR(tr[0], 1.0, 1e-15);
  EXPECT_NEAR(tr[2], 2.0 / 3, 1e-15);
  // Paper-style counting with a first-sojourn kernel: completed first
  // sojourns of S1 are {->3 at 3, ->2 at 1}.
  const SemiMarkovKernel c = EstimateKernel(stats_, EstimatorOptions{false, true});
  EXPECT_DOUBLE_EQ(c.first_rows.at(1).at(3)[2], 0.5);
  EXPECT_DOUBLE_EQ(TrCurveDirect(c, HostState::kS1, 3)[2], 0.5);
  // Too few windows starting in S2 (1 < 2): S2 uses its ordinary kernel.
  EstimatorOptions strict{true, true};
  strict.min_first_sojourn_windows = 2;
  const SemiMarkovKernel s = EstimateKernel(stats_, strict);
  EXPECT_EQ(s.first_rows.count(2), 0u);
  EXPECT_EQ(s.first_rows.count(1), 1u);
}

// A state seen only as a first sojourn gets its ordinary kernel from those.
TEST(KernelFallbackTest, OrdinaryRowFallsBackToFirstSojourns) {
  SojournStats stats;
  Add({2, 2, 3}, &stats);
  Add({2, 2, 2}, &stats);
  const SemiMarkovKernel k = EstimateKernel(stats, EstimatorOptions{});
  // R(1)=2, R(2)=2 with one event -> K_23(2) = 1/2.
  EXPECT_DOUBLE_EQ(k.At(2, 3, 2), 0.5);
  EXPECT_DOUBLE_EQ(k.first_rows.at(2).at(3)[1], 0.5);
}

// Censoring-aware estimate of a long stream of windows approaches the true
// geometric kernel where counting is biased towards short sojourns: windows
// of 20 steps from a chain that stays in S1 with probability 0.95 per step
// and otherwise fails.
TEST(KernelConsistencyTest, CensoringAwareRecoversHazardCountingDoesNot) {
  SojournStats stats;
  uint64_t x = 88172645463325252ull;
  auto rnd = [&]() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (x >> 11) * (1.0 / 9007199254740992.0);
  };
  for (int w = 0; w < 20000; ++w) {
    std::vector<int> v = {1};
    while (v.size() < 21) v.push_back(v.back() == 1 && rnd() < 0.95 ? 1 : 3);
    Add(v, &stats);
  }
  const SemiMarkovKernel aware = EstimateKernel(stats, EstimatorOptions{true, true});
  const SemiMarkovKernel paper = EstimateKernel(stats, EstimatorOptions{false, false});
  const auto tr_aware = TrCurve(aware, HostState::kS1, 20);
  const auto tr_paper = TrCurve(paper, HostState::kS1, 20);
  const double truth = std::pow(0.95, 20);  // 0.358
  EXPECT_NEAR(tr_aware[19], truth, 0.02);
  // Counting drops the ~36% of windows with no failure: TR(20) = 0.
  EXPECT_NEAR(tr_paper[19], 0.0, 1e-12);
}

// Delayed-entry hazards, computed by hand. First sojourns filed by age a_k
// with holding length x_k: (a=2, completed to S3 at 3: total 5),
// (a=0, censored at 4: total > 4), (a=4, censored at 3: total > 7). For a host
// of age 3, l = 1..4 is t = 4..7: R(4) = 2 (a=2, a=0), d = 0; R(5) = 2 (a=2,
// a=4), d_3 = 1 -> h = 1/2; R(6) = R(7) = 1 (a=4), d = 0.
TEST(AgeConditionedFirstRowTest, HandComputed) {
  std::map<int64_t, StateSojourns> table;
  table[2].completed[{3, 3}] = 1;
  table[0].censored[4] = 1;
  table[4].censored[3] = 1;
  KernelRow row = AgeConditionedFirstRow(table, nullptr, 0, 3, 4, 4, nullptr);
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row.at(3), (std::vector<double>{0, 0.5, 0, 0}));
  // A prior table scaled by 2: one sojourn at age 3 ending at length 1 (t=4)
  // towards S2: R(4) = 2 + 2, d_2 = 2 -> h_2(1) = 1/2; then S = 1/2 and
  // R(5) = 2, d_3 = 1 -> G_3(2) = 1/2 * 1/2.
  std::map<int64_t, StateSojourns> prior;
  prior[3].completed[{2, 1}] = 1;
  row = AgeConditionedFirstRow(table, &prior, 2.0, 3, 4, 4, nullptr);
  EXPECT_EQ(row.at(2), (std::vector<double>{0.5, 0, 0, 0}));
  EXPECT_EQ(row.at(3), (std::vector<double>{0, 0.25, 0, 0}));
  // A fallback row {S3: G(1) = 1/2} as a prior worth 1 at-risk sojourn:
  // h(1) = (0 + 1/2) / (2 + 1) = 1/6, h(2) = (1 + 0) / (2 + 1) = 1/3.
  const KernelRow fb = {{3, {0.5}}};
  row = AgeConditionedFirstRow(table, nullptr, 0, 3, 4, 4, &fb, 1.0);
  ASSERT_EQ(row.at(3).size(), 4u);
  EXPECT_NEAR(row.at(3)[0], 1.0 / 6, 1e-15);
  EXPECT_NEAR(row.at(3)[1], 5.0 / 6 / 3, 1e-15);
  // Beyond every observed length (age 20): only the fallback's hazards.
  row = AgeConditionedFirstRow(table, nullptr, 0, 20, 2, 4, &fb, 1.0);
  EXPECT_EQ(row.at(3), (std::vector<double>{0.5, 0}));
}

}  // namespace
}  // namespace sojourn::availability
