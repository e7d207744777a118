// gRPC adapter of the state manager: converts protos and calls HostBook.
#ifndef SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_
#define SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_

#include <atomic>

#include "common/metrics.h"
#include "common/thread_pool.h"
#include "common/tls.h"
#include "services/statemgr/host_book.h"
#include "services/statemgr/usage_keeper.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::statemgr {

struct StateManagerServiceConfig {
  // PushSamples refuses samples stamped later than the state manager's clock
  // (HostBook::clock()) plus this many seconds. A sample from the future
  // would make every later real sample a duplicate, silencing the host, and
  // a grid reaching years ahead exhausts memory. Default 1 h.
  int64_t max_clock_skew_seconds = 3600;
  // A WatchStates stream whose unsent transitions exceed this is ended with
  // RESOURCE_EXHAUSTED (a stuck watcher must not hold memory without bound).
  // Its snapshot messages (one per host) do not count.
  size_t max_watch_queue = 10000;
  // The directory of the RocksDB database and the MiB that must stay free
  // on its disk for a write to be taken (sojourn::CheckFreeDisk; 0 = no
  // check): RESOURCE_EXHAUSTED below it.
  std::string db_path;
  int64_t min_free_disk_mb = 0;
  // --tls_bind_hosts: PushSamples takes samples of a host only from a caller
  // whose TLS certificate names it (CheckHostNamed, common/tls.h), and only
  // of a host this state manager's own certificate names too (`own`, its
  // --tls_cert): a state manager per host keeps its own host's samples.
  // PERMISSION_DENIED otherwise. Needs mutual TLS.
  bool bind_hosts = false;
  CertificateIdentity own;
};

// Initial-metadata key of a WatchStates stream whose watcher is registered
// (value "1"): a client that has seen it misses no later change.
inline constexpr char kWatchRegisteredKey[] = "sojourn-watch-registered";

// Limits of PushSamplesRequest.period_seconds (0 = unset): 1 s .. 1 day.
using sojourn::kMaxPeriodSeconds;

// Keeps the hosts' states in Prometheus: sojourn_statemgr_host_state{host}
// (1..5) and sojourn_statemgr_state_transitions_total{to="S1".."S5"}.
class StateMetrics final : public StateWatcher {
 public:
  explicit StateMetrics(Metrics& metrics);
  void OnStateChange(const StateChange& change) override;

 private:
  Metrics& metrics_;
};

class StateManagerService final : public sojourn::v1::StateManager::CallbackService {
 public:
  // All references must outlive the service. Usage questions (which may run a
  // pattern analysis) are answered on `pool`.
  // Exports its event counters at 0 (Metrics::DeclareCounter).
  // Also watches `book` for the state metrics (StateMetrics) until destroyed.
  StateManagerService(HostBook& book, UsageKeeper& usage, ThreadPool& pool, Metrics& metrics,
                      const StateManagerServiceConfig& config = {});
  ~StateManagerService() override;

  grpc::ServerReadReactor<sojourn::v1::PushSamplesRequest>* PushSamples(
      grpc::CallbackServerContext* context, sojourn::v1::PushSamplesResponse* response) override;
  grpc::ServerWriteReactor<sojourn::v1::StateTransition>* WatchStates(
      grpc::CallbackServerContext* context,
      const sojourn::v1::WatchStatesRequest* request) override;
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::ListHostsRequest* request,
                                      sojourn::v1::ListHostsResponse* response) override;
  grpc::ServerUnaryReactor* GetStateIntervals(
      grpc::CallbackServerContext* context, const sojourn::v1::GetStateIntervalsRequest* request,
      sojourn::v1::GetStateIntervalsResponse* response) override;
  grpc::ServerUnaryReactor* GetWindowStats(grpc::CallbackServerContext* context,
                                           const sojourn::v1::GetWindowStatsRequest* request,
                                           sojourn::v1::GetWindowStatsResponse* response) override;
  grpc::ServerUnaryReactor* GetSeries(grpc::CallbackServerContext* context,
                                      const sojourn::v1::GetSeriesRequest* request,
                                      sojourn::v1::GetSeriesResponse* response) override;
  grpc::ServerUnaryReactor* PredictUsage(grpc::CallbackServerContext* context,
                                         const sojourn::v1::PredictUsageRequest* request,
                                         sojourn::v1::PredictUsageResponse* response) override;
  grpc::ServerUnaryReactor* CanRun(grpc::CallbackServerContext* context,
                                   const sojourn::v1::CanRunRequest* request,
                                   sojourn::v1::CanRunResponse* response) override;
  grpc::ServerUnaryReactor* HowLong(grpc::CallbackServerContext* context,
                                    const sojourn::v1::HowLongRequest* request,
                                    sojourn::v1::HowLongResponse* response) override;
  grpc::ServerUnaryReactor* AnalyzeUsage(grpc::CallbackServerContext* context,
                                         const sojourn::v1::AnalyzeUsageRequest* request,
                                         sojourn::v1::AnalyzeUsageResponse* response) override;

 private:
  HostBook& book_;
  UsageKeeper& usage_;
  ThreadPool& pool_;
  Metrics& metrics_;
  const StateManagerServiceConfig config_;
  StateMetrics state_metrics_;
  // Open WatchStates streams (the sojourn_statemgr_watchers gauge).
  std::atomic<int> open_watches_{0};
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_
