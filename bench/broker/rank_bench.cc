// RankHosts through gRPC over 100, 1,000 and 10,000 hosts, cold cache (every
// host's prediction and load fetched, fanned out) and warm cache.
//
// A real broker server (BrokerService + Ranker, default configuration) on
// loopback port 0; its predictor and state manager are an in-process fake
// server (tests/services/broker/fake_backends.h) answering each host's TR
// curve (288 points over the 24 h horizon) and 4 h of 5-minute load samples
// over real gRPC. The fake does no SMP work: the predictor's own cost per host
// is measured by bench/availability. SOJOURN_BENCH_FANOUT=N overrides the
// ranker's concurrent fetches (default 16). Per-call latencies are reported as
// p50_ms / p99_ms counters (the benchmark's own time is the mean).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include <malloc.h>

#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "common/server.h"
#include "services/broker/broker_service.h"
#include "tests/services/broker/fake_backends.h"

namespace sojourn::broker {
namespace {

using testing::FakeHost;
using testing::FakeHosts;

class Cluster {
 public:
  // load: 0 = no load forecast at all, 1 = the ranker fetches it with
  // GetSeries, 2 = it comes with the prediction (what the real predictor does).
  Cluster(int n, int load) {
    hosts_.load_with_prediction = load == 2;
    hosts_.fallback = [](const std::string& name, FakeHost* h) {
      const int i = std::atoi(name.c_str() + 1);
      h->life_seconds = 3600.0 * (2 + i % 37);
      h->load = 0.05 * (i % 9);
      h->state = i % 13 == 0 ? v1::HOST_STATE_S3_OVERLOADED : v1::HOST_STATE_S1_IDLE;
      return true;
    };
    auto b = GrpcServer::Start({}, {&predictor_, &statemgr_}, backend_metrics_);
    if (!b.ok()) std::abort();
    backend_ = std::move(*b);
    tr_source_ = std::make_unique<GrpcTrSource>(backend_->address());
    RankerConfig rc;
    // Entries live the TTL from their fetch and nothing is fetched in the
    // background: the warm cases time rankings served wholly from the cache.
    rc.spread_cache_refreshes = false;
    rc.refresh_threads = 0;
    if (load == 0) rc.load_history_seconds = 0;  // one predictor call per host, no GetSeries
    if (const char* f = std::getenv("SOJOURN_BENCH_FANOUT")) rc.fanout_threads = std::atoi(f);
    ranker_ = std::make_unique<Ranker>(*tr_source_, &load_source_, Clock::Real(), rc);
    service_ = std::make_unique<BrokerService>(registry_, *ranker_, pool_);
    auto s = GrpcServer::Start({}, {service_.get()}, broker_metrics_);
    if (!s.ok()) std::abort();
    broker_ = std::move(*s);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    stub_ = v1::Broker::NewStub(grpc::CreateCustomChannel(
        broker_->address(), grpc::InsecureChannelCredentials(), args));
    for (int i = 0; i < n; ++i) {
      v1::RegisterHostRequest r;
      r.set_host(absl::StrCat("h", i));
      r.set_statemgr_address(backend_->address());
      r.mutable_attributes()->set_cpu_mhz(1000 + (i * 7919) % 2000);
      r.mutable_attributes()->set_cpu_cores(1 + i % 4);
      r.mutable_attributes()->set_total_mem_mb(4096);
      r.set_last_sample_unix_seconds(FakeHosts::kNow);
      (void)registry_.Register(r);
    }
  }
  ~Cluster() {
    broker_->Shutdown(absl::Seconds(1));
    backend_->Shutdown(absl::Seconds(1));
  }

  bool Rank(v1::RankHostsResponse* resp, int64_t duration_seconds = 4 * 3600) {
    grpc::ClientContext ctx;
    v1::RankHostsRequest req;
    req.mutable_job()->set_duration_seconds(duration_seconds);
    return stub_->RankHosts(&ctx, req, resp).ok();
  }
  Ranker& ranker() { return *ranker_; }
  int64_t series_calls() const { return hosts_.series_calls.load(); }

 private:
  FakeHosts hosts_;
  testing::FakePredictorService predictor_{hosts_};
  testing::FakeStatemgrService statemgr_{hosts_};
  Metrics backend_metrics_{"fake"}, broker_metrics_{"broker"};
  std::unique_ptr<GrpcServer> backend_, broker_;
  std::unique_ptr<GrpcTrSource> tr_source_;
  GrpcLoadSource load_source_;
  HostRegistry registry_{Clock::Real(), absl::Hours(1)};
  ThreadPool pool_{4};
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<v1::Broker::Stub> stub_;
};

void Report(benchmark::State& state, std::vector<double>& ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  auto q = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * (ms.size() - 1) + 0.5))];
  };
  state.counters["p50_ms"] = q(0.5);
  state.counters["p99_ms"] = q(0.99);
  state.counters["max_ms"] = ms.back();
}

void BM_RankHosts(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool warm = state.range(1) != 0;
  const int load = static_cast<int>(state.range(2));
  Cluster cluster(n, load);
  v1::RankHostsResponse resp;
  if (!cluster.Rank(&resp) || resp.hosts_size() != n) {
    state.SkipWithError("ranking failed");
    return;
  }
  std::vector<double> ms;
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      cluster.ranker().cache().Clear();
      state.ResumeTiming();
    }
    resp.Clear();
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = cluster.Rank(&resp);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!ok) {
      state.SkipWithError("ranking failed");
      return;
    }
    if (warm && resp.predictions_fetched() != 0) {
      state.SkipWithError("cache state unexpected");
      return;
    }
  }
  if (load == 2 && cluster.series_calls() != 0) {
    state.SkipWithError("GetSeries called although the load came with the prediction");
    return;
  }
  state.counters["hosts"] = n;
  state.counters["fetched"] = resp.predictions_fetched();
  Report(state, ms);
}

// What the prediction cache holds per host: the heap bytes in use
// (mallinfo2, every arena) after a cold ranking, less before it, per host,
// as counter cached_kb_per_host (the response is freed first). Argument: the
// job's duration in hours; 84 h gives the longest horizon, 7 days (a TR curve
// of 2,016 points at the ranker's 300 s resolution), 1 h the default 1 day
// (288 points). The time is that of the cold ranking at 1,000 hosts.
void BM_CachedBytesPerHost(benchmark::State& state) {
  constexpr int kHosts = 1000;
  const int64_t duration = state.range(0) * 3600;
  Cluster cluster(kHosts, 2);
  double kb = 0;
  for (auto _ : state) {
    state.PauseTiming();
    cluster.ranker().cache().Clear();
    const size_t before = mallinfo2().uordblks;
    state.ResumeTiming();
    bool ok = false;
    {
      v1::RankHostsResponse resp;
      ok = cluster.Rank(&resp, duration) && resp.hosts_size() == kHosts &&
           resp.predictions_fetched() == kHosts;
    }
    state.PauseTiming();
    kb = (static_cast<double>(mallinfo2().uordblks) - static_cast<double>(before)) / kHosts /
         1024;
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError("ranking failed");
      return;
    }
  }
  state.counters["cached_kb_per_host"] = kb;
}
BENCHMARK(BM_CachedBytesPerHost)->Arg(1)->Arg(84)->ArgName("job_hours")->Iterations(3)->Unit(
    benchmark::kMillisecond);

// {hosts, warm, load}; iteration counts keep the run to a few seconds per
// case. load = 1: the load comes from GetSeries (two calls per host); load =
// 2: it comes with the prediction, as from the real predictor (one call per
// host); load = 0: no load forecast at all (lower bound).
BENCHMARK(BM_RankHosts)->Args({100, 0, 1})->Iterations(100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({100, 1, 1})->Iterations(300)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({1000, 0, 1})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({1000, 1, 1})->Iterations(200)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({1000, 0, 0})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({100, 0, 2})->Iterations(100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({1000, 0, 2})->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({10000, 0, 2})->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({10000, 0, 1})->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RankHosts)->Args({10000, 1, 1})->Iterations(20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sojourn::broker

BENCHMARK_MAIN();
