// What one GetWindowStats costs the state manager: HostBook::WindowStats for
// a 2 h window at 09:00 on a host with 28 days of history (RocksDB on disk,
// loaded once), sampled every 300 s (Bitbrains, 8,064 grid points) or 6 s
// (paper 000's monitor, 403,200 grid points). The predictor asks this of every
// host when it pools the shrinkage prior, so it bounds how many hosts one
// state manager can serve.
//
// Second argument, what the request asks for besides the same-clock windows:
//   0: nothing (EstimatorOptions with host_frailty and load_band_first_sojourn off),
//   1: the host's failure exposure (host frailty, frailty.h),
//   2: that and the exits by load band (load_band.h), the library default,
//   3: that and HTCondor's and BOINC's estimates of the window
//      (GetWindowStatsRequest.deployed_estimates, what the predictor asks of
//      the one host it answers for when its caller wants them).
// The extras walk the host's whole grid, so rows 1-3 against row 0 give
// their cost; items_per_second counts grid points.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/clock.h"
#include "services/statemgr/host_book.h"
#include "services/statemgr/sample_store.h"

namespace sojourn::statemgr {
namespace {

constexpr int64_t kMonday = 1700438400;  // 2023-11-20 00:00 UTC, a Monday
constexpr int kDays = 28;

void Require(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "window_stats_bench: %s\n", what.c_str());
    std::abort();
  }
}

// A host with a day pattern (busy 09:00-17:00 on weekdays) and noise, so every
// state and both load bands occur.
std::vector<HostSample> Synthetic(int64_t period) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 0.12);
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + kDays * 86400; t += period) {
    const int64_t hour = (t % 86400) / 3600;
    const bool weekend = (t - kMonday) / 86400 % 7 >= 5;
    const double base = !weekend && hour >= 9 && hour < 17 ? 0.35 : 0.08;
    HostSample s;
    s.unix_seconds = t;
    s.cpu_load = std::clamp(base + noise(rng), 0.0, 1.0);
    s.free_mem_mb = 4000;
    v.push_back(s);
  }
  return v;
}

class Book {
 public:
  explicit Book(int64_t period) {
    char tmpl[] = "/tmp/sojourn_window_stats_bench_XXXXXX";
    Require(mkdtemp(tmpl) != nullptr, "mkdtemp failed");
    dir_ = tmpl;
    auto store = SampleStore::Open(dir_, false);
    Require(store.ok(), store.status().ToString());
    store_ = std::move(*store);
    HostBookConfig config;
    config.default_period_seconds = period;
    clock_ = std::make_unique<FakeClock>(absl::FromUnixSeconds(kMonday + kDays * 86400));
    book_ = std::make_unique<HostBook>(config, *store_, *clock_);
    MetaUpdate meta;
    meta.period_seconds = period;
    const auto appended = book_->Append("h", Synthetic(period), meta);
    Require(appended.ok(), appended.status().ToString());
  }
  ~Book() {
    book_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const HostBook& book() const { return *book_; }

 private:
  std::string dir_;
  std::unique_ptr<SampleStore> store_;
  std::unique_ptr<FakeClock> clock_;
  std::unique_ptr<HostBook> book_;
};

void BM_WindowStats(benchmark::State& state) {
  const int64_t period = state.range(0);
  const Book b(period);
  availability::WindowSpec spec;
  spec.start_second_of_day = 9 * 3600;
  spec.length_seconds = 2 * 3600;
  availability::EstimatorOptions opt;
  opt.host_frailty = state.range(1) >= 1;
  opt.load_band_first_sojourn = state.range(1) >= 2;
  const bool deployed = state.range(1) >= 3;
  for (auto _ : state) {
    auto r = b.book().WindowStats("h", spec, 0, opt, deployed);
    Require(r.ok(), r.status().ToString());
    Require(r->band_exposure.has_value() == opt.load_band_first_sojourn, "band exposure");
    Require(r->deployed.has_value() == deployed, "deployed estimates");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * (kDays * 86400 / period));
}
BENCHMARK(BM_WindowStats)
    ->ArgsProduct({{300, 6}, {0, 1, 2, 3}})
    ->ArgNames({"period_s", "extras"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sojourn::statemgr

BENCHMARK_MAIN();
