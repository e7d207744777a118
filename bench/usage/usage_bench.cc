// Speed of LUPA's two phases (paper 003, section 4.2: pattern analysis under
// 1 s, a prediction under 3 ms; issue 5 asks for 50 ms and 50 us).
#include <cmath>
#include <random>

#include "benchmark/benchmark.h"
#include "models/usage/patterns.h"
#include "models/usage/usage_model.h"

namespace sojourn::usage {
namespace {

// 120 days of 5-minute samples with a noisy office-hours pattern.
UsageSeries OfficeSeries(int days) {
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0.0, 0.05);
  UsageSeries s;
  s.origin_unix = 1372636800;
  for (int d = 0; d < days; ++d) {
    const bool weekday = d % 7 < 5;
    const double level = weekday ? 0.5 + 0.1 * (d % 3) : 0.05;
    for (int b = 0; b < kBinsPerDay; ++b) {
      const bool office = b >= 9 * kBinsPerHour && b < 18 * kBinsPerHour;
      s.cpu.push_back(std::min(1.0, std::max(0.0, (office ? level : 0.03) + noise(rng))));
      s.mem.push_back(std::min(1.0, std::max(0.0, (office ? 0.6 : 0.3) + noise(rng))));
    }
  }
  return s;
}

// One pattern analysis (one resource) over 120 days: ~119 objects of 576 bins.
void BM_PatternAnalysis120Days(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  PatternOptions o;
  o.linkage = static_cast<Linkage>(state.range(0));
  o.clusters = static_cast<int>(state.range(1));
  for (auto _ : state) {
    auto p = AnalysePatterns(s, Resource::kCpu, o, s.UnixOfBin(s.bins()));
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::string(LinkageName(o.linkage)) + " k=" + std::to_string(o.clusters));
}
BENCHMARK(BM_PatternAnalysis120Days)
    ->ArgsProduct({{0, 1, 2, 3}, {5, 10}})
    ->Unit(benchmark::kMillisecond);

// The daily analysis of a host: CPU and memory, current and backtest prototypes.
void BM_AnalyseHost120Days(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  for (auto _ : state) {
    HostPatterns h = AnalyseHost(s, {}, s.UnixOfBin(s.bins()), 7);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_AnalyseHost120Days)->Unit(benchmark::kMillisecond);

// One UPA prediction of the next 4 hours at 14:00 (5 prototypes).
void BM_UpaPrediction(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  const int64_t now = 119 * kBinsPerDay + 14 * kBinsPerHour;
  auto p = AnalysePatterns(s, Resource::kCpu, {}, s.UnixOfBin(119 * kBinsPerDay));
  std::vector<double> out(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    Forecast(Forecaster::kUpa, s.cpu, now, out.size(), DowntimePolicy::kDiscard, &*p, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_UpaPrediction)->Arg(48)->Arg(864)->Unit(benchmark::kMicrosecond);

// The same with the paper-literal UPA (no residual correction).
void BM_UpaPaperPrediction(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  const int64_t now = 119 * kBinsPerDay + 14 * kBinsPerHour;
  auto p = AnalysePatterns(s, Resource::kCpu, {}, s.UnixOfBin(119 * kBinsPerDay));
  std::vector<double> out(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    Forecast(Forecaster::kUpaPaper, s.cpu, now, out.size(), DowntimePolicy::kDiscard, &*p,
             out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel("phi=" + std::to_string(p->residual_phi));
}
BENCHMARK(BM_UpaPaperPrediction)->Arg(48)->Arg(864)->Unit(benchmark::kMicrosecond);

// Fitting the residual coefficient alone (part of the pattern analysis).
void BM_FitResidualPhi120Days(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  auto p = AnalysePatterns(s, Resource::kCpu, {}, s.UnixOfBin(s.bins()));
  for (auto _ : state) {
    double phi = FitResidualPhi(s.cpu, DowntimePolicy::kDiscard, *p, s.bins());
    benchmark::DoNotOptimize(phi);
  }
}
BENCHMARK(BM_FitResidualPhi120Days)->Unit(benchmark::kMillisecond);

// One PredictUsage call of a built model (selector choice + forecast), and CanRun.
void BM_ModelPredictUsage(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(119 * kBinsPerDay + 14 * kBinsPerHour));
  for (auto _ : state) {
    auto f = m.PredictUsage(Resource::kCpu, 4);
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK(BM_ModelPredictUsage)->Unit(benchmark::kMicrosecond);

void BM_ModelCanRun(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  const UsageModel m = UsageModel::Build(s, {}, s.UnixOfBin(119 * kBinsPerDay + 14 * kBinsPerHour));
  for (auto _ : state) {
    auto f = m.CanRun(0.4, 0.3, 4);
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK(BM_ModelCanRun)->Unit(benchmark::kMicrosecond);

// Building a model from stored patterns: the selector's 7-day replay.
void BM_ModelFromStoredPatterns(benchmark::State& state) {
  const UsageSeries s = OfficeSeries(120);
  const int64_t now = s.UnixOfBin(119 * kBinsPerDay + 14 * kBinsPerHour);
  const HostPatterns h = AnalyseHost(s, {}, now, 7);
  for (auto _ : state) {
    UsageModel m(s, h, {}, now);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ModelFromStoredPatterns)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sojourn::usage

BENCHMARK_MAIN();
