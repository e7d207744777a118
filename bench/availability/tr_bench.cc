// Benchmarks of issue 3: the TR curve by the FFT solver and by the direct
// O(M^2) recursion of paper 000 eq. 3/4 at M = 600, 6000, 60000, 604800, and
// kernel estimation from a realistic number of training windows.
//
//   availability_tr_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "models/availability/kernel.h"
#include "models/availability/predict.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/tr.h"

namespace sojourn::availability {
namespace {

// A dense kernel: every pmf has support 1..M (the worst case for the solver;
// an estimated kernel from windows of M steps has at most this support).
SemiMarkovKernel DenseKernel(int M, bool first) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto row = [&](std::vector<int> targets, double sum) {
    KernelRow r;
    double total = 0;
    for (int j : targets) {
      std::vector<double> pmf(M);
      double w = 1.0;
      for (double& p : pmf) {
        p = w * u(rng);
        w *= 0.999;
        total += p;
      }
      r[j] = std::move(pmf);
    }
    for (auto& [j, pmf] : r) {
      for (double& p : pmf) p *= sum / total;
    }
    return r;
  };
  SemiMarkovKernel k;
  k.rows[1] = row({2, 3, 4, 5}, 0.97);
  k.rows[2] = row({1, 3, 4, 5}, 0.95);
  if (first) {
    k.first_rows[1] = row({2, 3, 4, 5}, 0.6);
    k.first_rows[2] = row({1, 3, 4, 5}, 0.7);
  }
  return k;
}

void BM_TrCurveFft(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0));
  const SemiMarkovKernel k = DenseKernel(M, false);
  for (auto _ : state) benchmark::DoNotOptimize(TrCurve(k, HostState::kS1, M));
}
BENCHMARK(BM_TrCurveFft)->Arg(600)->Arg(6000)->Arg(60000)->Arg(604800)->Unit(benchmark::kMillisecond);

void BM_TrCurveFftFirstSojournKernel(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0));
  const SemiMarkovKernel k = DenseKernel(M, true);
  for (auto _ : state) benchmark::DoNotOptimize(TrCurve(k, HostState::kS1, M));
}
BENCHMARK(BM_TrCurveFftFirstSojournKernel)
    ->Arg(600)->Arg(6000)->Arg(60000)->Arg(604800)->Unit(benchmark::kMillisecond);

// The direct recursion is O(M^2): ~4 s at M = 60000 and would take ~7 min at
// 604800, so it stops at 60000.
void BM_TrCurveDirect(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0));
  const SemiMarkovKernel k = DenseKernel(M, false);
  for (auto _ : state) benchmark::DoNotOptimize(TrCurveDirect(k, HostState::kS1, M));
}
BENCHMARK(BM_TrCurveDirect)->Arg(600)->Arg(6000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrCurveDirect)->Arg(60000)->Iterations(1)->Unit(benchmark::kMillisecond);

// Synthetic host: S1/S2 sojourns of a few minutes to hours with rare failures,
// sampled every 6 s as in paper 000 (a 10 h window is 6000 steps): geometric
// holding times of mean_s1 / mean_s2 steps, and at each exit S3 with
// probability p_s3, S5 with 0.01, else the other up state.
std::vector<HostState> SyntheticWindow(std::mt19937_64& rng, int steps, double mean_s1 = 600,
                                       double mean_s2 = 150, double p_s3 = 0.02) {
  std::vector<HostState> w;
  w.reserve(steps + 1);
  std::geometric_distribution<int> hold1(1.0 / mean_s1), hold2(1.0 / mean_s2);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  HostState s = u(rng) < 0.7 ? HostState::kS1 : HostState::kS2;
  while (static_cast<int>(w.size()) <= steps) {
    const int len = 1 + (s == HostState::kS1 ? hold1(rng) : hold2(rng));
    for (int i = 0; i < len && static_cast<int>(w.size()) <= steps; ++i) w.push_back(s);
    const double r = u(rng);
    if (r < p_s3) {
      s = HostState::kS3;
    } else if (r < p_s3 + 0.01) {
      s = HostState::kS5;
    } else {
      s = s == HostState::kS1 ? HostState::kS2 : HostState::kS1;
    }
    if (IsFailure(s)) {
      while (static_cast<int>(w.size()) <= steps) w.push_back(s);
    }
  }
  return w;
}

// Accumulating the sojourns of `windows` training windows of 6000 steps and
// estimating the kernel (the paper's "computation of Q and H", 29 ms for 10 h).
void BM_AccumulateAndEstimate(benchmark::State& state) {
  const int windows = static_cast<int>(state.range(0));
  const int steps = 6000;
  std::mt19937_64 rng(7);
  std::vector<std::vector<HostState>> data;
  for (int i = 0; i < windows; ++i) data.push_back(SyntheticWindow(rng, steps));
  EstimatorOptions opt;
  opt.censoring_aware = state.range(1) != 0;
  for (auto _ : state) {
    SojournStats stats;
    stats.step_seconds = 6;
    for (const auto& w : data) AccumulateWindow(w.data(), w.size(), &stats);
    benchmark::DoNotOptimize(EstimateKernel(stats, opt));
  }
}
BENCHMARK(BM_AccumulateAndEstimate)
    ->Args({20, 0})->Args({20, 1})->Args({60, 1})->Unit(benchmark::kMicrosecond);

// End to end for the predictor: stats of 20 windows -> TR(1..6000).
void BM_PredictFromStats(benchmark::State& state) {
  const int steps = 6000;
  std::mt19937_64 rng(7);
  SojournStats stats;
  stats.step_seconds = 6;
  for (int i = 0; i < 20; ++i) {
    const auto w = SyntheticWindow(rng, steps);
    AccumulateWindow(w.data(), w.size(), &stats);
  }
  const EstimatorOptions opt;
  for (auto _ : state) {
    benchmark::DoNotOptimize(PredictFromStats(stats, HostState::kS1, steps, opt));
  }
}
BENCHMARK(BM_PredictFromStats)->Unit(benchmark::kMicrosecond);

// The predictor service's path (availability_predictor.cc): the host's 20
// windows shrunk towards a prior pooled from 60 other windows, the host's age
// in its state (age-conditioned first sojourn), and, for arg 1, the first
// sojourn's hazards at the host's load band (load_band.h; ratios 1.5 / 1.1 as
// on Bitbrains' upper S1 band). Arg 0 is the same without the band, so the
// two rows give the band's cost.
void BM_PredictFromStatsServicePath(benchmark::State& state) {
  const int steps = 6000;
  std::mt19937_64 rng(7);
  SojournStats stats, prior;
  stats.step_seconds = prior.step_seconds = 6;
  for (int i = 0; i < 20; ++i) {
    const auto w = SyntheticWindow(rng, steps);
    AccumulateWindow(w.data(), w.size(), 1.0, &stats, i % 3);
  }
  for (int i = 0; i < 60; ++i) {
    const auto w = SyntheticWindow(rng, steps);
    AccumulateWindow(w.data(), w.size(), 1.0, &prior, i % 3);
  }
  const EstimatorOptions opt;
  FirstSojournRatio band;
  if (state.range(0) != 0) band = FirstSojournRatio{1.5, 1.1};
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        PredictFromStats(stats, HostState::kS1, steps, opt, &prior, 500 * 6, band));
  }
}
BENCHMARK(BM_PredictFromStatsServicePath)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The same with exact age conditioning (issue 3): the 20 windows' first
// sojourns filed at ages 0, 100, ..., and a host of age 500 steps.
void BM_PredictFromStatsExactAge(benchmark::State& state) {
  const int steps = 6000;
  std::mt19937_64 rng(7);
  SojournStats stats;
  stats.step_seconds = 6;
  for (int i = 0; i < 20; ++i) {
    const auto w = SyntheticWindow(rng, steps);
    AccumulateWindow(w.data(), w.size(), 1.0, &stats, -1, 100 * i);
  }
  EstimatorOptions opt;
  opt.exact_age_first_sojourn = true;
  for (auto _ : state) {
    benchmark::DoNotOptimize(PredictFromStats(stats, HostState::kS1, steps, opt, nullptr, 500 * 6));
  }
}
BENCHMARK(BM_PredictFromStatsExactAge)->Unit(benchmark::kMicrosecond);

// One cell of `sojourn-eval availability` on a trace sampled every 5 minutes
// (Bitbrains): a host's 26 training windows of M = arg steps (24 = 2 h, 120 =
// 10 h), shrunk towards a prior pooled from 100 hosts' 2,600 windows at the
// host's hazard ratio 1.3 (host frailty), then TR(1..M). Short windows make
// the shrinkage, not the TR curve, most of the cost: the prior's tables are
// rebuilt at the host's ratio and merged into the host's for every prediction.
void BM_PredictFromStatsBacktestCell(benchmark::State& state) {
  const int steps = static_cast<int>(state.range(0));
  std::mt19937_64 rng(11);
  // Holding times of about an hour in S1 and 20 minutes in S2 (5-min steps).
  auto window = [&rng, steps] { return SyntheticWindow(rng, steps, 12, 4, 0.03); };
  SojournStats stats, prior;
  stats.step_seconds = prior.step_seconds = 300;
  for (int i = 0; i < 26; ++i) {
    const auto w = window();
    AccumulateWindow(w.data(), w.size(), 1.0, &stats, i % 3);
  }
  for (int i = 0; i < 2600; ++i) {
    const auto w = window();
    AccumulateWindow(w.data(), w.size(), 1.0, &prior, i % 3);
  }
  stats.prior_hazard_ratio = 1.3;
  const EstimatorOptions opt;
  for (auto _ : state) {
    benchmark::DoNotOptimize(PredictFromStats(stats, HostState::kS1, steps, opt, &prior, 2 * 3600));
  }
}
BENCHMARK(BM_PredictFromStatsBacktestCell)->Arg(24)->Arg(120)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sojourn::availability

BENCHMARK_MAIN();
