#include "common/server.h"

#include <signal.h>

#include <fstream>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace sojourn {
namespace {

// Counts and times every RPC (health and reflection included).
class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(grpc::experimental::ServerRpcInfo* info, Metrics& metrics)
      : metrics_(metrics), start_(absl::Now()) {
    // "/sojourn.v1.Broker/RankHosts" -> service "sojourn.v1.Broker", method "RankHosts".
    std::vector<std::string> parts = absl::StrSplit(info->method(), '/', absl::SkipEmpty());
    grpc_service_ = parts.size() > 0 ? parts[0] : "unknown";
    method_ = parts.size() > 1 ? parts[1] : "unknown";
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
      metrics_.Increment("sojourn_grpc_requests_total", "gRPC requests handled",
                         {{"grpc_service", grpc_service_},
                          {"method", method_},
                          {"code", std::to_string(status.error_code())}});
      metrics_.Observe("sojourn_grpc_request_duration_seconds", "gRPC request latency",
                       {{"grpc_service", grpc_service_}, {"method", method_}}, seconds);
    }
    methods->Proceed();
  }

 private:
  Metrics& metrics_;
  absl::Time start_;
  std::string grpc_service_;
  std::string method_;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(Metrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(info, metrics_);
  }

 private:
  Metrics& metrics_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services, Metrics& metrics) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<GrpcServer> out(new GrpcServer());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(), &out->port_);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<MetricsInterceptorFactory>(metrics));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr || out->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address, " (address in use or invalid)"));
  }
  out->host_ = options.listen_address.substr(0, options.listen_address.rfind(':'));
  out->listen_host_ = out->host_;
  if (out->host_.empty() || out->host_ == "0.0.0.0" || out->host_ == "[::]") out->host_ = "127.0.0.1";
  out->server_->GetHealthCheckService()->SetServingStatus(true);
  if (!options.metrics_address.empty()) {
    auto port = metrics.StartHttp(options.metrics_address);
    if (!port.ok()) return port.status();
    out->metrics_port_ = *port;
    const size_t colon = options.metrics_address.rfind(':');
    out->metrics_host_ = colon == std::string::npos ? "" : options.metrics_address.substr(0, colon);
  }
  if (!options.port_file.empty()) {
    std::ofstream f(options.port_file + ".tmp");
    f << "grpc_port=" << out->port_ << "\nmetrics_port=" << out->metrics_port_ << "\n";
    f.close();
    if (!f || std::rename((options.port_file + ".tmp").c_str(), options.port_file.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot write port file ", options.port_file));
    }
  }
  return out;
}

GrpcServer::~GrpcServer() { Shutdown(absl::Seconds(1)); }

std::string GrpcServer::address() const { return absl::StrCat(host_, ":", port_); }

std::string GrpcServer::listen_address() const {
  return absl::StrCat(listen_host_, ":", port_);
}

std::string GrpcServer::metrics_description() const {
  if (metrics_port_ == 0) return "metrics off";
  return absl::StrCat("metrics on ", metrics_host_.empty() ? "0.0.0.0" : metrics_host_, ":",
                      metrics_port_);
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoSeconds(grace));
  server_->Wait();
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  SOJOURN_LOG(INFO, "received signal %d, shutting down", sig);
  return sig;
}

}  // namespace sojourn
