// RankHosts through the real gRPC stack: a broker server on loopback port 0
// whose ranker calls an in-process fake predictor and fake state manager
// (also over gRPC), with hosts registered by RegisterHost / Heartbeat.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/metrics.h"
#include "common/server.h"
#include "gtest/gtest.h"
#include "services/broker/broker_service.h"
#include "tests/services/broker/fake_backends.h"
#include "tests/test_util.h"

namespace sojourn::broker {
namespace {

using sojourn::broker::testing::FakeHost;
using sojourn::broker::testing::FakeHosts;
using sojourn::broker::testing::FakePredictorService;
using sojourn::broker::testing::FakeStatemgrService;
using sojourn::testing::IsOk;

class BrokerGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hosts_.Set("fast-flaky", FakeHost{3 * 3600.0, sojourn::v1::HOST_STATE_S1_IDLE, 0.0});
    hosts_.Set("slow-steady", FakeHost{40 * 3600.0, sojourn::v1::HOST_STATE_S2_BUSY, 0.3});
    hosts_.Set("revoked", FakeHost{3600.0, sojourn::v1::HOST_STATE_S5_REVOKED, 0.0});
    auto b = GrpcServer::Start({}, {&predictor_service_, &statemgr_service_}, backend_metrics_);
    ASSERT_THAT(b.status(), IsOk());
    backend_ = std::move(*b);
    tr_source_ = std::make_unique<GrpcTrSource>(backend_->address());
    RankerConfig rc;
    rc.fanout_threads = 4;
    rc.cache_ttl = absl::Seconds(60);
    ranker_ = std::make_unique<Ranker>(*tr_source_, &load_source_, clock_, rc);
    service_ = std::make_unique<BrokerService>(registry_, *ranker_, pool_);
    service_->ExportRankingMetrics(broker_metrics_);
    auto s = GrpcServer::Start({}, {service_.get()}, broker_metrics_);
    ASSERT_THAT(s.status(), IsOk());
    broker_ = std::move(*s);
    stub_ = v1::Broker::NewStub(
        grpc::CreateChannel(broker_->address(), grpc::InsecureChannelCredentials()));
    Register("fast-flaky", 3000, 1000);
    Register("slow-steady", 1000, 1000);
    Register("revoked", 2000, 1000);
  }
  void TearDown() override {
    if (broker_) broker_->Shutdown(absl::Seconds(1));
    if (backend_) backend_->Shutdown(absl::Seconds(1));
  }

  void Register(const std::string& host, double mhz, int64_t last_sample) {
    grpc::ClientContext ctx;
    v1::RegisterHostRequest req;
    req.set_host(host);
    req.set_statemgr_address(backend_->address());
    req.mutable_attributes()->set_cpu_mhz(mhz);
    req.mutable_attributes()->set_cpu_cores(1);
    req.mutable_attributes()->set_total_mem_mb(4096);
    req.set_last_sample_unix_seconds(last_sample);
    v1::RegisterHostResponse resp;
    ASSERT_TRUE(stub_->RegisterHost(&ctx, req, &resp).ok());
  }

  // sojourn_broker_ranking_predictions_total{source} as the broker's
  // /metrics shows it; -1 when the series is missing.
  double RankingPredictions(const std::string& source) {
    return sojourn::testing::MetricValue(broker_metrics_.Render(),
                                         "sojourn_broker_ranking_predictions_total",
                                         {{"source", source}});
  }

  grpc::Status Rank(const std::string& policy, int64_t seconds, v1::RankHostsResponse* resp,
                    double memory_mb = 0) {
    grpc::ClientContext ctx;
    v1::RankHostsRequest req;
    req.set_policy(policy);
    req.mutable_job()->set_duration_seconds(seconds);
    req.mutable_job()->set_memory_mb(memory_mb);
    return stub_->RankHosts(&ctx, req, resp);
  }

  FakeHosts hosts_;
  FakePredictorService predictor_service_{hosts_};
  FakeStatemgrService statemgr_service_{hosts_};
  Metrics backend_metrics_{"fake"}, broker_metrics_{"broker"};
  std::unique_ptr<GrpcServer> backend_, broker_;
  std::unique_ptr<GrpcTrSource> tr_source_;
  GrpcLoadSource load_source_;
  FakeClock clock_{absl::FromUnixSeconds(FakeHosts::kNow)};
  HostRegistry registry_{clock_, absl::Seconds(60)};
  ThreadPool pool_{2};
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<v1::Broker::Stub> stub_;
};

// A ranking whose caller's deadline passes while predictions are being
// fetched stops asking the predictor: with 43 hosts and 4 fan-out threads, the
// first prediction is held until the broker's clock is past the call's
// deadline; then no new prediction is asked for (at most the 4 already
// started finish) and the call ends with DEADLINE_EXCEEDED from the broker.
TEST_F(BrokerGrpcTest, RankingPastItsDeadlineStopsAskingThePredictor) {
  hosts_.fallback = [](const std::string&, FakeHost*) { return true; };
  for (int i = 0; i < 40; ++i) Register(absl::StrCat("extra", i), 1000, 1000);
  absl::Notification entered, release;
  std::atomic<bool> first{true};
  hosts_.on_predict = [&](const std::string&) {
    if (first.exchange(false)) entered.Notify();
    release.WaitForNotification();
  };
  const int before = hosts_.predict_calls.load();
  grpc::Status status;
  std::thread caller([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::RankHostsRequest req;
    req.mutable_job()->set_duration_seconds(3600);
    v1::RankHostsResponse resp;
    status = stub_->RankHosts(&ctx, req, &resp);
  });
  entered.WaitForNotification();
  clock_.Advance(absl::Seconds(61));  // the broker's clock passes the call's deadline
  release.Notify();
  caller.join();
  hosts_.on_predict = nullptr;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_NE(status.error_message().find("abandoned"), std::string::npos) << status.error_message();
  EXPECT_GE(hosts_.predict_calls.load() - before, 1);
  EXPECT_LE(hosts_.predict_calls.load() - before, 4);
}

// Each policy answers with figures for every usable host and a reason for the
// revoked one. A 4 h job: fast-flaky (CR 1.5, TR gone after 3 h, MTTF 1.5 h)
// vs slow-steady (CR 0.5, load 0.3, MTTF 20 h): proactive prefers the steady
// host (fast-flaky cannot finish 4 h of work within its expected life),
// condor the fast one.
TEST_F(BrokerGrpcTest, EveryPolicyReturnsFigures) {
  for (const std::string policy : {"proactive", "condor", "round_robin", "tr"}) {
    v1::RankHostsResponse resp;
    ASSERT_TRUE(Rank(policy, 4 * 3600, &resp).ok()) << policy;
    EXPECT_EQ(resp.policy(), policy);
    ASSERT_EQ(resp.hosts_size(), 3) << policy;
    for (int i = 0; i < 2; ++i) {
      const auto& h = resp.hosts(i);
      EXPECT_TRUE(h.eligible()) << policy << " " << h.host() << ": " << h.reason();
      EXPECT_EQ(h.rank(), i + 1);
      EXPECT_FALSE(h.rule().empty());
      EXPECT_TRUE(h.has_tr_ratio() && h.has_mttf_seconds() && h.has_jct_seconds() &&
                  h.has_etl_seconds() && h.has_predicted_load_ratio())
          << policy << " " << h.host();
      EXPECT_FALSE(h.reason().empty());
    }
    EXPECT_EQ(resp.hosts(2).host(), "revoked");
    EXPECT_FALSE(resp.hosts(2).eligible());
    EXPECT_NE(resp.hosts(2).reason().find("S5"), std::string::npos);
    if (policy == "proactive") {
      EXPECT_EQ(resp.hosts(0).host(), "slow-steady");
      EXPECT_EQ(resp.rule(), "jctf");
      EXPECT_TRUE(resp.hosts(0).has_jctf_seconds());
      EXPECT_FALSE(resp.hosts(1).has_jctf_seconds());
      EXPECT_NEAR(resp.hosts(0).predicted_load_ratio(), 0.3, 1e-9);
    }
    if (policy == "condor") {
      EXPECT_EQ(resp.hosts(0).host(), "fast-flaky");
    }
  }
  // Only the first ranking fetched (3 predictor calls, one per host).
  EXPECT_EQ(hosts_.predict_calls.load(), 3);
  v1::RankHostsResponse resp;
  grpc::Status s = Rank("omniscient", 3600, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("simulation"), std::string::npos);
}

// A heartbeat that reports newer history invalidates that host's prediction.
// The broker's /metrics counts the predictions by source (at 0 before any
// ranking, so that a rate over the first one is not lost).
TEST_F(BrokerGrpcTest, HeartbeatWithNewHistoryInvalidatesTheCache) {
  EXPECT_EQ(RankingPredictions("cache"), 0);
  EXPECT_EQ(RankingPredictions("predictor"), 0);
  v1::RankHostsResponse resp;
  ASSERT_TRUE(Rank("", 3600, &resp).ok());
  EXPECT_EQ(resp.predictions_fetched(), 3);
  grpc::ClientContext ctx;
  v1::HeartbeatRequest hb;
  hb.set_host("slow-steady");
  hb.set_last_sample_unix_seconds(1006);
  v1::HeartbeatResponse hr;
  ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &hr).ok());
  resp.Clear();
  ASSERT_TRUE(Rank("", 3600, &resp).ok());
  EXPECT_EQ(resp.predictions_fetched(), 1);
  EXPECT_EQ(resp.predictions_cached(), 2);
  EXPECT_EQ(RankingPredictions("cache"), 2);
  EXPECT_EQ(RankingPredictions("predictor"), 4);
}

// The broker's hosts in sojourn_broker_hosts{state} and the silent ones
// forgotten after --forget_hosts_after_seconds, counted in
// sojourn_broker_hosts_forgotten_total{reason}; ListHosts no longer lists them.
TEST_F(BrokerGrpcTest, HostChecksCountTheHostsAndForgetTheSilentOnes) {
  auto hosts = [this](const std::string& state) {
    return sojourn::testing::MetricValue(broker_metrics_.Render(), "sojourn_broker_hosts",
                                         {{"state", state}});
  };
  auto forgotten = [this](const std::string& reason) {
    return sojourn::testing::MetricValue(broker_metrics_.Render(),
                                         "sojourn_broker_hosts_forgotten_total",
                                         {{"reason", reason}});
  };
  // Registered without a condition, with a sample now: state unknown.
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  Register("fast-flaky", 3000, now);
  Register("slow-steady", 1000, now);
  Register("revoked", 2000, now);
  service_->EnableHostChecks(broker_metrics_, absl::Hours(24));
  EXPECT_EQ(hosts("unknown"), 3);
  EXPECT_EQ(hosts("S1"), 0);
  EXPECT_EQ(hosts("expired"), 0);
  EXPECT_EQ(forgotten("silent"), 0);
  EXPECT_EQ(forgotten("max_hosts"), 0);
  {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest hb;
    hb.set_host("slow-steady");
    hb.set_last_sample_unix_seconds(now + 10);
    hb.mutable_condition()->set_state(v1::HOST_STATE_S2_BUSY);
    hb.mutable_condition()->set_load_band(-1);
    v1::HeartbeatResponse hr;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &hr).ok());
  }
  EXPECT_TRUE(service_->CheckHosts().empty());
  EXPECT_EQ(hosts("unknown"), 2);
  EXPECT_EQ(hosts("S2"), 1);
  // Two hours on, only slow-steady keeps beating: the other two expire...
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Minutes(30));
    grpc::ClientContext ctx;
    v1::HeartbeatRequest hb;
    hb.set_host("slow-steady");
    v1::HeartbeatResponse hr;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &hr).ok());
  }
  EXPECT_TRUE(service_->CheckHosts().empty());
  EXPECT_EQ(hosts("expired"), 2);
  EXPECT_EQ(hosts("unknown"), 0);
  // ...and are forgotten once silent for more than a day (slow-steady's
  // newest sample is older than that too, but its heartbeat goes on: its
  // state manager keeps it, so it is forgotten only by the sample rule).
  clock_.Advance(absl::Hours(22) + absl::Minutes(1));
  {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest hb;
    hb.set_host("slow-steady");
    hb.set_last_sample_unix_seconds(absl::ToUnixSeconds(clock_.Now()));
    v1::HeartbeatResponse hr;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &hr).ok());
  }
  EXPECT_EQ(service_->CheckHosts(), (std::vector<std::string>{"fast-flaky", "revoked"}));
  EXPECT_EQ(hosts("expired"), 0);
  EXPECT_EQ(forgotten("silent"), 2);
  grpc::ClientContext ctx;
  v1::BrokerListHostsResponse list;
  ASSERT_TRUE(stub_->ListHosts(&ctx, v1::BrokerListHostsRequest(), &list).ok());
  ASSERT_EQ(list.hosts_size(), 1);
  EXPECT_EQ(list.hosts(0).host(), "slow-steady");
}

// RegisterHost / Heartbeat with a last_sample_unix_seconds outside [0, the
// broker's clock + skew] or a statemgr_address that is not HOST:PORT are
// INVALID_ARGUMENT naming the field, and change nothing: a heartbeat at
// INT64_MAX used to stick in GetHost, and then newer history could never
// invalidate the host's cached prediction again.
TEST_F(BrokerGrpcTest, AbsurdLastSampleOrAddressIsRefusedAndChangesNothing) {
  v1::RankHostsResponse resp;
  ASSERT_TRUE(Rank("", 3600, &resp).ok());
  EXPECT_EQ(resp.predictions_fetched(), 3);
  auto heartbeat = [&](int64_t last_sample) {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest hb;
    hb.set_host("slow-steady");
    hb.set_last_sample_unix_seconds(last_sample);
    v1::HeartbeatResponse hr;
    return stub_->Heartbeat(&ctx, hb, &hr);
  };
  auto get = [&] {
    grpc::ClientContext ctx;
    v1::GetHostRequest req;
    req.set_host("slow-steady");
    v1::RegisteredHost h;
    EXPECT_TRUE(stub_->GetHost(&ctx, req, &h).ok());
    return h;
  };
  const int64_t latest = FakeHosts::kNow + kDefaultMaxSampleSkewSeconds;
  for (int64_t bad : {int64_t{-5}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(), latest + 1}) {
    grpc::Status s = heartbeat(bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("last_sample_unix_seconds"), std::string::npos)
        << s.error_message();
    grpc::ClientContext ctx;
    v1::RegisterHostRequest req;
    req.set_host("slow-steady");
    req.set_statemgr_address(backend_->address());
    req.set_last_sample_unix_seconds(bad);
    v1::RegisterHostResponse rr;
    s = stub_->RegisterHost(&ctx, req, &rr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("last_sample_unix_seconds"), std::string::npos)
        << s.error_message();
  }
  for (const char* bad : {"localhost", "::::", "h:abc", "h:-1", "h:+1", "h:", "h:1:2", "[::1]",
                          "unix:"}) {
    grpc::ClientContext ctx;
    v1::RegisterHostRequest req;
    req.set_host("slow-steady");
    req.set_statemgr_address(bad);
    v1::RegisterHostResponse rr;
    grpc::Status s = stub_->RegisterHost(&ctx, req, &rr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("statemgr_address"), std::string::npos)
        << s.error_message();
  }
  // Nothing changed: the same record, the cached predictions still valid.
  v1::RegisteredHost h = get();
  EXPECT_EQ(h.last_sample_unix_seconds(), 1000);
  EXPECT_EQ(h.statemgr_address(), backend_->address());
  EXPECT_EQ(h.attributes().cpu_mhz(), 1000);
  resp.Clear();
  ASSERT_TRUE(Rank("", 3600, &resp).ok());
  EXPECT_EQ(resp.predictions_fetched(), 0);
  // Valid times up to the clock + skew are accepted, and newer history
  // still invalidates the host's prediction.
  ASSERT_TRUE(heartbeat(latest).ok());
  EXPECT_EQ(get().last_sample_unix_seconds(), latest);
  resp.Clear();
  ASSERT_TRUE(Rank("", 3600, &resp).ok());
  EXPECT_EQ(resp.predictions_fetched(), 1);
  EXPECT_EQ(resp.predictions_cached(), 2);
}

// A job no host can run: every host listed with why, not an empty answer.
TEST_F(BrokerGrpcTest, NoHostCanRunTheJob) {
  v1::RankHostsResponse resp;
  ASSERT_TRUE(Rank("proactive", 3600, &resp, /*memory_mb=*/1e6).ok());
  ASSERT_EQ(resp.hosts_size(), 3);
  for (const auto& h : resp.hosts()) {
    EXPECT_FALSE(h.eligible());
    EXPECT_EQ(h.rank(), 0);
    EXPECT_FALSE(h.reason().empty());
  }
  int memory_reasons = 0;
  for (const auto& h : resp.hosts()) memory_reasons += h.reason().find("MiB") != std::string::npos;
  EXPECT_EQ(memory_reasons, 3);
}

// The predictor down: RankHosts is UNAVAILABLE naming the predictor's
// address (it used to answer OK, "0 of 3 hosts can run it", with each reason
// a bare "failed to connect ..."). A host fetched while the predictor is down
// next to cached ones gets a per-host reason naming it.
TEST_F(BrokerGrpcTest, PredictorDownIsUnavailableNamingIt) {
  v1::RankHostsResponse resp;
  ASSERT_TRUE(Rank("proactive", 3600, &resp).ok());  // caches the 3 predictions
  const std::string address = backend_->address();
  backend_->Shutdown(absl::Seconds(1));
  Register("late", 2000, 1000);
  resp.Clear();
  grpc::Status s = Rank("proactive", 3600, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  bool saw_late = false;
  for (const auto& h : resp.hosts()) {
    if (h.host() != "late") continue;
    saw_late = true;
    EXPECT_FALSE(h.eligible());
    EXPECT_NE(h.reason().find("predictor " + address + " unreachable"), std::string::npos)
        << h.reason();
  }
  EXPECT_TRUE(saw_late);
  ranker_->cache().Clear();
  resp.Clear();
  s = Rank("proactive", 3600, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("predictor " + address + " unreachable"), std::string::npos)
      << s.error_message();
}

// The predictor up but unable to answer for any host (their state manager
// down): a ranking with per-host reasons, not an outage of the predictor.
TEST_F(BrokerGrpcTest, PredictorAnsweringErrorsIsNotAnOutage) {
  Ranker ranker(*tr_source_, nullptr, clock_, RankerConfig{});
  v1::RegisteredHost ghost;
  ghost.set_host("ghost");  // unknown to the fake predictor: "statemgr down"
  ghost.set_statemgr_address(backend_->address());
  ghost.set_live(true);
  v1::RankHostsRequest req;
  req.mutable_job()->set_duration_seconds(3600);
  auto r = ranker.Rank(req, {ghost});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->hosts_size(), 1);
  EXPECT_NE(r->hosts(0).reason().find("statemgr down"), std::string::npos)
      << r->hosts(0).reason();
}

// Oversized or malformed names and addresses are INVALID_ARGUMENT with a
// short message, and nothing of them is stored: a 20,000-byte statemgr
// address used to be accepted, and the predictor's error quoting it broke
// the broker's channel for every RankHosts in flight.
TEST_F(BrokerGrpcTest, RejectsOversizedNamesWithShortMessages) {
  auto check = [](const grpc::Status& s, const char* what) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_FALSE(s.error_message().empty()) << what;
    EXPECT_LT(s.error_message().size(), 300u) << what;
  };
  for (const auto& [host, address] : std::vector<std::pair<std::string, std::string>>{
           {"evil", std::string(20000, 'a')},
           {std::string(100000, 'x'), "127.0.0.1:1"},
           {"a\nb", "127.0.0.1:1"},
           {"   ", "127.0.0.1:1"},
           {"evil", "127.0.0.1:1 "}}) {
    grpc::ClientContext ctx;
    v1::RegisterHostRequest req;
    req.set_host(host);
    req.set_statemgr_address(address);
    v1::RegisterHostResponse resp;
    check(stub_->RegisterHost(&ctx, req, &resp), "RegisterHost");
  }
  {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest req;
    req.set_host(std::string(100000, 'y'));
    v1::HeartbeatResponse resp;
    check(stub_->Heartbeat(&ctx, req, &resp), "Heartbeat");
  }
  {
    grpc::ClientContext ctx;
    v1::GetHostRequest req;
    req.set_host(std::string(100000, 'z'));
    v1::RegisteredHost resp;
    check(stub_->GetHost(&ctx, req, &resp), "GetHost");
  }
  v1::RankHostsResponse resp;
  check(Rank(std::string(100000, 'p'), 3600, &resp), "RankHosts policy");
  // The registry holds the three good hosts only, and ranking still works.
  resp.Clear();
  ASSERT_TRUE(Rank("proactive", 3600, &resp).ok());
  EXPECT_EQ(resp.hosts_size(), 3);
}

}  // namespace
}  // namespace sojourn::broker
