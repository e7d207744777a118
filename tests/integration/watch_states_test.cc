// StateManager.WatchStates through the real gRPC stack: a statemgr on
// loopback port 0 (RocksDB in a temp dir, fake clock), a streaming client,
// and samples pushed with PushSamples. The client's blocking Read() is the
// synchronisation: each message arrives or the stream ends with a status.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/server.h"
#include "gtest/gtest.h"
#include "services/convert.h"
#include "services/statemgr/statemgr_service.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;
using v1::StateTransition;

constexpr int64_t kStart = 1700438400;  // 2023-11-20 00:00 UTC

class WatchStatesTest : public ::testing::Test {
 protected:
  void Start(size_t max_watch_queue = 10000) {
    auto store = statemgr::SampleStore::Open(dir_.File("db"), false);
    ASSERT_THAT(store.status(), IsOk());
    store_ = std::move(*store);
    book_ = std::make_unique<statemgr::HostBook>(statemgr::HostBookConfig{}, *store_, clock_);
    usage_ = std::make_unique<statemgr::UsageKeeper>(statemgr::UsageKeeperConfig{}, *book_,
                                                     *store_, clock_);
    statemgr::StateManagerServiceConfig sc;
    sc.max_watch_queue = max_watch_queue;
    service_ =
        std::make_unique<statemgr::StateManagerService>(*book_, *usage_, pool_, metrics_, sc);
    auto server = GrpcServer::Start({}, {service_.get()}, metrics_);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    stub_ = v1::StateManager::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (book_) book_->CloseWatchers();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // Pushes samples at a 6 s period from `t0` with the given loads.
  void Push(const std::string& host, int64_t t0, const std::vector<double>& loads) {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse resp;
    auto writer = stub_->PushSamples(&ctx, &resp);
    v1::PushSamplesRequest req;
    req.set_host(host);
    req.set_period_seconds(6);
    for (size_t i = 0; i < loads.size(); ++i) {
      auto* s = req.add_samples();
      s->set_unix_seconds(t0 + 6 * static_cast<int64_t>(i));
      s->set_cpu_load_ratio(loads[i]);
      s->set_free_mem_mb(4000);
    }
    ASSERT_TRUE(writer->Write(req));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(kStart + 20)};
  ThreadPool pool_{2};
  Metrics metrics_{"statemgr"};
  std::unique_ptr<statemgr::SampleStore> store_;
  std::unique_ptr<statemgr::HostBook> book_;
  std::unique_ptr<statemgr::UsageKeeper> usage_;
  std::unique_ptr<statemgr::StateManagerService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::StateManager::Stub> stub_;
};

// The snapshot, then each change as it is pushed, then S5 when the host falls
// silent, then the end of the stream (UNAVAILABLE) when the state manager
// closes its watchers for a shutdown.
TEST_F(WatchStatesTest, SnapshotChangesSilenceAndShutdown) {
  Start();
  Push("vm1", kStart, {0.1, 0.1});
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // no hang
  v1::WatchStatesRequest req;
  auto reader = stub_->WatchStates(&ctx, req);
  StateTransition t;
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_TRUE(t.snapshot());
  EXPECT_EQ(t.host(), "vm1");
  EXPECT_EQ(t.to_state(), v1::HOST_STATE_S1_IDLE);
  EXPECT_EQ(t.from_state(), v1::HOST_STATE_UNSPECIFIED);
  EXPECT_EQ(t.since_unix_seconds(), kStart);

  Push("vm1", kStart + 12, {0.4, 0.4});
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_FALSE(t.snapshot());
  EXPECT_EQ(t.from_state(), v1::HOST_STATE_S1_IDLE);
  EXPECT_EQ(t.to_state(), v1::HOST_STATE_S2_BUSY);
  EXPECT_EQ(t.since_unix_seconds(), kStart + 12);
  EXPECT_NE(t.reason().find("between Th1"), std::string::npos) << t.reason();

  // A new host appears: a watcher of every host hears of it.
  Push("vm2", kStart + 100, {0.9});
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.host(), "vm2");
  EXPECT_EQ(t.from_state(), v1::HOST_STATE_UNSPECIFIED);

  // vm1's last sample is at +18: silent for longer than its 60 s gap.
  clock_.Set(absl::FromUnixSeconds(kStart + 100));
  EXPECT_EQ(book_->CheckSilence(), 1);
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.host(), "vm1");
  EXPECT_EQ(t.to_state(), v1::HOST_STATE_S5_REVOKED);
  EXPECT_EQ(t.since_unix_seconds(), kStart + 18);
  // The same changes in Prometheus: each host's state, and the changes by the state entered.
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("sojourn_statemgr_host_state{service=\"statemgr\",host=\"vm1\"} 5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sojourn_statemgr_host_state{service=\"statemgr\",host=\"vm2\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("sojourn_statemgr_state_transitions_total{service=\"statemgr\",to=\"S5\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("sojourn_statemgr_state_transitions_total{service=\"statemgr\",to=\"S4\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("sojourn_statemgr_watchers{service=\"statemgr\"} 1"), std::string::npos);

  book_->CloseWatchers();
  EXPECT_FALSE(reader->Read(&t));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(metrics_.Render().find("sojourn_statemgr_watchers"), std::string::npos);
}

// One host's watcher sees only that host, even one not known yet; a bad name
// is refused.
TEST_F(WatchStatesTest, HostFilterAndBadName) {
  Start();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // no hang
  v1::WatchStatesRequest req;
  req.set_host("later");
  auto reader = stub_->WatchStates(&ctx, req);
  reader->WaitForInitialMetadata();  // registered: no change after this is missed
  Push("other", kStart, {0.1});
  Push("later", kStart, {0.5});
  StateTransition t;
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.host(), "later");
  EXPECT_EQ(t.to_state(), v1::HOST_STATE_S2_BUSY);
  ctx.TryCancel();
  while (reader->Read(&t)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  grpc::ClientContext bad_ctx;
  req.set_host(std::string("bad\0name", 8));
  auto bad = stub_->WatchStates(&bad_ctx, req);
  EXPECT_FALSE(bad->Read(&t));
  grpc::Status s = bad->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

// A watcher that cannot keep up is ended with RESOURCE_EXHAUSTED instead of
// queueing without bound: 2,000 changes delivered at once against a queue of
// 4 (the first write cannot complete before the next changes are queued).
TEST_F(WatchStatesTest, LaggingWatcherIsEnded) {
  Start(/*max_watch_queue=*/4);
  clock_.Set(absl::FromUnixSeconds(kStart + 12000));  // the pushed samples are not from the future
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // no hang
  v1::WatchStatesRequest req;
  req.set_skip_snapshot(true);
  auto reader = stub_->WatchStates(&ctx, req);
  reader->WaitForInitialMetadata();
  std::vector<double> loads;
  for (int i = 0; i < 2000; ++i) loads.push_back(i % 2 == 0 ? 0.1 : 0.4);  // S1, S2, S1, ...
  Push("h", kStart, loads);
  StateTransition t;
  int received = 0;
  while (reader->Read(&t)) ++received;
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_LT(received, 2000);
  EXPECT_NE(metrics_.Render().find("sojourn_statemgr_watchers_dropped_total{service=\"statemgr\"} 1"),
            std::string::npos)
      << metrics_.Render();
}

// The snapshot does not count against --max_watch_queue: a state manager
// holding more hosts than that (a replay of many hosts) still lets watchers
// in, each getting every host's state and then the changes. It used to end
// every watcher with RESOURCE_EXHAUSTED while it queued its snapshot, so a
// reconnect could never succeed.
TEST_F(WatchStatesTest, SnapshotLargerThanTheQueueIsSent) {
  Start(/*max_watch_queue=*/4);
  for (int i = 0; i < 12; ++i) Push("vm" + std::to_string(10 + i), kStart, {0.1});
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // no hang
  auto reader = stub_->WatchStates(&ctx, v1::WatchStatesRequest());
  StateTransition t;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(reader->Read(&t)) << "snapshot message " << i << ": "
                                  << reader->Finish().error_message();
    EXPECT_TRUE(t.snapshot());
    EXPECT_EQ(t.host(), "vm" + std::to_string(10 + i));
  }
  Push("vm10", kStart + 6, {0.4});
  ASSERT_TRUE(reader->Read(&t)) << reader->Finish().error_message();
  EXPECT_FALSE(t.snapshot());
  EXPECT_EQ(t.host(), "vm10");
  EXPECT_EQ(t.to_state(), v1::HOST_STATE_S2_BUSY);
  ctx.TryCancel();
  while (reader->Read(&t)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace sojourn
