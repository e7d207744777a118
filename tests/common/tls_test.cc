// common/tls.h: the checks of LoadTls on files made by scripts/make-certs (and
// openssl for the odd ones), at injected times, and a TLS server and channel
// built from them on loopback.
#include "common/tls.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Runs a shell command; fails the test when it does not exit 0.
void Shell(const std::string& command) {
  ASSERT_EQ(std::system((command + " 2>/dev/null").c_str()), 0) << command;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// grpc.health.v1.Health/Check with an empty request (the whole server), through
// the generic stub: the status of the call.
grpc::Status HealthCheck(const std::string& address,
                         std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::GenericStub stub(grpc::CreateChannel(address, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    MakeCerts(absl::StrCat(dir_->File("a"), " localhost client"));
    MakeCerts(absl::StrCat(dir_->File("b"), " localhost"));
    made_ = absl::Now();
  }
  // scripts/make-certs ARGS.
  static void MakeCerts(const std::string& args) {
    const char* src = std::getenv("SOJOURN_SOURCE_DIR");
    Shell(absl::StrCat(src != nullptr ? src : ".", "/scripts/make-certs ", args));
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string A(const std::string& name) { return dir_->File("a/" + name); }
  static std::string B(const std::string& name) { return dir_->File("b/" + name); }
  static TlsFiles Files(const std::string& cert, const std::string& key, const std::string& ca) {
    TlsFiles f;
    f.cert = cert;
    f.key = key;
    f.ca = ca;
    return f;
  }
  static TlsFiles ServiceFiles() {
    return Files(A("localhost.pem"), A("localhost.key"), A("ca.pem"));
  }

  static testing::TempDir* dir_;
  static absl::Time made_;
};
testing::TempDir* TlsTest::dir_ = nullptr;
absl::Time TlsTest::made_;

// No file given: plaintext, for either role.
TEST_F(TlsTest, NoFilesIsPlaintext) {
  for (TlsRole role : {TlsRole::kService, TlsRole::kClient}) {
    absl::StatusOr<TlsMaterial> m = LoadTls(TlsFiles{}, role, made_);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_FALSE(m->enabled);
  }
}

// make-certs' files load; the expiry times are the certificates' (825 days, 10 years).
TEST_F(TlsTest, LoadsMakeCertsFilesWithTheirExpiry) {
  std::vector<std::string> warnings;
  absl::StatusOr<TlsMaterial> m = LoadTls(ServiceFiles(), TlsRole::kService, made_, &warnings);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->enabled);
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_EQ(m->cert_pem, Slurp(A("localhost.pem")));
  EXPECT_EQ(m->key_pem, Slurp(A("localhost.key")));
  EXPECT_EQ(m->ca_pem, Slurp(A("ca.pem")));
  EXPECT_NEAR(absl::ToDoubleHours(m->cert_expires - made_), 825 * 24, 1);
  EXPECT_NEAR(absl::ToDoubleHours(m->ca_expires - made_), 3650 * 24, 1);
}

// The validity window is checked at the time given.
TEST_F(TlsTest, RefusesACertificateOutsideItsValidity) {
  absl::StatusOr<TlsMaterial> late =
      LoadTls(ServiceFiles(), TlsRole::kService, made_ + absl::Hours(826 * 24));
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.status().message(), HasSubstr(absl::StrCat("--tls_cert: the certificate in ",
                                                              A("localhost.pem"), " expired on ")));
  absl::StatusOr<TlsMaterial> early =
      LoadTls(ServiceFiles(), TlsRole::kService, made_ - absl::Hours(2));
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.status().message(), HasSubstr("is not valid before"));
  EXPECT_THAT(early.status().message(), HasSubstr("clock"));
  // The CA expires after 10 years: then the CA file is refused first.
  absl::StatusOr<TlsMaterial> ca_gone =
      LoadTls(ServiceFiles(), TlsRole::kService, made_ + absl::Hours(3651 * 24));
  ASSERT_FALSE(ca_gone.ok());
  EXPECT_THAT(ca_gone.status().message(), HasSubstr("--tls_ca: the CA certificate in"));
}

// A CA bundle with an expired CA beside a valid one: a warning, and the
// gauge's expiry is the valid one's.
TEST_F(TlsTest, AnExpiredCaInABundleIsAWarning) {
  Shell(
      absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ",
                   dir_->File("short.key"),
                   " -subj /CN=short -days 1 -addext "
                   "basicConstraints=critical,CA:TRUE -out ",
                   dir_->File("short.pem")));
  {
    std::ofstream bundle(dir_->File("bundle.pem"));
    bundle << Slurp(dir_->File("short.pem")) << Slurp(A("ca.pem"));
  }
  TlsFiles files = ServiceFiles();
  files.ca = dir_->File("bundle.pem");
  std::vector<std::string> warnings;
  absl::StatusOr<TlsMaterial> m =
      LoadTls(files, TlsRole::kService, made_ + absl::Hours(3 * 24), &warnings);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], HasSubstr("--tls_ca: a CA certificate in"));
  EXPECT_THAT(warnings[0], HasSubstr("expired on"));
  EXPECT_NEAR(absl::ToDoubleHours(m->ca_expires - made_), 3650 * 24, 1);
  // Before the short CA expires it is the earliest.
  warnings.clear();
  m = LoadTls(files, TlsRole::kService, made_, &warnings);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_LT(m->ca_expires - made_, absl::Hours(25));
}

// A certificate of another CA: an error for a service, a warning for a client.
TEST_F(TlsTest, ACertificateOfAnotherCa) {
  TlsFiles files = Files(B("localhost.pem"), B("localhost.key"), A("ca.pem"));
  absl::StatusOr<TlsMaterial> service = LoadTls(files, TlsRole::kService, made_);
  ASSERT_FALSE(service.ok());
  EXPECT_THAT(service.status().message(),
              HasSubstr(absl::StrCat("--tls_cert: the certificate in ", B("localhost.pem"),
                                     " does not verify against ", A("ca.pem"))));
  std::vector<std::string> warnings;
  files.flag_prefix = "--tls-";
  absl::StatusOr<TlsMaterial> client = LoadTls(files, TlsRole::kClient, made_, &warnings);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], HasSubstr("--tls-cert: the certificate in"));
}

// Each kind of bad file or missing option gets its one-line reason, naming
// the option and the file.
TEST_F(TlsTest, BadFilesAndOptions) {
  Shell(absl::StrCat("openssl pkey -in ", A("client.key"), " -aes256 -passout pass:x -out ",
                     dir_->File("encrypted.key")));
  { std::ofstream(dir_->File("garbage.pem")) << "not PEM\n"; }
  struct Case {
    TlsFiles files;
    TlsRole role;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Files(A("localhost.pem"), "", A("ca.pem")), TlsRole::kService, "--tls_key is missing"},
      {Files("", "", A("ca.pem")), TlsRole::kService, "--tls_cert is missing"},
      {Files(A("client.pem"), A("client.key"), ""), TlsRole::kClient, "--tls_ca is missing"},
      {Files(A("client.pem"), "", A("ca.pem")), TlsRole::kClient,
       "--tls_cert and --tls_key go together"},
      {Files(A("localhost.pem"), A("localhost.key"), A("nope.pem")), TlsRole::kService,
       absl::StrCat("--tls_ca: cannot read ", A("nope.pem"), " (No such file or directory)")},
      {Files(A("localhost.pem"), A("localhost.key"), dir_->path()), TlsRole::kService,
       absl::StrCat("--tls_ca: ", dir_->path(), " is not a file")},
      {Files(A("localhost.pem"), A("localhost.key"), A("localhost.pem")), TlsRole::kService,
       absl::StrCat("--tls_ca: no CA certificate in ", A("localhost.pem"))},
      {Files(dir_->File("garbage.pem"), A("localhost.key"), A("ca.pem")), TlsRole::kService,
       absl::StrCat("--tls_cert: no PEM certificate in ", dir_->File("garbage.pem"))},
      {Files(A("localhost.pem"), dir_->File("garbage.pem"), A("ca.pem")), TlsRole::kService,
       absl::StrCat("--tls_key: no PEM private key in ", dir_->File("garbage.pem"))},
      {Files(A("client.pem"), dir_->File("encrypted.key"), A("ca.pem")), TlsRole::kService,
       "is an encrypted key"},
      {Files(A("localhost.pem"), A("client.key"), A("ca.pem")), TlsRole::kService,
       absl::StrCat("--tls_key: the key in ", A("client.key"),
                    " does not match the certificate in ", A("localhost.pem"))},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TlsMaterial> m = LoadTls(c.files, c.role, made_);
    ASSERT_FALSE(m.ok()) << c.message;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr(c.message));
    EXPECT_EQ(m.status().message().find('\n'), absl::string_view::npos) << m.status();
  }
}

// What --tls_bind_hosts reads of a certificate: its DNS names and IP
// addresses, without the loopback names, and whether it may serve.
TEST_F(TlsTest, CertificateIdentityOfMakeCertsFiles) {
  MakeCerts(absl::StrCat(dir_->File("a"), " Lab-PC01,lab-pc01.lab.example,10.0.0.7,2001:DB8:0::1"));
  MakeCerts(absl::StrCat("--client ", dir_->File("a"), " ops"));
  const CertificateIdentity host = CertificateIdentityOf(Slurp(A("Lab-PC01.pem")));
  EXPECT_TRUE(host.present);
  EXPECT_TRUE(host.server_auth);
  EXPECT_EQ(host.names, (std::vector<std::string>{"lab-pc01", "lab-pc01.lab.example", "10.0.0.7",
                                                  "2001:db8::1"}));
  const CertificateIdentity client = CertificateIdentityOf(Slurp(A("ops.pem")));
  EXPECT_TRUE(client.present);
  EXPECT_FALSE(client.server_auth);
  EXPECT_EQ(client.names, std::vector<std::string>{"ops"});
  const CertificateIdentity local = CertificateIdentityOf(Slurp(A("localhost.pem")));
  EXPECT_TRUE(local.server_auth);
  EXPECT_THAT(local.names, IsEmpty());
  EXPECT_FALSE(CertificateIdentityOf("not PEM").present);

  // A client certificate loads for a client, and is refused to a service (its
  // peers' handshakes would all fail with a verify error naming nothing).
  const TlsFiles ops = Files(A("ops.pem"), A("ops.key"), A("ca.pem"));
  EXPECT_TRUE(LoadTls(ops, TlsRole::kClient, absl::Now()).ok());
  absl::StatusOr<TlsMaterial> served = LoadTls(ops, TlsRole::kService, absl::Now());
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(served.status().message(), HasSubstr("is for clients only"));
  EXPECT_TRUE(LoadTls(Files(A("Lab-PC01.pem"), A("Lab-PC01.key"), A("ca.pem")),
                      TlsRole::kService, absl::Now())
                  .ok());

  EXPECT_TRUE(CheckHostNamed(host, "host", "lab-pc01").ok());
  EXPECT_TRUE(CheckHostNamed(host, "host", "10.0.0.7").ok());
  EXPECT_TRUE(CheckHostNamed(host, "host", "2001:db8:0:0::1").ok());  // the same address
  struct Refusal {
    CertificateIdentity peer;
    std::string host, message;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {host, "lab-pc02",
            "host lab-pc02 is not named in the caller's TLS certificate (it "
            "names lab-pc01, lab-pc01.lab.example, 10.0.0.7, 2001:db8::1)"},
           {host, "Lab-PC01", "matched in lowercase"},
           {host, "localhost", "is a loopback name"},
           {host, "127.0.0.9", "is a loopback name"},
           {host, "::1", "is a loopback name"},
           {client, "ops", "the caller's certificate is a client's"},
           {CertificateIdentity{}, "lab-pc01", "the caller presented no certificate"},
           {local, "lab-pc01", "(it names no host)"},
       }) {
    absl::Status st = CheckHostNamed(r.peer, "host", r.host);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << r.host;
    EXPECT_THAT(st.message(), HasSubstr(r.message)) << r.host;
  }
}

// The host of a state manager address, as CheckHostNamed compares it.
TEST(AddressHostTest, TakesTheHostOfEveryAddressForm) {
  EXPECT_EQ(AddressHost("lab-pc01:7403"), "lab-pc01");
  EXPECT_EQ(AddressHost("dns:///lab-pc01:7403"), "lab-pc01");
  EXPECT_EQ(AddressHost("10.0.0.7:7403"), "10.0.0.7");
  EXPECT_EQ(AddressHost("[2001:DB8:0::1]:7403"), "2001:db8::1");
  EXPECT_EQ(AddressHost("[fe80::1%eth0]:7403"), "fe80::1");
}

// A server started with the material serves a client holding a certificate
// of the CA, and refuses a plaintext caller and one without a certificate.
TEST_F(TlsTest, ServerAndChannelFromTheMaterial) {
  absl::StatusOr<TlsMaterial> server_tls = LoadTls(ServiceFiles(), TlsRole::kService, absl::Now());
  ASSERT_TRUE(server_tls.ok()) << server_tls.status();
  Metrics metrics("test");
  ServerOptions options;
  options.tls = *server_tls;
  auto server = GrpcServer::Start(options, {}, metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("localhost:", (*server)->port());
  EXPECT_THAT(metrics.Render(),
              HasSubstr("sojourn_tls_certificate_expiry_timestamp_seconds{service=\"test\","
                        "file=\"cert\"}"));

  TlsFiles client = Files(A("client.pem"), A("client.key"), A("ca.pem"));
  absl::StatusOr<TlsMaterial> with_cert = LoadTls(client, TlsRole::kClient, absl::Now());
  ASSERT_TRUE(with_cert.ok()) << with_cert.status();
  EXPECT_TRUE(HealthCheck(address, ChannelCredentialsFor(*with_cert)).ok());
  EXPECT_EQ(HealthCheck(address, grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  absl::StatusOr<TlsMaterial> without_cert =
      LoadTls(Files("", "", A("ca.pem")), TlsRole::kClient, absl::Now());
  ASSERT_TRUE(without_cert.ok()) << without_cert.status();
  EXPECT_EQ(HealthCheck(address, ChannelCredentialsFor(*without_cert)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace sojourn
