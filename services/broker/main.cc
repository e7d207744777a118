// broker: the registry of hosts and the ranking of hosts for incoming jobs.
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/server.h"
#include "common/thread_pool.h"
#include "services/broker/broker_service.h"
#include "services/broker/host_registry.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7401", "gRPC listen address (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9401",
          "HTTP address serving /metrics for Prometheus (empty = off)");
ABSL_FLAG(std::string, port_file, "", "write the bound gRPC and metrics ports to this file");
ABSL_FLAG(std::string, predictor, "127.0.0.1:7402", "predictor address used by RankHosts");
ABSL_FLAG(int64_t, heartbeat_ttl_seconds, 60,
          "a host without a heartbeat for this long is expired (listed, not ranked)");
ABSL_FLAG(int, threads, 4, "worker threads for rankings");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "broker: registry of hosts (registration, heartbeats, expiry) and RankHosts, which orders "
      "hosts for a job by their predicted availability.\nusage: broker [--flags]; see --help");
  absl::ParseCommandLine(argc, argv);
  sojourn::BlockTerminationSignals();
  if (absl::GetFlag(FLAGS_heartbeat_ttl_seconds) <= 0) {
    SOJOURN_LOG(ERROR, "--heartbeat_ttl_seconds must be > 0");
    return 2;
  }
  sojourn::broker::HostRegistry registry(sojourn::Clock::Real(),
                                         absl::Seconds(absl::GetFlag(FLAGS_heartbeat_ttl_seconds)));
  sojourn::broker::GrpcTrSource tr_source(absl::GetFlag(FLAGS_predictor));
  sojourn::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  sojourn::broker::BrokerService service(registry, tr_source, pool);
  sojourn::Metrics metrics("broker");
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  auto server = sojourn::GrpcServer::Start(options, {&service}, metrics);
  if (!server.ok()) {
    SOJOURN_LOG(ERROR, "%s", server.status().ToString());
    return 1;
  }
  SOJOURN_LOG(INFO, "broker serving on %s (metrics :%d), predictor %s", (*server)->address(),
              (*server)->metrics_port(), absl::GetFlag(FLAGS_predictor));
  sojourn::WaitForTerminationSignal();
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}
