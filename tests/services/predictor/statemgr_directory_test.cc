// Tests of the predictor's StatemgrDirectory: one channel per state manager
// address, bounded by an LRU, and addresses checked as HOST:PORT (channels
// are lazy, so no server is needed); then the predictor's request checks and
// its answers for failed state manager calls, through its gRPC stack with a
// fake state manager.
#include "services/predictor/statemgr_directory.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/reactors.h"
#include "common/server.h"
#include "common/thread_pool.h"
#include "gtest/gtest.h"
#include "models/turnaround/hist_db.h"
#include "services/predictor/availability_predictor.h"
#include "services/predictor/predictor_service.h"
#include "tests/test_util.h"

namespace sojourn::predictor {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::SilentListener;

// Requests naming thousands of addresses keep at most max_channels channels;
// the most recently used survive, the others are rebuilt on demand, and a
// stub held by a caller stays usable after its channel was evicted.
TEST(StatemgrDirectoryTest, KeepsAtMostMaxChannels) {
  StatemgrDirectory directory("", absl::Seconds(1), /*max_channels=*/3);
  auto first = directory.Find("h", "127.0.0.1:1001");
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(directory.Find("h", absl::StrCat("127.0.0.1:", 2000 + i)).ok());
    ASSERT_LE(directory.channels(), 3u);
  }
  EXPECT_EQ(directory.channels(), 3u);
  // The newest address is kept: the same stub again.
  auto newest = directory.Find("h", "127.0.0.1:4999");
  auto again = directory.Find("h", "127.0.0.1:4999");
  ASSERT_TRUE(newest.ok() && again.ok());
  EXPECT_EQ(newest->get(), again->get());
  // The first was evicted: a new stub, while the old one is still held.
  auto rebuilt = directory.Find("h", "127.0.0.1:1001");
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_NE(rebuilt->get(), first->get());
  EXPECT_EQ(first->use_count(), 1);  // only this test holds the evicted stub
  EXPECT_EQ(directory.channels(), 3u);
}

// Malformed hosts and addresses are refused before any channel is made.
TEST(StatemgrDirectoryTest, RefusesMalformedNames) {
  StatemgrDirectory directory("", absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(directory.Find("", "127.0.0.1:1").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(directory.Find("h", std::string(100000, 'a')).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(directory.Find("h", "127.0.0.1:1\n").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(directory.Find("h", "").status()));  // no broker
  // HOST:PORT with a port in [1, 65535], as the broker stores them: these
  // used to get a channel ("localhost" dialled on port 443, names that do not
  // resolve answered UNAVAILABLE).
  for (const char* bad : {"localhost", "::::", "h:abc", "h:-1", "h:+1", "h:", "h:1:2", "[::1]",
                          "unix:", "unix:/tmp/sm.sock", "h:0", "h:70000", ":1"}) {
    absl::Status s = directory.Find("h", bad).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find("statemgr_address"), std::string::npos) << s;
  }
  EXPECT_EQ(directory.channels(), 0u);
  for (const char* good : {"127.0.0.1:7403", "sm-1.example.com:1", "[::1]:65535"}) {
    EXPECT_TRUE(directory.Find("h", good).ok()) << good;
  }
  EXPECT_EQ(directory.channels(), 3u);
}

constexpr int64_t kNow = 1'700'000'000;

// A state manager that let a call run into its deadline is not called again
// for 30 s, then with a short deadline, its backoff doubling with every
// further deadline up to 10 minutes; any other outcome clears it. Other
// addresses are not affected.
TEST(StatemgrDirectoryTest, SilentStatemgrIsNotCalledDuringItsBackoff) {
  FakeClock clock(absl::FromUnixSeconds(kNow));
  StatemgrDirectory directory("", absl::Seconds(10), 2, &clock);
  const std::string silent = "10.0.0.1:7403", other = "10.0.0.2:7403";
  const grpc::Status deadline(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  ASSERT_THAT(directory.Admit(silent, "h").status(), IsOk());
  EXPECT_EQ(*directory.Admit(silent, "h"), absl::Seconds(10));
  directory.Record(silent, deadline);
  EXPECT_EQ(directory.silent(), 1u);
  absl::StatusOr<absl::Duration> a = directory.Admit(silent, "h");
  ASSERT_TRUE(absl::IsUnavailable(a.status())) << a.status();
  EXPECT_NE(a.status().message().find("state manager 10.0.0.1:7403 of host h: did not answer"),
            std::string::npos)
      << a.status();
  EXPECT_NE(a.status().message().find("not asked again until 22:13:50 UTC"), std::string::npos)
      << a.status();  // kNow = 22:13:20 UTC
  EXPECT_EQ(*directory.Admit(other, "h2"), absl::Seconds(10));
  // A call admitted before the deadline was recorded, ending in its own:
  // the backoff does not grow.
  clock.Advance(absl::Seconds(5));
  directory.Record(silent, deadline);
  clock.Advance(absl::Seconds(24));
  EXPECT_FALSE(directory.Admit(silent, "h").ok());
  // After 30 s: a probe with the short deadline; it fails, so 60 s now.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(*directory.Admit(silent, "h"), StatemgrDirectory::kProbeTimeout);
  directory.Record(silent, deadline);
  clock.Advance(absl::Seconds(59));
  EXPECT_FALSE(directory.Admit(silent, "h").ok());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(directory.Admit(silent, "h").ok());
  // Doubling stops at 10 minutes.
  for (int i = 0; i < 8; ++i) {
    directory.Record(silent, deadline);
    clock.Advance(StatemgrDirectory::kMaxSilentBackoff);
    ASSERT_TRUE(directory.Admit(silent, "h").ok()) << i;
  }
  directory.Record(silent, deadline);
  clock.Advance(StatemgrDirectory::kMaxSilentBackoff - absl::Seconds(1));
  EXPECT_FALSE(directory.Admit(silent, "h").ok());
  // Answered (even with an error of the state manager's own): cleared.
  clock.Advance(absl::Seconds(1));
  directory.Record(silent, grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown host"));
  EXPECT_EQ(directory.silent(), 0u);
  EXPECT_EQ(*directory.Admit(silent, "h"), absl::Seconds(10));
  // Too slow for the prior's shorter deadline: left out of the prior only;
  // requests about its hosts still get the whole timeout, until one of them
  // runs into it.
  using Use = StatemgrDirectory::Use;
  const std::string slow = "10.0.0.3:7403";
  directory.Record(slow, deadline, Use::kPrior);
  EXPECT_FALSE(directory.Admit(slow, "h3", Use::kPrior).ok());
  EXPECT_EQ(*directory.Admit(slow, "h3"), absl::Seconds(10));
  directory.Record(slow, deadline);
  EXPECT_FALSE(directory.Admit(slow, "h3").ok());
  clock.Advance(StatemgrDirectory::kSilentBackoff);
  EXPECT_EQ(*directory.Admit(slow, "h3"), StatemgrDirectory::kProbeTimeout);
  directory.Record(slow, grpc::Status::OK);
  EXPECT_EQ(*directory.Admit(slow, "h3", Use::kPrior), absl::Seconds(10));
  // At most 4 x max_channels addresses are remembered.
  for (int i = 0; i < 20; ++i) {
    directory.Record(absl::StrCat("10.0.1.", i, ":7403"), deadline);
    clock.Advance(absl::Milliseconds(1));
  }
  EXPECT_EQ(directory.silent(), 8u);
  EXPECT_TRUE(directory.Admit("10.0.1.0:7403", "h").ok());    // the oldest went
  EXPECT_FALSE(directory.Admit("10.0.1.19:7403", "h").ok());  // the newest stay
}

// A request for a 1 h window of host h1, whose state manager is at `address`.
v1::PredictAvailabilityRequest HourOfH1At(const std::string& address) {
  v1::PredictAvailabilityRequest req;
  req.set_host("h1");
  req.set_window_seconds(3600);
  req.set_statemgr_address(address);
  return req;
}

// A state manager that never answers costs its deadline once; until its
// backoff ends the predictor answers UNAVAILABLE at once, saying so (one
// such host used to stall every ranking for the whole timeout).
TEST(SilentStatemgrTest, AnsweredAtOnceAfterTheFirstDeadline) {
  SilentListener silent;
  ASSERT_FALSE(silent.address().empty());
  FakeClock clock(absl::FromUnixSeconds(kNow));
  StatemgrDirectory directory("", absl::Milliseconds(300), StatemgrDirectory::kDefaultMaxChannels,
                              &clock);
  AvailabilityPredictor predictor(AvailabilityPredictorConfig{}, directory, clock);
  const v1::PredictAvailabilityRequest req = HourOfH1At(silent.address());
  absl::Status first = predictor.Predict(req).status();
  ASSERT_TRUE(absl::IsUnavailable(first)) << first;
  EXPECT_NE(first.message().find("DEADLINE_EXCEEDED"), std::string::npos) << first;
  EXPECT_EQ(directory.silent(), 1u);
  absl::Status second = predictor.Predict(req).status();
  ASSERT_TRUE(absl::IsUnavailable(second)) << second;
  EXPECT_NE(second.message().find("did not answer within its deadline"), std::string::npos)
      << second;
  EXPECT_NE(second.message().find(absl::StrCat("state manager ", silent.address(), " of host h1")),
            std::string::npos)
      << second;
  // After the backoff it is tried again (and times out again).
  clock.Advance(StatemgrDirectory::kSilentBackoff);
  absl::Status third = predictor.Predict(req).status();
  EXPECT_NE(third.message().find("DEADLINE_EXCEEDED"), std::string::npos) << third;
}

// A caller's deadline earlier than the directory's timeout ends the call to
// the state manager then, with DEADLINE_EXCEEDED naming it, and puts no
// backoff on the state manager (the caller was impatient, not the state
// manager silent); a later caller still gets the whole timeout.
TEST(SilentStatemgrTest, TheCallersDeadlineEndsTheCallAndStartsNoBackoff) {
  SilentListener silent;
  ASSERT_FALSE(silent.address().empty());
  FakeClock clock(absl::FromUnixSeconds(kNow));
  StatemgrDirectory directory("", absl::Seconds(60), StatemgrDirectory::kDefaultMaxChannels,
                              &clock);
  AvailabilityPredictor predictor(AvailabilityPredictorConfig{}, directory, clock);
  const v1::PredictAvailabilityRequest req = HourOfH1At(silent.address());
  absl::Status s = predictor.Predict(req, absl::Now() + absl::Milliseconds(200)).status();
  ASSERT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find(absl::StrCat("state manager ", silent.address(), " of host h1")),
            std::string::npos)
      << s;
  EXPECT_EQ(directory.silent(), 0u);
  EXPECT_TRUE(directory.Admit(silent.address(), "h1").ok());

  const absl::Time far = absl::Now() + absl::Hours(1);
  StatemgrDirectory::CallDeadline d = StatemgrDirectory::DeadlineFor(absl::Seconds(60), far);
  EXPECT_FALSE(d.callers);
  EXPECT_LT(d.at, far);
  d = StatemgrDirectory::DeadlineFor(absl::Seconds(60), absl::InfiniteFuture());
  EXPECT_FALSE(d.callers);
  // A caller's deadline that leaves the state manager kProbeTimeout or more
  // is the caller's only in name: no answer in that time is silence (the
  // broker's 10 s deadline against the predictor's 10 s timeout).
  d = StatemgrDirectory::DeadlineFor(absl::Hours(2), far);
  EXPECT_FALSE(d.callers);
  EXPECT_EQ(d.at, far);
  const absl::Time soon = absl::Now() + absl::Milliseconds(500);
  d = StatemgrDirectory::DeadlineFor(absl::Seconds(10), soon);
  EXPECT_TRUE(d.callers);
  EXPECT_EQ(d.at, soon);
  // The directory's own deadline still starts the backoff.
  directory.Record(silent.address(), grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""),
                   StatemgrDirectory::Use::kRequest, /*callers_deadline=*/true);
  EXPECT_EQ(directory.silent(), 0u);
  directory.Record(silent.address(), grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""));
  EXPECT_EQ(directory.silent(), 1u);
}

// A caller's deadline a little earlier than the directory's timeout (the
// broker calls with 10 s, as the predictor's default timeout) still starts
// the backoff when the state manager does not answer: it had seconds.
TEST(SilentStatemgrTest, ALongCallersDeadlineStillStartsTheBackoff) {
  SilentListener silent;
  ASSERT_FALSE(silent.address().empty());
  FakeClock clock(absl::FromUnixSeconds(kNow));
  StatemgrDirectory directory("", StatemgrDirectory::kProbeTimeout + absl::Seconds(1),
                              StatemgrDirectory::kDefaultMaxChannels, &clock);
  AvailabilityPredictor predictor(AvailabilityPredictorConfig{}, directory, clock);
  const absl::Status s =
      predictor
          .Predict(HourOfH1At(silent.address()),
                   absl::Now() + StatemgrDirectory::kProbeTimeout + absl::Milliseconds(200))
          .status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(directory.silent(), 1u);
  EXPECT_FALSE(directory.Admit(silent.address(), "h1").ok());
}

// A state manager whose answers are fixed: window statistics and CanRun for
// an unknown host (NOT_FOUND), PredictUsage without enough history
// (FAILED_PRECONDITION, as the real one says), HowLong answered.
class FakeStatemgr final : public v1::StateManager::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetWindowStats(grpc::CallbackServerContext* context,
                                           const v1::GetWindowStatsRequest* request,
                                           v1::GetWindowStatsResponse* /*response*/) override {
    absl::MutexLock l(&mu_);
    window_requests_.push_back(*request);
    return FinishNow(context, absl::NotFoundError("unknown host 'h1'"));
  }
  grpc::ServerUnaryReactor* PredictUsage(grpc::CallbackServerContext* context,
                                         const v1::PredictUsageRequest* /*request*/,
                                         v1::PredictUsageResponse* /*response*/) override {
    return FinishNow(context, absl::FailedPreconditionError(
                                  "not enough history yet: no cpu data in the last 24 hours"));
  }
  grpc::ServerUnaryReactor* CanRun(grpc::CallbackServerContext* context,
                                   const v1::CanRunRequest* /*request*/,
                                   v1::CanRunResponse* /*response*/) override {
    return FinishNow(context, absl::NotFoundError("unknown host 'h1'"));
  }
  grpc::ServerUnaryReactor* HowLong(grpc::CallbackServerContext* context,
                                    const v1::HowLongRequest* request,
                                    v1::HowLongResponse* response) override {
    {
      absl::MutexLock l(&mu_);
      how_long_requests_.push_back(*request);
    }
    response->set_hours(3);
    response->set_method("fake");
    return FinishNow(context, absl::OkStatus());
  }
  std::vector<v1::GetWindowStatsRequest> window_requests() const {
    absl::MutexLock l(&mu_);
    return window_requests_;
  }
  std::vector<v1::HowLongRequest> how_long_requests() const {
    absl::MutexLock l(&mu_);
    return how_long_requests_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::GetWindowStatsRequest> window_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::HowLongRequest> how_long_requests_ ABSL_GUARDED_BY(mu_);
};

// A broker that lists fixed hosts.
class FakeBroker final : public v1::Broker::CallbackService {
 public:
  explicit FakeBroker(std::vector<std::pair<std::string, std::string>> hosts)
      : hosts_(std::move(hosts)) {}
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const v1::BrokerListHostsRequest* /*request*/,
                                      v1::BrokerListHostsResponse* response) override {
    for (const auto& [host, address] : hosts_) {
      v1::RegisteredHost* h = response->add_hosts();
      h->set_host(host);
      h->set_statemgr_address(address);
    }
    return FinishNow(context, absl::OkStatus());
  }

 private:
  const std::vector<std::pair<std::string, std::string>> hosts_;
};

// Every state manager the broker lists keeps its channel beside max_channels
// others: a cluster of more state managers than max_channels (one per lab
// host) is not reconnected to at every round of requests, and requests
// naming other addresses keep at most max_channels more, evicting their own
// least recently used, never a listed one.
TEST(StatemgrDirectoryTest, KeepsAChannelForEveryListedStatemgr) {
  // 9 distinct addresses over 10 hosts (two share one), and one the
  // predictor could never dial, which is not counted.
  std::vector<std::pair<std::string, std::string>> hosts;
  for (int i = 0; i < 9; ++i) {
    hosts.emplace_back(absl::StrCat("h", i), absl::StrCat("127.0.0.1:", 3000 + i));
  }
  hosts.emplace_back("h9", "127.0.0.1:3000");
  hosts.emplace_back("bad", "localhost");
  FakeBroker broker(hosts);
  Metrics metrics("broker");
  auto server = GrpcServer::Start({}, {&broker}, metrics);
  ASSERT_THAT(server.status(), IsOk());
  StatemgrDirectory directory((*server)->address(), absl::Seconds(5), /*max_channels=*/3);
  auto listed = directory.ListHosts();
  ASSERT_THAT(listed.status(), IsOk());
  EXPECT_EQ(listed->size(), 11u);

  // The stubs of the listed state managers, held so that an evicted one
  // could not come back at the same address.
  std::vector<std::shared_ptr<v1::StateManager::Stub>> kept;
  const auto find_listed = [&](int i) {
    auto stub = directory.Find(absl::StrCat("h", i), absl::StrCat("127.0.0.1:", 3000 + i));
    EXPECT_THAT(stub.status(), IsOk());
    return stub.ok() ? *stub : nullptr;
  };
  for (int i = 0; i < 9; ++i) kept.push_back(find_listed(i));
  EXPECT_EQ(directory.channels(), 9u);
  // Other addresses, then the listed ones again: 3 others are kept beside
  // the 9, the least recently used other goes, and every listed state
  // manager still has the stub it had (no reconnection).
  std::shared_ptr<v1::StateManager::Stub> first_other;
  for (int i = 0; i < 5; ++i) {
    auto other = directory.Find("x", absl::StrCat("127.0.0.1:", 4000 + i));
    ASSERT_THAT(other.status(), IsOk());
    if (i == 0) first_other = *other;
    EXPECT_EQ(directory.channels(), std::min(10u + i, 12u));
  }
  for (int i = 0; i < 9; ++i) EXPECT_EQ(find_listed(i), kept[i]) << "h" << i;
  EXPECT_EQ(directory.channels(), 12u);
  auto again = directory.Find("x", "127.0.0.1:4000");
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_NE(*again, first_other);  // the oldest other was evicted
  (*server)->Shutdown(absl::Seconds(1));
}

// A predictor (no broker, in-memory job history, clock at kNow) and a fake
// state manager, both on loopback port 0.
class PredictorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sm = GrpcServer::Start({}, {&statemgr_}, statemgr_metrics_);
    ASSERT_THAT(sm.status(), IsOk());
    statemgr_server_ = std::move(*sm);
    predictor_ = std::make_unique<AvailabilityPredictor>(AvailabilityPredictorConfig{},
                                                         directory_, clock_);
    estimator_ = std::make_unique<turnaround::TurnaroundEstimator>(db_, turnaround::EstimatorOptions{});
    service_ = std::make_unique<PredictorService>(*predictor_, directory_, pool_, estimator_.get());
    auto s = GrpcServer::Start({}, {service_.get()}, metrics_);
    ASSERT_THAT(s.status(), IsOk());
    server_ = std::move(*s);
    stub_ = v1::Predictor::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
    if (statemgr_server_) statemgr_server_->Shutdown(absl::Seconds(1));
  }

  // The four RPCs that ask a host's state manager, for host h1 at `address`;
  // `start` is PredictAvailability's start_unix_seconds.
  grpc::Status Availability(const std::string& address, int64_t start = 0) {
    grpc::ClientContext ctx;
    v1::PredictAvailabilityRequest req;
    req.set_host("h1");
    req.set_window_seconds(3600);
    req.set_start_unix_seconds(start);
    req.set_statemgr_address(address);
    v1::PredictAvailabilityResponse resp;
    return stub_->PredictAvailability(&ctx, req, &resp);
  }
  grpc::Status Usage(const std::string& address) {
    grpc::ClientContext ctx;
    v1::PredictUsageRequest req;
    req.set_host("h1");
    req.set_resource("cpu");
    req.set_hours(4);
    req.set_statemgr_address(address);
    v1::PredictUsageResponse resp;
    return stub_->PredictUsage(&ctx, req, &resp);
  }
  grpc::Status CanRun(const std::string& address) {
    grpc::ClientContext ctx;
    v1::CanRunRequest req;
    req.set_host("h1");
    req.set_free_cpu_ratio(0.5);
    req.set_hours(4);
    req.set_statemgr_address(address);
    v1::CanRunResponse resp;
    return stub_->CanRun(&ctx, req, &resp);
  }
  grpc::Status HowLong(const std::string& address, v1::HowLongResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    v1::HowLongRequest req;
    req.set_host("h1");
    req.set_free_cpu_ratio(0.5);
    req.set_statemgr_address(address);
    v1::HowLongResponse local;
    return stub_->HowLong(&ctx, req, resp != nullptr ? resp : &local);
  }

  FakeStatemgr statemgr_;
  Metrics statemgr_metrics_{"fake_statemgr"}, metrics_{"predictor"};
  std::unique_ptr<GrpcServer> statemgr_server_, server_;
  FakeClock clock_{absl::FromUnixSeconds(kNow)};
  StatemgrDirectory directory_{"", absl::Seconds(5)};
  ThreadPool pool_{2};
  turnaround::InMemoryHistDb db_;
  std::unique_ptr<turnaround::TurnaroundEstimator> estimator_;
  std::unique_ptr<AvailabilityPredictor> predictor_;
  std::unique_ptr<PredictorService> service_;
  std::unique_ptr<v1::Predictor::Stub> stub_;
};

// statemgr_address pointing at a gRPC server that is not a state manager
// (here the predictor itself): every RPC that asks the state manager answers
// UNAVAILABLE naming the address and the host, as PredictAvailability did;
// PredictUsage / CanRun / HowLong used to pass UNIMPLEMENTED through with
// an empty message, which read as "the predictor lacks this RPC".
TEST_F(PredictorServiceTest, PeerThatIsNoStatemgrIsUnavailableNamingIt) {
  const std::string self = server_->address();
  const std::string prefix = absl::StrCat("state manager ", self, " of host h1: UNIMPLEMENTED: ");
  for (const auto& [rpc, status] : std::vector<std::pair<std::string, grpc::Status>>{
           {"PredictAvailability", Availability(self)},
           {"PredictUsage", Usage(self)},
           {"CanRun", CanRun(self)},
           {"HowLong", HowLong(self)}}) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << rpc;
    const std::string& m = status.error_message();
    EXPECT_EQ(m.find(prefix), 0u) << rpc << ": " << m;
    EXPECT_GT(m.size(), prefix.size()) << rpc << ": nothing after the code: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << rpc << ": " << m;
  }
}

// Through the service: the client's deadline reaches the call to the state
// manager. Two clients that give up after 300 ms on a silent state manager
// used to hold both pool threads for the directory's whole 5 s; now the next
// request is answered within 3 s, and the silent peer is not put in a
// backoff by them.
TEST_F(PredictorServiceTest, TheClientsDeadlineEndsTheCallToTheStatemgr) {
  SilentListener silent;
  ASSERT_FALSE(silent.address().empty());
  auto impatient = [&](auto rpc, auto request, auto response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    request.set_host("h1");
    request.set_statemgr_address(silent.address());
    return ((*stub_).*rpc)(&ctx, request, &response);
  };
  v1::PredictAvailabilityRequest avail;
  avail.set_window_seconds(3600);
  v1::CanRunRequest can_run;
  can_run.set_free_cpu_ratio(0.5);
  can_run.set_hours(4);
  grpc::Status a = impatient(&v1::Predictor::Stub::PredictAvailability, avail,
                             v1::PredictAvailabilityResponse());
  grpc::Status c = impatient(&v1::Predictor::Stub::CanRun, can_run, v1::CanRunResponse());
  EXPECT_EQ(a.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << a.error_message();
  EXPECT_EQ(c.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << c.error_message();

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  v1::HowLongRequest req;
  req.set_host("h1");
  req.set_free_cpu_ratio(0.5);
  req.set_statemgr_address(statemgr_server_->address());
  v1::HowLongResponse resp;
  grpc::Status h = stub_->HowLong(&ctx, req, &resp);
  EXPECT_TRUE(h.ok()) << h.error_code() << ": " << h.error_message();
  EXPECT_EQ(resp.method(), "fake");
  EXPECT_EQ(directory_.silent(), 0u);
}

// The state manager's own verdicts pass through with their codes and
// messages; its answers too, for a request without the statemgr_address.
TEST_F(PredictorServiceTest, StatemgrVerdictsAndAnswersPassThrough) {
  const std::string sm = statemgr_server_->address();
  grpc::Status s = Usage(sm);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(s.error_message(), "not enough history yet: no cpu data in the last 24 hours");
  s = CanRun(sm);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(s.error_message(), "unknown host 'h1'");
  s = Availability(sm);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(s.error_message(), "unknown host 'h1'");
  v1::HowLongResponse resp;
  s = HowLong(sm, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.hours(), 3);
  EXPECT_EQ(resp.method(), "fake");
  ASSERT_EQ(statemgr_.how_long_requests().size(), 1u);
  EXPECT_EQ(statemgr_.how_long_requests()[0].host(), "h1");
  EXPECT_EQ(statemgr_.how_long_requests()[0].statemgr_address(), "");
}

// A statemgr_address that is not HOST:PORT is INVALID_ARGUMENT naming the
// field for every RPC taking one, before any channel is made ("h:abc" used
// to come back as UNAVAILABLE from a DNS failure).
TEST_F(PredictorServiceTest, StatemgrAddressMustBeHostPort) {
  for (const char* bad : {"localhost", "::::", "h:abc", "h:-1", "h:+1", "h:", "h:1:2", "[::1]",
                          "unix:"}) {
    for (const auto& [rpc, status] : std::vector<std::pair<std::string, grpc::Status>>{
             {"PredictAvailability", Availability(bad)},
             {"PredictUsage", Usage(bad)},
             {"CanRun", CanRun(bad)},
             {"HowLong", HowLong(bad)}}) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << rpc << " " << bad;
      EXPECT_NE(status.error_message().find("statemgr_address"), std::string::npos)
          << rpc << ": " << status.error_message();
    }
  }
  EXPECT_EQ(directory_.channels(), 0u);
  EXPECT_TRUE(statemgr_.window_requests().empty());
}

// PredictAvailability: start_unix_seconds < 0 is INVALID_ARGUMENT (it used
// to be answered as 0, "now"); 0 and a past start still reach the state
// manager, with the window ending at the start when one is given.
TEST_F(PredictorServiceTest, NegativeStartIsInvalidArgument) {
  const std::string sm = statemgr_server_->address();
  for (int64_t bad : {int64_t{-1}, int64_t{-86400}, std::numeric_limits<int64_t>::min()}) {
    grpc::Status s = Availability(sm, bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("start_unix_seconds"), std::string::npos)
        << s.error_message();
  }
  EXPECT_TRUE(statemgr_.window_requests().empty());
  EXPECT_EQ(Availability(sm, 0).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Availability(sm, kNow - 3600).error_code(), grpc::StatusCode::NOT_FOUND);
  const auto requests = statemgr_.window_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].end_unix_seconds(), 0);  // now
  EXPECT_EQ(requests[1].end_unix_seconds(), kNow - 3600);
}

v1::JobSpec Job(int64_t id, int64_t submit, int32_t procs = 2) {
  v1::JobSpec j;
  j.set_job_id(id);
  j.set_submit_unix_seconds(submit);
  j.set_user(7);
  j.set_executable(3);
  j.set_procs(procs);
  j.set_requested_seconds(7200);
  return j;
}

v1::ClusterSnapshot Cluster(int64_t now, int nodes) {
  v1::ClusterSnapshot s;
  s.set_now_unix_seconds(now);
  for (int i = 0; i < nodes; ++i) s.add_nodes()->set_local_cpu_ratio(0.1);
  return s;
}

// Cluster(now, 4) with job 2 (2 procs, submitted at now - 900) running on
// nodes 0 and 1 since now - 400.
v1::ClusterSnapshot ClusterWithRunningJob(int64_t now) {
  v1::ClusterSnapshot s = Cluster(now, 4);
  v1::RunningJob* r = s.add_running();
  *r->mutable_spec() = Job(2, now - 900);
  r->set_start_unix_seconds(now - 400);
  r->add_nodes(0);
  r->add_nodes(1);
  r->set_cpu_seconds_per_task(-1);
  return s;
}

// The snapshot edits EstimateTurnaround and RecordJobEvent refuse, with a
// word the message must hold (the field).
struct SnapshotEdit {
  const char* what;
  void (*edit)(v1::ClusterSnapshot*);
  const char* field;
};
std::vector<SnapshotEdit> BadSnapshotEdits() {
  return {
      {"now 0", [](v1::ClusterSnapshot* s) { s->set_now_unix_seconds(0); }, "now_unix_seconds"},
      {"no snapshot", [](v1::ClusterSnapshot* s) { *s = v1::ClusterSnapshot(); },
       "now_unix_seconds"},
      {"only a node", [](v1::ClusterSnapshot* s) {
         *s = v1::ClusterSnapshot();
         s->add_nodes();
       }, "now_unix_seconds"},
      {"start 0", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->set_start_unix_seconds(0); },
       "start_unix_seconds"},
      {"start -1", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->set_start_unix_seconds(-1); },
       "start_unix_seconds"},
      {"start before submit",
       [](v1::ClusterSnapshot* s) {
         s->mutable_running(0)->set_start_unix_seconds(s->running(0).spec().submit_unix_seconds() - 1);
       },
       "submit_unix_seconds"},
      {"start after now",
       [](v1::ClusterSnapshot* s) {
         s->mutable_running(0)->set_start_unix_seconds(s->now_unix_seconds() + 1);
       },
       "start_unix_seconds"},
      {"no node", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->clear_nodes(); }, "nodes"},
      {"node twice", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->set_nodes(1, 0); },
       "nodes"},
      {"fewer nodes than procs",
       [](v1::ClusterSnapshot* s) { s->mutable_running(0)->mutable_nodes()->RemoveLast(); },
       "procs"},
      {"more nodes than procs", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->add_nodes(2); },
       "procs"},
      {"node outside", [](v1::ClusterSnapshot* s) { s->mutable_running(0)->set_nodes(1, 4); },
       "node 4"},
  };
}

// EstimateTurnaround refuses snapshots whose running jobs the README calls
// INVALID_ARGUMENT (they used to be simulated: a job started at 0, before
// its submit, on no node, twice on one node, on fewer nodes than its procs),
// naming the field; the same snapshot without the defect is estimated.
TEST_F(PredictorServiceTest, EstimateTurnaroundRefusesInconsistentRunningJobs) {
  auto estimate = [&](const v1::ClusterSnapshot& snapshot) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, kNow - 100);
    *req.mutable_snapshot() = snapshot;
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = stub_->EstimateTurnaround(&ctx, req, &resp);
    if (s.ok()) {
      EXPECT_EQ(resp.estimates_size(), 3);
    }
    return s;
  };
  ASSERT_TRUE(estimate(ClusterWithRunningJob(kNow - 100)).ok());
  {
    // A start at the snapshot's time and at the submit are fine.
    v1::ClusterSnapshot s = ClusterWithRunningJob(kNow - 100);
    s.mutable_running(0)->set_start_unix_seconds(kNow - 100);
    EXPECT_TRUE(estimate(s).ok());
    s.mutable_running(0)->set_start_unix_seconds(kNow - 1000);
    EXPECT_TRUE(estimate(s).ok());
  }
  for (const SnapshotEdit& e : BadSnapshotEdits()) {
    v1::ClusterSnapshot s = ClusterWithRunningJob(kNow - 100);
    e.edit(&s);
    grpc::Status status = estimate(s);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what;
    EXPECT_NE(status.error_message().find(e.field), std::string::npos)
        << e.what << ": " << status.error_message();
    EXPECT_EQ(status.error_message().find('\n'), std::string::npos) << status.error_message();
  }
}

// RecordJobEvent applies the same snapshot rules to the snapshots of
// JobSubmitted and JobStarted (a submit with now_unix_seconds 0 or no
// snapshot at all used to be stored), with the same messages, and stores
// nothing of a refused event; a started event's nodes are distinct, one per
// submitted proc.
// Below the disk reserve of --histdb_path (here above any disk) a job event
// is RESOURCE_EXHAUSTED and not recorded (RocksDB 7.8 aborted when a write
// met a full disk); the broker keeps it in its outbox and sends it again.
TEST_F(PredictorServiceTest, RecordJobEventBelowTheDiskReserveRecordsNothing) {
  PredictorServiceConfig config;
  config.histdb_path = ::testing::TempDir();
  config.min_free_disk_mb = int64_t{1} << 40;
  PredictorService guarded(*predictor_, directory_, pool_, estimator_.get(), config);
  Metrics metrics("predictor_guarded");
  auto server = GrpcServer::Start({}, {&guarded}, metrics);
  ASSERT_THAT(server.status(), IsOk());
  auto stub = v1::Predictor::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::JobEvent e;
  *e.mutable_submitted()->mutable_job() = Job(1, kNow - 1000);
  v1::RecordJobEventResponse resp;
  const grpc::Status s = stub->RecordJobEvent(&ctx, e, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("MiB free on the disk of --histdb_path"), std::string::npos)
      << s.error_message();
  EXPECT_FALSE(db_.GetPending(1).ok());  // a submitted job waits there once recorded
  (*server)->Shutdown(absl::Seconds(1));
}

TEST_F(PredictorServiceTest, RecordJobEventAppliesTheSnapshotRulesOfEstimates) {
  v1::RecordJobEventResponse resp;
  auto send = [&](const v1::JobEvent& e) {
    grpc::ClientContext ctx;
    return stub_->RecordJobEvent(&ctx, e, &resp);
  };
  auto submitted = [](const v1::ClusterSnapshot& snapshot) {
    v1::JobEvent e;
    *e.mutable_submitted()->mutable_job() = Job(1, kNow - 1000);
    *e.mutable_submitted()->mutable_snapshot() = snapshot;
    return e;
  };
  auto started = [](std::vector<int32_t> nodes, const v1::ClusterSnapshot& snapshot) {
    v1::JobEvent e;
    e.mutable_started()->set_job_id(1);
    e.mutable_started()->set_start_unix_seconds(kNow - 500);
    for (int32_t n : nodes) e.mutable_started()->add_nodes(n);
    *e.mutable_started()->mutable_snapshot() = snapshot;
    return e;
  };
  auto estimate_message = [&](const v1::ClusterSnapshot& snapshot) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, kNow - 1000);
    *req.mutable_snapshot() = snapshot;
    v1::EstimateTurnaroundResponse out;
    return stub_->EstimateTurnaround(&ctx, req, &out).error_message();
  };
  for (const SnapshotEdit& e : BadSnapshotEdits()) {
    v1::ClusterSnapshot s = ClusterWithRunningJob(kNow - 1000);
    e.edit(&s);
    grpc::Status status = send(submitted(s));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what;
    EXPECT_NE(status.error_message().find(e.field), std::string::npos)
        << e.what << ": " << status.error_message();
    EXPECT_EQ(status.error_message(), estimate_message(s)) << e.what;
  }
  // Nothing was stored: job 1 is unknown.
  EXPECT_EQ(send(started({0, 1}, Cluster(kNow - 500, 4))).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(send(submitted(ClusterWithRunningJob(kNow - 1000))).ok());
  // Started: the snapshot's rules, and the job's own nodes.
  for (const SnapshotEdit& e : BadSnapshotEdits()) {
    v1::ClusterSnapshot s = ClusterWithRunningJob(kNow - 500);
    e.edit(&s);
    grpc::Status status = send(started({2, 3}, s));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what;
    EXPECT_NE(status.error_message().find(e.field), std::string::npos)
        << e.what << ": " << status.error_message();
  }
  for (const auto& [nodes, field] : std::vector<std::pair<std::vector<int32_t>, std::string>>{
           {{}, "no node"}, {{2, 2}, "twice"}, {{2}, "procs"}, {{0, 1, 2}, "procs"},
           {{2, 4}, "outside"}}) {
    grpc::Status status = send(started(nodes, Cluster(kNow - 500, 4)));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_NE(status.error_message().find(field), std::string::npos) << status.error_message();
  }
  // Still pending: the valid start and finish make one history record.
  ASSERT_TRUE(send(started({2, 3}, ClusterWithRunningJob(kNow - 500))).ok());
  v1::JobEvent fin;
  fin.mutable_finished()->set_job_id(1);
  fin.mutable_finished()->set_finish_unix_seconds(kNow - 100);
  fin.mutable_finished()->set_cpu_seconds_per_task(300);
  ASSERT_TRUE(send(fin).ok());
  EXPECT_EQ(resp.history_records(), 1);
}

}  // namespace
}  // namespace sojourn::predictor
