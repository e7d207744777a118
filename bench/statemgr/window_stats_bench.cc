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
// Rows 1-3 walk the host's whole grid on the first request only: the book
// keeps what they ask as the grid grows (HostBook::GridCounts), so against
// row 0 they give the cost of a request on a host with no new samples.
// items_per_second counts grid points.
//
// BM_AppendThenWindowStats, BM_UsageAfterNewSamples, BM_WholeSeries and
// BM_RetainOneDay: a state manager in service, with 28 days or a year of 6 s
// samples (below).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <malloc.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "common/clock.h"
#include "services/statemgr/host_book.h"
#include "services/statemgr/sample_store.h"
#include "services/statemgr/usage_keeper.h"

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
std::vector<HostSample> Synthetic(int64_t period, int days = kDays) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 0.12);
  std::vector<HostSample> v;
  for (int64_t t = kMonday; t < kMonday + days * 86400; t += period) {
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

// A sample of an idle host at `t` (what the in-service benchmarks push).
HostSample IdleAt(int64_t t) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = 0.1;
  s.free_mem_mb = 4000;
  return s;
}

class Book {
 public:
  // The history pushed a day at a time, as a monitor's samples arrive; with
  // `hosts` > 1 the same history for hosts "h", "h1", "h2", ...
  explicit Book(int64_t period, int days = kDays, int hosts = 1) {
    char tmpl[] = "/tmp/sojourn_window_stats_bench_XXXXXX";
    Require(mkdtemp(tmpl) != nullptr, "mkdtemp failed");
    dir_ = tmpl;
    config_.default_period_seconds = period;
    clock_ = std::make_unique<FakeClock>(absl::FromUnixSeconds(kMonday + days * 86400));
    Open();
    MetaUpdate meta;
    meta.period_seconds = period;
    const std::vector<HostSample> all = Synthetic(period, days);
    const size_t per_day = static_cast<size_t>(86400 / period);
    for (size_t i = 0; i < all.size(); i += per_day) {
      const size_t end = std::min(i + per_day, all.size());
      const std::vector<HostSample> day(all.begin() + static_cast<ptrdiff_t>(i),
                                        all.begin() + static_cast<ptrdiff_t>(end));
      for (int k = 0; k < hosts; ++k) {
        const auto appended = book_->Append(k == 0 ? "h" : "h" + std::to_string(k), day, meta);
        Require(appended.ok(), appended.status().ToString());
      }
    }
  }
  // A restart: the book and the store closed (Close), opened again and
  // loaded (Load).
  void Close() {
    book_.reset();
    store_.reset();
  }
  void Load() {
    Open();
    Require(book_->Load().ok(), "load");
  }
  void Reload() {
    Close();
    Load();
  }
  ~Book() {
    Close();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const HostBook& book() const { return *book_; }
  HostBook& mutable_book() { return *book_; }
  SampleStore& store() { return *store_; }
  // Bytes of the RocksDB directory, in MiB.
  double DiskMb() const {
    std::error_code ec;
    uintmax_t bytes = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_, ec)) {
      if (e.is_regular_file(ec)) bytes += e.file_size(ec);
    }
    return static_cast<double>(bytes) / (1 << 20);
  }
  FakeClock& clock() { return *clock_; }

 private:
  void Open() {
    auto store = SampleStore::Open(dir_, false);
    Require(store.ok(), store.status().ToString());
    store_ = std::move(*store);
    book_ = std::make_unique<HostBook>(config_, *store_, *clock_);
  }

  std::string dir_;
  HostBookConfig config_;
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

// The most resident memory of this process since ResetPeak (VmHWM), in MiB.
void ResetPeak() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return;
  std::fputs("5", f);
  std::fclose(f);
}
double PeakMb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb / 1024;
}

// Resident set of this process in MiB (/proc/self/statm), after the
// allocator gave back what it could.
double ResidentMb() {
  malloc_trim(0);
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1 << 20);
}

// A state manager in service: the monitor pushes a sample every period and the
// predictor asks for the window statistics (the default request) after it, so
// every request follows new samples. Argument: days of 6 s history (28 days,
// a year), pushed a day at a time and then loaded again as after a restart.
// Counter resident_mb: the process's resident set then, less before the
// history (the book, RocksDB's memtable and caches, the allocator's slack);
// load_peak_mb: the most it had while loading, less before the load;
// disk_mb: the RocksDB directory of the closed store; first_request_ms: the
// first request after the load (once, not a median), which counts the
// failure exposure and the exits by band over the whole grid (the timed ones
// count only what the new sample added).
void BM_AppendThenWindowStats(benchmark::State& state) {
  constexpr int64_t kPeriod = 6;
  const int days = static_cast<int>(state.range(0));
  const double rss_before = ResidentMb();
  Book b(kPeriod, days);
  b.Close();
  // Measured closed: an open store may still hold the files a compaction
  // has just replaced.
  const double disk_mb = b.DiskMb();
  const double rss_closed = ResidentMb();
  ResetPeak();
  b.Load();
  state.counters["load_peak_mb"] = PeakMb() - rss_closed;
  state.counters["disk_mb"] = disk_mb;
  state.counters["resident_mb"] = ResidentMb() - rss_before;
  availability::WindowSpec spec;
  spec.start_second_of_day = 9 * 3600;
  spec.length_seconds = 2 * 3600;
  const availability::EstimatorOptions opt;
  // The first request after the load counts the exposures over the whole
  // grid; those after it count what the new samples added.
  const auto first_start = std::chrono::steady_clock::now();
  Require(b.book().WindowStats("h", spec, 0, opt, false).ok(), "first request");
  state.counters["first_request_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_start)
          .count();
  int64_t t = kMonday + static_cast<int64_t>(days) * 86400;
  for (auto _ : state) {
    b.clock().Set(absl::FromUnixSeconds(t));
    Require(b.mutable_book().Append("h", {IdleAt(t)}).ok(), "append");
    t += kPeriod;
    auto r = b.book().WindowStats("h", spec, 0, opt, false);
    Require(r.ok(), r.status().ToString());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_AppendThenWindowStats)
    ->Arg(28)
    ->Arg(365)
    ->ArgName("days")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

// The whole history of a host, as GetSeries from the start and the first
// usage model after a restart ask for it: read from the store for all but
// the last day since samples older than that left memory.
void BM_WholeSeries(benchmark::State& state) {
  constexpr int64_t kPeriod = 6;
  const int days = static_cast<int>(state.range(0));
  Book b(kPeriod, days);
  b.Reload();
  for (auto _ : state) {
    bool truncated = false;
    auto r = b.book().Series("h", 0, 0, std::numeric_limits<size_t>::max(), &truncated);
    Require(r.ok() && r->size() == static_cast<size_t>(days) * 86400 / kPeriod, "series");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * days * 86400 / kPeriod);
}
BENCHMARK(BM_WholeSeries)->Arg(28)->Arg(365)->ArgName("days")->Unit(benchmark::kMillisecond);

// A usage question every 5 minutes (UsageKeeper's model_max_age), with the
// samples of those 5 minutes pushed before it: the model is built again each
// time from the host's 5-minute series (the daily pattern analysis is
// stored, so it is not redone).
void BM_UsageAfterNewSamples(benchmark::State& state) {
  constexpr int64_t kPeriod = 6;
  const int days = static_cast<int>(state.range(0));
  Book b(kPeriod, days);
  b.Reload();
  UsageKeeper keeper(UsageKeeperConfig{}, b.mutable_book(), b.store(), b.clock());
  Require(keeper.Get("h").ok(), "first usage model");
  int64_t t = kMonday + static_cast<int64_t>(days) * 86400;
  for (auto _ : state) {
    std::vector<HostSample> v;
    for (int i = 0; i < 50; ++i, t += kPeriod) v.push_back(IdleAt(t));
    b.clock().Set(absl::FromUnixSeconds(t));
    Require(b.mutable_book().Append("h", v).ok(), "append");
    auto m = keeper.Get("h");
    Require(m.ok(), m.status().ToString());
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_UsageAfterNewSamples)
    ->Arg(28)
    ->Arg(365)
    ->ArgName("days")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// Retention's daily pass (HostBook::Retain, statemgr --retention_days) on
// `hosts` hosts with 28 days or a year of 6 s samples each: each iteration
// moves the cut a day on, so it deletes a day of every host's samples,
// rebuilds each host's grid from the samples left and compacts the deleted
// ranges. Baseline in the same run: load_ms, a restart's Load() of the same
// store before the passes (one timing), which reads and classifies the same
// samples. ms_per_host: the pass's wall time per host (does one host's cost
// grow with the others' data?).
void BM_RetainOneDay(benchmark::State& state) {
  constexpr int64_t kPeriod = 6;
  const int days = static_cast<int>(state.range(0));
  const int hosts = static_cast<int>(state.range(1));
  Book b(kPeriod, days, hosts);
  b.Close();
  const auto load_start = std::chrono::steady_clock::now();
  b.Load();
  state.counters["load_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();
  int64_t cut = kMonday;
  int64_t deleted = 0;
  double seconds = 0;
  for (auto _ : state) {
    cut += 86400;
    const auto start = std::chrono::steady_clock::now();
    const RetainResult r = b.mutable_book().Retain(cut);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Require(r.hosts == hosts && r.failed_hosts == 0, "retain");
    deleted += r.deleted_samples;
  }
  const auto passes = static_cast<int64_t>(state.iterations());
  Require(deleted == passes * hosts * 86400 / kPeriod, "deleted");
  state.counters["deleted_per_pass"] = static_cast<double>(deleted) / static_cast<double>(passes);
  state.counters["ms_per_host"] = 1000 * seconds / static_cast<double>(passes * hosts);
}
BENCHMARK(BM_RetainOneDay)
    ->Args({28, 1})
    ->Args({28, 8})
    ->Args({365, 1})
    ->ArgNames({"days", "hosts"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);

}  // namespace
}  // namespace sojourn::statemgr

BENCHMARK_MAIN();
