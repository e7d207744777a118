// Import speed of the shared real traces (issue 3: the 22 MB tar.xz of 100
// VMs must read in seconds; skips a trace that is not present), and of a
// canonical CSV as `sojourn export` writes it (read and written).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "models/traces/traces.h"

namespace {

std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("SOJOURN_SHARED_DIR");
  std::filesystem::path base = env ? env : "../shared";
  return (base / rel).string();
}

// Reads PATH once per iteration; counts the samples read.
void Import(benchmark::State& state, const std::string& path) {
  size_t samples = 0;
  for (auto _ : state) {
    auto traces = sojourn::traces::ImportTrace(path, {});
    if (!traces.ok()) {
      state.SkipWithError(std::string(traces.status().message()).c_str());
      break;
    }
    samples = 0;
    for (const auto& t : *traces) samples += t.samples.size();
    benchmark::DoNotOptimize(samples);
  }
  state.counters["samples"] = static_cast<double>(samples);
}

void ImportShared(benchmark::State& state, const std::string& rel) {
  const std::string path = SharedPath(rel);
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("not found: " + path).c_str());
    return;
  }
  Import(state, path);
}

void BM_ImportBitbrainsTarXz(benchmark::State& state) {
  ImportShared(state, "data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz");
}
BENCHMARK(BM_ImportBitbrainsTarXz)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ImportDesktopMatrixGz(benchmark::State& state) {
  ImportShared(state, "data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz");
}
BENCHMARK(BM_ImportDesktopMatrixGz)->Unit(benchmark::kMillisecond);

// A cluster's export: 100 hosts of 20,000 samples (about 69 days at 300 s),
// loads and free memory at full precision, every 50th row without memory.
constexpr int kHosts = 100;
constexpr int kRows = 20000;

std::vector<sojourn::HostTrace> SyntheticCluster() {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<sojourn::HostTrace> traces(kHosts);
  for (int h = 0; h < kHosts; ++h) {
    traces[h].host = "lab-host-" + std::to_string(h);
    traces[h].total_mem_mb = 8192;
    traces[h].cpu_cores = 4;
    for (int i = 0; i < kRows; ++i) {
      sojourn::HostSample s;
      s.unix_seconds = 1700000000 + 300LL * i;
      s.cpu_load = u(rng);
      if (i % 50 != 0) s.free_mem_mb = 8192 * u(rng);
      traces[h].samples.push_back(s);
    }
  }
  return traces;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

void BM_ImportCanonicalCsv(benchmark::State& state) {
  const std::string path = TempPath("sojourn_import_bench.csv");
  if (auto st = sojourn::traces::WriteCanonicalCsv(SyntheticCluster(), path); !st.ok()) {
    state.SkipWithError(std::string(st.message()).c_str());
    return;
  }
  Import(state, path);
  std::remove(path.c_str());
}
BENCHMARK(BM_ImportCanonicalCsv)->Unit(benchmark::kMillisecond);

// Writing the same trace, plain and gzip-compressed (arg 1).
void BM_WriteCanonicalCsv(benchmark::State& state) {
  const auto traces = SyntheticCluster();
  const std::string path =
      TempPath(state.range(0) ? "sojourn_write_bench.csv.gz" : "sojourn_write_bench.csv");
  for (auto _ : state) {
    if (auto st = sojourn::traces::WriteCanonicalCsv(traces, path); !st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  state.counters["samples"] = static_cast<double>(kHosts) * kRows;
  std::error_code ec;
  state.counters["bytes"] = static_cast<double>(std::filesystem::file_size(path, ec));
  std::remove(path.c_str());
}
BENCHMARK(BM_WriteCanonicalCsv)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
