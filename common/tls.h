// TLS for sojourn's gRPC traffic: the services' servers, the channels they
// open to each other, and the command-line clients.
//
// A lab runs monitors on every workstation, streaming to state managers over
// the lab network; without TLS anyone on that network could push samples,
// register guests or read rankings. With one CA for the lab (scripts/make-certs
// makes one) every process is given three PEM files:
//
//   --tls_cert  the certificate (chain) this process presents, as a server and
//               as a client
//   --tls_key   its private key (unencrypted PEM)
//   --tls_ca    the CA certificates peers are verified against: the servers
//               this process dials, and the clients calling its server
//
// A service with any of them set needs all three, and by default requires its
// callers to present a certificate signed by --tls_ca (mutual TLS);
// --tls_client_auth=none accepts callers without one (still encrypted, the
// server still verified by them). A client-only program (the `sojourn` CLI,
// sojourn-replay) needs --tls_ca, and --tls_cert/--tls_key when the server
// asks for a client certificate. Servers check each client against the CA;
// clients also check that the server's certificate names the address they
// dial (a DNS name or an IP address in its subjectAltName). A certificate
// proves membership of the lab's CA, not which host the caller is; the state
// manager and the broker match it to the host a call reports for only with
// --tls_bind_hosts (CheckHostNamed; deploy/README.md "TLS").
//
// The files are read once, at start-up, and checked there (LoadTls), so a
// mistake stops the service with one line rather than failing every handshake
// later. After rotating them, restart the service. The /metrics endpoint stays
// plain HTTP.
#ifndef SOJOURN_COMMON_TLS_H_
#define SOJOURN_COMMON_TLS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sojourn {

// Paths of the PEM files, as given on the command line ("" = not given).
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
  // For a server: require a client certificate signed by `ca` (true) or
  // accept clients without one (false).
  bool require_client_cert = true;
  // How the options are spelt in messages: "--tls_" for the services'
  // flags, "--tls-" for the sojourn CLI.
  std::string flag_prefix = "--tls_";

  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// The contents of TlsFiles, read and checked.
struct TlsMaterial {
  bool enabled = false;
  bool require_client_cert = true;
  std::string cert_pem;  // "" for a client without a certificate
  std::string key_pem;
  std::string ca_pem;
  // notAfter of the (first) certificate in cert_pem, and the earliest notAfter
  // of the CA certificates still valid at load time; absl::InfinitePast()
  // when absent.
  absl::Time cert_expires = absl::InfinitePast();
  absl::Time ca_expires = absl::InfinitePast();
};

enum class TlsRole {
  kService,  // serves and dials: cert, key and ca all required
  kClient,   // only dials: ca required, cert and key optional (together)
};

// Reads and checks `files` for `role` as of `now`. Not enabled (no file given)
// is OK and yields a material with enabled == false. Errors are
// INVALID_ARGUMENT with one line naming the option and the file: a missing
// partner option, a path that is not a readable regular file, no PEM
// certificate or key in it, a CA file without a CA certificate or with only
// expired ones, an encrypted key, a key that does not match the certificate, a
// certificate not yet valid or expired, and for a service a certificate that
// does not verify against its own CA file (the peers of a sojourn cluster
// verify against the same CA, so all of them would refuse it). For a client
// that is only a warning, as is an expired certificate in a CA bundle that
// still holds a valid one; warnings are appended to `warnings` when given.
absl::StatusOr<TlsMaterial> LoadTls(const TlsFiles& files, TlsRole role, absl::Time now,
                                    std::vector<std::string>* warnings = nullptr);

// Credentials for a server and for channels from `material`; insecure ones
// when it is not enabled.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsMaterial& material);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsMaterial& material);

// What a certificate says about the host holding it, for --tls_bind_hosts.
struct CertificateIdentity {
  bool present = false;
  // It may serve: extendedKeyUsage has serverAuth, or it has no such
  // extension. scripts/make-certs --client certificates may not.
  bool server_auth = false;
  // The DNS names (lowercased) and IP addresses (inet_ntop form) of its
  // subjectAltName, loopback names left out (localhost, *.localhost,
  // 127.0.0.0/8, ::1: every make-certs certificate names them). URI, email
  // and other kinds of names are ignored.
  std::vector<std::string> names;
};

// The identity of the first certificate in `pem`; not present when it holds none.
CertificateIdentity CertificateIdentityOf(absl::string_view pem);
// The identity of the caller's TLS certificate; not present without TLS or a
// client certificate.
CertificateIdentity PeerCertificateIdentity(const grpc::ServerContextBase& context);

// The host of a state manager address: HOST of HOST:PORT, [V6]:PORT (zone
// dropped) or dns:///HOST:PORT, with an IP address in inet_ntop form.
std::string AddressHost(absl::string_view address);

// --tls_bind_hosts: OK when the caller (`peer`) may report for `host`: it
// presented a certificate that may serve and whose names hold `host` exactly
// (DNS names are lowercased, so a host name must be lowercase; an IP address
// in inet_ntop form). PERMISSION_DENIED otherwise, naming `what` and what the
// certificate names; loopback names are refused as hosts (any certificate
// names them). A host name proves nothing otherwise: any holder of a
// certificate of the lab's CA could report for any host.
absl::Status CheckHostNamed(const CertificateIdentity& peer, absl::string_view what,
                            absl::string_view host);

// The check of a service's --tls_bind_hosts: it needs mutual TLS (`tls`
// enabled, client certificates required); INVALID_ARGUMENT otherwise.
absl::Status CheckBindHostsFlag(bool bind_hosts, const TlsMaterial& tls);

// `credentials`, or insecure channel credentials when it is null: what a
// service's client classes dial with when not given any.
std::shared_ptr<grpc::ChannelCredentials> OrInsecure(
    std::shared_ptr<grpc::ChannelCredentials> credentials);

// The services' flags --tls_cert, --tls_key, --tls_ca and --tls_client_auth
// (require | none; common/tls_flags.cc), as TlsFiles. An unknown
// --tls_client_auth value yields INVALID_ARGUMENT.
absl::StatusOr<TlsFiles> TlsFilesFromFlags();
// TlsFilesFromFlags, then LoadTls as of now; logs LoadTls's warnings, and one
// for --tls_client_auth=none without TLS files (it has no effect then). In a
// service's main(), before anything is opened (exit 2 on an error):
//   absl::StatusOr<sojourn::TlsMaterial> tls = sojourn::LoadTlsFromFlags(TlsRole::kService);
absl::StatusOr<TlsMaterial> LoadTlsFromFlags(TlsRole role);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_TLS_H_
