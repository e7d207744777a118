// Cost of one turnaround estimate per kernel (issue 4 acceptance 1: <= 1 ms
// median with 10,000 history records, < 10 ms with 1,000,000), on the
// in-memory and the RocksDB HistDB (with and without its Recent() cache; in a
// predictor the cache is hit between two job finishes).
//
// History: 2,000 users x 5 executables x 3 sizes; the estimated job's
// application holds 1 % of all records (10,000 at 1M) so the kernels read a
// full window. Snapshots: "paper" = 64 nodes, 75 % local load, MPL 4,
// 5 running and 4 waiting jobs (section 6.1.1); "sdsc" = 128 dedicated nodes,
// 30 running and 30 waiting jobs (the SDSC-SP2 replay's mean queue).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "benchmark/benchmark.h"
#include "models/turnaround/cluster_model.h"
#include "models/turnaround/estimator.h"
#include "models/turnaround/hist_db_rocksdb.h"

namespace sojourn::turnaround {
namespace {

JobSpec Spec(std::mt19937_64& rng, int64_t id) {
  JobSpec j;
  j.job_id = id;
  j.user = static_cast<int32_t>(rng() % 2000);
  j.executable = static_cast<int32_t>(rng() % 5);
  j.procs = 1 << (rng() % 3);
  j.queue = static_cast<int32_t>(rng() % 4);
  j.requested_time = 3600;
  j.cpu_fraction = 0.9;
  return j;
}

JobSpec HotApp(int64_t id) {
  JobSpec j;
  j.job_id = id;
  j.user = 7;
  j.executable = 3;
  j.procs = 4;
  j.queue = 1;
  j.requested_time = 3600;
  j.cpu_fraction = 0.9;
  return j;
}

void Fill(HistDb& db, int64_t n) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    JobRecord r;
    r.spec = (i % 100 == 0) ? HotApp(i) : Spec(rng, i);
    r.wait_time = static_cast<int64_t>(600 * u(rng));
    r.exec_time = static_cast<int64_t>(100 + 3000 * u(rng));
    r.cpu_time_per_task = r.exec_time * 0.9;
    r.cpu_ahead = 50000 * u(rng);
    r.cpu_backwards = 50000 * u(rng);
    r.shared_tasks = static_cast<int32_t>(rng() % 4);
    r.max_local_cpu = r.shared_tasks ? 0.2 : 0;
    if (!db.Put(r).ok()) std::abort();
  }
}

// store: 0 in memory, 1 RocksDB with its Recent() cache, 2 RocksDB without.
HistDb& Store(int64_t n, int store) {
  static auto* stores = new std::map<std::pair<int64_t, int>, std::unique_ptr<HistDb>>();
  auto key = std::make_pair(n, store);
  auto it = stores->find(key);
  if (it != stores->end()) return *it->second;
  std::unique_ptr<HistDb> db;
  if (store != 0) {
    std::string dir = "/tmp/sojourn_turnaround_bench_" + std::to_string(::getpid()) + "_" +
                      std::to_string(n) + "_" + std::to_string(store);
    std::filesystem::remove_all(dir);
    RocksHistDbOptions options;
    if (store == 2) options.recent_cache_templates = 0;
    auto opened = RocksHistDb::Open(dir, options);
    if (!opened.ok()) std::abort();
    db = *std::move(opened);
  } else {
    db = std::make_unique<InMemoryHistDb>();
  }
  Fill(*db, n);
  auto& slot = (*stores)[key];
  slot = std::move(db);
  return *slot;
}

EstimateRequest Request(bool sdsc) {
  std::mt19937_64 rng(2);
  EstimateRequest req;
  ClusterSnapshot& s = req.snapshot;
  s.now = 100000;
  const int nodes = sdsc ? 128 : 64;
  const int running = sdsc ? 30 : 5;
  const int waiting = sdsc ? 30 : 4;
  s.nodes.resize(nodes);
  s.policy.job_selection = JobSelection::kEasyBackfilling;
  s.policy.node_selection = sdsc ? NodeSelection::kNormal : NodeSelection::kUniform;
  s.policy.mpl_limit = sdsc ? 1 : 4;
  if (!sdsc) {
    for (int n = 0; n < nodes * 3 / 4; ++n) s.nodes[n] = {0.2, 1};
  }
  int next = 0;
  for (int r = 0; r < running; ++r) {
    RunningJob j;
    j.spec = Spec(rng, 1000000 + r);
    j.start_time = s.now - static_cast<int64_t>(rng() % 2000);
    for (int k = 0; k < j.spec.procs; ++k) j.nodes.push_back((next++) % nodes);
    s.running.push_back(j);
  }
  for (int w = 0; w < waiting; ++w) {
    JobSpec j = Spec(rng, 2000000 + w);
    j.procs = sdsc ? 16 : 8;  // keep them queued
    s.waiting.push_back(j);
  }
  req.job = HotApp(3000000);
  req.job.submit_time = s.now;
  return req;
}

// Args: kernel, records, store (0 memory, 1 rocksdb cached, 2 rocksdb
// uncached), sdsc snapshot (0/1).
void BM_Estimate(benchmark::State& state) {
  const Kernel kernel = static_cast<Kernel>(state.range(0));
  HistDb& db = Store(state.range(1), static_cast<int>(state.range(2)));
  TurnaroundEstimator est(db, {});
  const EstimateRequest req = Request(state.range(3) != 0);
  for (auto _ : state) {
    auto e = est.EstimateWith(kernel, req);
    if (!e.ok()) state.SkipWithError(std::string(e.status().message()).c_str());
    benchmark::DoNotOptimize(e);
  }
  static const char* kStores[] = {"/memory", "/rocksdb", "/rocksdb-nocache"};
  state.SetLabel(std::string(KernelName(kernel)) + kStores[state.range(2)] +
                 (state.range(3) ? "/sdsc" : "/paper"));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t records : {10000, 1000000}) {
    for (int store : {0, 1, 2}) {
      for (int sdsc : {0, 1}) {
        for (int k = 0; k < 3; ++k) b->Args({k, records, store, sdsc});
      }
    }
  }
}
BENCHMARK(BM_Estimate)
    ->Apply(Args)
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// Normal node selection, the step every simulated job start takes (half of a
// replay's time on 1,024 processors before session 24), against the full sort
// of its definition in the same binary. Args: implementation (0 ClusterModel,
// 1 SelectNormalByFullSort), nodes, dedicated (1: MPL 1 and no local load, as
// in a replay; 0: MPL 4 and 75 % of the nodes with a local user, as in
// simulate). Half of the nodes are taken by random 1-8-node jobs; each
// selection asks for an eighth of the nodes.
void BM_SelectNormal(benchmark::State& state) {
  const bool reference = state.range(0) != 0;
  const int nodes = static_cast<int>(state.range(1));
  const bool dedicated = state.range(2) != 0;
  SchedulingPolicy policy;
  policy.node_selection = NodeSelection::kNormal;
  policy.mpl_limit = dedicated ? 1 : 4;
  ClusterModel cluster(nodes, policy);
  std::mt19937_64 rng(5);
  if (!dedicated) {
    for (int n = 0; n < nodes; ++n) {
      if (rng() % 4 != 0) cluster.SetLocal(n, 0.1 * static_cast<double>(1 + rng() % 9), 1);
    }
  }
  for (int key = 0, used = 0; used < nodes / 2; ++key) {
    const int procs = 1 + static_cast<int>(rng() % 8);
    std::vector<int> chosen;
    for (int k = 0; k < procs; ++k) chosen.push_back(static_cast<int>(rng() % nodes));
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    cluster.Place(key, chosen, 0.9);
    used += static_cast<int>(chosen.size());
  }
  const int procs = std::max(1, nodes / 8);
  for (auto _ : state) {
    std::vector<int> chosen = reference ? SelectNormalByFullSort(cluster, procs, nullptr)
                                        : cluster.SelectNodes(procs, 0.9, nullptr);
    if (static_cast<int>(chosen.size()) != procs) state.SkipWithError("too few free nodes");
    benchmark::DoNotOptimize(chosen);
  }
  state.SetLabel(std::string(reference ? "full-sort" : "sojourn") +
                 (dedicated ? "/dedicated" : "/shared"));
}
BENCHMARK(BM_SelectNormal)
    ->ArgsProduct({{0, 1}, {128, 1024, 16384}, {1, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace
}  // namespace sojourn::turnaround

BENCHMARK_MAIN();
