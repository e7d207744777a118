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

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/tls.h"

namespace sojourn {

struct ServerOptions {
  // gRPC listen address, e.g. "127.0.0.1:7401"; port 0 picks a free port.
  std::string listen_address = "127.0.0.1:0";
  // HTTP address for /metrics; empty disables it; port 0 picks a free port.
  std::string metrics_address;
  // Written with "grpc_port=N\nmetrics_port=M\n" once bound (empty: not written).
  std::string port_file;
  // TLS for the gRPC port (common/tls.h); not enabled = plaintext. When
  // enabled, Start exports the certificate's and the CA's notAfter as
  // sojourn_tls_certificate_expiry_timestamp_seconds{file="cert"|"ca"}.
  TlsMaterial tls;
};

// Start-up checks of the flags behind ServerOptions, before a service opens
// or binds anything. Each returns INVALID_ARGUMENT with a one-line reason
// naming `flag` (a service exits 2 on it); what only fails at run time (a
// port in use, a name server not answering) passes and fails in Start.
//
// A gRPC listen address: HOST:PORT with HOST an IPv4 address (0.0.0.0 = every
// interface), a bracketed IPv6 address ([::1], [::]) or a host name that
// resolves to an address of this machine, and PORT in [0, 65535] (0 = any
// free port). gRPC itself takes the port modulo 65536 and reads "7403" as
// host 7403, port 443.
absl::Status ValidateListenAddress(absl::string_view address, absl::string_view flag);
// The /metrics address: as ValidateListenAddress, or a bare PORT (every
// interface), or "" (off); no IPv6 address when the HTTP server lacks IPv6.
absl::Status ValidateMetricsAddress(absl::string_view address, absl::string_view flag);
// All of `options`, as the flags --listen, --metrics_listen and --port_file
// (a file the service can write, and <file>.tmp next to it).
absl::Status ValidateServerOptions(const ServerOptions& options);

// The flags a state manager and a monitor classify the five states with (the
// monitor's gateway and adaptive period use the state manager's classifier,
// so they accept the same values): --th1 in (0, 1], --th2 in [--th1, 1],
// --grace_seconds in [0, a year], --working_set_mb in [0, 1e12].
absl::Status ValidateClassifierFlags(double th1, double th2, int64_t grace_seconds,
                                     double working_set_mb);

// The TLS flags of a service (common/tls.h LoadTlsFromFlags, TlsRole::kService):
// sets options->tls and returns the credentials of the channels the service
// opens (insecure ones without TLS). On a bad flag or file, logs the one-line
// reason and returns null (a service exits 2). In main(), after FlagsOk:
//   auto credentials = sojourn::ServiceTlsFromFlags(&options);
//   if (credentials == nullptr) return sojourn::kExitUsage;
std::shared_ptr<grpc::ChannelCredentials> ServiceTlsFromFlags(ServerOptions* options);

// Logs the first failed check (one line; each message names its flag) and
// returns false; true when all passed. In main():
//   if (!sojourn::FlagsOk({sojourn::IntFlagInRange("--threads", t, 1, 1024), ...})) return 2;
bool FlagsOk(std::initializer_list<absl::Status> checks);

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

// Raises the soft limit on open files to the hard limit (RaiseOpenFileLimit in
// common/proc_stat.h; each connection to a service is a descriptor) and logs
// the change. Returns the limit now in force, -1 for unlimited, 0 when it could
// not be read or set (logged). When the limit is below `needed` (0 = no
// need), logs a warning that says `what` needs them and how to raise it. Call
// in main(), before anything is opened.
int64_t RaiseOpenFileLimitOrWarn(int64_t needed = 0, absl::string_view what = "");

}  // namespace sojourn

#endif  // SOJOURN_COMMON_SERVER_H_
