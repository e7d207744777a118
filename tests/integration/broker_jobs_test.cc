// The broker's job queue through the real gRPC stack: a broker on loopback
// port 0 with its queue in RocksDB on disk forwards job events to a real
// predictor (job history in RocksDB on disk) and asks it for turnaround
// estimates on the snapshot it builds from its hosts and queue. One FakeClock
// drives both services.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/server.h"
#include "gtest/gtest.h"
#include "models/turnaround/hist_db_rocksdb.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/checkpoint.h"
#include "models/turnaround/job.h"
#include "services/broker/broker_service.h"
#include "services/broker/job_queue.h"
#include "services/job_spec.h"
#include "services/predictor/predictor_service.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

constexpr int64_t kStart = 1700000000;
constexpr int64_t kOverdueGrace = broker::kOverdueGraceSeconds;

v1::JobSpec Job(int64_t id, int procs, int64_t submit = 0) {
  v1::JobSpec j;
  j.set_job_id(id);
  j.set_submit_unix_seconds(submit);
  j.set_user(7);
  j.set_executable(3);
  j.set_procs(procs);
  j.set_requested_seconds(7200);
  return j;
}

class BrokerJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = turnaround::RocksHistDb::Open(dir_.File("histdb"), {});
    ASSERT_THAT(db.status(), IsOk());
    histdb_ = std::move(*db);
    estimator_ = std::make_unique<turnaround::TurnaroundEstimator>(*histdb_,
                                                                   turnaround::EstimatorOptions{});
    avail_ = std::make_unique<predictor::AvailabilityPredictor>(
        predictor::AvailabilityPredictorConfig{}, directory_, clock_);
    predictor_service_ = std::make_unique<predictor::PredictorService>(
        *avail_, directory_, predictor_pool_, estimator_.get());
    predictor_service_->ExportTurnaroundAccuracy(predictor_metrics_);
    auto p = GrpcServer::Start({}, {predictor_service_.get()}, predictor_metrics_);
    ASSERT_THAT(p.status(), IsOk());
    predictor_ = std::move(*p);
    StartBroker(predictor_->address());
  }
  void TearDown() override {
    StopBroker();
    if (predictor_) predictor_->Shutdown(absl::Seconds(1));
  }

  // A broker whose queue is in dir_/`queue_dir` and whose history is the
  // predictor at `predictor_address`, or `history` when not null.
  void StartBroker(const std::string& predictor_address,
                   const broker::JobQueueServiceConfig& config = {},
                   broker::JobHistory* history = nullptr, const std::string& queue_dir = "queue") {
    auto q = broker::JobQueue::Open(dir_.File(queue_dir));
    ASSERT_THAT(q.status(), IsOk());
    queue_ = std::move(*q);
    tr_source_ = std::make_unique<broker::GrpcTrSource>(predictor_address);
    history_ = std::make_unique<broker::GrpcJobHistory>(predictor_address, absl::Seconds(5),
                                                        absl::Seconds(30));
    ranker_ = std::make_unique<broker::Ranker>(*tr_source_, nullptr, clock_, broker::RankerConfig{});
    service_ = std::make_unique<broker::BrokerService>(registry_, *ranker_, broker_pool_);
    broker_metrics_ = std::make_unique<Metrics>("broker");
    service_->EnableJobQueue(*queue_, history != nullptr ? *history : *history_, config,
                             broker_metrics_.get());
    auto b = GrpcServer::Start({}, {service_.get()}, *broker_metrics_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = std::move(*b);
    stub_ = v1::Broker::NewStub(
        grpc::CreateChannel(broker_->address(), grpc::InsecureChannelCredentials()));
  }
  void StopBroker() {
    if (broker_) broker_->Shutdown(absl::Seconds(1));
    broker_.reset();
    service_.reset();
    queue_.reset();
  }

  grpc::Status Register(const std::string& host, std::optional<double> load) {
    grpc::ClientContext ctx;
    v1::RegisterHostRequest req;
    req.set_host(host);
    req.set_statemgr_address("127.0.0.1:1");
    req.mutable_attributes()->set_cpu_cores(1);
    if (load) req.set_cpu_load_ratio(*load);
    v1::RegisterHostResponse resp;
    return stub_->RegisterHost(&ctx, req, &resp);
  }
  grpc::Status Submit(const v1::JobSpec& job, v1::JobQueueResponse* resp) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_job() = job;
    return stub_->SubmitJob(&ctx, req, resp);
  }
  grpc::Status Start(int64_t id, const std::vector<std::string>& hosts, v1::JobQueueResponse* resp) {
    grpc::ClientContext ctx;
    v1::StartJobRequest req;
    req.set_job_id(id);
    for (const auto& h : hosts) req.add_hosts(h);
    return stub_->StartJob(&ctx, req, resp);
  }
  grpc::Status Finish(int64_t id, double cpu, bool cancelled, v1::JobQueueResponse* resp) {
    grpc::ClientContext ctx;
    v1::FinishJobRequest req;
    req.set_job_id(id);
    req.set_cpu_seconds_per_task(cpu);
    req.set_cancelled(cancelled);
    return stub_->FinishJob(&ctx, req, resp);
  }
  v1::ListJobsResponse List() {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    EXPECT_TRUE(stub_->ListJobs(&ctx, v1::ListJobsRequest(), &resp).ok());
    return resp;
  }
  grpc::Status Estimate(const v1::JobSpec& job, v1::JobSelection selection,
                        v1::EstimateJobTurnaroundResponse* resp) {
    grpc::ClientContext ctx;
    v1::EstimateJobTurnaroundRequest req;
    *req.mutable_job() = job;
    req.mutable_policy()->set_job_selection(selection);
    return stub_->EstimateJobTurnaround(&ctx, req, resp);
  }
  static const v1::KernelEstimate& Kernel(const v1::EstimateJobTurnaroundResponse& r,
                                          const std::string& name) {
    for (const auto& e : r.estimates()) {
      if (e.kernel() == name) return e;
    }
    ADD_FAILURE() << "no " << name << " estimate";
    return r.estimates(0);
  }

  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(kStart)};
  predictor::StatemgrDirectory directory_{"", absl::Seconds(5)};
  ThreadPool predictor_pool_{2};
  Metrics predictor_metrics_{"predictor"};
  std::unique_ptr<turnaround::RocksHistDb> histdb_;
  std::unique_ptr<turnaround::TurnaroundEstimator> estimator_;
  std::unique_ptr<predictor::AvailabilityPredictor> avail_;
  std::unique_ptr<predictor::PredictorService> predictor_service_;
  std::unique_ptr<GrpcServer> predictor_;

  broker::HostRegistry registry_{clock_, absl::Hours(24)};
  ThreadPool broker_pool_{2};
  std::unique_ptr<broker::JobQueue> queue_;
  std::unique_ptr<broker::GrpcTrSource> tr_source_;
  std::unique_ptr<broker::GrpcJobHistory> history_;
  std::unique_ptr<broker::Ranker> ranker_;
  std::unique_ptr<broker::BrokerService> service_;
  std::unique_ptr<Metrics> broker_metrics_;
  std::unique_ptr<GrpcServer> broker_;
  std::unique_ptr<v1::Broker::Stub> stub_;
};

// Jobs reported to the broker by host name teach the predictor's history:
// after five 1,000 s runs of one application, the broker's estimate for the
// next one runs about 1,000 s, and the snapshot it sent holds the hosts with
// the load they reported.
TEST_F(BrokerJobsTest, JobEventsTeachTheHistoryAndEstimatesUseTheQueue) {
  ASSERT_TRUE(Register("a", 0.1).ok());
  ASSERT_TRUE(Register("b", 0.5).ok());
  ASSERT_TRUE(Register("c", std::nullopt).ok());
  for (int i = 1; i <= 5; ++i) {
    v1::JobQueueResponse resp;
    ASSERT_TRUE(Submit(Job(i, 2), &resp).ok());
    EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
    EXPECT_EQ(resp.job().spec().submit_unix_seconds(), absl::ToUnixSeconds(clock_.Now()));
    EXPECT_EQ(resp.waiting_jobs(), 1);
    clock_.Advance(absl::Seconds(60));
    ASSERT_TRUE(Start(i, {"a", "b"}, &resp).ok());
    EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
    EXPECT_EQ(resp.running_jobs(), 1);
    EXPECT_EQ(resp.waiting_jobs(), 0);
    if (i == 1) {
      const v1::ListJobsResponse l = List();
      ASSERT_EQ(l.snapshot_hosts_size(), 3);
      EXPECT_EQ(l.snapshot_hosts(0), "a");
      EXPECT_DOUBLE_EQ(l.snapshot().nodes(0).local_cpu_ratio(), 0.1);
      EXPECT_DOUBLE_EQ(l.snapshot().nodes(1).local_cpu_ratio(), 0.5);
      EXPECT_DOUBLE_EQ(l.snapshot().nodes(2).local_cpu_ratio(), 0.0);
      ASSERT_EQ(l.running_size(), 1);
      ASSERT_EQ(l.snapshot().running_size(), 1);
      EXPECT_EQ(l.snapshot().running(0).nodes(0), 0);
      EXPECT_EQ(l.snapshot().running(0).nodes(1), 1);
    }
    clock_.Advance(absl::Seconds(1000));
    ASSERT_TRUE(Finish(i, 900, false, &resp).ok());
    EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
    EXPECT_EQ(resp.history_records(), i);
    EXPECT_EQ(resp.running_jobs(), 0);
  }
  v1::EstimateJobTurnaroundResponse est;
  ASSERT_TRUE(Estimate(Job(0, 2), v1::JOB_SELECTION_FCFS, &est).ok());
  const v1::KernelEstimate& h = Kernel(est, "historical");
  EXPECT_TRUE(h.from_history());
  EXPECT_GE(h.matched_records(), 5);
  EXPECT_NEAR(h.exec().point_seconds(), 1000, 100);
  EXPECT_EQ(est.snapshot().nodes_size(), 3);
  EXPECT_EQ(est.snapshot().waiting_size(), 0);
  EXPECT_EQ(Kernel(est, "simulation").wait().point_seconds(), 0);  // an idle cluster
}

// `sojourn turnaround --queue --job-id N` for a job waiting in the queue
// (submit time 0) is estimated from when the job was submitted, so the
// predictor scores it when the job finishes; one made while it runs is not.
TEST_F(BrokerJobsTest, EstimatesOfAQueuedJobCountFromItsSubmitAndAreScored) {
  for (const char* h : {"a", "b", "c"}) ASSERT_TRUE(Register(h, 0.0).ok());
  auto scored = [&](const char* kernel, const char* quantity) {
    const std::string text = predictor_metrics_.Render();
    const std::string key =
        absl::StrCat("sojourn_predictor_turnaround_scored_total{service=\"predictor\",kernel=\"",
                     kernel, "\",quantity=\"", quantity, "\"} ");
    const size_t at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(5, 1), &resp).ok());  // at kStart
  ASSERT_TRUE(resp.recorded_in_history()) << resp.history_error();
  clock_.Advance(absl::Seconds(100));
  v1::EstimateJobTurnaroundResponse est;
  ASSERT_TRUE(Estimate(Job(5, 1), v1::JOB_SELECTION_FCFS, &est).ok());
  // An idle cluster: it starts now, having waited the 100 s since its submit.
  EXPECT_EQ(Kernel(est, "simulation").wait().point_seconds(), 100);
  clock_.Advance(absl::Seconds(20));
  ASSERT_TRUE(Start(5, {"a"}, &resp).ok());
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(Estimate(Job(5, 1), v1::JOB_SELECTION_FCFS, &est).ok());  // hindsight
  clock_.Advance(absl::Seconds(970));
  ASSERT_TRUE(Finish(5, 900, false, &resp).ok());
  ASSERT_TRUE(resp.recorded_in_history()) << resp.history_error();
  for (const char* q : {"wait", "run", "turnaround"}) {
    EXPECT_EQ(scored("simulation", q), 1) << q;
  }
  EXPECT_EQ(scored("user_estimate", "run"), 1);
  const std::string text = predictor_metrics_.Render();
  // The forecast made before the start: wait 100 s predicted, 120 s observed.
  EXPECT_NE(text.find("sojourn_predictor_turnaround_abs_error_seconds_total{service=\"predictor\","
                      "kernel=\"simulation\",quantity=\"wait\"} 20\n"),
            std::string::npos)
      << text;
}

// A job waits behind the queue the broker holds: with two of three hosts
// running a job and a 3-host job queued first, a new 1-host job waits under
// FCFS; under EASY it backfills onto the free host. A queued job that needs
// more hosts than there are does not block it.
TEST_F(BrokerJobsTest, EstimatesWaitBehindTheBrokersQueue) {
  for (const char* h : {"a", "b", "c"}) ASSERT_TRUE(Register(h, 0.0).ok());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 2), &resp).ok());
  ASSERT_TRUE(Start(1, {"a", "b"}, &resp).ok());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(Submit(Job(2, 3), &resp).ok());
  EXPECT_EQ(resp.waiting_jobs(), 1);
  EXPECT_EQ(resp.running_jobs(), 1);
  // A job for 5 hosts on a 3-host cluster could never start; under FCFS it
  // would block every job behind it, so the snapshot leaves it out.
  ASSERT_TRUE(Submit(Job(4, 5), &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  clock_.Advance(absl::Seconds(10));

  v1::EstimateJobTurnaroundResponse fcfs, easy;
  v1::JobSpec small = Job(3, 1);
  small.set_requested_seconds(600);
  ASSERT_TRUE(Estimate(small, v1::JOB_SELECTION_FCFS, &fcfs).ok());
  ASSERT_TRUE(Estimate(small, v1::JOB_SELECTION_EASY, &easy).ok());
  ASSERT_EQ(fcfs.snapshot().waiting_size(), 1);
  EXPECT_EQ(fcfs.snapshot().waiting(0).job_id(), 2);
  EXPECT_EQ(fcfs.snapshot().running_size(), 1);
  EXPECT_GT(Kernel(fcfs, "simulation").wait().point_seconds(), 0);
  EXPECT_EQ(Kernel(easy, "simulation").wait().point_seconds(), 0);

  // The job being estimated is left out of the waiting jobs when queued.
  ASSERT_TRUE(Estimate(Job(2, 3), v1::JOB_SELECTION_FCFS, &fcfs).ok());
  EXPECT_EQ(fcfs.snapshot().waiting_size(), 0);
}

// Refusals name the reason, and none of them changes the queue.
TEST_F(BrokerJobsTest, BadEventsAreRefusedAndLeaveTheQueueAlone) {
  ASSERT_TRUE(Register("a", 0.2).ok());
  ASSERT_TRUE(Register("b", 0.2).ok());
  EXPECT_EQ(Register("c", 1.5).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 2), &resp).ok());
  const std::string before = List().DebugString();

  grpc::Status s = Submit(Job(1, 2), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  s = Submit(Job(0, 2), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = Submit(Job(2, 0), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = Submit(Job(3, 1, kStart + 86400), &resp);  // a day in the future
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("submit_unix_seconds"), std::string::npos) << s.error_message();
  s = Start(9, {"a", "b"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  s = Start(1, {"a"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("one host per task"), std::string::npos) << s.error_message();
  s = Start(1, {"a", "a"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = Start(1, {"a", "nowhere"}, &resp);
  // UNAVAILABLE (retry) so soon after the broker's start; INVALID_ARGUMENT
  // after its heartbeat TTL (UnknownHostsAreRetriedWhileHostsReregister).
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("'nowhere' is not registered"), std::string::npos);
  s = Finish(1, -1, false, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  s = Finish(9, -1, true, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  // What the predictor would refuse is refused here: queued, such a job
  // failed every later snapshot, estimate and job event (session 19).
  v1::JobSpec long_job = Job(4, 1);
  long_job.set_requested_seconds(kMaxRequestedSeconds + 1);
  s = Submit(long_job, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("requested_seconds"), std::string::npos) << s.error_message();
  v1::JobSpec bad_user = Job(5, 1);
  bad_user.set_user(-5);
  s = Submit(bad_user, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("user must be >= -1"), std::string::npos) << s.error_message();
  EXPECT_EQ(List().DebugString(), before);
  // A bad policy is refused, not echoed back in the snapshot.
  for (const auto& [selection, mpl] : std::vector<std::pair<int, int>>{{9, 0}, {0, -1}}) {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.mutable_policy()->set_job_selection(static_cast<v1::JobSelection>(selection));
    req.mutable_policy()->set_mpl_limit(mpl);
    v1::ListJobsResponse listed;
    s = stub_->ListJobs(&ctx, req, &listed);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.DebugString();
  }
  v1::JobSpec year_job = Job(6, 1);
  year_job.set_requested_seconds(kMaxRequestedSeconds);  // the longest the predictor takes
  ASSERT_TRUE(Submit(year_job, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  v1::EstimateJobTurnaroundResponse est;
  s = Estimate(Job(0, 1), v1::JOB_SELECTION_FCFS, &est);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(est.snapshot().waiting_size(), 2);
  ASSERT_TRUE(Finish(6, -1, true, &resp).ok());

  ASSERT_TRUE(Start(1, {"a", "b"}, &resp).ok());
  s = Start(1, {"a", "b"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  s = Finish(1, std::nan(""), false, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  // More CPU seconds than the job has run: refused while it is still queued
  // (the history would refuse it and the job would be lost to it).
  clock_.Advance(absl::Seconds(100));
  s = Finish(1, 102, false, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("at most one CPU"), std::string::npos) << s.error_message();
  EXPECT_EQ(List().running_size(), 1);
  // A running job may be cancelled (killed): it leaves the queue.
  ASSERT_TRUE(Finish(1, -1, true, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  EXPECT_EQ(resp.running_jobs(), 0);
}

// Job times ahead of the broker's clock are held to the predictor's limit
// (kMaxJobClockSkewSeconds): what the queue takes, the history records at
// once, and an estimate takes the same submit times as SubmitJob. The broker
// binary used to apply its 2 h --max_clock_skew_seconds for host samples: a
// job 1-2 h ahead was queued while the history refused its event for good.
TEST_F(BrokerJobsTest, JobTimesAheadOfTheClockAreThoseTheHistoryTakes) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  const int64_t latest = kStart + kMaxJobClockSkewSeconds;
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1, latest), &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  EXPECT_EQ(resp.history_pending(), 0);
  grpc::Status s = Submit(Job(2, 1, latest + 1), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("submit_unix_seconds"), std::string::npos) << s.error_message();
  EXPECT_EQ(List().waiting_size(), 1);

  v1::EstimateJobTurnaroundResponse est;
  s = Estimate(Job(3, 1, latest), v1::JOB_SELECTION_FCFS, &est);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Refused by the broker itself, as SubmitJob refuses it.
  s = Estimate(Job(3, 1, latest + 1), v1::JOB_SELECTION_FCFS, &est);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("to 3600 s after it"), std::string::npos)
      << s.error_message();
  // At most a year back: a job "submitted" in 1970 recorded a decades-long
  // wait when it started, and estimates of it were refused.
  const int64_t earliest = kStart - turnaround::kMaxWaitSeconds;
  EXPECT_EQ(Submit(Job(4, 1, earliest - 1), &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Submit(Job(5, 1, 1), &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Submit(Job(6, 1, earliest), &resp).ok());
  EXPECT_EQ(List().waiting_size(), 2);
  // The predictor takes at least what the broker takes.
  EXPECT_GE(predictor::PredictorServiceConfig{}.max_clock_skew_seconds, kMaxJobClockSkewSeconds);
}

// A job started up to the skew ahead of the broker's clock on a host that is
// registered but expired: its host is a node of the snapshot sent with the
// event (it was not, and the event named node 0 of an empty cluster, which
// the history refused for good).
TEST_F(BrokerJobsTest, AJobStartingAheadOfTheClockOnAnExpiredHostIsRecorded) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  clock_.Advance(absl::Hours(25));  // a's registration (TTL 24 h) has expired
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1, now), &resp).ok());
  grpc::ClientContext ctx;
  v1::StartJobRequest req;
  req.set_job_id(1);
  req.add_hosts("a");
  req.set_start_unix_seconds(now + 1800);
  ASSERT_TRUE(stub_->StartJob(&ctx, req, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  EXPECT_EQ(resp.history_pending(), 0);
}

// Job ids as the predictor's history takes them: a job the queue keeps has an
// id > 0 (StartJob and FinishJob of 0 or less are INVALID_ARGUMENT, not "not
// queued"); the job estimated may be 0 (not queued), never negative.
TEST_F(BrokerJobsTest, JobIdsAreCheckedAsThePredictorChecksThem) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  v1::JobQueueResponse resp;
  for (int64_t id : {0, -3}) {
    grpc::Status s = Start(id, {"a"}, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << id << s.error_message();
    EXPECT_NE(s.error_message().find("job_id must be > 0"), std::string::npos) << s.error_message();
    s = Finish(id, -1, true, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << id << s.error_message();
  }
  v1::EstimateJobTurnaroundResponse est;
  grpc::Status s = Estimate(Job(-1, 1), v1::JOB_SELECTION_FCFS, &est);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("job_id must be >= 0"), std::string::npos) << s.error_message();
  s = Estimate(Job(0, 1), v1::JOB_SELECTION_FCFS, &est);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// The queue is on disk: a restarted broker lists the same jobs in the same
// order, and estimates still wait behind them.
TEST_F(BrokerJobsTest, QueueSurvivesABrokerRestart) {
  for (const char* h : {"a", "b"}) ASSERT_TRUE(Register(h, 0.0).ok());
  v1::JobQueueResponse resp;
  for (int64_t id : {30, 10, 20}) {
    ASSERT_TRUE(Submit(Job(id, 1), &resp).ok());
    clock_.Advance(absl::Seconds(5));
  }
  ASSERT_TRUE(Start(10, {"b"}, &resp).ok());
  const std::string before = List().DebugString();
  StopBroker();
  StartBroker(predictor_->address());
  const v1::ListJobsResponse after = List();
  EXPECT_EQ(after.DebugString(), before);
  ASSERT_EQ(after.waiting_size(), 2);
  EXPECT_EQ(after.waiting(0).spec().job_id(), 30);  // submission order, not id order
  EXPECT_EQ(after.waiting(1).spec().job_id(), 20);
  ASSERT_EQ(after.running_size(), 1);
  EXPECT_EQ(after.running(0).hosts(0), "b");
  // New jobs queue after the old ones.
  ASSERT_TRUE(Submit(Job(5, 1), &resp).ok());
  EXPECT_EQ(List().waiting(2).spec().job_id(), 5);
}

bool HasLine(const Metrics& metrics, const std::string& line) {
  return metrics.Render().find(line + "\n") != std::string::npos;
}

// Off by default, a job the middleware never reported finished stays queued
// (and its host busy) however late it is; the overdue gauge and ListJobs say
// so, and its finish, when it comes, is recorded as usual.
TEST_F(BrokerJobsTest, OverdueJobsStayUntilReportedByDefault) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());  // requested 7200 s
  ASSERT_TRUE(Start(1, {"a"}, &resp).ok());
  clock_.Advance(absl::Hours(24 * 30));
  const broker::BrokerService::JobCheck check = service_->CheckJobs();
  EXPECT_EQ(check.expired_running + check.expired_waiting, 0);
  EXPECT_EQ(check.overdue, 1);
  EXPECT_TRUE(HasLine(*broker_metrics_, "sojourn_broker_jobs_overdue{service=\"broker\"} 1"));
  const v1::ListJobsResponse l = List();
  ASSERT_EQ(l.running_size(), 1);
  EXPECT_EQ(l.running(0).overdue_seconds(), 30 * 86400 - 7200);
  const int64_t records = histdb_->size();
  ASSERT_TRUE(Finish(1, 100, false, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  EXPECT_EQ(histdb_->size(), records + 1);
  service_->CheckJobs();
  EXPECT_TRUE(HasLine(*broker_metrics_, "sojourn_broker_jobs_overdue{service=\"broker\"} 0"));
}

// With expiry on, a job nothing was reported of is dropped as cancelled: a
// running one the set time after its start plus its requested time (after
// its start when that is unknown), a waiting one after its submission. The
// history forgets it without learning a run time, its host is free again,
// the drop is on disk, and a late StartJob or FinishJob says what happened.
TEST_F(BrokerJobsTest, JobsNothingIsReportedOfExpireWhenAsked) {
  broker::JobQueueServiceConfig config;
  config.expiry.waiting_seconds = 2 * 86400;
  config.expiry.running_seconds = 4 * 3600;
  StopBroker();
  StartBroker(predictor_->address(), config);
  for (const char* h : {"a", "b", "c"}) ASSERT_TRUE(Register(h, 0.0).ok());
  v1::JobQueueResponse resp;
  v1::JobSpec unknown = Job(2, 1);
  unknown.set_requested_seconds(-1);
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());  // requested 7200 s
  ASSERT_TRUE(Submit(unknown, &resp).ok());
  ASSERT_TRUE(Submit(Job(3, 1), &resp).ok());
  ASSERT_TRUE(Start(1, {"a"}, &resp).ok());
  ASSERT_TRUE(Start(2, {"b"}, &resp).ok());
  const int64_t records = histdb_->size();

  // An hour past job 1's requested time it is not yet overdue; a second
  // later it is. Nothing has expired.
  clock_.Advance(absl::Seconds(7200 + kOverdueGrace));
  broker::BrokerService::JobCheck check = service_->CheckJobs();
  EXPECT_EQ(check.overdue, 0);
  EXPECT_EQ(List().running(0).overdue_seconds(), kOverdueGrace);
  clock_.Advance(absl::Seconds(1));
  check = service_->CheckJobs();
  EXPECT_EQ(check.overdue, 1);
  EXPECT_EQ(check.expired_running + check.expired_waiting, 0);
  EXPECT_TRUE(HasLine(*broker_metrics_, "sojourn_broker_jobs_overdue{service=\"broker\"} 1"));
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_job_age_max_seconds{service=\"broker\",state=\"running\"} "
                      "10801"));
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_job_age_max_seconds{service=\"broker\",state=\"waiting\"} "
                      "10801"));

  // Job 2 (no requested time) expires 4 h after its start, not a second before.
  clock_.Advance(absl::Seconds(4 * 3600 - 10801 - 1));
  EXPECT_EQ(service_->CheckJobs().expired_running, 0);
  clock_.Advance(absl::Seconds(1));
  check = service_->CheckJobs();
  EXPECT_EQ(check.expired_running, 1);
  EXPECT_EQ(check.expired_waiting, 0);
  ASSERT_EQ(List().running_size(), 1);
  EXPECT_EQ(List().running(0).spec().job_id(), 1);
  EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(2).status()));  // cancelled there
  EXPECT_TRUE(histdb_->GetPending(1).ok());
  grpc::Status s = Finish(2, 100, false, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("--expire_running_jobs_after_seconds"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("with no requested time"), std::string::npos)
      << s.error_message();

  // Job 1 expires 4 h after its start plus 7200 s; host a is free for job 4.
  clock_.Advance(absl::Seconds(7200 - 1));
  EXPECT_EQ(service_->CheckJobs().expired_running, 0);
  clock_.Advance(absl::Seconds(1));
  check = service_->CheckJobs();
  EXPECT_EQ(check.expired_running, 1);
  EXPECT_EQ(check.overdue, 0);
  EXPECT_EQ(List().running_size(), 0);
  EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(1).status()));
  ASSERT_TRUE(Submit(Job(4, 1), &resp).ok());
  ASSERT_TRUE(Start(4, {"a"}, &resp).ok());
  clock_.Advance(absl::Seconds(100));
  ASSERT_TRUE(Finish(4, 50, false, &resp).ok());

  // Job 3 waited two days since its submission (at kStart).
  clock_.Advance(absl::FromUnixSeconds(kStart + 2 * 86400 - 1) - clock_.Now());
  EXPECT_EQ(service_->CheckJobs().expired_waiting, 0);
  clock_.Advance(absl::Seconds(1));
  check = service_->CheckJobs();
  EXPECT_EQ(check.expired_waiting, 1);
  s = Start(3, {"c"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("--expire_waiting_jobs_after_seconds"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(3).status()));
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_jobs_expired_total{service=\"broker\",state=\"running\"} 2"));
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_jobs_expired_total{service=\"broker\",state=\"waiting\"} 1"));
  // The cancels went through the outbox, not as events the middleware sent.
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_job_events_replayed_total{service=\"broker\","
                      "outcome=\"recorded\"} 3"));
  EXPECT_TRUE(HasLine(*broker_metrics_,
                      "sojourn_broker_job_events_total{service=\"broker\",event=\"cancelled\","
                      "recorded=\"true\"} 0"));
  // The history learnt job 4's run and nothing from the dropped jobs.
  EXPECT_EQ(histdb_->size(), records + 1);

  // Queued anew, job 3 is an ordinary job again.
  ASSERT_TRUE(Submit(Job(3, 1), &resp).ok());
  s = Finish(3, 0, true, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = Finish(3, 0, true, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  // The drops were written: a restarted broker has an empty queue.
  ASSERT_TRUE(Submit(Job(5, 1), &resp).ok());
  StopBroker();
  StartBroker(predictor_->address(), config);
  const v1::ListJobsResponse l = List();
  ASSERT_EQ(l.waiting_size(), 1);
  EXPECT_EQ(l.waiting(0).spec().job_id(), 5);
  EXPECT_EQ(l.running_size(), 0);
}

// Expiry counts from when the broker took the job's latest event when the
// event carried an earlier time: a job reported late (submitted three days
// ago, started a day ago on a 1 h request) gets the whole period from its
// report, not dropped at the next check.
TEST_F(BrokerJobsTest, JobsReportedLateGetTheWholePeriod) {
  broker::JobQueueServiceConfig config;
  config.expiry.waiting_seconds = 86400;
  config.expiry.running_seconds = 3600;
  StopBroker();
  StartBroker(predictor_->address(), config);
  ASSERT_TRUE(Register("a", 0.0).ok());
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1, now - 3 * 86400), &resp).ok());
  EXPECT_EQ(resp.job().reported_unix_seconds(), now);
  EXPECT_EQ(service_->CheckJobs().expired_waiting, 0);
  clock_.Advance(absl::Seconds(86400 - 1));
  EXPECT_EQ(service_->CheckJobs().expired_waiting, 0);
  ASSERT_TRUE(Submit(Job(2, 1, now - 3 * 86400), &resp).ok());
  grpc::ClientContext ctx;
  v1::StartJobRequest req;
  req.set_job_id(2);
  req.add_hosts("a");
  req.set_start_unix_seconds(now - 86400);  // with Job()'s 7200 s: due long ago
  ASSERT_TRUE(stub_->StartJob(&ctx, req, &resp).ok());
  const int64_t reported = absl::ToUnixSeconds(clock_.Now());
  EXPECT_EQ(resp.job().reported_unix_seconds(), reported);
  // Overdue it is (past its requested time), but not dropped before an hour
  // after its report.
  EXPECT_EQ(service_->CheckJobs().overdue, 1);
  clock_.Advance(absl::Seconds(1));
  broker::BrokerService::JobCheck check = service_->CheckJobs();
  EXPECT_EQ(check.expired_waiting, 1);  // job 1, a day after its report
  EXPECT_EQ(check.expired_running, 0);
  clock_.Advance(absl::Seconds(3600 - 2));
  EXPECT_EQ(service_->CheckJobs().expired_running, 0);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(service_->CheckJobs().expired_running, 1);
}

// A drop while the predictor is away reaches the history later, behind the
// events before it, through the outbox.
TEST_F(BrokerJobsTest, ExpiryWhileThePredictorIsDownGoesThroughTheOutbox) {
  broker::JobQueueServiceConfig config;
  config.expiry.waiting_seconds = 3600;
  StopBroker();
  StartBroker("127.0.0.1:1", config);
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());
  clock_.Advance(absl::Seconds(3600));
  EXPECT_EQ(service_->CheckJobs().expired_waiting, 1);
  EXPECT_EQ(queue_->OutboxSize(), 2);
  StopBroker();
  StartBroker(predictor_->address(), config);
  EXPECT_EQ(service_->FlushJobHistory(), 2);
  EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(1).status()));
}

// With the predictor unreachable the queue still changes, and the response
// says the history did not take the event.
TEST_F(BrokerJobsTest, QueueWorksWhileThePredictorIsDown) {
  StopBroker();
  StartBroker("127.0.0.1:1");
  ASSERT_TRUE(Register("a", 0.0).ok());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());
  EXPECT_FALSE(resp.recorded_in_history());
  EXPECT_FALSE(resp.history_error().empty());
  EXPECT_EQ(resp.waiting_jobs(), 1);
  EXPECT_NE(broker_metrics_->Render().find(
                "sojourn_broker_job_events_total{service=\"broker\",event=\"submitted\","
                "recorded=\"false\"} 1\n"),
            std::string::npos);
  v1::EstimateJobTurnaroundResponse est;
  grpc::Status s = Estimate(Job(2, 1), v1::JOB_SELECTION_FCFS, &est);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

// Events the history could not take wait in the queue's outbox (on disk), in
// the order they happened, and reach the history once the predictor answers:
// nothing the middleware reported is lost to the turnaround kernels.
TEST_F(BrokerJobsTest, EventsThePredictorMissedAreSentAgainInOrder) {
  StopBroker();
  StartBroker("127.0.0.1:1");
  ASSERT_TRUE(Register("a", 0.0).ok());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());
  EXPECT_FALSE(resp.recorded_in_history());
  EXPECT_EQ(resp.history_pending(), 1);
  EXPECT_NE(resp.history_error().find("outbox"), std::string::npos) << resp.history_error();
  clock_.Advance(absl::Seconds(100));
  ASSERT_TRUE(Start(1, {"a"}, &resp).ok());
  EXPECT_EQ(resp.history_pending(), 2);
  EXPECT_EQ(service_->FlushJobHistory(), 0);  // still down: both stay
  EXPECT_EQ(queue_->OutboxSize(), 2);
  EXPECT_NE(broker_metrics_->Render().find(
                "sojourn_broker_job_events_pending{service=\"broker\"} 2\n"),
            std::string::npos);
  EXPECT_FALSE(histdb_->GetPending(1).ok());

  // A restarted broker, its predictor back: the outbox was kept, and an
  // event that arrives before it is sent goes behind it.
  StopBroker();
  StartBroker(predictor_->address());
  EXPECT_EQ(queue_->OutboxSize(), 2);
  clock_.Advance(absl::Seconds(1000));
  ASSERT_TRUE(Finish(1, 900, false, &resp).ok());
  EXPECT_FALSE(resp.recorded_in_history());
  EXPECT_EQ(resp.history_pending(), 3);
  const int64_t records = histdb_->size();
  EXPECT_EQ(service_->FlushJobHistory(), 3);
  EXPECT_EQ(queue_->OutboxSize(), 0);
  // Submitted, started, finished, in that order: one more finished job, with
  // the times the events carried.
  EXPECT_EQ(histdb_->size(), records + 1);
  EXPECT_FALSE(histdb_->GetPending(1).ok());  // no longer pending: finished
  EXPECT_NE(broker_metrics_->Render().find(
                "sojourn_broker_job_events_replayed_total{service=\"broker\",outcome=\"recorded\"} 3\n"),
            std::string::npos);
  EXPECT_NE(broker_metrics_->Render().find(
                "sojourn_broker_job_events_pending{service=\"broker\"} 0\n"),
            std::string::npos);
  // Nothing pending: new events go straight to the history again.
  ASSERT_TRUE(Submit(Job(2, 1), &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
  EXPECT_EQ(resp.history_pending(), 0);
}

// A JobHistory in front of another that, at its first Record once armed,
// copies the broker's queue database as it is on disk (a RocksDB
// checkpoint): what a broker killed while it sends that event leaves behind.
// Killed before the history got the event, the send fails; killed after, the
// history took it and the copy is made before the broker hears so. The
// broker that opens the copy is the one restarted after the kill.
class KilledWhileSending final : public broker::JobHistory {
 public:
  KilledWhileSending(broker::JobHistory& history, std::string copy_dir, bool history_took_it)
      : history_(history), copy_dir_(std::move(copy_dir)), history_took_it_(history_took_it) {}
  void Arm(rocksdb::DB* queue_db) { db_ = queue_db; }
  bool copied() const { return copied_; }

  absl::StatusOr<v1::RecordJobEventResponse> Record(const v1::JobEvent& event) override {
    if (db_ == nullptr) return history_.Record(event);
    if (!history_took_it_) {
      Copy();
      return absl::UnavailableError("the broker was killed before the history got the event");
    }
    absl::StatusOr<v1::RecordJobEventResponse> r = history_.Record(event);
    EXPECT_THAT(r.status(), IsOk());
    Copy();
    return r;
  }
  absl::StatusOr<v1::EstimateTurnaroundResponse> Estimate(
      const v1::EstimateTurnaroundRequest& request) override {
    return history_.Estimate(request);
  }

 private:
  void Copy() {
    rocksdb::Checkpoint* raw = nullptr;
    ASSERT_TRUE(rocksdb::Checkpoint::Create(db_, &raw).ok());
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    const rocksdb::Status s = checkpoint->CreateCheckpoint(copy_dir_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    db_ = nullptr;
    copied_ = true;
  }
  broker::JobHistory& history_;
  const std::string copy_dir_;
  const bool history_took_it_;
  rocksdb::DB* db_ = nullptr;
  bool copied_ = false;
};

// A broker killed while it sends a job event to the history (a hung
// predictor, then an OOM kill or a power cut) still has the event after its
// restart: the queue change and the event are one write, and the event
// leaves the outbox only once the history answered. The restarted broker
// sends it, and the history has the finish once: when the kill came after
// the history took it, the repeat is refused (the job is no longer
// pending) and dropped. (The queue had already lost the job and the outbox
// was empty: the finished run was gone for good, audit s43 finding 1.)
TEST_F(BrokerJobsTest, FinishIsSentAfterABrokerKilledWhileSendingIt) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  broker::GrpcJobHistory predictor_history(predictor_->address(), absl::Seconds(5),
                                           absl::Seconds(30));
  for (const bool history_took_it : {false, true}) {
    SCOPED_TRACE(history_took_it ? "killed after the history took the finish"
                                 : "killed before the history got the finish");
    const int64_t id = history_took_it ? 2 : 1;
    const std::string copy = history_took_it ? "killed-after" : "killed-before";
    KilledWhileSending killed(predictor_history, dir_.File(copy), history_took_it);
    StopBroker();
    StartBroker(predictor_->address(), {}, &killed, absl::StrCat("queue-", copy));
    v1::JobQueueResponse resp;
    ASSERT_TRUE(Submit(Job(id, 1), &resp).ok());
    ASSERT_TRUE(resp.recorded_in_history()) << resp.history_error();
    ASSERT_TRUE(Start(id, {"a"}, &resp).ok());
    ASSERT_TRUE(resp.recorded_in_history()) << resp.history_error();
    EXPECT_EQ(queue_->OutboxSize(), 0);  // each popped once the history took it
    clock_.Advance(absl::Seconds(1000));
    const int64_t records = histdb_->size();
    killed.Arm(queue_->db());
    ASSERT_TRUE(Finish(id, 900, false, &resp).ok());
    ASSERT_TRUE(killed.copied());
    EXPECT_EQ(histdb_->size(), records + (history_took_it ? 1 : 0));

    StopBroker();
    StartBroker(predictor_->address(), {}, nullptr, copy);  // the broker restarted after the kill
    const v1::ListJobsResponse listed = List();
    EXPECT_EQ(listed.waiting_size() + listed.running_size(), 0);
    ASSERT_EQ(queue_->OutboxSize(), 1);
    const auto front = queue_->OutboxFront();
    ASSERT_TRUE(front.has_value());
    EXPECT_EQ(front->second.finished().job_id(), id);
    EXPECT_EQ(front->second.finished().finish_unix_seconds(), absl::ToUnixSeconds(clock_.Now()));
    EXPECT_EQ(service_->FlushJobHistory(), history_took_it ? 0 : 1);
    EXPECT_EQ(queue_->OutboxSize(), 0);
    EXPECT_EQ(histdb_->size(), records + 1);  // the run, once
    EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(id).status()));
    EXPECT_TRUE(HasLine(*broker_metrics_,
                        absl::StrCat("sojourn_broker_job_events_replayed_total{service=\"broker\","
                                     "outcome=\"",
                                     history_took_it ? "dropped" : "recorded", "\"} 1")));
    // Sent: the next restart has nothing to send again.
    StopBroker();
    StartBroker(predictor_->address(), {}, nullptr, copy);
    EXPECT_EQ(queue_->OutboxSize(), 0);
    EXPECT_EQ(service_->FlushJobHistory(), 0);
    EXPECT_EQ(histdb_->size(), records + 1);
  }
}

// The same for a submit: the restarted broker queues the job and the history
// gets its submit before the start that follows, so the job's later events
// are recorded (they were refused as "not pending" for good).
TEST_F(BrokerJobsTest, SubmitIsSentAfterABrokerKilledWhileSendingIt) {
  ASSERT_TRUE(Register("a", 0.0).ok());
  broker::GrpcJobHistory predictor_history(predictor_->address(), absl::Seconds(5),
                                           absl::Seconds(30));
  KilledWhileSending killed(predictor_history, dir_.File("killed"), /*history_took_it=*/false);
  StopBroker();
  StartBroker(predictor_->address(), {}, &killed);
  killed.Arm(queue_->db());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(3, 1), &resp).ok());
  ASSERT_TRUE(killed.copied());
  EXPECT_TRUE(absl::IsNotFound(histdb_->GetPending(3).status()));

  StopBroker();
  StartBroker(predictor_->address(), {}, nullptr, "killed");
  ASSERT_EQ(List().waiting_size(), 1);
  ASSERT_EQ(queue_->OutboxSize(), 1);
  EXPECT_EQ(queue_->OutboxFront()->second.submitted().job().job_id(), 3);
  // A start before the outbox is sent waits behind the submit.
  clock_.Advance(absl::Seconds(60));
  ASSERT_TRUE(Start(3, {"a"}, &resp).ok());
  EXPECT_FALSE(resp.recorded_in_history());
  EXPECT_EQ(resp.history_pending(), 2);
  EXPECT_EQ(service_->FlushJobHistory(), 2);
  absl::StatusOr<turnaround::JobRecord> pending = histdb_->GetPending(3);
  ASSERT_THAT(pending.status(), IsOk());
  EXPECT_EQ(pending->start_time, kStart + 60);
  clock_.Advance(absl::Seconds(600));
  ASSERT_TRUE(Finish(3, -1, false, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();
}

// The host registry is in memory: after a restart a host is missing from it
// until its state manager's next heartbeat. Within the heartbeat TTL of the
// broker's start, a StartJob naming such a host is UNAVAILABLE, which
// clients retry, saying why (INVALID_ARGUMENT lost the start, and the job
// waited for good); the retry after the host registered starts the job.
// After the TTL an unknown host is the caller's mistake: INVALID_ARGUMENT.
TEST_F(BrokerJobsTest, UnknownHostsAreRetriedWhileHostsReregister) {
  const int64_t ttl = absl::ToInt64Seconds(registry_.ttl());
  v1::JobQueueResponse resp;
  ASSERT_TRUE(Submit(Job(1, 1), &resp).ok());
  clock_.Advance(absl::Seconds(30));
  grpc::Status s = Start(1, {"a"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(s.error_message(),
            absl::StrCat("job 1: host 'a' is not registered with this broker yet: the broker "
                         "started 30 s ago and hosts re-register with their next heartbeat "
                         "(within ", ttl, " s, --heartbeat_ttl_seconds); retry"));
  EXPECT_EQ(List().waiting_size(), 1);
  {
    grpc::ClientContext ctx;
    v1::GetHostRequest req;
    req.set_host("a");
    v1::RegisteredHost host;
    s = stub_->GetHost(&ctx, req, &host);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_NE(s.error_message().find("the broker started 30 s ago"), std::string::npos)
        << s.error_message();
  }
  ASSERT_TRUE(Register("a", 0.0).ok());  // its heartbeat
  ASSERT_TRUE(Start(1, {"a"}, &resp).ok());
  EXPECT_TRUE(resp.recorded_in_history()) << resp.history_error();

  ASSERT_TRUE(Submit(Job(2, 1), &resp).ok());
  clock_.Advance(absl::Seconds(ttl - 31));  // the TTL's last second
  s = Start(2, {"b"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  clock_.Advance(absl::Seconds(1));
  s = Start(2, {"b"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message(), "job 2: host 'b' is not registered with this broker");
  // A broker restarted now (the registry kept here stands for the hosts'
  // heartbeats) has the window again, from its own start.
  StopBroker();
  StartBroker(predictor_->address());
  s = Start(2, {"b"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("started 0 s ago"), std::string::npos) << s.error_message();
  EXPECT_EQ(List().waiting_size(), 1);
}

// A JobHistory that answers each Record with the next status of a script
// (then OK), and remembers the events it took.
class ScriptedHistory final : public broker::JobHistory {
 public:
  explicit ScriptedHistory(std::vector<absl::Status> script) : script_(std::move(script)) {}
  absl::StatusOr<v1::RecordJobEventResponse> Record(const v1::JobEvent& event) override {
    absl::Status s = next_ < script_.size() ? script_[next_++] : absl::OkStatus();
    if (!s.ok()) return s;
    taken.push_back(event);
    return v1::RecordJobEventResponse();
  }
  absl::StatusOr<v1::EstimateTurnaroundResponse> Estimate(
      const v1::EstimateTurnaroundRequest&) override {
    return absl::UnimplementedError("not in this test");
  }
  std::vector<v1::JobEvent> taken;

 private:
  std::vector<absl::Status> script_;
  size_t next_ = 0;
};

// Only failures that may pass keep an event for later; an event the history
// refuses for good is not kept, and one it refuses on replay is dropped
// (counted) without holding up the ones behind it.
TEST(JobHistoryOutboxTest, TransientFailuresWaitRefusalsAreDropped) {
  FakeClock clock{absl::FromUnixSeconds(kStart)};
  broker::HostRegistry registry{clock, absl::Hours(24)};
  auto q = broker::JobQueue::Open("");
  ASSERT_THAT(q.status(), IsOk());
  ScriptedHistory history({absl::InvalidArgumentError("bad"), absl::UnavailableError("down"),
                           absl::DeadlineExceededError("slow"), absl::NotFoundError("gone")});
  broker::GrpcTrSource tr_source("127.0.0.1:1");
  ThreadPool pool{1};
  broker::BrokerService service(registry, tr_source, pool);
  Metrics metrics("broker");
  service.EnableJobQueue(**q, history, broker::JobQueueServiceConfig{}, &metrics);
  auto server = GrpcServer::Start({}, {&service}, metrics);
  ASSERT_THAT(server.status(), IsOk());
  auto stub = v1::Broker::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto submit = [&](int64_t id) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_job() = Job(id, 1);
    v1::JobQueueResponse resp;
    EXPECT_TRUE(stub->SubmitJob(&ctx, req, &resp).ok());
    return resp;
  };
  EXPECT_EQ(submit(1).history_pending(), 0);  // INVALID_ARGUMENT: the history's verdict
  EXPECT_EQ(submit(2).history_pending(), 1);  // UNAVAILABLE: kept
  EXPECT_EQ(submit(3).history_pending(), 2);  // behind it, unsent
  EXPECT_EQ((*q)->OutboxSize(), 2);
  // Job 2 meets DEADLINE_EXCEEDED (kept), then NOT_FOUND (dropped); job 3
  // is taken.
  EXPECT_EQ(service.FlushJobHistory(), 0);
  EXPECT_EQ((*q)->OutboxSize(), 2);
  EXPECT_EQ(service.FlushJobHistory(), 1);
  EXPECT_EQ((*q)->OutboxSize(), 0);
  ASSERT_EQ(history.taken.size(), 1u);
  EXPECT_EQ(history.taken[0].submitted().job().job_id(), 3);
  EXPECT_NE(metrics.Render().find("sojourn_broker_job_events_replayed_total{service=\"broker\","
                                  "outcome=\"dropped\"} 1\n"),
            std::string::npos);
  (*server)->Shutdown(absl::Seconds(1));
}

// Only an empty directory or a job queue is opened as one: a job history's
// database is refused, untouched.
TEST(JobQueueOpenTest, RefusesAnotherServicesDatabase) {
  TempDir dir;
  {
    auto db = turnaround::RocksHistDb::Open(dir.File("histdb"), {});
    ASSERT_THAT(db.status(), IsOk());
  }
  auto q = broker::JobQueue::Open(dir.File("histdb"));
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition) << q.status();
  EXPECT_NE(q.status().message().find("holds no job queue"), std::string::npos) << q.status();
  auto again = turnaround::RocksHistDb::Open(dir.File("histdb"), {});
  EXPECT_THAT(again.status(), IsOk());
}

// Below the disk reserve (--min_free_disk_mb; here above any disk) the job
// RPCs are RESOURCE_EXHAUSTED naming --data_dir, and nothing is written:
// RocksDB 7.8 aborted when a write met a full disk.
TEST(JobQueueDiskTest, BelowTheReserveNothingIsWritten) {
  TempDir dir;
  FakeClock clock{absl::FromUnixSeconds(kStart)};
  broker::HostRegistry registry{clock, absl::Hours(24)};
  auto q = broker::JobQueue::Open(dir.File("queue"));
  ASSERT_THAT(q.status(), IsOk());
  ScriptedHistory history({});
  broker::GrpcTrSource tr_source("127.0.0.1:1");
  ThreadPool pool{1};
  broker::BrokerService service(registry, tr_source, pool);
  Metrics metrics("broker");
  broker::JobQueueServiceConfig config;
  config.data_dir = dir.File("queue");
  config.min_free_disk_mb = int64_t{1} << 40;
  service.EnableJobQueue(**q, history, config, &metrics);
  auto server = GrpcServer::Start({}, {&service}, metrics);
  ASSERT_THAT(server.status(), IsOk());
  auto stub = v1::Broker::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_job() = Job(1, 1);
  v1::JobQueueResponse resp;
  const grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("MiB free on the disk of --data_dir"), std::string::npos)
      << s.error_message();
  EXPECT_EQ((*q)->Count().waiting, 0);
  EXPECT_TRUE(history.taken.empty());
  (*server)->Shutdown(absl::Seconds(1));
}

// The queue's limit: RESOURCE_EXHAUSTED beyond max_jobs, room again after a
// removal.
TEST(JobQueueOpenTest, FullQueueRefusesSubmits) {
  auto q = broker::JobQueue::Open("", 2);
  ASSERT_THAT(q.status(), IsOk());
  for (int64_t id : {1, 2}) ASSERT_THAT((*q)->Submit(Job(id, 1, kStart), kStart).status(), IsOk());
  EXPECT_EQ((*q)->Submit(Job(3, 1, kStart), kStart).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_THAT((*q)->Remove(1).status(), IsOk());
  EXPECT_THAT((*q)->Submit(Job(3, 1, kStart), kStart).status(), IsOk());
}

// The snapshot: nodes are the live hosts and the hosts running jobs (sorted
// by name), the running jobs point at their hosts, waiting jobs keep queue
// order, and the excluded job is left out.
// A queue change and its event are one write: reopened after the change
// (a broker killed before the history answered), the queue has both; the
// event leaves the outbox only when popped. A full outbox (10 x max_jobs)
// keeps no more events, and the change is made all the same.
TEST(JobQueueOutboxTest, QueueChangeAndItsEventAreOneWrite) {
  TempDir dir;
  const std::string path = dir.File("queue");
  auto q = broker::JobQueue::Open(path, 1);
  ASSERT_THAT(q.status(), IsOk());
  broker::JobQueue::OutboxAppend submitted;
  submitted.event.mutable_submitted()->mutable_job()->set_job_id(1);
  ASSERT_THAT((*q)->Submit(Job(1, 1, kStart), kStart, &submitted).status(), IsOk());
  ASSERT_THAT(submitted.sequence.status(), IsOk());
  broker::JobQueue::OutboxAppend cancelled;
  cancelled.event.mutable_cancelled()->set_job_id(1);
  ASSERT_THAT((*q)->Remove(1, &cancelled).status(), IsOk());
  ASSERT_THAT(cancelled.sequence.status(), IsOk());
  EXPECT_GT(*cancelled.sequence, *submitted.sequence);
  q->reset();
  q = broker::JobQueue::Open(path, 1);
  ASSERT_THAT(q.status(), IsOk());
  EXPECT_EQ((*q)->Count().waiting, 0);
  ASSERT_EQ((*q)->OutboxSize(), 2);
  EXPECT_EQ((*q)->OutboxFront()->first, *submitted.sequence);
  EXPECT_TRUE((*q)->OutboxFront()->second.has_submitted());
  ASSERT_THAT((*q)->PopOutbox(*submitted.sequence), IsOk());
  EXPECT_TRUE((*q)->OutboxFront()->second.has_cancelled());
  q->reset();
  q = broker::JobQueue::Open(path, 1);
  ASSERT_THAT(q.status(), IsOk());
  ASSERT_EQ((*q)->OutboxSize(), 1);
  EXPECT_EQ((*q)->OutboxFront()->first, *cancelled.sequence);

  // Up to 10 events for a queue of one job; the 11th change keeps none.
  for (int64_t id = 2; (*q)->OutboxSize() < 10; ++id) {
    broker::JobQueue::OutboxAppend e;
    ASSERT_THAT((*q)->Submit(Job(id, 1, kStart), kStart, &e).status(), IsOk());
    ASSERT_THAT(e.sequence.status(), IsOk());
    ASSERT_THAT((*q)->Remove(id, &e).status(), IsOk());
  }
  broker::JobQueue::OutboxAppend full;
  ASSERT_THAT((*q)->Submit(Job(99, 1, kStart), kStart, &full).status(), IsOk());
  EXPECT_EQ(full.sequence.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.sequence.status().message().find("outbox is full"), std::string::npos);
  q->reset();
  q = broker::JobQueue::Open(path, 1);
  ASSERT_THAT(q.status(), IsOk());
  EXPECT_EQ((*q)->Count().waiting, 1);
  EXPECT_EQ((*q)->OutboxSize(), 10);
}

TEST(BuildSnapshotTest, NodesJobsAndExclusion) {
  std::vector<v1::RegisteredHost> hosts(3);
  hosts[0].set_host("z");
  hosts[0].set_live(true);
  hosts[0].set_cpu_load_ratio(0.25);
  hosts[1].set_host("m");
  hosts[1].set_live(false);  // expired, but runs job 1
  hosts[2].set_host("gone");
  hosts[2].set_live(false);  // expired and idle: not a node
  broker::JobQueue::Listing jobs;
  v1::QueuedJob running;
  *running.mutable_spec() = Job(1, 2, kStart);
  running.set_start_unix_seconds(kStart + 10);
  running.add_hosts("z");
  running.add_hosts("m");
  jobs.running.push_back(running);
  for (int64_t id : {4, 3, 2}) {
    v1::QueuedJob w;
    *w.mutable_spec() = Job(id, 1, kStart + 20);
    jobs.waiting.push_back(w);
  }
  std::vector<std::string> names;
  v1::ClusterSnapshot s =
      broker::BuildSnapshot(kStart + 100, v1::SchedulingPolicy(), hosts, jobs, 3, &names);
  ASSERT_EQ(names, (std::vector<std::string>{"m", "z"}));
  EXPECT_EQ(s.now_unix_seconds(), kStart + 100);
  EXPECT_DOUBLE_EQ(s.nodes(1).local_cpu_ratio(), 0.25);
  ASSERT_EQ(s.running_size(), 1);
  EXPECT_EQ(s.running(0).nodes(0), 1);
  EXPECT_EQ(s.running(0).nodes(1), 0);
  ASSERT_EQ(s.waiting_size(), 2);
  EXPECT_EQ(s.waiting(0).job_id(), 4);
  EXPECT_EQ(s.waiting(1).job_id(), 2);
  // A job needing more hosts than there are nodes could never start: left out.
  v1::QueuedJob huge;
  *huge.mutable_spec() = Job(5, 3, kStart + 20);
  jobs.waiting.insert(jobs.waiting.begin(), huge);
  s = broker::BuildSnapshot(kStart + 100, v1::SchedulingPolicy(), hosts, jobs, 3, &names);
  ASSERT_EQ(s.waiting_size(), 2);
  EXPECT_EQ(s.waiting(0).job_id(), 4);
  // A snapshot taken before a job's submit (the clock went back) leaves it out.
  s = broker::BuildSnapshot(kStart + 5, v1::SchedulingPolicy(), hosts, jobs, 0, &names);
  EXPECT_EQ(s.waiting_size(), 0);
  EXPECT_EQ(s.running_size(), 0);
  EXPECT_EQ(names, (std::vector<std::string>{"z"}));
}

// RankHosts with a queue: a host at the multiprogramming limit cannot take
// the job (figures kept, the job named), the others are renumbered in order.
TEST(MarkBusyHostsTest, BusyHostsGoAfterTheUsableOnes) {
  v1::RankHostsResponse r;
  for (const char* name : {"a", "b", "c"}) {
    v1::HostRank* h = r.add_hosts();
    h->set_host(name);
    h->set_rank(r.hosts_size());
    h->set_eligible(true);
    h->set_rule("jctf");
    h->set_reason("JCTF ...");
    h->set_tr_ratio(0.9);
  }
  v1::HostRank* gone = r.add_hosts();
  gone->set_host("d");
  gone->set_reason("revoked (S5)");
  broker::JobQueue::Listing jobs;
  v1::QueuedJob j;
  *j.mutable_spec() = Job(12, 1, kStart);
  j.set_start_unix_seconds(kStart);
  j.add_hosts("a");
  jobs.running.push_back(j);
  v1::QueuedJob waiting;
  *waiting.mutable_spec() = Job(13, 1, kStart);
  jobs.waiting.push_back(waiting);  // waiting jobs hold no host

  v1::RankHostsResponse limit2 = r;
  broker::MarkBusyHosts(jobs, 2, &limit2);  // one task on "a", room for another
  EXPECT_EQ(limit2.DebugString(), r.DebugString());

  broker::MarkBusyHosts(jobs, 1, &r);
  ASSERT_EQ(r.hosts_size(), 4);
  EXPECT_EQ(r.hosts(0).host(), "b");
  EXPECT_EQ(r.hosts(0).rank(), 1);
  EXPECT_EQ(r.hosts(1).host(), "c");
  EXPECT_EQ(r.hosts(1).rank(), 2);
  EXPECT_EQ(r.hosts(2).host(), "a");
  EXPECT_FALSE(r.hosts(2).eligible());
  EXPECT_EQ(r.hosts(2).rank(), 0);
  EXPECT_NE(r.hosts(2).reason().find("busy: runs guest job 12 of the broker's queue"),
            std::string::npos)
      << r.hosts(2).reason();
  EXPECT_DOUBLE_EQ(r.hosts(2).tr_ratio(), 0.9);
  EXPECT_EQ(r.hosts(3).host(), "d");
}

}  // namespace
}  // namespace sojourn
