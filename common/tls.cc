#include "common/tls.h"

#include <arpa/inet.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/text.h"

namespace sojourn {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_free(s); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// A PEM file is a few KiB; anything this large is not one.
constexpr std::streamoff kMaxPemBytes = 1 << 20;

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", t, absl::UTCTimeZone());
}

// The first queued OpenSSL error as text (and the queue cleared).
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& option) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": cannot read ", path, " (", std::strerror(errno), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": ", path, " is not a file"));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": cannot read ", path, " (", std::strerror(errno), ")"));
  }
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0 || size > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": ", path, " is larger than 1 MiB; not a PEM file"));
  }
  f.seekg(0);
  std::ostringstream out;
  out << f.rdbuf();
  if (f.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": cannot read ", path));
  }
  return out.str();
}

BioPtr MemoryBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`, in file order; at least one.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem,
                                                       const std::string& option,
                                                       const std::string& path) {
  std::vector<X509Ptr> certs;
  BioPtr bio = MemoryBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(x);
  }
  ERR_clear_error();  // the read past the last certificate
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": no PEM certificate in ", path,
                                                   " (expected -----BEGIN CERTIFICATE-----)"));
  }
  return certs;
}

absl::Time AsTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromTimeT(timegm(&tm));
}

// A passphrase callback that refuses: an encrypted key fails to load.
int NoPassphrase(char*, int, int, void* asked) {
  *static_cast<bool*>(asked) = true;
  return -1;
}

absl::StatusOr<PkeyPtr> ParseKey(const std::string& pem, const std::string& option,
                                 const std::string& path) {
  BioPtr bio = MemoryBio(pem);
  bool asked = false;
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, &asked));
  if (key == nullptr) {
    const std::string why = OpenSslError();
    if (asked || absl::StrContains(pem, "ENCRYPTED")) {
      return absl::InvalidArgumentError(absl::StrCat(
          option, ": ", path,
          " is an encrypted key; give it unencrypted (openssl pkey -in KEY -out PLAIN.key)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(option, ": no PEM private key in ", path,
                                                   " (expected -----BEGIN PRIVATE KEY-----; ", why,
                                                   ")"));
  }
  return key;
}

// Whether `chain[0]` verifies against the CA certificates (with the rest of
// `chain` as intermediates) at `now`: "" when it does, else why not.
std::string VerifyAgainst(const std::vector<X509Ptr>& chain, const std::vector<X509Ptr>& cas,
                          absl::Time now) {
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const X509Ptr& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<STACK_OF(X509), StackFree> untrusted(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted.get(), chain[i].get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (X509_STORE_CTX_init(ctx.get(), store.get(), chain[0].get(), untrusted.get()) != 1) {
    return OpenSslError();
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, absl::ToTimeT(now));
  if (X509_verify_cert(ctx.get()) == 1) return "";
  const std::string why = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  ERR_clear_error();
  return why;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTls(const TlsFiles& files, TlsRole role, absl::Time now,
                                    std::vector<std::string>* warnings) {
  const auto warn = [warnings](std::string w) {
    if (warnings != nullptr) warnings->push_back(std::move(w));
  };
  TlsMaterial out;
  out.require_client_cert = files.require_client_cert;
  if (!files.enabled()) return out;
  out.enabled = true;
  const std::string& p = files.flag_prefix;
  const std::string cert_opt = p + "cert", key_opt = p + "key", ca_opt = p + "ca";
  if (role == TlsRole::kService) {
    for (const auto& [value, option] :
         {std::pair{&files.cert, &cert_opt}, {&files.key, &key_opt}, {&files.ca, &ca_opt}}) {
      if (value->empty()) {
        return absl::InvalidArgumentError(absl::StrCat(*option, " is missing: a service with TLS ",
                                                       "needs ", cert_opt, ", ", key_opt, " and ",
                                                       ca_opt));
      }
    }
  } else {
    if (files.ca.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          ca_opt, " is missing: TLS needs the CA that signed the services' certificates"));
    }
    if (files.cert.empty() != files.key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(cert_opt, " and ", key_opt,
                                                     " go together (a client certificate and "
                                                     "its key)"));
    }
  }

  absl::StatusOr<std::string> ca_pem = ReadFile(files.ca, ca_opt);
  if (!ca_pem.ok()) return ca_pem.status();
  absl::StatusOr<std::vector<X509Ptr>> cas = ParseCertificates(*ca_pem, ca_opt, files.ca);
  if (!cas.ok()) return cas.status();
  // Only CA certificates count (a host's certificate given as --tls_ca is a
  // likely slip); expired ones are reported and left out of ca_expires.
  int ca_certs = 0, valid_ca_certs = 0;
  absl::Time latest_ca = absl::InfinitePast();
  out.ca_expires = absl::InfiniteFuture();
  for (const X509Ptr& ca : *cas) {
    if (X509_check_ca(ca.get()) <= 0) continue;
    ++ca_certs;
    const absl::Time expires = AsTime(X509_get0_notAfter(ca.get()));
    latest_ca = std::max(latest_ca, expires);
    if (expires <= now) {
      warn(absl::StrCat(ca_opt, ": a CA certificate in ", files.ca, " expired on ",
                        FormatUtc(expires), "; remove it from the file"));
      continue;
    }
    ++valid_ca_certs;
    out.ca_expires = std::min(out.ca_expires, expires);
  }
  ERR_clear_error();
  if (ca_certs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        ca_opt, ": no CA certificate in ", files.ca,
        " (a certificate there is not a CA's: give the CA's ca.pem, not a host's certificate)"));
  }
  if (valid_ca_certs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(ca_opt, ": the CA certificate in ", files.ca,
                                                   " expired on ", FormatUtc(latest_ca)));
  }
  out.ca_pem = std::move(*ca_pem);

  if (files.cert.empty()) return out;
  absl::StatusOr<std::string> cert_pem = ReadFile(files.cert, cert_opt);
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(*cert_pem, cert_opt, files.cert);
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> key_pem = ReadFile(files.key, key_opt);
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<PkeyPtr> key = ParseKey(*key_pem, key_opt, files.key);
  if (!key.ok()) return key.status();
  X509* leaf = (*chain)[0].get();
  if (X509_check_private_key(leaf, key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        key_opt, ": the key in ", files.key, " does not match the certificate in ", files.cert));
  }
  const absl::Time not_before = AsTime(X509_get0_notBefore(leaf));
  out.cert_expires = AsTime(X509_get0_notAfter(leaf));
  if (now < not_before) {
    return absl::InvalidArgumentError(absl::StrCat(cert_opt, ": the certificate in ", files.cert,
                                                   " is not valid before ", FormatUtc(not_before),
                                                   " (is this machine's clock right?)"));
  }
  if (now >= out.cert_expires) {
    return absl::InvalidArgumentError(absl::StrCat(cert_opt, ": the certificate in ", files.cert,
                                                   " expired on ", FormatUtc(out.cert_expires)));
  }
  if (const std::string why = VerifyAgainst(*chain, *cas, now); !why.empty()) {
    std::string message = absl::StrCat(cert_opt, ": the certificate in ", files.cert,
                                       " does not verify against ", files.ca, " (", why, ")");
    if (role == TlsRole::kService) {
      return absl::InvalidArgumentError(absl::StrCat(
          message, "; the other services verify against the same CA and would refuse it"));
    }
    warn(absl::StrCat(message, "; services that trust only that CA will refuse it"));
  }
  // A client certificate (scripts/make-certs --client: extended key usage
  // clientAuth only) given to a service: every peer's handshake would fail,
  // with nothing on their side naming the cause.
  // (Without the extension every use is allowed; the flags are read after
  // X509_get_extended_key_usage has cached the extensions.)
  const uint32_t usage = X509_get_extended_key_usage(leaf);
  if (role == TlsRole::kService && (X509_get_extension_flags(leaf) & EXFLAG_XKUSAGE) != 0 &&
      (X509_get_extension_flags(leaf) & EXFLAG_INVALID) == 0 && (usage & XKU_SSL_SERVER) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        cert_opt, ": the certificate in ", files.cert,
        " is for clients only (its extended key usage lacks serverAuth), so every peer would "
        "refuse it as a service's; give the service its own certificate (scripts/make-certs "
        "without --client)"));
  }
  out.cert_pem = std::move(*cert_pem);
  out.key_pem = std::move(*key_pem);
  return out;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsMaterial& material) {
  if (!material.enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      material.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = material.ca_pem;
  options.pem_key_cert_pairs.push_back({material.key_pem, material.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsMaterial& material) {
  if (!material.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = material.ca_pem;
  options.pem_private_key = material.key_pem;
  options.pem_cert_chain = material.cert_pem;
  return grpc::SslCredentials(options);
}

namespace {

// An IP address literal in inet_ntop form, or "" when `text` is not one.
std::string CanonicalIp(absl::string_view text) {
  const std::string t(text);
  unsigned char buf[sizeof(in6_addr)];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, t.c_str(), buf) == 1) {
    return inet_ntop(AF_INET, buf, out, sizeof(out)) != nullptr ? out : "";
  }
  if (inet_pton(AF_INET6, t.c_str(), buf) == 1) {
    return inet_ntop(AF_INET6, buf, out, sizeof(out)) != nullptr ? out : "";
  }
  return "";
}

// localhost, *.localhost, 127.0.0.0/8 and ::1 (`name` lowercased / canonical).
bool IsLoopbackName(const std::string& name) {
  return name == "localhost" || absl::EndsWith(name, ".localhost") ||
         absl::StartsWith(name, "127.") || name == "::1";
}

}  // namespace

CertificateIdentity CertificateIdentityOf(absl::string_view pem) {
  CertificateIdentity id;
  BioPtr bio = MemoryBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (cert == nullptr) return id;
  id.present = true;
  id.server_auth = (X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER) != 0;
  auto* sans = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int k = 0; sans != nullptr && k < sk_GENERAL_NAME_num(sans); ++k) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, k);
    std::string name;
    if (g->type == GEN_DNS) {
      const ASN1_STRING* d = g->d.dNSName;
      name = absl::AsciiStrToLower(absl::string_view(
          reinterpret_cast<const char*>(ASN1_STRING_get0_data(d)), ASN1_STRING_length(d)));
    } else if (g->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = g->d.iPAddress;
      char out[INET6_ADDRSTRLEN];
      const int family = ASN1_STRING_length(ip) == 4    ? AF_INET
                         : ASN1_STRING_length(ip) == 16 ? AF_INET6
                                                        : 0;
      if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(ip), out, sizeof(out))) {
        name = out;
      }
    }
    if (!name.empty() && !IsLoopbackName(name)) id.names.push_back(std::move(name));
  }
  GENERAL_NAMES_free(sans);
  ERR_clear_error();
  return id;
}

CertificateIdentity PeerCertificateIdentity(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return {};
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
    return CertificateIdentityOf(absl::string_view(v.data(), v.size()));
  }
  return {};
}

std::string AddressHost(absl::string_view address) {
  absl::ConsumePrefix(&address, "dns:///");
  absl::ConsumePrefix(&address, "dns:");
  const size_t colon = address.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    host = host.substr(0, host.find('%'));  // a zone (fe80::1%eth0) is not in certificates
  }
  const std::string ip = CanonicalIp(host);
  return ip.empty() ? std::string(host) : ip;
}

absl::Status CheckHostNamed(const CertificateIdentity& peer, absl::string_view what,
                            absl::string_view host) {
  constexpr absl::string_view kWhy =
      "--tls_bind_hosts takes reports for a host only from that host's own certificate";
  const std::string ip = CanonicalIp(host);
  const std::string want = ip.empty() ? std::string(host) : ip;
  if (IsLoopbackName(absl::AsciiStrToLower(want))) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", Excerpt(host),
                     " is a loopback name, which every certificate of the lab holds; ", kWhy));
  }
  if (!peer.present) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", Excerpt(host), ": the caller presented no certificate; ", kWhy));
  }
  if (!peer.server_auth) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", Excerpt(host),
                     ": the caller's certificate is a client's (no serverAuth, as "
                     "make-certs --client makes them); ",
                     kWhy));
  }
  for (const std::string& n : peer.names) {
    if (n == want) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      what, " ", Excerpt(host), " is not named in the caller's TLS certificate (",
      peer.names.empty() ? "it names no host"
                         : absl::StrCat("it names ", absl::StrJoin(peer.names, ", ")),
      absl::AsciiStrToLower(want) != want ? "; host names are matched in lowercase" : "", "); ",
      kWhy));
}

absl::Status CheckBindHostsFlag(bool bind_hosts, const TlsMaterial& tls) {
  if (!bind_hosts || (tls.enabled && tls.require_client_cert)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--tls_bind_hosts needs mutual TLS: --tls_cert, --tls_key, --tls_ca and "
      "--tls_client_auth=require");
}

std::shared_ptr<grpc::ChannelCredentials> OrInsecure(
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  return credentials != nullptr ? credentials : grpc::InsecureChannelCredentials();
}

}  // namespace sojourn
