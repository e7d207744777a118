// Runs a gRPC server the way every sojourn service does: grpc.health.v1
// health checking, server reflection, per-method request counts and latency
// histograms, /metrics over HTTP, and graceful shutdown on SIGTERM/SIGINT.
//
//   sojourn::ServerOptions options{.listen_address = "127.0.0.1:0", ...};
//   auto server = sojourn::GrpcServer::Start(options, {&service}, metrics);
//   server->port();               // the bound port
//   sojourn::WaitForTerminationSignal();
//   server->Shutdown(absl::Seconds(5));
#ifndef SOJOURN_COMMON_SERVER_H_
#define SOJOURN_COMMON_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace sojourn {

struct ServerOptions {
  // gRPC listen address, e.g. "127.0.0.1:7401"; port 0 picks a free port.
  std::string listen_address = "127.0.0.1:0";
  // HTTP address for /metrics; empty disables it; port 0 picks a free port.
  std::string metrics_address;
  // Written with "grpc_port=N\nmetrics_port=M\n" once bound (empty: not written).
  std::string port_file;
};

// Owns a started gRPC server. Thread-compatible: Shutdown() once, from one thread.
class GrpcServer {
 public:
  // `services` must outlive the server. `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const ServerOptions& options,
                                                           const std::vector<grpc::Service*>& services,
                                                           Metrics& metrics);
  ~GrpcServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // Where peers on this machine dial the server: the listen host with the
  // bound port, 127.0.0.1 for a wildcard listen address.
  std::string address() const;
  // What the server listens on, as configured but with the bound port
  // ("0.0.0.0:7403" for a wildcard): for start-up logs.
  std::string listen_address() const;
  // "host:port" of /metrics, or "off" when it is not served: for start-up logs.
  std::string metrics_description() const;
  // Marks health NOT_SERVING, stops accepting calls, waits up to `grace` for
  // calls in flight, then cancels the rest.
  void Shutdown(absl::Duration grace);
  grpc::Server* server() { return server_.get(); }

 private:
  GrpcServer() = default;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string host_;
  std::string listen_host_;
  std::string metrics_host_;
  bool shut_down_ = false;
};

// Blocks SIGTERM and SIGINT in the calling thread and every thread it later
// creates. Call first thing in main(), before any thread starts.
void BlockTerminationSignals();
// Waits for SIGTERM or SIGINT (blocked by BlockTerminationSignals) and returns
// its number.
int WaitForTerminationSignal();

}  // namespace sojourn

#endif  // SOJOURN_COMMON_SERVER_H_
