// Tests of the TR curve (paper 000 eq. 3/4): the FFT solver against the direct
// recursion, a closed form for geometric holding times, and Monte Carlo.
#include "models/availability/tr.h"

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::availability {
namespace {

// A random kernel over transient states 1..n (plus absorbing 3..5 when n <= 2,
// else absorbing states are still 3, 4, 5 and transient ones 1, 2, 6, 7, ...).
std::vector<int> TransientStates(int n) {
  std::vector<int> s;
  for (int v = 1; static_cast<int>(s.size()) < n; ++v) {
    if (!IsAbsorbingState(v)) s.push_back(v);
  }
  return s;
}

KernelRow RandomRow(std::mt19937_64& rng, const std::vector<int>& transient, int self,
                    int max_len, double row_sum) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int> targets = {3, 4, 5};
  for (int t : transient) {
    if (t != self || transient.size() == 1) targets.push_back(t);
  }
  KernelRow row;
  double total = 0;
  for (int j : targets) {
    // Sparse-ish random pmf with a geometric-ish tail.
    std::vector<double> pmf(1 + rng() % max_len, 0.0);
    const double decay = 0.5 + 0.5 * u(rng);
    double w = 1.0;
    for (double& p : pmf) {
      p = u(rng) < 0.3 ? 0.0 : w * u(rng);
      w *= decay;
    }
    for (double p : pmf) total += p;
    row[j] = std::move(pmf);
  }
  for (auto& [j, pmf] : row) {
    for (double& p : pmf) p *= row_sum / total;
  }
  return row;
}

SemiMarkovKernel RandomKernel(uint64_t seed, int n, int max_len, bool first, bool full_rows) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const std::vector<int> transient = TransientStates(n);
  SemiMarkovKernel k;
  for (int i : transient) {
    k.rows[i] = RandomRow(rng, transient, i, max_len, full_rows ? 1.0 : 0.5 + 0.5 * u(rng));
    if (first) k.first_rows[i] = RandomRow(rng, transient, i, max_len, 0.3 + 0.7 * u(rng));
  }
  return k;
}

void ExpectCurvesNear(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  size_t at = 0;
  for (size_t m = 0; m < a.size(); ++m) {
    if (std::abs(a[m] - b[m]) > worst) {
      worst = std::abs(a[m] - b[m]);
      at = m;
    }
  }
  EXPECT_LE(worst, tol) << "at m=" << at + 1 << ": " << a[at] << " vs " << b[at];
}

struct FftCase {
  int n;
  int M;
  int max_len;
  bool first;
  bool full_rows;
};

class TrFftVsDirectTest : public ::testing::TestWithParam<FftCase> {};

// The FFT solver equals the direct O(M^2) recursion to 1e-9.
TEST_P(TrFftVsDirectTest, MatchesDirectRecursion) {
  const FftCase c = GetParam();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const SemiMarkovKernel k = RandomKernel(seed * 7919 + c.M, c.n, c.max_len, c.first, c.full_rows);
    for (int init : TransientStates(c.n)) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " init " << init);
      const auto fast = internal::TrCurveFft(k, init, c.M);
      const auto direct = TrCurveDirect(k, init, c.M);
      ExpectCurvesNear(fast, direct, 1e-9);
      // Non-trivial curves: something fails within the horizon.
      ASSERT_LT(direct.back(), 0.999);
      // The curve must be a survival function.
      for (size_t m = 1; m < fast.size(); ++m) ASSERT_LE(fast[m], fast[m - 1] + 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, TrFftVsDirectTest,
    ::testing::Values(FftCase{2, 150, 40, false, true}, FftCase{2, 1000, 1000, false, false},
                      FftCase{2, 3000, 3000, false, true}, FftCase{2, 2500, 200, true, false},
                      FftCase{2, 3000, 3000, true, true}, FftCase{1, 2000, 2000, false, false},
                      FftCase{1, 1500, 700, true, true}, FftCase{3, 1200, 1200, false, false},
                      FftCase{4, 700, 300, true, false}));

// A state with a row that is only reachable through a first-sojourn kernel,
// and the public TrCurve (direct below its threshold, FFT above) agree.
TEST(TrCurveTest, PublicEntryPointMatchesDirectOnBothSidesOfThreshold) {
  const SemiMarkovKernel k = RandomKernel(99, 2, 300, true, false);
  for (int M : {10, 95, 96, 97, 500}) {
    ExpectCurvesNear(TrCurve(k, HostState::kS1, M), TrCurveDirect(k, HostState::kS1, M), 1e-9);
  }
}

// An absorbing initial state has TR 0; a state that never leaves has TR 1.
TEST(TrCurveTest, AbsorbingAndFrozenInitialStates) {
  const SemiMarkovKernel k = RandomKernel(5, 2, 50, false, true);
  for (int init : {3, 4, 5}) {
    for (double v : TrCurve(k, init, 200)) EXPECT_EQ(v, 0.0);
  }
  SemiMarkovKernel frozen;
  frozen.rows[1][2] = {0.5};  // 1 -> 2 after one step; 2 has no row
  for (double v : TrCurve(frozen, 2, 200)) EXPECT_EQ(v, 1.0);
  for (double v : TrCurve(frozen, 1, 200)) EXPECT_DOUBLE_EQ(v, 1.0);
  EXPECT_TRUE(TrCurve(k, 1, 0).empty());
}

// A kernel of all zeros (no transition within the horizon) gives TR = 1.
TEST(TrCurveTest, EmptyRowsNeverFail) {
  SemiMarkovKernel k;
  k.rows[1][3] = std::vector<double>(10, 0.0);
  k.rows[2][1] = {0.0};
  const auto tr = internal::TrCurveFft(k, 1, 300);
  for (double v : tr) EXPECT_NEAR(v, 1.0, 1e-12);
}

// Markov chain closed form: geometric holding times K_ij(l) = p_ii^(l-1) p_ij
// make the SMP a discrete-time Markov chain with matrix P, so
// TR(m) = 1 - sum_{j in 3..5} (P^m)_{init,j}.
TEST(TrCurveTest, GeometricHoldingTimesMatchMatrixPowers) {
  const double P[5][5] = {
      {0.95, 0.03, 0.01, 0.005, 0.005},
      {0.04, 0.93, 0.02, 0.0, 0.01},
      {0, 0, 1, 0, 0},
      {0, 0, 0, 1, 0},
      {0, 0, 0, 0, 1},
  };
  const int M = 2000;
  SemiMarkovKernel k;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 5; ++j) {
      if (j == i || P[i][j] == 0) continue;
      std::vector<double> pmf(M);
      double stay = 1.0;
      for (int l = 1; l <= M; ++l) {
        pmf[l - 1] = stay * P[i][j];
        stay *= P[i][i];
      }
      k.rows[i + 1][j + 1] = pmf;
    }
  }
  for (int init = 1; init <= 2; ++init) {
    std::vector<double> dist(5, 0.0);
    dist[init - 1] = 1.0;
    const auto fast = internal::TrCurveFft(k, init, M);
    const auto direct = TrCurveDirect(k, init, M);
    for (int m = 1; m <= M; ++m) {
      std::vector<double> next(5, 0.0);
      for (int a = 0; a < 5; ++a) {
        for (int b = 0; b < 5; ++b) next[b] += dist[a] * P[a][b];
      }
      dist = next;
      const double expected = 1.0 - dist[2] - dist[3] - dist[4];
      ASSERT_NEAR(fast[m - 1], expected, 1e-10) << "init " << init << " m " << m;
      ASSERT_NEAR(direct[m - 1], expected, 1e-10) << "init " << init << " m " << m;
    }
  }
  // Memoryless holding times: a first-sojourn kernel equal to the ordinary
  // one changes nothing.
  SemiMarkovKernel with_first = k;
  with_first.first_rows = k.rows;
  ExpectCurvesNear(internal::TrCurveFft(with_first, 1, M), internal::TrCurveFft(k, 1, M), 1e-10);
}

// Monte Carlo simulation of the same semi-Markov process (including the
// first-sojourn kernel) agrees within 4 standard errors.
TEST(TrCurveTest, MatchesMonteCarloSimulation) {
  const int M = 400;
  const SemiMarkovKernel k = RandomKernel(2024, 2, 120, true, false);
  const int init = 1;
  const auto tr = TrCurve(k, init, M);
  // The comparison is only informative on a curve that really decays.
  ASSERT_LT(tr[M - 1], 0.8);
  ASSERT_GT(tr[M - 1], 0.01);
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // Sample the (to-state, length) of one sojourn from a row; to = 0 for "no
  // transition within the horizon".
  auto sample = [&](const KernelRow& row, int* to, int* len) {
    double r = u(rng);
    for (const auto& [j, pmf] : row) {
      for (size_t l = 0; l < pmf.size(); ++l) {
        r -= pmf[l];
        if (r < 0) {
          *to = j;
          *len = static_cast<int>(l + 1);
          return;
        }
      }
    }
    *to = 0;
    *len = 0;
  };
  const int n = 200000;
  std::vector<int> failures_at(M + 2, 0);
  for (int run = 0; run < n; ++run) {
    int t = 0, state = init, to = 0, len = 0;
    const KernelRow* row = &k.first_rows.at(init);
    while (true) {
      sample(*row, &to, &len);
      if (to == 0) break;
      t += len;
      if (t > M) break;
      if (IsAbsorbingState(to)) {
        failures_at[t]++;
        break;
      }
      state = to;
      row = &k.rows.at(state);
    }
  }
  int failed = 0;
  for (int m = 1; m <= M; ++m) {
    failed += failures_at[m];
    if (m % 20 != 0) continue;
    const double emp = 1.0 - static_cast<double>(failed) / n;
    const double p = tr[m - 1];
    const double se = std::sqrt(std::max(p * (1 - p), 1e-4) / n);
    EXPECT_NEAR(emp, p, 4 * se) << "m " << m;
  }
}

// Concurrent calls (the predictor's thread pool) give the same curves.
TEST(TrCurveTest, ThreadSafe) {
  const SemiMarkovKernel k = RandomKernel(77, 2, 500, true, false);
  const auto expected = internal::TrCurveFft(k, 1, 1500);
  const auto expected_other_size = internal::TrCurveFft(k, 2, 777);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) {
        if (internal::TrCurveFft(k, 1, 1500) != expected) mismatches[t]++;
        if (internal::TrCurveFft(k, 2, 777) != expected_other_size) mismatches[t]++;
        // New sizes create plans while other threads execute.
        internal::TrCurveFft(k, 1, 1000 + 37 * t + r);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0);
}

// MTTF restricted to the horizon: sum_{m=0}^{M-1} TR(m), TR(0) = 1.
TEST(MttfTest, SumsTheCurveFromStepZero) {
  EXPECT_EQ(MttfSteps({}), 0.0);
  EXPECT_DOUBLE_EQ(MttfSteps({0.5, 0.25, 0.125}), 1.75);
  // Geometric lifetime with failure probability 0.1 per step: TR(m) = 0.9^m,
  // E[min(X, M)] = (1 - 0.9^M) / 0.1.
  std::vector<double> tr(500);
  for (int m = 1; m <= 500; ++m) tr[m - 1] = std::pow(0.9, m);
  EXPECT_NEAR(MttfSteps(tr), (1 - std::pow(0.9, 500)) / 0.1, 1e-9);
}

}  // namespace
}  // namespace sojourn::availability
