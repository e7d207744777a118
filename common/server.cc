#include "common/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cli_util.h"
#include "common/logging.h"
#include "common/proc_stat.h"
#include "common/text.h"
#if SOJOURN_HAVE_CIVETWEB
#include <civetweb.h>
#endif

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

// A listen address taken apart by ParseListenAddress.
struct HostPort {
  std::string host;  // without brackets; "" for a bare port
  int port = 0;
  bool numeric = false;  // an IPv4 or IPv6 address rather than a name
  bool ipv6 = false;
};

constexpr absl::string_view kListenWant =
    "(want HOST:PORT such as 127.0.0.1:7403, 0.0.0.0:7403, [::1]:7403 or myhost:7403; port 0 = "
    "any free port)";
constexpr absl::string_view kMetricsWant =
    "(want HOST:PORT such as 127.0.0.1:9403, 0.0.0.0:9403 or myhost:9403, a bare PORT for every "
    "interface, or empty for no /metrics; port 0 = any free port)";

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// RFC 1123 host name (underscores allowed, as container names have them).
bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
    }
  }
  return true;
}

absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag,
                                            bool allow_bare_port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", Excerpt(address), "' ", why));
  };
  const absl::string_view want = allow_bare_port ? kMetricsWant : kListenWant;
  if (address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " is empty ", want));
  }
  HostPort out;
  absl::string_view host, port;
  bool bare = false;
  if (address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return bad(absl::StrCat("has no closing ']' ", want));
    host = address.substr(1, close - 1);
    const absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return bad(absl::StrCat("has no :PORT after the IPv6 address ", want));
    }
    port = rest.substr(1);
    out.ipv6 = true;
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      if (!allow_bare_port || !AllDigits(address)) {
        return bad(absl::StrCat("has no :PORT ", want));
      }
      port = address;
      bare = true;
    } else {
      host = address.substr(0, colon);
      port = address.substr(colon + 1);
      if (host.find(':') != absl::string_view::npos) {
        return bad("is an IPv6 address without brackets (write e.g. [::1]:7403)");
      }
    }
  }
  if (!AllDigits(port)) return bad(absl::StrCat("has no numeric port ", want));
  int64_t value = 0;
  for (char c : port.substr(0, 6)) value = value * 10 + (c - '0');
  if (port.size() > 6 || value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": port must be in [0, 65535], got ",
                                                   Excerpt(port), " in '", Excerpt(address),
                                                   "'"));
  }
  out.port = static_cast<int>(value);
  if (bare) return out;
  out.host = std::string(host);
  if (out.ipv6) {
    in6_addr a;
    if (inet_pton(AF_INET6, out.host.c_str(), &a) != 1) return bad("has no valid IPv6 address");
    out.numeric = true;
  } else if (host.empty()) {
    return bad("has no host (0.0.0.0:PORT listens on every interface)");
  } else if (std::all_of(host.begin(), host.end(),
                         [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    in_addr a;
    if (inet_pton(AF_INET, out.host.c_str(), &a) != 1) return bad("has no valid IPv4 address");
    out.numeric = true;
  } else if (!IsHostName(host)) {
    return bad("has no valid host: want an IPv4 address, a [IPv6] address or a host name");
  }
  return out;
}

// Binds a TCP socket to each address `hp.host` resolves to, port `port`
// (SO_REUSEADDR, as a server sets it). "" when one bind succeeds, else the
// first error: the errno (EADDRNOTAVAIL: not an address of this machine,
// EADDRINUSE) in *err and its text. `resolve_error` gets getaddrinfo's code
// when the name does not resolve.
std::string TryBind(const HostPort& hp, int port, int* err, int* resolve_error) {
  *err = 0;
  *resolve_error = 0;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | (hp.numeric ? AI_NUMERICHOST : 0);
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(hp.host.empty() ? nullptr : hp.host.c_str(),
                             std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    *resolve_error = rc;
    return gai_strerror(rc);
  }
  std::string first_error;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int e = 0;
    if (fd < 0) {
      e = errno;
    } else {
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        close(fd);
        freeaddrinfo(res);
        *err = 0;
        return "";
      }
      e = errno;
      close(fd);
    }
    if (first_error.empty()) {
      *err = e;
      first_error = std::strerror(e);
    } else if (e != EADDRNOTAVAIL) {
      *err = e;  // a reason other than "not here" wins
    }
  }
  freeaddrinfo(res);
  return first_error.empty() ? "no address" : first_error;
}

// Whether `hp.host` resolves to an address of this machine (a port-0 bind to
// it succeeds). OK as well when that cannot be told (a name server not
// answering, no socket): GrpcServer::Start fails then, at run time.
absl::Status CheckLocalHost(const HostPort& hp, absl::string_view address,
                            absl::string_view flag) {
  if (hp.host.empty()) return absl::OkStatus();
  int err = 0, resolve_error = 0;
  const std::string why = TryBind(hp, 0, &err, &resolve_error);
  if (resolve_error == EAI_NONAME || resolve_error == EAI_FAIL
#ifdef EAI_NODATA
      || resolve_error == EAI_NODATA
#endif
  ) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot resolve host '",
                                                   Excerpt(hp.host), "' in '", Excerpt(address),
                                                   "' (", why, ")"));
  }
  if (resolve_error == 0 && err == EADDRNOTAVAIL) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", Excerpt(hp.host), "' in '",
                                                   Excerpt(address),
                                                   "' is not an address of this machine (",
                                                   why, ")"));
  }
  return absl::OkStatus();
}

// Why listening on `address` failed, for the start-up error: "address
// already in use" and the like, or "" when a bind there works now.
std::string ListenFailure(absl::string_view address, bool allow_bare_port) {
  auto hp = ParseListenAddress(address, "", allow_bare_port);
  if (!hp.ok()) return std::string(hp.status().message());
  int err = 0, resolve_error = 0;
  return TryBind(*hp, hp->port, &err, &resolve_error);
}

bool MetricsServerHasIpv6() {
#if SOJOURN_HAVE_CIVETWEB
  return mg_check_feature(8) != 0;
#else
  return true;
#endif
}

}  // namespace

absl::Status ValidateListenAddress(absl::string_view address, absl::string_view flag) {
  absl::StatusOr<HostPort> hp = ParseListenAddress(address, flag, /*allow_bare_port=*/false);
  if (!hp.ok()) return hp.status();
  return CheckLocalHost(*hp, address, flag);
}

absl::Status ValidateMetricsAddress(absl::string_view address, absl::string_view flag) {
  if (address.empty()) return absl::OkStatus();  // off
  absl::StatusOr<HostPort> hp = ParseListenAddress(address, flag, /*allow_bare_port=*/true);
  if (!hp.ok()) return hp.status();
  if (hp->ipv6 && !MetricsServerHasIpv6()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": '", Excerpt(address),
        "' is an IPv6 address, which the /metrics server of this build (civetweb without IPv6) "
        "cannot listen on; use an IPv4 address, 0.0.0.0 or a host name"));
  }
  return CheckLocalHost(*hp, address, flag);
}

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (absl::Status s = ValidateListenAddress(options.listen_address, "--listen"); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateMetricsAddress(options.metrics_address, "--metrics_listen");
      !s.ok()) {
    return s;
  }
  if (!options.port_file.empty()) {
    // Written as <file>.tmp, then renamed.
    for (const std::string& path : {options.port_file, options.port_file + ".tmp"}) {
      if (absl::Status s = CheckWritableFile(path); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--port_file: ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateClassifierFlags(double th1, double th2, int64_t grace_seconds,
                                     double working_set_mb) {
  if (absl::Status s = ValidateThresholdFlags(th1, th2); !s.ok()) return s;
  constexpr int64_t kYear = 365 * 86400;
  if (absl::Status s = IntFlagInRange("--grace_seconds", grace_seconds, 0, kYear, "(a year)");
      !s.ok()) {
    return s;
  }
  return NumberFlagInRange("--working_set_mb", working_set_mb, 0, 1e12);
}

std::shared_ptr<grpc::ChannelCredentials> ServiceTlsFromFlags(ServerOptions* options) {
  absl::StatusOr<TlsMaterial> tls = LoadTlsFromFlags(TlsRole::kService);
  if (!tls.ok()) {
    SOJOURN_LOG(ERROR, "%s", tls.status().message());
    return nullptr;
  }
  options->tls = *tls;
  return ChannelCredentialsFor(*tls);
}

bool FlagsOk(std::initializer_list<absl::Status> checks) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) {
      SOJOURN_LOG(ERROR, "%s", s.message());
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services, Metrics& metrics) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<GrpcServer> out(new GrpcServer());
  // A port in use is the usual failure: say so in one line, before gRPC
  // logs its error tree for it.
  if (absl::StatusOr<HostPort> hp =
          ParseListenAddress(options.listen_address, "--listen", /*allow_bare_port=*/false);
      hp.ok() && hp->port != 0) {
    int err = 0, resolve_error = 0;
    const std::string why = TryBind(*hp, hp->port, &err, &resolve_error);
    if (err == EADDRINUSE) {
      return absl::UnavailableError(absl::StrCat(
          "--listen: cannot listen on ", Excerpt(options.listen_address), " (", why, ")"));
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, ServerCredentialsFor(options.tls), &out->port_);
  // gRPC sets SO_REUSEPORT by default: a second instance on a taken port
  // would start and share it with the first, each getting some of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<MetricsInterceptorFactory>(metrics));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr || out->port_ == 0) {
    const std::string why = ListenFailure(options.listen_address, /*allow_bare_port=*/false);
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ",
                                               Excerpt(options.listen_address), " (",
                                               why.empty() ? "address in use or invalid" : why,
                                               ")"));
  }
  out->host_ = options.listen_address.substr(0, options.listen_address.rfind(':'));
  out->listen_host_ = out->host_;
  if (out->host_.empty() || out->host_ == "0.0.0.0" || out->host_ == "[::]") out->host_ = "127.0.0.1";
  out->server_->GetHealthCheckService()->SetServingStatus(true);
  if (options.tls.enabled) {
    const char* kHelp =
        "When the TLS certificate this service presents (file=cert) and the earliest of the CA "
        "certificates it verifies peers with (file=ca) expire, Unix seconds; read at start-up";
    metrics.Set("sojourn_tls_certificate_expiry_timestamp_seconds", kHelp, {{"file", "cert"}},
                absl::ToDoubleSeconds(options.tls.cert_expires - absl::UnixEpoch()));
    metrics.Set("sojourn_tls_certificate_expiry_timestamp_seconds", kHelp, {{"file", "ca"}},
                absl::ToDoubleSeconds(options.tls.ca_expires - absl::UnixEpoch()));
  }
  if (!options.metrics_address.empty()) {
    auto port = metrics.StartHttp(options.metrics_address);
    if (!port.ok()) {
      // civetweb only says "null context when constructing CivetServer".
      const std::string why = ListenFailure(options.metrics_address, /*allow_bare_port=*/true);
      if (why.empty()) return port.status();
      return absl::UnavailableError(absl::StrCat("--metrics_listen: cannot serve /metrics on ",
                                                 Excerpt(options.metrics_address), " (", why,
                                                 ")"));
    }
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

int64_t RaiseOpenFileLimitOrWarn(int64_t needed, absl::string_view what) {
  absl::StatusOr<OpenFileLimit> limit = RaiseOpenFileLimit();
  if (!limit.ok()) {
    SOJOURN_LOG(WARNING, "open files: %s", limit.status().ToString());
    return 0;
  }
  if (limit->hard != limit->before) {
    SOJOURN_LOG(INFO, "open files: soft limit raised from %d to the hard limit %d",
                limit->before, limit->hard);
  }
  if (needed > 0 && limit->hard >= 0 && limit->hard < needed) {
    SOJOURN_LOG(WARNING,
                "open files: the limit is %d, below the %d that %s need; raise the hard limit "
                "(systemd LimitNOFILE=, docker-compose ulimits: nofile:, ulimit -Hn as root)",
                limit->hard, needed, std::string(what));
  }
  return limit->hard;
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
