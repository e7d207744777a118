// The services' TLS flags (common/tls.h), defined once for the four services
// and sojourn-replay; each binary's --help lists them (common/flags_usage.cc).
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/text.h"
#include "common/tls.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) this process presents to its callers and, when asked, to the "
          "services it dials; with --tls_key and --tls_ca. Empty (with the other two): no TLS. "
          "Read at start-up: restart after rotating it");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert (not encrypted)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s) that the services this process dials, and the clients calling "
          "it (see --tls_client_auth), must be signed by");
ABSL_FLAG(std::string, tls_client_auth, "require",
          "with TLS on, for a service's callers (a client that only dials out ignores it): "
          "'require' = callers must present a certificate signed by --tls_ca "
          "(mutual TLS); 'none' = any caller (the connection is still encrypted)");

namespace sojourn {

absl::StatusOr<TlsFiles> TlsFilesFromFlags() {
  TlsFiles files;
  files.cert = absl::GetFlag(FLAGS_tls_cert);
  files.key = absl::GetFlag(FLAGS_tls_key);
  files.ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string auth = absl::GetFlag(FLAGS_tls_client_auth);
  if (auth == "require") {
    files.require_client_cert = true;
  } else if (auth == "none") {
    files.require_client_cert = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_client_auth must be 'require' or 'none', got '", Excerpt(auth), "'"));
  }
  return files;
}

absl::StatusOr<TlsMaterial> LoadTlsFromFlags(TlsRole role) {
  absl::StatusOr<TlsFiles> files = TlsFilesFromFlags();
  if (!files.ok()) return files.status();
  std::vector<std::string> warnings;
  absl::StatusOr<TlsMaterial> material = LoadTls(*files, role, absl::Now(), &warnings);
  if (material.ok() && !material->enabled && !files->require_client_cert) {
    SOJOURN_LOG(WARNING,
                "--tls_client_auth=none has no effect without --tls_cert, --tls_key "
                "and --tls_ca: the service is plaintext");
  }
  if (!material.ok() || !material->enabled) return material;
  for (const std::string& w : warnings) SOJOURN_LOG(WARNING, "%s", w);
  const auto utc = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%d", t, absl::UTCTimeZone());
  };
  if (material->cert_pem.empty()) {
    SOJOURN_LOG(INFO, "TLS on: services verified against %s (valid until %s)", files->ca,
                utc(material->ca_expires));
  } else {
    SOJOURN_LOG(INFO, "TLS on: presenting %s (valid until %s), peers verified against %s%s",
                files->cert, utc(material->cert_expires), files->ca,
                role == TlsRole::kClient        ? ""
                : material->require_client_cert ? ", client certificates required"
                                                : ", no client certificate asked");
  }
  return material;
}

}  // namespace sojourn
