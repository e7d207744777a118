// StateManager.WatchStates through the real gRPC stack: a statemgr on
// loopback port 0 (RocksDB in a temp dir, fake clock), a streaming client,
// and samples pushed with PushSamples. The client's blocking Read() is the
// synchronisation: each message arrives or the stream ends with a status.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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

// Stress (also run under ThreadSanitizer): pushers on several streams, the
// silence check, and watchers that come, read a little and cancel, all at
// once. Every watcher's view must be a piece of one history: a reference
// watcher registered first sees each host's changes chained (each from the
// previous to), a later watcher's snapshot is a state of that chain and its
// changes follow it without gap or duplicate, and a fresh snapshot at the
// end is every host's last state. Each stream ends with the status of its
// cause, and after the shutdown only the metrics watcher is registered.
TEST_F(WatchStatesTest, ConcurrentPushersSilenceAndWatchersAgree) {
  Start(/*max_watch_queue=*/100000);
  // Samples from +9000 s on, the clock at +10000 s: hosts fall silent by the
  // clock and come back with no gap, so silence and samples interleave.
  clock_.Set(absl::FromUnixSeconds(kStart + 10000));
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(60); };
  grpc::ClientContext ref_ctx;
  ref_ctx.set_deadline(deadline());
  auto ref = stub_->WatchStates(&ref_ctx, v1::WatchStatesRequest());
  ref->WaitForInitialMetadata();

  constexpr int kPushers = 3;
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([this, p] {
      std::mt19937 rng(p);
      for (int batch = 0; batch < 40; ++batch) {
        const std::string host = "p" + std::to_string(p) + "-" + std::to_string(batch % 2);
        std::vector<double> loads;
        for (int i = 0; i < 5; ++i) loads.push_back(std::vector<double>{0.1, 0.4, 0.9}[rng() % 3]);
        // 5 samples per batch, a batch every 30 s of the host's time; now and
        // then a gap (a revocation).
        const int64_t t0 = kStart + 9000 + (batch / 2) * 30 + (batch >= 20 ? 300 : 0);
        Push(host, t0, loads);
      }
    });
  }
  std::atomic<bool> pushing{true};
  threads.emplace_back([this, &pushing] {
    while (pushing) book_->CheckSilence();
  });
  struct Seen {
    std::string filter;
    bool skip_snapshot;
    std::vector<StateTransition> messages;
    grpc::Status status;
  };
  std::mutex seen_mu;
  std::vector<Seen> seen;
  constexpr int kChurners = 6;
  for (int c = 0; c < kChurners; ++c) {
    threads.emplace_back([this, c, &deadline, &seen_mu, &seen] {
      std::mt19937 rng(100 + c);
      for (int round = 0; round < 10; ++round) {
        Seen s;
        const int kind = static_cast<int>(rng() % 4);
        s.filter = kind == 0 ? "p" + std::to_string(rng() % kPushers) + "-0" : "";
        s.skip_snapshot = kind == 1;
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline());
        v1::WatchStatesRequest req;
        req.set_host(s.filter);
        req.set_skip_snapshot(s.skip_snapshot);
        auto reader = stub_->WatchStates(&ctx, req);
        reader->WaitForInitialMetadata();
        const size_t want = rng() % 8;
        StateTransition t;
        while (s.messages.size() < want && reader->Read(&t)) s.messages.push_back(t);
        ctx.TryCancel();
        while (reader->Read(&t)) {
        }
        s.status = reader->Finish();
        std::lock_guard<std::mutex> l(seen_mu);
        seen.push_back(std::move(s));
      }
    });
  }
  for (int i = 0; i < kPushers; ++i) threads[i].join();
  pushing = false;
  for (size_t i = kPushers; i < threads.size(); ++i) threads[i].join();

  // The hosts silent since their last batch are announced now, not by the
  // fresh watcher below; everything before the marker has reached the
  // reference watcher once the marker has.
  book_->CheckSilence();
  Push("zz-marker", kStart + 10000, {0.1});
  std::map<std::string, std::vector<StateTransition>> chain;
  StateTransition t;
  while (true) {
    ASSERT_TRUE(ref->Read(&t)) << ref->Finish().error_message();
    if (t.host() == "zz-marker") break;
    ASSERT_FALSE(t.snapshot());
    auto& c = chain[t.host()];
    EXPECT_EQ(t.from_state(), c.empty() ? v1::HOST_STATE_UNSPECIFIED : c.back().to_state())
        << t.host() << " change " << c.size();
    EXPECT_NE(t.from_state(), t.to_state()) << t.host();
    c.push_back(t);
  }
  ASSERT_EQ(chain.size(), 2u * kPushers);
  auto same = [](const StateTransition& a, const StateTransition& b) {
    return a.host() == b.host() && a.from_state() == b.from_state() &&
           a.to_state() == b.to_state() && a.since_unix_seconds() == b.since_unix_seconds() &&
           a.reason() == b.reason();
  };
  ASSERT_EQ(seen.size(), static_cast<size_t>(kChurners * 10));
  for (const Seen& s : seen) {
    EXPECT_EQ(s.status.error_code(), grpc::StatusCode::CANCELLED) << s.status.error_message();
    std::map<std::string, size_t> at;  // host -> index in its chain of the last message
    for (const StateTransition& m : s.messages) {
      SCOPED_TRACE(m.DebugString());
      if (!s.filter.empty()) {
        EXPECT_EQ(m.host(), s.filter);
      }
      const auto& c = chain[m.host()];
      auto it = at.find(m.host());
      if (m.snapshot()) {
        EXPECT_FALSE(s.skip_snapshot);
        EXPECT_TRUE(it == at.end()) << "a snapshot after changes";
        // The state after some change of the chain (the last one with that
        // state and time: a host may return to a state at one sample).
        size_t k = c.size();
        for (size_t i = 0; i < c.size(); ++i) {
          if (c[i].to_state() == m.to_state() &&
              c[i].since_unix_seconds() == m.since_unix_seconds()) {
            k = i;
          }
        }
        ASSERT_LT(k, c.size()) << "a snapshot state the host never had";
        at[m.host()] = k;
      } else if (it != at.end()) {
        ASSERT_LT(it->second + 1, c.size());
        EXPECT_TRUE(same(m, c[it->second + 1])) << "not the next change of the chain";
        ++it->second;
      } else {
        // The first message of this host: with a snapshot, only a host that
        // appeared after the registration starts with a change (its first).
        if (!s.skip_snapshot) {
          EXPECT_EQ(m.from_state(), v1::HOST_STATE_UNSPECIFIED);
        }
        size_t k = c.size();
        for (size_t i = 0; i < c.size() && k == c.size(); ++i) {
          if (same(c[i], m)) k = i;
        }
        ASSERT_LT(k, c.size()) << "a change the reference watcher did not see";
        at[m.host()] = k;
      }
    }
  }
  // A fresh snapshot: every host's last state.
  grpc::ClientContext last_ctx;
  last_ctx.set_deadline(deadline());
  auto last = stub_->WatchStates(&last_ctx, v1::WatchStatesRequest());
  for (size_t i = 0; i < chain.size() + 1; ++i) {
    ASSERT_TRUE(last->Read(&t));
    ASSERT_TRUE(t.snapshot());
    if (t.host() == "zz-marker") continue;
    EXPECT_EQ(t.to_state(), chain[t.host()].back().to_state()) << t.host();
    EXPECT_EQ(t.since_unix_seconds(), chain[t.host()].back().since_unix_seconds()) << t.host();
  }
  book_->CloseWatchers();
  EXPECT_FALSE(ref->Read(&t));
  EXPECT_EQ(ref->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(last->Read(&t));
  EXPECT_EQ(last->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  server_->Shutdown(absl::Seconds(10));
  EXPECT_EQ(book_->watchers(), 1u);  // the metrics watcher
}

}  // namespace
}  // namespace sojourn
