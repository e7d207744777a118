// Starts the four services in this process on loopback port 0 (statemgr on a
// RocksDB temp dir, predictor, broker, monitor on a fake /proc), streams
// samples, and ranks hosts through the real gRPC stack.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

#include "common/server.h"
#include "gtest/gtest.h"
#include "services/broker/broker_service.h"
#include "services/convert.h"
#include "models/availability/frailty.h"
#include "models/availability/predict.h"
#include "models/baselines/baselines.h"
#include "services/monitor/monitor.h"
#include "services/monitor/monitor_service.h"
#include "services/predictor/availability_scorer.h"
#include "services/predictor/predictor_service.h"
#include "services/statemgr/registrar.h"
#include "services/statemgr/statemgr_service.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::IsOk;
using ::testing::HasSubstr;
using sojourn::testing::TempDir;

constexpr int64_t kMonday = 1700438400;  // 2023-11-20 00:00 UTC

// The broker is built before the predictor's port is known; this source
// connects once the test tells it where.
class DeferredTrSource final : public broker::TrSource {
 public:
  void Connect(const std::string& address) {
    inner_ = std::make_unique<broker::GrpcTrSource>(address);
  }
  absl::StatusOr<v1::PredictAvailabilityResponse> Predict(
      const v1::PredictAvailabilityRequest& request) override {
    return inner_->Predict(request);
  }

 private:
  std::unique_ptr<broker::GrpcTrSource> inner_;
};

// The predictor's job history for the broker's job queue, connected later
// likewise.
class DeferredJobHistory final : public broker::JobHistory {
 public:
  void Connect(const std::string& address) {
    inner_ = std::make_unique<broker::GrpcJobHistory>(address);
  }
  absl::StatusOr<v1::RecordJobEventResponse> Record(const v1::JobEvent& event) override {
    return inner_->Record(event);
  }
  absl::StatusOr<v1::EstimateTurnaroundResponse> Estimate(
      const v1::EstimateTurnaroundRequest& request) override {
    return inner_->Estimate(request);
  }

 private:
  std::unique_ptr<broker::GrpcJobHistory> inner_;
};

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // statemgr
    auto store = statemgr::SampleStore::Open(dir_.File("db"), false);
    ASSERT_THAT(store.status(), IsOk());
    store_ = std::move(*store);
    statemgr::HostBookConfig bc;
    bc.default_period_seconds = 300;
    book_ = std::make_unique<statemgr::HostBook>(bc, *store_, clock_);
    usage_ = std::make_unique<statemgr::UsageKeeper>(statemgr::UsageKeeperConfig{}, *book_,
                                                     *store_, clock_);
    sm_service_ =
        std::make_unique<statemgr::StateManagerService>(*book_, *usage_, pool_, sm_metrics_);
    auto sm = GrpcServer::Start({}, {sm_service_.get()}, sm_metrics_);
    ASSERT_THAT(sm.status(), IsOk());
    sm_server_ = std::move(*sm);
    // broker (TR source connected below)
    registry_ = std::make_unique<broker::HostRegistry>(clock_, absl::Seconds(60));
    // The ranker on the test's clock (its cache TTL and the predictions'
    // valid_until_unix_seconds are judged against it). Its entries live the
    // TTL from their fetch and are fetched by the ranking after it
    // (ranker_test covers the spread of refreshes and the refreshes ahead),
    // so that what a test sees of the cache does not depend on the hosts'
    // phases of the TTL or on background fetches.
    broker::RankerConfig rc;
    rc.spread_cache_refreshes = false;
    rc.refresh_threads = 0;
    ranker_ = std::make_unique<broker::Ranker>(tr_source_, nullptr, clock_, rc);
    broker_service_ = std::make_unique<broker::BrokerService>(*registry_, *ranker_, pool_);
    auto queue = broker::JobQueue::Open("");
    ASSERT_THAT(queue.status(), IsOk());
    job_queue_ = std::move(*queue);
    broker_service_->EnableJobQueue(*job_queue_, job_history_, broker::JobQueueServiceConfig{});
    ServerOptions bo;
    bo.metrics_address = "127.0.0.1:0";
    auto b = GrpcServer::Start(bo, {broker_service_.get()}, broker_metrics_);
    ASSERT_THAT(b.status(), IsOk());
    broker_server_ = std::move(*b);
    // predictor
    predictor::AvailabilityPredictorConfig pc;
    directory_ = std::make_unique<predictor::StatemgrDirectory>(broker_server_->address(),
                                                                absl::Seconds(10));
    predictor_ = std::make_unique<predictor::AvailabilityPredictor>(pc, *directory_, clock_);
    predictor_service_ =
        std::make_unique<predictor::PredictorService>(*predictor_, *directory_, pool_);
    scorer_ =
        std::make_unique<predictor::AvailabilityScorer>(*directory_, clock_, predictor_metrics_);
    predictor_service_->ScoreAvailability(scorer_.get());
    auto p = GrpcServer::Start({}, {predictor_service_.get()}, predictor_metrics_);
    ASSERT_THAT(p.status(), IsOk());
    predictor_server_ = std::move(*p);
    tr_source_.Connect(predictor_server_->address());
    job_history_.Connect(predictor_server_->address());

    broker_stub_ = v1::Broker::NewStub(grpc::CreateChannel(
        broker_server_->address(), grpc::InsecureChannelCredentials()));
    sm_stub_ = v1::StateManager::NewStub(
        grpc::CreateChannel(sm_server_->address(), grpc::InsecureChannelCredentials()));
    predictor_stub_ = v1::Predictor::NewStub(grpc::CreateChannel(
        predictor_server_->address(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    for (auto* s : {predictor_server_.get(), broker_server_.get(), sm_server_.get()}) {
      if (s != nullptr) s->Shutdown(absl::Seconds(1));
    }
  }

  // Streams `days` days of 5-minute samples of `host` through PushSamples.
  // Busy spikes only on days d with d % busy_every_days == 0.
  // Load 0.05, and `busy_load` on every 7th 5-minute sample from 09:00 to
  // 17:00 of every `busy_every_days`-th day, the two samples before it at
  // `warn_load`.
  v1::PushSamplesResponse Push(const std::string& host, int days, double busy_load,
                               int busy_every_days = 1, double warn_load = 0.05) {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    for (int d = 0; d < days; ++d) {
      v1::PushSamplesRequest req;
      req.set_host(host);
      req.set_period_seconds(300);
      req.mutable_attributes()->set_cpu_cores(4);
      req.mutable_attributes()->set_total_mem_mb(8192);
      for (int64_t t = kMonday + d * 86400; t < kMonday + (d + 1) * 86400; t += 300) {
        HostSample s;
        s.unix_seconds = t;
        const int hour = static_cast<int>((t % 86400) / 3600);
        const bool busy_day = d % busy_every_days == 0;
        const bool office = busy_day && hour >= 9 && hour < 17;
        s.cpu_load = office && (t / 300) % 7 == 0   ? busy_load
                     : office && (t / 300) % 7 >= 5 ? warn_load
                                                    : 0.05;
        s.free_mem_mb = 4000;
        *req.add_samples() = ToProto(s);
      }
      EXPECT_TRUE(writer->Write(req));
    }
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return resp;
  }

  // One hour of 5-minute samples of a host (e.g. one that has just joined), ending at
  // `end` (exclusive), at a constant load.
  bool PushHour(const std::string& host, int64_t end, double load, double free_mem_mb) {
    return PushHour(
        host, end, [load](int64_t) { return load; }, free_mem_mb);
  }
  // The same with the load of each sample's time.
  bool PushHour(const std::string& host, int64_t end, const std::function<double(int64_t)>& load,
                double free_mem_mb) {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    v1::PushSamplesRequest req;
    req.set_host(host);
    req.set_period_seconds(300);
    for (int i = 0; i < 12; ++i) {
      auto* s = req.add_samples();
      s->set_unix_seconds(end - 3600 + i * 300);
      s->set_cpu_load_ratio(load(end - 3600 + i * 300));
      s->set_free_mem_mb(free_mem_mb);
    }
    writer->Write(req);
    writer->WritesDone();
    return writer->Finish().ok();
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(kMonday + 21 * 86400 + 8 * 3600)};
  ThreadPool pool_{2};
  Metrics sm_metrics_{"statemgr"}, broker_metrics_{"broker"}, predictor_metrics_{"predictor"};
  std::unique_ptr<statemgr::SampleStore> store_;
  std::unique_ptr<statemgr::HostBook> book_;
  std::unique_ptr<statemgr::UsageKeeper> usage_;
  std::unique_ptr<statemgr::StateManagerService> sm_service_;
  std::unique_ptr<GrpcServer> sm_server_;
  DeferredTrSource tr_source_;
  std::unique_ptr<broker::HostRegistry> registry_;
  std::unique_ptr<broker::Ranker> ranker_;
  std::unique_ptr<broker::JobQueue> job_queue_;
  DeferredJobHistory job_history_;
  std::unique_ptr<broker::BrokerService> broker_service_;
  std::unique_ptr<GrpcServer> broker_server_;
  std::unique_ptr<predictor::StatemgrDirectory> directory_;
  std::unique_ptr<predictor::AvailabilityPredictor> predictor_;
  std::unique_ptr<predictor::AvailabilityScorer> scorer_;
  std::unique_ptr<predictor::PredictorService> predictor_service_;
  std::unique_ptr<GrpcServer> predictor_server_;
  std::unique_ptr<v1::Broker::Stub> broker_stub_;
  std::unique_ptr<v1::StateManager::Stub> sm_stub_;
  std::unique_ptr<v1::Predictor::Stub> predictor_stub_;
};

// A broker that cannot be reached ends a registration round at the first
// host and is logged once until it answers again (one warning per host every
// 10 s flooded the log of a state manager holding many hosts).
TEST_F(ClusterTest, AnUnreachableBrokerIsLoggedOncePerOutage) {
  for (const char* host : {"a", "b", "c", "d"}) Push(host, 1, 0.3);
  statemgr::RegistrarConfig rc;
  rc.broker_address = "127.0.0.1:1";  // nothing listens there
  rc.advertise_address = sm_server_->address();
  statemgr::Registrar down(rc, *book_, clock_);
  EXPECT_EQ(down.RegisterAll(), 0);
  EXPECT_EQ(down.RegisterAll(), 0);
  EXPECT_EQ(down.warnings(), 1);
  rc.broker_address = broker_server_->address();
  statemgr::Registrar up(rc, *book_, clock_);
  EXPECT_EQ(up.RegisterAll(), 4);
  EXPECT_EQ(up.warnings(), 0);
}

// Samples streamed to the statemgr lead, through registration, the predictor
// and the broker, to a ranking of every host with TR in [0, 1]; the busier
// host ranks lower.
TEST_F(ClusterTest, StreamsSamplesAndRanksHosts) {
  auto ack = Push("calm", 21, 0.3);
  EXPECT_EQ(ack.persisted_samples(), 21 * 288);
  EXPECT_EQ(ack.last_persisted_unix_seconds().at("calm"), kMonday + 21 * 86400 - 300);
  Push("stormy", 21, 0.95);
  statemgr::RegistrarConfig rc;
  rc.broker_address = broker_server_->address();
  rc.advertise_address = sm_server_->address();
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  // The registration carries the newest sample's load (23:55, off hours:
  // 0.05), the node's local load in the job queue's snapshots.
  auto calm = registry_->Get("calm");
  ASSERT_THAT(calm.status(), IsOk());
  ASSERT_TRUE(calm->has_cpu_load_ratio());
  EXPECT_DOUBLE_EQ(calm->cpu_load_ratio(), 0.05);

  grpc::ClientContext ctx;
  v1::RankHostsRequest req;
  req.mutable_job()->set_duration_seconds(4 * 3600);
  v1::RankHostsResponse resp;
  // Sunday 09:00 of week 3: the window covers the stormy host's busy hours.
  clock_.Set(absl::FromUnixSeconds(kMonday + 20 * 86400 + 9 * 3600));
  ASSERT_TRUE(broker_stub_->RankHosts(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.hosts_size(), 2);
  for (const auto& h : resp.hosts()) {
    ASSERT_TRUE(h.has_tr_ratio()) << h.host() << ": " << h.reason();
    EXPECT_GE(h.tr_ratio(), 0.0);
    EXPECT_LE(h.tr_ratio(), 1.0);
    EXPECT_TRUE(h.eligible()) << h.reason();
  }
  EXPECT_EQ(resp.hosts(0).host(), "calm");
  EXPECT_GT(resp.hosts(0).tr_ratio(), resp.hosts(1).tr_ratio() + 0.3);
  // The metrics interceptor counted the call.
  EXPECT_NE(broker_metrics_.Render().find("method=\"RankHosts\""), std::string::npos);
}

// A host running a job of the broker's queue (multiprogramming limit 1)
// cannot take another: the calm host, first before, is listed busy with its
// figures; the stormy one ranks first. include_busy_hosts ranks it as free,
// and once the job is cancelled it is first again. The predictor here keeps
// no job history, so the queue changes while the events go unrecorded.
TEST_F(ClusterTest, RankingSkipsHostsBusyWithQueuedJobs) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  clock_.Set(absl::FromUnixSeconds(kMonday + 20 * 86400 + 9 * 3600));
  auto rank = [&](bool include_busy) {
    grpc::ClientContext ctx;
    v1::RankHostsRequest req;
    req.mutable_job()->set_duration_seconds(4 * 3600);
    req.set_include_busy_hosts(include_busy);
    v1::RankHostsResponse resp;
    EXPECT_TRUE(broker_stub_->RankHosts(&ctx, req, &resp).ok());
    return resp;
  };
  ASSERT_EQ(rank(false).hosts(0).host(), "calm");

  v1::JobQueueResponse q;
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    req.mutable_job()->set_job_id(41);
    req.mutable_job()->set_procs(1);
    ASSERT_TRUE(broker_stub_->SubmitJob(&ctx, req, &q).ok());
    EXPECT_FALSE(q.recorded_in_history());
    EXPECT_NE(q.history_error().find("no job history configured"), std::string::npos)
        << q.history_error();
  }
  {
    grpc::ClientContext ctx;
    v1::StartJobRequest req;
    req.set_job_id(41);
    req.add_hosts("calm");
    ASSERT_TRUE(broker_stub_->StartJob(&ctx, req, &q).ok());
    EXPECT_EQ(q.running_jobs(), 1);
  }
  v1::RankHostsResponse busy = rank(false);
  ASSERT_EQ(busy.hosts_size(), 2);
  EXPECT_EQ(busy.hosts(0).host(), "stormy");
  EXPECT_EQ(busy.hosts(0).rank(), 1);
  EXPECT_TRUE(busy.hosts(0).eligible());
  EXPECT_EQ(busy.hosts(1).host(), "calm");
  EXPECT_FALSE(busy.hosts(1).eligible());
  EXPECT_TRUE(busy.hosts(1).has_tr_ratio());
  EXPECT_NE(busy.hosts(1).reason().find("busy: runs guest job 41"), std::string::npos)
      << busy.hosts(1).reason();
  EXPECT_EQ(rank(true).hosts(0).host(), "calm");
  {
    grpc::ClientContext ctx;
    v1::FinishJobRequest req;
    req.set_job_id(41);
    req.set_cancelled(true);
    ASSERT_TRUE(broker_stub_->FinishJob(&ctx, req, &q).ok());
  }
  EXPECT_EQ(rank(false).hosts(0).host(), "calm");
}

// GetWindowStats calls the state manager has answered.
int WindowStatsCalls(Metrics& m) {
  const std::string text = m.Render();
  const std::string key = "code=\"0\",grpc_service=\"sojourn.v1.StateManager\",method=\"GetWindowStats\"} ";
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + key.size());
}

// A young deployment, where no host has a window of the length asked yet:
// the empty prior is kept as a pooled one is, so each prediction of the
// minute asks its own host only. It was built again for every prediction,
// hosts^2 calls a ranking (3.76 million at 10,000 hosts, past every
// deadline, in the session 43 scale audit).
TEST_F(ClusterTest, AnEmptyPopulationPriorIsKeptToo) {
  for (int i = 0; i < 6; ++i) Push(absl::StrCat("young", i), 2, 0.3);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  clock_.Set(absl::FromUnixSeconds(kMonday + 2 * 86400 - 300));
  ASSERT_EQ(registrar.RegisterAll(), 6);
  auto predict = [&](const std::string& host) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest p;
    p.set_host(host);
    p.set_window_seconds(3 * 86400);  // longer than any host's history
    v1::PredictAvailabilityResponse resp;
    EXPECT_TRUE(predictor_stub_->PredictAvailability(&ctx, p, &resp).ok());
    return resp;
  };
  const int before = WindowStatsCalls(sm_metrics_);
  const v1::PredictAvailabilityResponse first = predict("young0");
  EXPECT_EQ(first.past_up_windows(), 0);
  EXPECT_EQ(WindowStatsCalls(sm_metrics_) - before, 1 + 6);  // its own, and the prior's
  EXPECT_EQ(predictor_->cached_priors(), 1u);
  for (int i = 1; i < 6; ++i) {
    const int at = WindowStatsCalls(sm_metrics_);
    const v1::PredictAvailabilityResponse r = predict(absl::StrCat("young", i));
    EXPECT_EQ(WindowStatsCalls(sm_metrics_) - at, 1) << i;
    EXPECT_EQ(r.tr_ratio(), first.tr_ratio()) << i;  // the same hosts, the same answer
  }
}

// One ranking builds the population prior once: the broker asks for every
// host's prediction at the same time, and each prior build asks every host's
// state manager, so 12 hosts cost 12 + 12 calls, not up to 12 + 12 x 12.
// Requests of the same minute share the prior; a later minute builds a new
// one, and priors past their TTL are dropped.
TEST_F(ClusterTest, OnePopulationPriorPerRanking) {
  for (int i = 0; i < 12; ++i) Push(absl::StrCat("vm", i), 8, i % 3 == 0 ? 0.95 : 0.3);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  const int64_t now = kMonday + 8 * 86400 - 300;
  clock_.Set(absl::FromUnixSeconds(now));
  ASSERT_EQ(registrar.RegisterAll(), 12);
  const int before = WindowStatsCalls(sm_metrics_);
  grpc::ClientContext c1;
  v1::RankHostsRequest req;
  req.mutable_job()->set_duration_seconds(3600);
  v1::RankHostsResponse r1;
  ASSERT_TRUE(broker_stub_->RankHosts(&c1, req, &r1).ok());
  EXPECT_EQ(r1.predictions_fetched(), 12);
  EXPECT_EQ(WindowStatsCalls(sm_metrics_) - before, 24);
  EXPECT_EQ(predictor_->cached_priors(), 1u);
  // 40 s later, the same minute: the host's own call only.
  auto predict = [&](const std::string& host) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest p;
    p.set_host(host);
    p.set_window_seconds(86400);  // the ranking's horizon
    v1::PredictAvailabilityResponse resp;
    EXPECT_TRUE(predictor_stub_->PredictAvailability(&ctx, p, &resp).ok());
    return resp.tr_ratio();
  };
  clock_.Advance(absl::Seconds(40));
  const int mid = WindowStatsCalls(sm_metrics_);
  predict("vm1");
  EXPECT_EQ(WindowStatsCalls(sm_metrics_) - mid, 1);
  // The next minute: a new prior (12 calls) beside the first.
  clock_.Advance(absl::Seconds(30));
  const int next = WindowStatsCalls(sm_metrics_);
  predict("vm1");
  EXPECT_EQ(WindowStatsCalls(sm_metrics_) - next, 13);
  EXPECT_EQ(predictor_->cached_priors(), 2u);
  // Past the TTL (10 minutes): the next build drops both.
  clock_.Advance(absl::Minutes(11));
  predict("vm1");
  EXPECT_EQ(predictor_->cached_priors(), 1u);
  // Ever other window lengths within the TTL: at most max_cached_priors (64)
  // are kept.
  for (int w = 1; w <= 70; ++w) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest p;
    p.set_host("vm1");
    p.set_window_seconds(3600 + 60 * w);
    v1::PredictAvailabilityResponse resp;
    ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, p, &resp).ok());
  }
  EXPECT_EQ(predictor_->cached_priors(), 64u);
  // Twelve predictions at once, straight on the predictor (no gRPC pool to
  // queue them), in a new minute: still one build while they wait.
  clock_.Advance(absl::Minutes(1));
  const int burst = WindowStatsCalls(sm_metrics_);
  std::vector<std::thread> callers;
  for (int i = 0; i < 12; ++i) {
    callers.emplace_back([this, i] {
      v1::PredictAvailabilityRequest p;
      p.set_host(absl::StrCat("vm", i));
      p.set_window_seconds(86400);
      EXPECT_THAT(predictor_->Predict(p).status(), IsOk());
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(WindowStatsCalls(sm_metrics_) - burst, 24);
}

// A host that falls silent leaves the ranking once its revocation gap has
// passed, though the broker's cached prediction is younger than its TTL and
// no newer history was reported: the predictor says until when its answer
// holds (newest sample + revocation gap), and the cache drops it then.
TEST_F(ClusterTest, SilentHostLeavesTheRankingAtItsRevocationGap) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  const int64_t last = kMonday + 21 * 86400 - 300;
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  v1::RankHostsRequest req;
  req.mutable_job()->set_duration_seconds(3600);
  // 440 s after the newest sample: within the 450 s gap (1.5 periods), up.
  clock_.Set(absl::FromUnixSeconds(last + 440));
  ASSERT_EQ(registrar.RegisterAll(), 2);
  {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest p;
    p.set_host("calm");
    p.set_window_seconds(3600);
    v1::PredictAvailabilityResponse resp;
    ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, p, &resp).ok());
    EXPECT_EQ(resp.initial_state(), v1::HOST_STATE_S1_IDLE);
    EXPECT_EQ(resp.valid_until_unix_seconds(), last + 450);
  }
  grpc::ClientContext c1;
  v1::RankHostsResponse r1;
  ASSERT_TRUE(broker_stub_->RankHosts(&c1, req, &r1).ok());
  EXPECT_EQ(r1.predictions_fetched(), 2);
  for (const auto& h : r1.hosts()) EXPECT_TRUE(h.eligible()) << h.host() << ": " << h.reason();
  // 11 s later (the cache keeps entries 60 s), silent past the gap: S5.
  clock_.Advance(absl::Seconds(11));
  ASSERT_EQ(registrar.RegisterAll(), 2);  // heartbeats go on, with no newer sample
  grpc::ClientContext c2;
  v1::RankHostsResponse r2;
  ASSERT_TRUE(broker_stub_->RankHosts(&c2, req, &r2).ok());
  EXPECT_EQ(r2.predictions_fetched(), 2);
  EXPECT_EQ(r2.predictions_cached(), 0);
  ASSERT_EQ(r2.hosts_size(), 2);
  for (const auto& h : r2.hosts()) {
    EXPECT_FALSE(h.eligible()) << h.host();
    EXPECT_EQ(h.current_state(), v1::HOST_STATE_S5_REVOKED) << h.host();
  }
}

// Live accuracy of the TR answers (AvailabilityScorer): an answer for a
// window from now is kept, one per host and window length, until the window
// plus the host's revocation gap and a minute have passed; then the host's
// states in it score the answer and the host's window frequency beside it.
TEST_F(ClusterTest, AvailabilityAnswersAreScoredWhenTheirWindowHasPassed) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  Push("quiet", 21, 0.3);                           // sends nothing after the answer
  const int64_t last = kMonday + 21 * 86400 - 300;  // the newest sample
  const int64_t start = last + 100;
  clock_.Set(absl::FromUnixSeconds(start));
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 3);
  auto predict = [&](const std::string& host, int64_t window) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host(host);
    req.set_window_seconds(window);
    v1::PredictAvailabilityResponse resp;
    EXPECT_TRUE(predictor_stub_->PredictAvailability(&ctx, req, &resp).ok());
    return resp;
  };
  auto metric = [&](const std::string& series) {
    const std::string text = predictor_metrics_.Render();
    const size_t at = text.find(series + " ");
    return at == std::string::npos ? std::nan("") : std::stod(text.substr(at + series.size() + 1));
  };
  const std::string smp = "{service=\"predictor\",method=\"smp\"}";
  const std::string freq = "{service=\"predictor\",method=\"window_frequency\"}";
  EXPECT_EQ(metric("sojourn_predictor_availability_scored_total" + smp), 0);  // declared

  const v1::PredictAvailabilityResponse calm = predict("calm", 3600);
  predict("calm", 3600);  // the same host and length: kept once
  const v1::PredictAvailabilityResponse calm_2h = predict("calm", 7200);
  const v1::PredictAvailabilityResponse stormy = predict("stormy", 3600);
  const v1::PredictAvailabilityResponse quiet = predict("quiet", 3600);
  // Shorter than the 300 s step: the model's one step, the grid point after
  // the newest sample (a window with no grid point of its own was unscored).
  const v1::PredictAvailabilityResponse brief = predict("stormy", 60);
  ASSERT_GT(calm.past_up_windows(), 0);
  ASSERT_GT(stormy.past_up_windows(), 0);
  EXPECT_EQ(calm.last_sample_unix_seconds(), last);  // where the windows scored start
  EXPECT_EQ(scorer_->pending(), 5);
  EXPECT_EQ(metric("sojourn_predictor_availability_pending{service=\"predictor\"}"), 5);
  {  // A window in the past is a backtest, not a forecast: not kept.
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("calm");
    req.set_window_seconds(1800);
    req.set_start_unix_seconds(start - 86400);
    v1::PredictAvailabilityResponse resp;
    ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, req, &resp).ok());
    EXPECT_EQ(scorer_->pending(), 5);
  }

  // The hour from the newest sample: calm stays idle; stormy is overloaded
  // for 20 minutes at half past; quiet sends nothing. Then all are silent.
  const int64_t gap = calm.valid_until_unix_seconds() - calm.last_sample_unix_seconds();
  ASSERT_GT(gap, 0);
  clock_.Set(absl::FromUnixSeconds(last + 3600 + gap + 60 - 1));
  ASSERT_TRUE(PushHour("calm", last + 3900, 0.05, 4000));
  ASSERT_TRUE(PushHour(
      "stormy", last + 3900,
      [&](int64_t t) { return t >= last + 1800 && t < last + 3000 ? 0.95 : 0.05; }, 4000));
  EXPECT_EQ(scorer_->ScoreDue(), 1);  // the brief window; the hour's a second too early
  clock_.Advance(absl::Seconds(1));
  {  // quiet's states go on through its silence: S5 once its gap has passed.
    grpc::ClientContext ctx;
    v1::GetStateIntervalsRequest req;
    req.set_host("quiet");
    req.set_start_unix_seconds(last);
    req.set_end_unix_seconds(last + 3600);
    req.set_through_silence(true);
    v1::GetStateIntervalsResponse resp;
    ASSERT_TRUE(sm_stub_->GetStateIntervals(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.intervals_size(), 2);
    EXPECT_EQ(resp.intervals(0).state(), quiet.initial_state());
    EXPECT_EQ(resp.intervals(1).state(), v1::HOST_STATE_S5_REVOKED);
    // The first grid point more than the gap after the newest sample.
    EXPECT_EQ(resp.intervals(1).start_unix_seconds(), last + (gap / 300 + 1) * 300);
    EXPECT_EQ(resp.intervals(1).end_unix_seconds(), last + 3600);
  }
  EXPECT_EQ(scorer_->ScoreDue(), 3);
  EXPECT_EQ(scorer_->pending(), 1);
  auto freq_of = [](const v1::PredictAvailabilityResponse& r) {
    return static_cast<double>(r.past_up_windows_survived()) / r.past_up_windows();
  };
  EXPECT_EQ(metric("sojourn_predictor_availability_scored_total" + smp), 4);
  EXPECT_EQ(metric("sojourn_predictor_availability_scored_total" + freq), 4);
  EXPECT_EQ(metric("sojourn_predictor_availability_survived_total{service=\"predictor\"}"), 2);
  const double square =
      (1 - calm.tr_ratio()) * (1 - calm.tr_ratio()) + stormy.tr_ratio() * stormy.tr_ratio() +
      quiet.tr_ratio() * quiet.tr_ratio() + (1 - brief.tr_ratio()) * (1 - brief.tr_ratio());
  EXPECT_NEAR(metric("sojourn_predictor_availability_brier_sum_total" + smp), square, 1e-9);
  const double freq_square = (1 - freq_of(calm)) * (1 - freq_of(calm)) +
                             freq_of(stormy) * freq_of(stormy) + freq_of(quiet) * freq_of(quiet) +
                             (1 - freq_of(brief)) * (1 - freq_of(brief));
  EXPECT_NEAR(metric("sojourn_predictor_availability_brier_sum_total" + freq), freq_square, 1e-9);
  EXPECT_NEAR(metric("sojourn_predictor_availability_predicted_sum_total" + smp),
              calm.tr_ratio() + stormy.tr_ratio() + quiet.tr_ratio() + brief.tr_ratio(), 1e-9);

  // calm's 2 h window: silent from the end of its first hour, for longer
  // than its revocation gap, so S5 inside the window: failed. (The hosts'
  // registrations with the broker expired long ago: an answer is scored at
  // the state manager that gave it.)
  clock_.Set(absl::FromUnixSeconds(last + 7200 + gap + 60));
  EXPECT_EQ(scorer_->ScoreDue(), 1);
  EXPECT_EQ(scorer_->pending(), 0);
  EXPECT_EQ(metric("sojourn_predictor_availability_scored_total" + smp), 5);
  EXPECT_EQ(metric("sojourn_predictor_availability_survived_total{service=\"predictor\"}"), 2);
  EXPECT_NEAR(metric("sojourn_predictor_availability_brier_sum_total" + smp),
              square + calm_2h.tr_ratio() * calm_2h.tr_ratio(), 1e-9);
}

// Live hosts: samples keep coming and the registrar reports every 10 s. It
// reports each host's condition (the grid's state, its start and the newest
// sample's load band, what the predictor conditions on), and the broker
// keeps its cached predictions through newer samples in the same condition
// (before, every newer sample made the next ranking cold). A change of load
// band fetches that host again; a change of state is reported at the grid
// point that shows it, and the broker lists the condition.
TEST_F(ClusterTest, LiveSamplesInTheSameConditionKeepTheCachedPredictions) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  const int64_t t0 = kMonday + 21 * 86400;  // Monday 00:00, a grid point (period 300 s)
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  auto push = [&](const std::string& host, int64_t t, double load) {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    v1::PushSamplesRequest req;
    req.set_host(host);
    auto* s = req.add_samples();
    s->set_unix_seconds(t);
    s->set_cpu_load_ratio(load);
    s->set_free_mem_mb(4000);
    EXPECT_TRUE(writer->Write(req));
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok()) << host;
  };
  auto rank = [&]() {
    grpc::ClientContext ctx;
    v1::RankHostsRequest req;
    req.mutable_job()->set_duration_seconds(3600);
    v1::RankHostsResponse resp;
    EXPECT_TRUE(broker_stub_->RankHosts(&ctx, req, &resp).ok());
    for (const auto& h : resp.hosts()) {
      EXPECT_TRUE(h.eligible()) << h.host() << ": " << h.reason();
    }
    return resp;
  };
  clock_.Set(absl::FromUnixSeconds(t0 + 5));
  push("calm", t0, 0.05);
  push("stormy", t0, 0.05);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  auto calm = registry_->Get("calm");
  ASSERT_THAT(calm.status(), IsOk());
  ASSERT_TRUE(calm->has_condition());
  EXPECT_EQ(calm->condition().state(), v1::HOST_STATE_S1_IDLE);
  EXPECT_EQ(calm->condition().load_band(), 0);  // 0.05 < Th1 / 2
  const int64_t since = calm->condition().state_since_unix_seconds();
  EXPECT_GT(since, kMonday + 20 * 86400);  // after the calm host's last busy spike, Sunday
  EXPECT_LT(since, t0);
  EXPECT_EQ(rank().predictions_fetched(), 2);
  for (int i = 1; i <= 3; ++i) {  // 10 s apart, newer samples at the same loads
    clock_.Advance(absl::Seconds(10));
    push("calm", t0 + 10 * i, 0.05);
    push("stormy", t0 + 10 * i, 0.05);
    ASSERT_EQ(registrar.RegisterAll(), 2);
    EXPECT_EQ(registry_->Get("calm")->last_sample_unix_seconds(), t0 + 10 * i);
    v1::RankHostsResponse r = rank();
    EXPECT_EQ(r.predictions_fetched(), 0) << i;
    EXPECT_EQ(r.predictions_cached(), 2) << i;
  }
  // The calm host's load moves into S1's upper band: it alone is fetched.
  clock_.Advance(absl::Seconds(10));
  push("calm", t0 + 40, 0.15);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  EXPECT_EQ(registry_->Get("calm")->condition().load_band(), 1);
  EXPECT_EQ(registry_->Get("calm")->condition().state_since_unix_seconds(), since);
  v1::RankHostsResponse r = rank();
  EXPECT_EQ(r.predictions_fetched(), 1);
  EXPECT_EQ(r.predictions_cached(), 1);
  // Into S2 at 00:00:50; the grid shows it at its next point, 00:05.
  clock_.Advance(absl::Seconds(10));
  push("calm", t0 + 50, 0.4);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  EXPECT_EQ(registry_->Get("calm")->condition().state(), v1::HOST_STATE_S1_IDLE);
  clock_.Set(absl::FromUnixSeconds(t0 + 300));
  push("calm", t0 + 300, 0.4);
  push("stormy", t0 + 300, 0.05);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  EXPECT_EQ(registry_->Get("calm")->condition().state(), v1::HOST_STATE_S2_BUSY);
  EXPECT_EQ(registry_->Get("calm")->condition().state_since_unix_seconds(), t0 + 300);
  EXPECT_EQ(registry_->Get("stormy")->condition().state(), v1::HOST_STATE_S1_IDLE);
  r = rank();
  for (const auto& h : r.hosts()) {
    EXPECT_EQ(h.current_state(),
              h.host() == "calm" ? v1::HOST_STATE_S2_BUSY : v1::HOST_STATE_S1_IDLE);
  }
  // The prediction carries the condition it was made in: the registered one.
  grpc::ClientContext ctx;
  v1::PredictAvailabilityRequest p;
  p.set_host("calm");
  p.set_window_seconds(3600);
  v1::PredictAvailabilityResponse resp;
  ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, p, &resp).ok());
  ASSERT_TRUE(resp.has_condition());
  EXPECT_EQ(resp.condition().SerializeAsString(),
            registry_->Get("calm")->condition().SerializeAsString())
      << resp.condition().ShortDebugString();
  EXPECT_EQ(resp.condition().step_seconds(), 300);
}

// A window that starts in the stormy host's busy hours predicts failure more
// often than the calm host's, through PredictAvailability with a TR curve.
TEST_F(ClusterTest, PredictAvailabilityReturnsCurve) {
  Push("stormy", 21, 0.95);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 1);
  clock_.Set(absl::FromUnixSeconds(kMonday + 21 * 86400 - 200));
  grpc::ClientContext ctx;
  v1::PredictAvailabilityRequest req;
  req.set_host("stormy");
  req.set_window_seconds(3 * 3600);
  // Monday ~09:00 of week 3, on a sample between two spikes (the host is up).
  int64_t start = kMonday + 14 * 86400 + 9 * 3600;
  while ((start / 300) % 7 != 3) start += 300;
  req.set_start_unix_seconds(start);
  req.set_curve_points(6);
  v1::PredictAvailabilityResponse resp;
  ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.curve_size(), 6);
  EXPECT_EQ(resp.curve(5).offset_seconds(), 3 * 3600);
  EXPECT_NEAR(resp.curve(5).tr_ratio(), resp.tr_ratio(), 1e-12);
  for (int i = 1; i < resp.curve_size(); ++i) {
    EXPECT_LE(resp.curve(i).tr_ratio(), resp.curve(i - 1).tr_ratio() + 1e-12);
  }
  EXPECT_LT(resp.tr_ratio(), 0.5);  // a spike above Th2 every 35 minutes in office hours
  // 10 same-clock weekday windows, plus those an hour earlier and later.
  EXPECT_GE(resp.history_windows(), 10);
  EXPECT_FALSE(resp.low_history()) << resp.initial_state();
  // The MTTF is the integral of TR over the window, also when the window is
  // no multiple of the 300 s grid step or shorter than one step (it was the
  // whole last step: 300 s for a 100 s window).
  for (int64_t window : {100, 1000, 3 * 3600}) {
    grpc::ClientContext c;
    req.set_window_seconds(window);
    req.set_curve_points(100);
    v1::PredictAvailabilityResponse r;
    ASSERT_TRUE(predictor_stub_->PredictAvailability(&c, req, &r).ok()) << window;
    EXPECT_EQ(r.step_seconds(), 300);
    EXPECT_LE(r.mttf_seconds(), static_cast<double>(window)) << window;
    EXPECT_GE(r.mttf_seconds(), r.tr_ratio() * static_cast<double>(window)) << window;
    EXPECT_EQ(r.curve_size(), std::min<int64_t>(100, (window + 299) / 300)) << window;
    EXPECT_EQ(r.curve(r.curve_size() - 1).offset_seconds(), window) << window;
  }
}

// Malformed requests get INVALID_ARGUMENT / NOT_FOUND with a message and the
// services keep serving.
TEST_F(ClusterTest, MalformedRequestsAreRejected) {
  {
    grpc::ClientContext ctx;
    v1::RankHostsRequest req;
    req.mutable_job()->set_duration_seconds(-3600);
    v1::RankHostsResponse resp;
    grpc::Status s = broker_stub_->RankHosts(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_FALSE(s.error_message().empty());
  }
  {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("ghost");
    req.set_window_seconds(3600);
    v1::PredictAvailabilityResponse resp;
    grpc::Status s = predictor_stub_->PredictAvailability(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("ghost"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("ghost");
    req.set_window_seconds(0);
    v1::PredictAvailabilityResponse resp;
    EXPECT_EQ(predictor_stub_->PredictAvailability(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Each bad field is named; a start more than a year ahead (INT64_MAX was
  // answered, start + window overflowing) is refused, one in the past is a
  // backtest and answered.
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  for (const auto& [field, set] :
       std::vector<std::pair<std::string, std::function<void(v1::PredictAvailabilityRequest*)>>>{
           {"history_days", [](auto* r) { r->set_history_days(-1); }},
           {"history_days", [](auto* r) { r->set_history_days(36501); }},
           {"curve_points", [](auto* r) { r->set_curve_points(100001); }},
           {"start_unix_seconds", [](auto* r) { r->set_start_unix_seconds(-1); }},
           {"start_unix_seconds",
            [](auto* r) { r->set_start_unix_seconds(std::numeric_limits<int64_t>::max()); }},
           {"start_unix_seconds",
            [now](auto* r) { r->set_start_unix_seconds(now + 367 * 86400); }}}) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("good-a");
    req.set_window_seconds(3600);
    set(&req);
    v1::PredictAvailabilityResponse resp;
    grpc::Status s = predictor_stub_->PredictAvailability(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.DebugString();
    EXPECT_EQ(s.error_message().rfind(field + " must be", 0), 0u) << s.error_message();
  }
  for (const int64_t start : {int64_t{1}, now + 300 * 86400}) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("good-a");  // not registered here: past the checks, the lookup fails
    req.set_window_seconds(3600);
    req.set_start_unix_seconds(start);
    v1::PredictAvailabilityResponse resp;
    grpc::Status s = predictor_stub_->PredictAvailability(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("empty"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    v1::PushSamplesRequest req;
    req.set_host("h");
    req.add_samples()->set_unix_seconds(100);
    req.mutable_samples(0)->set_cpu_load_ratio(-1);
    writer->Write(req);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::GetWindowStatsRequest req;
    req.set_host("ghost");
    req.set_length_seconds(3600);
    v1::GetWindowStatsResponse resp;
    EXPECT_EQ(sm_stub_->GetWindowStats(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // A wrong state manager address: UNAVAILABLE naming the address, the host,
  // the gRPC code and why (it used to end in an empty ": ").
  for (const bool usage : {false, true}) {
    grpc::ClientContext ctx;
    grpc::Status s;
    if (usage) {
      v1::HowLongRequest req;
      req.set_host("good-a");
      req.set_free_cpu_ratio(0.5);
      req.set_statemgr_address("127.0.0.1:1");
      v1::HowLongResponse resp;
      s = predictor_stub_->HowLong(&ctx, req, &resp);
    } else {
      v1::PredictAvailabilityRequest req;
      req.set_host("good-a");
      req.set_window_seconds(3600);
      req.set_statemgr_address("127.0.0.1:1");
      v1::PredictAvailabilityResponse resp;
      s = predictor_stub_->PredictAvailability(&ctx, req, &resp);
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_NE(s.error_message().find("127.0.0.1:1 of host good-a: UNAVAILABLE: "),
              std::string::npos)
        << s.error_message();
    EXPECT_GT(s.error_message().size(),
              s.error_message().find("UNAVAILABLE: ") + std::string("UNAVAILABLE: ").size())
        << s.error_message();
  }
  // Oversized strings are INVALID_ARGUMENT with a short message, never
  // echoed whole (a status message travels in metadata, which peers cap).
  {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("h");
    req.set_window_seconds(3600);
    req.set_statemgr_address(std::string(100000, 'a'));
    v1::PredictAvailabilityResponse resp;
    grpc::Status s = predictor_stub_->PredictAvailability(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LT(s.error_message().size(), 300u);
  }
  {
    grpc::ClientContext ctx;
    v1::PredictUsageRequest req;
    req.set_host(std::string(100000, 'h'));
    req.set_resource("cpu");
    req.set_hours(1);
    req.set_statemgr_address(sm_server_->address());
    v1::PredictUsageResponse resp;
    grpc::Status s = predictor_stub_->PredictUsage(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LT(s.error_message().size(), 300u);
  }
  {
    grpc::ClientContext ctx;
    v1::PredictUsageRequest req;
    req.set_host("h");
    req.set_resource(std::string(100000, 'r'));
    req.set_hours(1);
    v1::PredictUsageResponse resp;
    grpc::Status s = sm_stub_->PredictUsage(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LT(s.error_message().size(), 300u);
    EXPECT_NE(s.error_message().find("100000 bytes"), std::string::npos);
  }
  // Still serving, and nothing stored was lost.
  auto ack = Push("h", 1, 0.1);
  EXPECT_EQ(ack.persisted_samples(), 288);
}

// GetWindowStats: an end far in the future answers at once (it used to walk
// back one day at a time from INT64_MAX and wedge the server); a negative
// end, a UTC offset beyond +-14 h (INT32_MIN included) and an unknown
// day_type are INVALID_ARGUMENT with a message.
TEST_F(ClusterTest, WindowStatsRejectsBadRangesAndClampsTheEnd) {
  Push("calm", 14, 0.3);
  auto stats = [&](void (*edit)(v1::GetWindowStatsRequest*), v1::GetWindowStatsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::GetWindowStatsRequest req;
    req.set_host("calm");
    req.set_day_type(v1::DAY_TYPE_WEEKDAY);
    req.set_start_second_of_day(9 * 3600);
    req.set_length_seconds(3600);
    edit(&req);
    return sm_stub_->GetWindowStats(&ctx, req, resp);
  };
  v1::GetWindowStatsResponse last, far;
  ASSERT_TRUE(stats([](v1::GetWindowStatsRequest*) {}, &last).ok());
  grpc::Status s = stats([](auto* r) { r->set_end_unix_seconds(INT64_MAX); }, &far);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(far.window_start_unix_seconds_size(), last.window_start_unix_seconds_size());
  EXPECT_EQ(far.window_start_unix_seconds_size(), 10);
  for (auto edit : std::vector<void (*)(v1::GetWindowStatsRequest*)>{
           [](auto* r) { r->set_end_unix_seconds(-1); },
           [](auto* r) { r->set_end_unix_seconds(INT64_MIN); },
           [](auto* r) { r->set_utc_offset_seconds(INT32_MIN); },
           [](auto* r) { r->set_utc_offset_seconds(INT32_MAX); },
           [](auto* r) { r->set_utc_offset_seconds(-14 * 3600 - 1); },
           [](auto* r) { r->set_day_type(static_cast<v1::DayType>(99)); }}) {
    v1::GetWindowStatsResponse resp;
    grpc::Status bad = stats(edit, &resp);
    EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.error_message();
    EXPECT_FALSE(bad.error_message().empty());
  }
  v1::GetWindowStatsResponse east;
  EXPECT_TRUE(stats([](auto* r) { r->set_utc_offset_seconds(-14 * 3600); }, &east).ok());
}

// PushSamples refuses, atomically and with a message naming the sample, what
// would poison a host: samples from the future (beyond the clock + 1 h, the
// default --max_clock_skew_seconds), NaN or negative fields, a period outside
// 1 s .. 1 day, and host names of only spaces or with control characters.
// The host is not silenced afterwards, and when a later message of a stream
// fails the error says how many samples earlier messages stored.
TEST_F(ClusterTest, PushSamplesRejectsPoisonAtomically) {
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  auto sample = [](int64_t t) {
    v1::HostSample s;
    s.set_unix_seconds(t);
    s.set_cpu_load_ratio(0.05);
    s.set_free_mem_mb(4000);
    return s;
  };
  auto push = [&](const std::vector<v1::PushSamplesRequest>& msgs,
                  v1::PushSamplesResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = sm_stub_->PushSamples(&ctx, resp);
    for (const auto& m : msgs) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  };
  auto batch = [&](const std::string& host, std::vector<int64_t> times) {
    v1::PushSamplesRequest r;
    r.set_host(host);
    for (int64_t t : times) *r.add_samples() = sample(t);
    return r;
  };
  auto stored = [&](const std::string& host) {
    grpc::ClientContext ctx;
    v1::GetSeriesRequest req;
    req.set_host(host);
    v1::GetSeriesResponse resp;
    grpc::Status s = sm_stub_->GetSeries(&ctx, req, &resp);
    return s.ok() ? resp.samples_size() : -1;
  };
  std::vector<std::pair<std::string, v1::PushSamplesRequest>> bad;
  for (int64_t t : {now + 3601, now + 86400, int64_t{32503680000}, INT64_MAX}) {
    bad.emplace_back("future", batch("h", {now - 60, t}));
  }
  {
    auto r = batch("h", {now});
    r.mutable_samples(0)->set_free_mem_mb(std::nan(""));
    bad.emplace_back("nan mem", r);
    r = batch("h", {now});
    r.mutable_samples(0)->set_swap_in_pages_per_second(std::nan(""));
    bad.emplace_back("nan swap", r);
    r = batch("h", {now});
    r.mutable_samples(0)->set_swap_out_pages_per_second(-5);
    bad.emplace_back("negative swap", r);
    for (int64_t period : {int64_t{-5}, int64_t{86401}, int64_t{1} << 62, INT64_MAX, INT64_MIN}) {
      r = batch("h", {now});
      r.set_period_seconds(period);
      bad.emplace_back("period", r);
    }
    r = batch("h", {now});
    r.mutable_attributes()->set_cpu_mhz(std::nan(""));
    bad.emplace_back("nan mhz", r);
    r = batch("h", {now});
    r.mutable_attributes()->set_cpu_cores(-4);
    bad.emplace_back("negative cores", r);
    r = batch("h", {now});
    r.mutable_attributes()->set_total_mem_mb(-INFINITY);
    bad.emplace_back("-inf memory", r);
    bad.emplace_back("blank host", batch("   ", {now}));
    bad.emplace_back("newline host", batch("a/b\nc", {now}));
  }
  for (const auto& [what, req] : bad) {
    v1::PushSamplesResponse resp;
    grpc::Status s = push({req}, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_FALSE(s.error_message().empty()) << what;
    if (what == "future") {
      EXPECT_NE(s.error_message().find("sample 1 "), std::string::npos) << s.error_message();
      EXPECT_NE(s.error_message().find("3600"), std::string::npos) << s.error_message();
    }
  }
  EXPECT_EQ(stored("h"), -1);  // nothing of any rejected batch, not even sample 0
  // Within the skew is fine, and the host still takes its next real samples.
  v1::PushSamplesResponse ok;
  ASSERT_TRUE(push({batch("h", {now - 60, now + 1800})}, &ok).ok());
  EXPECT_EQ(ok.persisted_samples(), 2);
  v1::PushSamplesRequest with_period = batch("h", {now + 1900});
  with_period.set_period_seconds(86400);
  ASSERT_TRUE(push({with_period}, &ok).ok());
  EXPECT_EQ(stored("h"), 3);
  // But a real sample of now is "not after the last persisted" (now + 1900):
  // dropped as a duplicate, and counted as shadowed (its loss is visible).
  const std::string shadowed = "sojourn_statemgr_samples_shadowed_total{service=\"statemgr\"} ";
  EXPECT_NE(sm_metrics_.Render().find(shadowed + "0\n"), std::string::npos);
  v1::PushSamplesResponse dup;
  ASSERT_TRUE(push({batch("h", {now + 60, now + 120})}, &dup).ok());
  EXPECT_EQ(dup.persisted_samples(), 0);
  EXPECT_EQ(dup.duplicate_samples(), 2);
  EXPECT_EQ(stored("h"), 3);
  EXPECT_NE(sm_metrics_.Render().find(shadowed + "2\n"), std::string::npos)
      << sm_metrics_.Render();

  // A later message fails: the earlier ones are stored, and the error says so.
  v1::PushSamplesResponse partial;
  grpc::Status s = push({batch("multi", {now - 300, now - 240, now - 180}),
                         batch("multi", {now - 120, now + 7200})},
                        &partial);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("3 samples of earlier messages were stored"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(stored("multi"), 3);
}

// Below the disk reserve (--min_free_disk_mb; here above any disk)
// PushSamples is RESOURCE_EXHAUSTED naming --db_path and stores nothing
// (RocksDB 7.8 aborted when a write met a full disk); the monitor keeps the
// samples and sends them again.
TEST_F(ClusterTest, PushSamplesBelowTheDiskReserveStoresNothing) {
  statemgr::StateManagerServiceConfig sc;
  sc.db_path = dir_.File("db");
  sc.min_free_disk_mb = int64_t{1} << 40;
  Metrics metrics("statemgr");
  statemgr::StateManagerService guarded(*book_, *usage_, pool_, metrics, sc);
  auto server = GrpcServer::Start({}, {&guarded}, metrics);
  ASSERT_THAT(server.status(), IsOk());
  auto stub = v1::StateManager::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::PushSamplesResponse resp;
  auto writer = stub->PushSamples(&ctx, &resp);
  v1::PushSamplesRequest req;
  req.set_host("reserve");
  v1::HostSample* sample = req.add_samples();
  sample->set_unix_seconds(absl::ToUnixSeconds(clock_.Now()));
  sample->set_cpu_load_ratio(0.1);
  writer->Write(req);
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("MiB free on the disk of --db_path"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(resp.persisted_samples(), 0);
  grpc::ClientContext get;
  v1::GetSeriesRequest series;
  series.set_host("reserve");
  v1::GetSeriesResponse got;
  EXPECT_EQ(sm_stub_->GetSeries(&get, series, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  (*server)->Shutdown(absl::Seconds(1));
}

// Usage forecasts through the predictor, answered by the host's statemgr:
// every answer names its method; a host with under 4 hours of data gets
// persistence, not an error; bad questions are INVALID_ARGUMENT.
TEST_F(ClusterTest, UsageForecastsNameTheirMethod) {
  Push("calm", 21, 0.3);
  ASSERT_TRUE(PushHour("fresh", kMonday + 21 * 86400, 0.25, 1000));  // one hour of data
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  clock_.Set(absl::FromUnixSeconds(kMonday + 21 * 86400));

  grpc::ClientContext c1;
  v1::PredictUsageRequest pu;
  pu.set_host("calm");
  pu.set_resource("cpu");
  pu.set_hours(4);
  v1::PredictUsageResponse pr;
  ASSERT_TRUE(predictor_stub_->PredictUsage(&c1, pu, &pr).ok());
  EXPECT_EQ(pr.use_ratio_size(), 48);
  EXPECT_FALSE(pr.method().method().empty());
  for (double v : pr.use_ratio()) {
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 1);
  }

  grpc::ClientContext c2;
  v1::CanRunRequest cr;
  cr.set_host("fresh");
  cr.set_free_cpu_ratio(0.5);
  cr.set_hours(2);
  v1::CanRunResponse ca;
  ASSERT_TRUE(predictor_stub_->CanRun(&c2, cr, &ca).ok());
  EXPECT_EQ(ca.cpu_method().method(), "persist");
  EXPECT_TRUE(ca.can_run()) << ca.reason();  // 0.25 used persists: 0.75 free >= 0.5
  {
    // More memory than the host has: no, in one short line (1e308 MiB was
    // printed with all its 309 digits).
    grpc::ClientContext ctx;
    v1::CanRunRequest huge = cr;
    huge.set_free_mem_mb(1e308);
    v1::CanRunResponse no;
    ASSERT_TRUE(predictor_stub_->CanRun(&ctx, huge, &no).ok());
    EXPECT_FALSE(no.can_run());
    EXPECT_EQ(no.reason().rfind("mem: needs 1e+308 MiB free, the host has ", 0), 0u) << no.reason();
    EXPECT_LT(no.reason().size(), 80u) << no.reason();
  }

  {
    // Nothing asked for: INVALID_ARGUMENT, not a trivial yes / 72 h.
    grpc::ClientContext ctx;
    v1::CanRunRequest nothing = cr;
    nothing.set_free_cpu_ratio(0);
    v1::CanRunResponse no;
    const grpc::Status s = predictor_stub_->CanRun(&ctx, nothing, &no);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("nothing to check"), std::string::npos) << s.error_message();
    grpc::ClientContext ctx2;
    v1::HowLongRequest how;
    how.set_host("fresh");
    v1::HowLongResponse resp;
    EXPECT_EQ(predictor_stub_->HowLong(&ctx2, how, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }

  grpc::ClientContext c3;
  v1::HowLongRequest hl;
  hl.set_host("fresh");
  hl.set_free_cpu_ratio(0.9);  // more than the 0.75 free now
  v1::HowLongResponse ha;
  ASSERT_TRUE(predictor_stub_->HowLong(&c3, hl, &ha).ok());
  EXPECT_EQ(ha.hours(), 0);
  EXPECT_EQ(ha.cpu_method().method(), "persist");

  grpc::ClientContext c4;
  pu.set_hours(-1);
  EXPECT_EQ(predictor_stub_->PredictUsage(&c4, pu, &pr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext c5;
  pu.set_hours(2);
  pu.set_resource("disk");
  EXPECT_EQ(predictor_stub_->PredictUsage(&c5, pu, &pr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext c6;
  pu.set_resource("cpu");
  pu.set_host("ghost");
  EXPECT_EQ(predictor_stub_->PredictUsage(&c6, pu, &pr).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Issue 3 acceptance 5 / issue 7 acceptance 3: PredictAvailability returns
// the TR of the library pipeline sojourn-eval runs (ClassifyToGrid ->
// CollectStats -> PredictFromStats with the population prior and the host's
// age in its state) for the same history.
// The library pipeline of sojourn-eval for host "calm" at `start`: each host's
// CollectStats, the population prior from PopulationPriorBuilder, the host's
// age in its state, PredictFromStats.
availability::TrPrediction LibraryPipeline(statemgr::HostBook& book, int64_t start,
                                           const availability::EstimatorOptions& opt,
                                           availability::HostState* init,
                                           availability::SojournStats* own_stats = nullptr) {
  availability::ClassifierConfig cc;
  cc.revocation_gap_seconds = 450;  // the statemgr's rule: max(60 s, 1.5 periods)
  availability::WindowSpec spec;
  spec.day_type = availability::DayTypeOf(start, 0);
  spec.start_second_of_day = start - availability::LocalMidnight(start, 0);
  spec.length_seconds = 5 * 3600;
  availability::SojournStats own;
  availability::PopulationPriorBuilder builder;
  availability::HostFrailtyModel frailty;
  availability::FailureExposure calm_exposure;
  availability::BandExposure band;
  availability::StateSeries calm_series;
  for (const std::string host : {"calm", "stormy"}) {
    bool truncated = false;
    auto samples = book.Series(host, 0, 0, 1 << 30, &truncated);
    EXPECT_THAT(samples.status(), IsOk());
    availability::StateSeries series = availability::ClassifyToGrid(*samples, cc, 300, 0);
    availability::SojournStats stats = availability::CollectStats(series, spec, start, opt);
    builder.Add(stats);
    const availability::FailureExposure exposure =
        availability::CountFailureExposure(series, start, 0);
    frailty.Add(exposure);
    band.Merge(availability::CountBandExposure(series, start, 0, 60, opt.recent_age_seconds,
                                               opt.long_age_seconds));
    if (host == "calm") {
      own = stats;
      calm_series = series;
      calm_exposure = exposure;
    }
  }
  const availability::SojournStats pooled = builder.Build(opt.level_corrected_borrowing);
  frailty.Build();
  if (opt.host_frailty) {
    own.prior_hazard_ratio =
        opt.frailty_by_day_type
            ? frailty.Theta(calm_exposure, spec.day_type == availability::DayType::kWeekend)
            : frailty.Theta(calm_exposure);
  }
  if (own_stats != nullptr) *own_stats = own;
  const size_t at = static_cast<size_t>((start - calm_series.start_unix) / 300);
  *init = calm_series.states[at];
  const int64_t age = availability::InitialAgeSteps(calm_series.states, at, 1 << 20) * 300;
  availability::FirstSojournRatio ratio;
  if (opt.load_band_first_sojourn) {
    ratio = band.RatioOf(spec.day_type == availability::DayType::kWeekend, *init,
                         calm_series.load_band[at]);
  }
  return availability::PredictFromStats(own, *init, 60, opt, &pooled, age, ratio);
}

TEST_F(ClusterTest, PredictAvailabilityMatchesTheLibraryPipeline) {
  Push("calm", 21, 0.75, /*busy_every_days=*/3);  // S3 spikes on every third day
  Push("stormy", 21, 0.95);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  const int64_t start = kMonday + 14 * 86400 + 9 * 3600 + 1800;  // Monday 09:30, week 3
  clock_.Set(absl::FromUnixSeconds(start));

  grpc::ClientContext ctx;
  v1::PredictAvailabilityRequest req;
  req.set_host("calm");
  req.set_window_seconds(5 * 3600);
  req.set_start_unix_seconds(start);
  v1::PredictAvailabilityResponse resp;
  ASSERT_TRUE(predictor_stub_->PredictAvailability(&ctx, req, &resp).ok());

  // The same computation straight from the libraries, with the defaults.
  availability::HostState init;
  availability::SojournStats own;
  const auto expected =
      LibraryPipeline(*book_, start, availability::EstimatorOptions(), &init, &own);
  EXPECT_EQ(static_cast<int>(resp.initial_state()), static_cast<int>(init));
  EXPECT_NEAR(resp.tr_ratio(), expected.tr.back(), 1e-12);
  EXPECT_NEAR(resp.mttf_seconds(), expected.mttf_seconds, 1e-6);
  EXPECT_GT(resp.tr_ratio(), 0.0);
  EXPECT_LT(resp.tr_ratio(), 1.0);
  // The empirical baseline beside it: the host's own 09:30 weekday windows of
  // 5 h in its 14 days of history, some hit by the spikes of every third day.
  EXPECT_EQ(resp.past_up_windows(), static_cast<int>(own.own_up_windows));
  EXPECT_EQ(resp.past_up_windows_survived(), static_cast<int>(own.own_up_survived));
  EXPECT_GE(resp.past_up_windows(), 8);
  EXPECT_LT(resp.past_up_windows_survived(), resp.past_up_windows());
  EXPECT_GT(resp.past_up_windows_survived(), 0);
  // HTCondor's and BOINC's estimates only when asked for, then the library's
  // on the host's grid up to the window start.
  EXPECT_FALSE(resp.has_deployed_estimates());
  {
    grpc::ClientContext dctx;
    req.set_deployed_estimates(true);
    v1::PredictAvailabilityResponse with;
    ASSERT_TRUE(predictor_stub_->PredictAvailability(&dctx, req, &with).ok());
    EXPECT_NEAR(with.tr_ratio(), resp.tr_ratio(), 1e-15);  // the TR does not change
    ASSERT_TRUE(with.has_deployed_estimates());
    availability::ClassifierConfig cc;
    cc.revocation_gap_seconds = 450;
    bool truncated = false;
    auto samples = book_->Series("calm", 0, 0, 1 << 30, &truncated);
    ASSERT_THAT(samples.status(), IsOk());
    const availability::StateSeries series = availability::ClassifyToGrid(*samples, cc, 300, 0);
    const size_t at = static_cast<size_t>((start - series.start_unix) / 300);
    std::vector<bool> up(at + 1);
    for (size_t i = 0; i <= at; ++i) up[i] = !availability::IsFailure(series.states[i]);
    const baselines::DeployedEstimates want = baselines::DeployedEstimatesAt(up, at, 60, 300);
    const v1::DeployedEstimates& got = with.deployed_estimates();
    EXPECT_NEAR(got.avail_time_tr(), want.avail_time_tr, 1e-12);
    EXPECT_EQ(got.completed_up_intervals(), want.completed_intervals);
    EXPECT_EQ(got.up_seconds(), want.up_steps * 300);
    EXPECT_NEAR(got.on_fraction(), want.on_fraction, 1e-12);
    EXPECT_GT(got.completed_up_intervals(), 2);  // the spikes of every third day
    EXPECT_GT(got.on_fraction(), 0.5);
    EXPECT_LT(got.on_fraction(), 1.0);
    req.set_deployed_estimates(false);
  }

  // A predictor with `pc` asked for `at`: its answer and the library
  // pipeline's with the same options agree; returns the TR.
  auto matches_library = [&](const predictor::AvailabilityPredictorConfig& pc, int64_t at) {
    predictor::AvailabilityPredictor p(pc, *directory_, clock_);
    v1::PredictAvailabilityRequest r = req;
    r.set_start_unix_seconds(at);
    auto got = p.Predict(r);
    EXPECT_THAT(got.status(), IsOk());
    if (!got.ok()) return -1.0;
    availability::HostState init;
    const auto expected = LibraryPipeline(*book_, at, pc.estimator, &init);
    EXPECT_EQ(static_cast<int>(got->initial_state()), static_cast<int>(init));
    EXPECT_NEAR(got->tr_ratio(), expected.tr.back(), 1e-12);
    EXPECT_NEAR(got->mttf_seconds(), expected.mttf_seconds, 1e-6);
    EXPECT_GT(got->tr_ratio(), 0.0);
    EXPECT_LT(got->tr_ratio(), 1.0);
    return got->tr_ratio();
  };

  // And with the issue 3 switches on (empirical-Bayes prior strength, exact
  // age conditioning): the statemgr ships the exact-age table, the predictor
  // pools with the library's builder.
  predictor::AvailabilityPredictorConfig pc;
  pc.estimator.empirical_bayes_prior = true;
  pc.estimator.exact_age_first_sojourn = true;
  // The switches change the answer (the test would not notice them otherwise).
  EXPECT_GT(std::fabs(matches_library(pc, start) - resp.tr_ratio()), 1e-9);

  // Host frailty is on by default: "calm" fails on every third day, "stormy"
  // every day, so calm's prior is moved towards fewer failures and its TR is
  // higher than without the frailty, which the library pipeline reproduces.
  ASSERT_TRUE(availability::EstimatorOptions().host_frailty);
  predictor::AvailabilityPredictorConfig no_frailty;
  no_frailty.estimator.host_frailty = false;
  EXPECT_GT(resp.tr_ratio(), matches_library(no_frailty, start) + 1e-6);

  // Saturday of week 3: 4 weekend windows, and the weekdays at 09:30 are
  // borrowed (every cell borrows by default). The statemgr ships them apart and the predictor
  // levels their failure hazards by the hosts' weekend/weekday ratio, as the
  // library does; without the level correction the answer differs.
  ASSERT_TRUE(availability::EstimatorOptions().level_corrected_borrowing);
  const int64_t saturday = kMonday + 19 * 86400 + 9 * 3600 + 1800;
  clock_.Set(absl::FromUnixSeconds(saturday));
  predictor::AvailabilityPredictorConfig unlevelled;
  unlevelled.estimator.level_corrected_borrowing = false;
  EXPECT_GT(std::fabs(matches_library(predictor::AvailabilityPredictorConfig(), saturday) -
                      matches_library(unlevelled, saturday)),
            1e-9);
}

// A lab in New York, busy 18:00-20:00 on its wall clock every weekday,
// before and after daylight saving time starts (Sun 2024-03-10). Asked on
// Wed Mar 13 for 16:30-18:30, a predictor with the lab's time zone finds
// that window failing on every weekday; one with the winter offset cuts the
// summer days' windows an hour early (15:30 on the wall clock), where they
// survive, and its answer is an hour off until the winter history is gone
// (the session 43 time audit measured TR 0.82 where the host always failed).
TEST_F(ClusterTest, TimeZoneKeepsTheWallClockAcrossDaylightSavingTime) {
  auto ny = availability::LocalClock::Zone("America/New_York");
  ASSERT_THAT(ny.status(), IsOk());
  const int64_t from = 1708923600;  // Mon 2024-02-26 00:00 EST
  const int64_t wed = 1710361800;   // Wed 2024-03-13 16:30 EDT (20:30 UTC)
  clock_.Set(absl::FromUnixSeconds(wed));
  {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    v1::PushSamplesRequest req;
    req.set_host("ny");
    req.set_period_seconds(300);
    req.mutable_attributes()->set_cpu_cores(4);
    req.mutable_attributes()->set_total_mem_mb(8192);
    for (int64_t t = from; t < wed; t += 300) {
      if (req.samples_size() == 288) {  // a day a message
        ASSERT_TRUE(writer->Write(req));
        req.clear_samples();
      }
      const int64_t clock = availability::LocalSecondOfDay(t, *ny);
      const bool busy = availability::DayTypeOf(t, *ny) == availability::DayType::kWeekday &&
                        clock >= 18 * 3600 && clock < 20 * 3600;
      HostSample s;
      s.unix_seconds = t;
      s.cpu_load = busy ? 0.95 : 0.05;
      s.free_mem_mb = 4000;
      *req.add_samples() = ToProto(s);
    }
    ASSERT_TRUE(writer->Write(req));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 1);
  auto ask = [&](const availability::LocalClock& local) {
    predictor::AvailabilityPredictorConfig pc;
    pc.clock = local;
    predictor::AvailabilityPredictor p(pc, *directory_, clock_);
    v1::PredictAvailabilityRequest r;
    r.set_host("ny");
    r.set_window_seconds(2 * 3600);
    r.set_start_unix_seconds(wed);
    auto got = p.Predict(r);
    EXPECT_THAT(got.status(), IsOk());
    return got.ok() ? *got : v1::PredictAvailabilityResponse();
  };
  // Feb 26 .. Mar 12: 12 weekdays, each busy from 18:00 local.
  const v1::PredictAvailabilityResponse zoned = ask(*ny);
  EXPECT_EQ(zoned.past_up_windows(), 12);
  EXPECT_EQ(zoned.past_up_windows_survived(), 0);
  EXPECT_LT(zoned.tr_ratio(), 0.3);
  // The winter offset: the 10 winter weekdays' windows at 15:30 EST-clock
  // survive, the 2 summer ones fail.
  const v1::PredictAvailabilityResponse fixed = ask(-5 * 3600);
  EXPECT_EQ(fixed.past_up_windows(), 12);
  EXPECT_EQ(fixed.past_up_windows_survived(), 10);
  EXPECT_GT(fixed.tr_ratio(), 0.5);
  // A zone the state manager does not know: INVALID_ARGUMENT from it.
  grpc::ClientContext ctx;
  v1::GetWindowStatsRequest bad;
  bad.set_host("ny");
  bad.set_length_seconds(3600);
  bad.set_time_zone("Mars/Olympus_Mons");
  v1::GetWindowStatsResponse bad_resp;
  const grpc::Status st = sm_stub_->GetWindowStats(&ctx, bad, &bad_resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("unknown time zone 'Mars/Olympus_Mons'"));
}

// Load-band conditioning of the first sojourn (load_band.h): the statemgr
// ships each host's exits by band and its band at the window start, the
// predictor pools them over its hosts, and the answer is the library's.
TEST_F(ClusterTest, LoadBandMatchesTheLibraryPipeline) {
  // Before every load spike the load rises to 0.15 (S1, upper band) for two
  // samples: a host in the upper band is about to fail.
  Push("calm", 21, 0.75, /*busy_every_days=*/3, /*warn_load=*/0.15);
  Push("stormy", 21, 0.95, /*busy_every_days=*/1, /*warn_load=*/0.15);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  // Tuesday of week 3 (a busy day for "calm"), the first grid point after
  // 09:30 in the upper band, and the one after it that is in the lower band.
  int64_t high = kMonday + 15 * 86400 + 9 * 3600 + 1800;
  while ((high / 300) % 7 != 5) high += 300;
  const int64_t low = high + 3 * 300;  // (t / 300) % 7 == 1: back at 0.05
  predictor::AvailabilityPredictorConfig pc;
  pc.estimator.load_band_first_sojourn = true;
  predictor::AvailabilityPredictorConfig off;
  off.estimator.load_band_first_sojourn = false;
  auto tr = [&](const predictor::AvailabilityPredictorConfig& c, int64_t at) {
    clock_.Set(absl::FromUnixSeconds(at));
    predictor::AvailabilityPredictor p(c, *directory_, clock_);
    v1::PredictAvailabilityRequest r;
    r.set_host("calm");
    r.set_window_seconds(5 * 3600);
    r.set_start_unix_seconds(at);
    auto got = p.Predict(r);
    EXPECT_THAT(got.status(), IsOk());
    if (!got.ok()) return -1.0;
    availability::HostState init;
    const auto expected = LibraryPipeline(*book_, at, c.estimator, &init);
    EXPECT_EQ(static_cast<int>(got->initial_state()), 1);
    EXPECT_EQ(static_cast<int>(init), 1);
    EXPECT_NEAR(got->tr_ratio(), expected.tr.back(), 1e-12);
    return got->tr_ratio();
  };
  const double high_on = tr(pc, high), high_off = tr(off, high);
  const double low_on = tr(pc, low), low_off = tr(off, low);
  // The upper band lowers the TR, the lower band raises it.
  EXPECT_LT(high_on, high_off - 1e-4);
  EXPECT_GT(low_on, low_off + 1e-6);
  EXPECT_LT(high_on, low_on);
}

// A host that joined an hour ago has no same-clock window yet (whole-history
// fallback): its prediction is low-history and pulled towards what the other
// hosts show at that clock time, not a perfect TR from one quiet hour.
TEST_F(ClusterTest, NewHostLeansOnThePopulation) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  const int64_t start = kMonday + 18 * 86400 + 9 * 3600;  // Friday 09:00, week 3
  ASSERT_TRUE(PushHour("fresh", start, 0.05, 2000));  // the hour before `start`, idle
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 3);
  clock_.Set(absl::FromUnixSeconds(start));
  auto predict = [&](const std::string& host, predictor::AvailabilityPredictor& p) {
    v1::PredictAvailabilityRequest req;
    req.set_host(host);
    req.set_window_seconds(3 * 3600);
    req.set_start_unix_seconds(start);
    return p.Predict(req);
  };
  predictor::AvailabilityPredictorConfig pc;
  predictor::AvailabilityPredictor with_prior(pc, *directory_, clock_);
  auto fresh = predict("fresh", with_prior);
  auto stormy = predict("stormy", with_prior);
  auto calm = predict("calm", with_prior);
  ASSERT_THAT(fresh.status(), IsOk());
  ASSERT_THAT(stormy.status(), IsOk());
  ASSERT_THAT(calm.status(), IsOk());
  EXPECT_TRUE(fresh->low_history());
  EXPECT_EQ(fresh->history_windows(), 0);
  EXPECT_EQ(fresh->past_up_windows(), 0);  // no window of its own to count
  EXPECT_EQ(fresh->past_up_windows_survived(), 0);
  // Without the population (prior switched off) the quiet hour alone says TR 1.
  pc.estimator.prior_windows = 0;
  predictor::AvailabilityPredictor alone(pc, *directory_, clock_);
  auto fresh_alone = predict("fresh", alone);
  ASSERT_THAT(fresh_alone.status(), IsOk());
  EXPECT_GT(fresh_alone->tr_ratio(), 0.99);
  // With it, the fresh host gets the population's mix of the calm host (no
  // failure in office hours) and the stormy one (always failing): strictly
  // between them, not ranked above the calm host with a perfect record.
  EXPECT_LT(fresh->tr_ratio(), 0.9);
  EXPECT_GT(fresh->tr_ratio(), stormy->tr_ratio() + 0.1);
  EXPECT_LT(fresh->tr_ratio(), calm->tr_ratio() - 0.1);
}

// A registered host whose state manager accepts connections and never
// answers is left out of the population prior: the prediction is the one
// made without it, and the host is marked silent, so the next builds do not
// wait on it (each used to wait the whole 10 s timeout, for every host
// like it and every request waiting on the build).
TEST_F(ClusterTest, SilentStatemgrIsLeftOutOfThePrior) {
  Push("calm", 21, 0.3);
  Push("stormy", 21, 0.95);
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  const int64_t start = kMonday + 18 * 86400 + 9 * 3600;
  clock_.Set(absl::FromUnixSeconds(start));
  v1::PredictAvailabilityRequest req;
  req.set_host("calm");
  req.set_window_seconds(3 * 3600);
  req.set_start_unix_seconds(start);
  predictor::AvailabilityPredictorConfig pc;
  auto before = predictor::AvailabilityPredictor(pc, *directory_, clock_).Predict(req);
  ASSERT_THAT(before.status(), IsOk());

  // 20 ghosts: more than the 16 calls the build used to make at a time, so
  // it waited two prior deadlines (3 s each) where one is enough now.
  std::vector<std::unique_ptr<sojourn::testing::SilentListener>> ghosts;
  for (int g = 0; g < 20; ++g) {
    ghosts.push_back(std::make_unique<sojourn::testing::SilentListener>());
    ASSERT_FALSE(ghosts.back()->address().empty());
    grpc::ClientContext ctx;
    v1::RegisterHostRequest reg;
    reg.set_host(absl::StrCat("ghost", g));
    reg.set_statemgr_address(ghosts.back()->address());
    v1::RegisterHostResponse reg_resp;
    ASSERT_TRUE(broker_stub_->RegisterHost(&ctx, reg, &reg_resp).ok());
  }
  for (int build = 0; build < 2; ++build) {
    const absl::Time t0 = absl::Now();
    auto with_ghost = predictor::AvailabilityPredictor(pc, *directory_, clock_).Predict(req);
    const absl::Duration took = absl::Now() - t0;
    ASSERT_THAT(with_ghost.status(), IsOk()) << build;
    EXPECT_EQ(with_ghost->tr_ratio(), before->tr_ratio()) << build;
    EXPECT_EQ(directory_->silent(), 20u) << build;
    // One prior deadline at most (two rounds of them took 6 s and more).
    EXPECT_LT(took, absl::Seconds(5.5)) << build;
  }
}

void WriteFakeProc(const std::string& root, uint64_t busy, uint64_t idle) {
  std::filesystem::create_directories(root);
  std::ofstream(root + "/stat") << "cpu  " << busy << " 0 0 " << idle << " 0 0 0 0 0 0\ncpu0 0\n";
  std::ofstream(root + "/meminfo") << "MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\n";
  std::ofstream(root + "/vmstat") << "pswpin 0\npswpout 0\n";
}

// The monitor samples, buffers while its statemgr is unreachable (backing off
// on the injected clock), and delivers everything once it is reachable.
TEST_F(ClusterTest, MonitorBuffersAndDelivers) {
  const std::string proc = dir_.File("proc");
  WriteFakeProc(proc, 100, 100);
  monitor::ProcSampler sampler(proc);
  monitor::SenderConfig dead;
  dead.host = "local";
  dead.statemgr_address = "127.0.0.1:1";  // nothing listens there
  monitor::SampleSender dead_sender(dead, clock_);
  Metrics m("monitor");
  monitor::Monitor mon(sampler, dead_sender, clock_, m, absl::Seconds(6));
  mon.Tick();  // first reading: no sample yet
  WriteFakeProc(proc, 130, 170);
  clock_.Advance(absl::Seconds(6));
  mon.Tick();
  EXPECT_EQ(dead_sender.unacknowledged(), 1u);
  EXPECT_FALSE(dead_sender.connected());
  ASSERT_TRUE(mon.last_sample().has_value());
  EXPECT_NEAR(mon.last_sample()->cpu_load, 0.3, 1e-12);

  monitor::SenderConfig live = dead;
  live.statemgr_address = sm_server_->address();
  monitor::SampleSender sender(live, clock_);
  sender.Add(*mon.last_sample());
  ASSERT_THAT(sender.Flush(), IsOk());
  EXPECT_EQ(sender.unacknowledged(), 0u);
  EXPECT_EQ(sender.acknowledged(), 1);
  EXPECT_EQ(book_->Info("local")->samples, 1);
}

}  // namespace
}  // namespace sojourn

namespace sojourn {
namespace {

// Samples the state manager never acknowledged survive a restart of the
// monitor through the spool file, and are delivered (once) afterwards.
TEST_F(ClusterTest, SpooledSamplesSurviveMonitorRestart) {
  monitor::SenderConfig dead;
  dead.host = "spooled";
  dead.statemgr_address = "127.0.0.1:1";  // unreachable
  dead.spool_path = dir_.File("monitor.spool");
  {
    monitor::SampleSender sender(dead, clock_);
    for (int i = 0; i < 5; ++i) {
      HostSample s;
      s.unix_seconds = kMonday + 6 * i;
      s.cpu_load = 0.1 * i;
      sender.Add(s);
    }
    EXPECT_FALSE(sender.Flush().ok());
    EXPECT_EQ(sender.unacknowledged(), 5u);
  }  // the monitor stops with nothing acknowledged
  monitor::SenderConfig live = dead;
  live.statemgr_address = sm_server_->address();
  monitor::SampleSender restarted(live, clock_);
  EXPECT_EQ(restarted.restored(), 5u);
  ASSERT_THAT(restarted.Flush(), IsOk());
  EXPECT_EQ(restarted.unacknowledged(), 0u);
  bool truncated = false;
  auto got = book_->Series("spooled", 0, 0, 100, &truncated);
  ASSERT_THAT(got.status(), IsOk());
  ASSERT_EQ(got->size(), 5u);
  EXPECT_NEAR((*got)[4].cpu_load, 0.4, 1e-12);
  // The spool is empty now: a third start restores nothing.
  monitor::SampleSender third(live, clock_);
  EXPECT_EQ(third.restored(), 0u);
}

}  // namespace
}  // namespace sojourn

namespace sojourn {
namespace {

// A clock stepped back between two samples no longer wedges the sender: the
// buffer stays in time order, so the state manager takes the batch (before:
// INVALID_ARGUMENT "out of time order" on every retry). A sample the state
// manager refuses comes back as INVALID_ARGUMENT, not UNAVAILABLE.
TEST_F(ClusterTest, SenderSurvivesClockStepBackAndReportsRefusals) {
  monitor::SenderConfig sc;
  sc.host = "stepped";
  sc.statemgr_address = sm_server_->address();
  monitor::SampleSender sender(sc, clock_);
  for (int64_t t : {kMonday + 60, kMonday + 30}) {
    HostSample s;
    s.unix_seconds = t;
    s.cpu_load = 0.2;
    sender.Add(s);
  }
  ASSERT_THAT(sender.Flush(), IsOk());
  EXPECT_EQ(sender.unacknowledged(), 0u);
  EXPECT_EQ(book_->Info("stepped")->samples, 2);
  HostSample bad;
  bad.unix_seconds = kMonday + 90;
  bad.cpu_load = 7;
  sender.Add(bad);
  absl::Status refused = sender.Flush();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
}

}  // namespace
}  // namespace sojourn

namespace sojourn {
namespace {

// A PushSamples stream of several messages keeps the host's attributes up to
// the broker. Before, each message without attributes replaced the stored
// ones with empty ones: a replayed VM of ~7000 samples (two messages) showed
// MEM_MB 0 in `sojourn hosts`, a short one 8192.
TEST_F(ClusterTest, MultiMessageStreamKeepsAttributes) {
  // A client that sends the attributes in the first message only (the
  // monitor and the replay did): the later messages must not erase them.
  {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = sm_stub_->PushSamples(&ctx, &resp);
    for (int m = 0; m < 3; ++m) {
      v1::PushSamplesRequest req;
      req.set_host("first-only");
      req.set_period_seconds(300);
      if (m == 0) {
        req.mutable_attributes()->set_cpu_cores(4);
        req.mutable_attributes()->set_total_mem_mb(8192);
      }
      for (int i = 0; i < 4; ++i) {
        auto* s = req.add_samples();
        s->set_unix_seconds(kMonday + (m * 4 + i) * 300);
        s->set_cpu_load_ratio(0.1);
      }
      ASSERT_TRUE(writer->Write(req));
    }
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(resp.persisted_samples(), 12);
  }
  // The monitor's sender in batches of 2: five samples are three messages.
  monitor::SenderConfig sc;
  sc.host = "batched";
  sc.statemgr_address = sm_server_->address();
  sc.period_seconds = 300;
  sc.batch_size = 2;
  sc.attributes.set_cpu_cores(2);
  sc.attributes.set_total_mem_mb(2048);
  monitor::SampleSender sender(sc, clock_);
  for (int i = 0; i < 5; ++i) {
    HostSample s;
    s.unix_seconds = kMonday + i * 300;
    s.cpu_load = 0.2;
    sender.Add(s);
  }
  ASSERT_THAT(sender.Flush(), IsOk());
  EXPECT_EQ(sender.acknowledged(), 5);

  grpc::ClientContext list_ctx;
  v1::ListHostsResponse listed;
  ASSERT_TRUE(sm_stub_->ListHosts(&list_ctx, v1::ListHostsRequest(), &listed).ok());
  std::map<std::string, v1::HostStatus> by_host;
  for (const auto& h : listed.hosts()) by_host[h.host()] = h;
  ASSERT_EQ(by_host.count("first-only"), 1u);
  EXPECT_EQ(by_host["first-only"].sample_count(), 12);
  EXPECT_EQ(by_host["first-only"].attributes().total_mem_mb(), 8192);
  EXPECT_EQ(by_host["first-only"].attributes().cpu_cores(), 4);
  ASSERT_EQ(by_host.count("batched"), 1u);
  EXPECT_EQ(by_host["batched"].sample_count(), 5);
  EXPECT_EQ(by_host["batched"].attributes().total_mem_mb(), 2048);
  EXPECT_EQ(by_host["batched"].attributes().cpu_cores(), 2);

  // And what the broker gets from the state manager's registration.
  statemgr::RegistrarConfig rc{broker_server_->address(), sm_server_->address()};
  statemgr::Registrar registrar(rc, *book_, clock_);
  ASSERT_EQ(registrar.RegisterAll(), 2);
  for (const auto& [host, mem] : {std::pair<std::string, double>("first-only", 8192),
                                  std::pair<std::string, double>("batched", 2048)}) {
    grpc::ClientContext ctx;
    v1::GetHostRequest req;
    req.set_host(host);
    v1::RegisteredHost got;
    ASSERT_TRUE(broker_stub_->GetHost(&ctx, req, &got).ok()) << host;
    EXPECT_EQ(got.attributes().total_mem_mb(), mem) << host;
  }
}

// A fresh state manager and monitor export their event counters at 0, so
// that Prometheus' rate() sees the first rejected batch, failed /proc read
// or usage answer (a counter created by its first event misses it, and the
// dashboards said "No data").
TEST_F(ClusterTest, EventCountersStartAtZero) {
  const std::string sm = sm_metrics_.Render();
  std::vector<std::string> expected = {
      "sojourn_statemgr_rejected_batches_total{service=\"statemgr\"} 0",
      "sojourn_statemgr_samples_persisted_total{service=\"statemgr\"} 0"};
  for (const char* method : {"upa", "last4", "persist", "same_time_yesterday"}) {
    expected.push_back(std::string("sojourn_statemgr_usage_answers_total{service=\"statemgr\",") +
                       "method=\"" + method + "\"} 0");
  }
  for (const std::string& series : expected) {
    EXPECT_NE(sm.find(series + "\n"), std::string::npos) << series << " not in:\n" << sm;
  }
  const std::string proc = dir_.File("proc");
  WriteFakeProc(proc, 100, 100);
  monitor::ProcSampler sampler(proc);
  monitor::SenderConfig sc;
  sc.host = "fresh";
  sc.statemgr_address = sm_server_->address();
  monitor::SampleSender sender(sc, clock_);
  Metrics m("monitor");
  monitor::Monitor mon(sampler, sender, clock_, m, absl::Seconds(6));
  const std::string fresh = m.Render();
  for (const std::string series : {"sojourn_monitor_sample_errors_total{service=\"monitor\"} 0",
                                   "sojourn_monitor_samples_total{service=\"monitor\"} 0"}) {
    EXPECT_NE(fresh.find(series + "\n"), std::string::npos) << series << " not in:\n" << fresh;
  }
  // A rejected batch then counts 1 on the series that was there.
  grpc::ClientContext ctx;
  v1::PushSamplesResponse resp;
  auto writer = sm_stub_->PushSamples(&ctx, &resp);
  v1::PushSamplesRequest bad;
  bad.set_host("h");
  bad.add_samples()->set_unix_seconds(-1);
  writer->Write(bad);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(sm_metrics_.Render().find(
                "sojourn_statemgr_rejected_batches_total{service=\"statemgr\"} 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace sojourn
