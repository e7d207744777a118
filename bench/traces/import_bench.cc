// Import speed of the shared real traces (issue 3: the 22 MB tar.xz of 100
// VMs must read in seconds). Skips a trace that is not present.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "benchmark/benchmark.h"
#include "models/traces/traces.h"

namespace {

std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("SOJOURN_SHARED_DIR");
  std::filesystem::path base = env ? env : "../shared";
  return (base / rel).string();
}

void ImportShared(benchmark::State& state, const std::string& rel) {
  const std::string path = SharedPath(rel);
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("not found: " + path).c_str());
    return;
  }
  size_t samples = 0;
  for (auto _ : state) {
    auto traces = sojourn::traces::ImportTrace(path, {});
    if (!traces.ok()) {
      state.SkipWithError(std::string(traces.status().message()).c_str());
      return;
    }
    samples = 0;
    for (const auto& t : *traces) samples += t.samples.size();
    benchmark::DoNotOptimize(samples);
  }
  state.counters["samples"] = static_cast<double>(samples);
}

void BM_ImportBitbrainsTarXz(benchmark::State& state) {
  ImportShared(state, "data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz");
}
BENCHMARK(BM_ImportBitbrainsTarXz)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ImportDesktopMatrixGz(benchmark::State& state) {
  ImportShared(state, "data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz");
}
BENCHMARK(BM_ImportDesktopMatrixGz)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
