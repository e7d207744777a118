// EstimateTurnaround, RecordJobEvent and ListJobHistory through the predictor's gRPC stack,
// with the job history in RocksDB on disk: it survives a predictor restart.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/server.h"
#include "gtest/gtest.h"
#include "models/turnaround/hist_db_rocksdb.h"
#include "services/predictor/predictor_service.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

constexpr int64_t kNow = 1700000000 + 200000;

// One predictor process: HistDB + estimator + service + server.
class PredictorUnderTest {
 public:
  // An empty `db_path`: a predictor keeping no job history (--histdb_path=).
  explicit PredictorUnderTest(const std::string& db_path, bool score_estimates = false) {
    if (!db_path.empty()) {
      auto db = turnaround::RocksHistDb::Open(db_path, {});
      EXPECT_THAT(db.status(), IsOk());
      db_ = std::move(*db);
      estimator_ =
          std::make_unique<turnaround::TurnaroundEstimator>(*db_, turnaround::EstimatorOptions{});
    }
    predictor_ = std::make_unique<predictor::AvailabilityPredictor>(
        predictor::AvailabilityPredictorConfig{}, directory_, clock_);
    service_ = std::make_unique<predictor::PredictorService>(*predictor_, directory_, pool_,
                                                             estimator_.get());
    if (score_estimates) service_->ExportTurnaroundAccuracy(metrics_);
    auto server = GrpcServer::Start({}, {service_.get()}, metrics_);
    EXPECT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    stub_ = v1::Predictor::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  ~PredictorUnderTest() { server_->Shutdown(absl::Seconds(1)); }
  v1::Predictor::Stub& stub() { return *stub_; }
  // The value of the predictor's series `name{kernel, quantity}`; NaN when absent.
  double Metric(const std::string& name, const std::string& kernel,
                const std::string& quantity) const {
    const std::string text = metrics_.Render();
    const std::string key =
        name + "{service=\"predictor\",kernel=\"" + kernel + "\",quantity=\"" + quantity + "\"} ";
    const size_t at = text.find(key);
    if (at == std::string::npos) return std::nan("");
    return std::stod(text.substr(at + key.size()));
  }

 private:
  // After every event of the tests (times later than the clock + 1 h are refused).
  FakeClock clock_{absl::FromUnixSeconds(kNow)};
  predictor::StatemgrDirectory directory_{"", absl::Seconds(5)};
  ThreadPool pool_{2};
  Metrics metrics_{"predictor"};
  std::unique_ptr<turnaround::RocksHistDb> db_;
  std::unique_ptr<turnaround::TurnaroundEstimator> estimator_;
  std::unique_ptr<predictor::AvailabilityPredictor> predictor_;
  std::unique_ptr<predictor::PredictorService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::Predictor::Stub> stub_;
};

v1::ClusterSnapshot Cluster(int64_t now, int nodes) {
  v1::ClusterSnapshot s;
  s.set_now_unix_seconds(now);
  for (int i = 0; i < nodes; ++i) s.add_nodes()->set_local_cpu_ratio(0.1);
  return s;
}

v1::JobSpec Job(int64_t id, int64_t submit) {
  v1::JobSpec j;
  j.set_job_id(id);
  j.set_submit_unix_seconds(submit);
  j.set_user(7);
  j.set_executable(3);
  j.set_procs(2);
  j.set_requested_seconds(7200);
  return j;
}

// Job events of job `id` on a 4-node dedicated cluster (Job's spec).
v1::JobEvent Submitted(int64_t id, int64_t submit) {
  v1::JobEvent e;
  *e.mutable_submitted()->mutable_job() = Job(id, submit);
  *e.mutable_submitted()->mutable_snapshot() = Cluster(submit, 4);
  return e;
}
v1::JobEvent Started(int64_t id, int64_t start, const std::vector<int32_t>& nodes) {
  v1::JobEvent e;
  e.mutable_started()->set_job_id(id);
  e.mutable_started()->set_start_unix_seconds(start);
  for (int32_t n : nodes) e.mutable_started()->add_nodes(n);
  *e.mutable_started()->mutable_snapshot() = Cluster(start, 4);
  return e;
}
v1::JobEvent Finished(int64_t id, int64_t finish, double cpu) {
  v1::JobEvent e;
  e.mutable_finished()->set_job_id(id);
  e.mutable_finished()->set_finish_unix_seconds(finish);
  e.mutable_finished()->set_cpu_seconds_per_task(cpu);
  return e;
}

grpc::Status Send(v1::Predictor::Stub& stub, const v1::JobEvent& e,
                  v1::RecordJobEventResponse* resp) {
  grpc::ClientContext ctx;
  return stub.RecordJobEvent(&ctx, e, resp);
}

// Jobs that ran 1000 s teach the history; an estimate for the same
// application uses it, and still does after a restart.
TEST(TurnaroundRpcTest, HistorySurvivesRestartAndDrivesEstimates) {
  TempDir dir;
  const int64_t t0 = 1700000000;
  {
    PredictorUnderTest p(dir.File("histdb"));
    v1::RecordJobEventResponse resp;
    for (int i = 1; i <= 5; ++i) {  // ids > 0: the history keys on them
      const int64_t submit = t0 + i * 5000;
      v1::JobEvent sub;
      *sub.mutable_submitted()->mutable_job() = Job(i, submit);
      *sub.mutable_submitted()->mutable_snapshot() = Cluster(submit, 4);
      ASSERT_TRUE(Send(p.stub(), sub, &resp).ok());
      v1::JobEvent start;
      start.mutable_started()->set_job_id(i);
      start.mutable_started()->set_start_unix_seconds(submit + 60);
      start.mutable_started()->add_nodes(0);
      start.mutable_started()->add_nodes(1);
      *start.mutable_started()->mutable_snapshot() = Cluster(submit + 60, 4);
      ASSERT_TRUE(Send(p.stub(), start, &resp).ok());
      v1::JobEvent fin;
      fin.mutable_finished()->set_job_id(i);
      fin.mutable_finished()->set_finish_unix_seconds(submit + 60 + 1000);
      fin.mutable_finished()->set_cpu_seconds_per_task(900);
      ASSERT_TRUE(Send(p.stub(), fin, &resp).ok());
    }
    EXPECT_EQ(resp.history_records(), 5);
  }
  PredictorUnderTest again(dir.File("histdb"));
  grpc::ClientContext ctx;
  v1::EstimateTurnaroundRequest req;
  *req.mutable_job() = Job(99, t0 + 100000);
  *req.mutable_snapshot() = Cluster(t0 + 100000, 4);
  v1::EstimateTurnaroundResponse resp;
  ASSERT_TRUE(again.stub().EstimateTurnaround(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.estimates_size(), 3);
  EXPECT_EQ(resp.estimates(0).kernel(), "historical");
  EXPECT_EQ(resp.estimates(2).kernel(), "hybrid");
  const auto& hist = resp.estimates(0);
  EXPECT_TRUE(hist.from_history());
  EXPECT_GT(hist.matched_records(), 0);
  // The history says 1000 s, not the 7200 s the user asked for.
  EXPECT_NEAR(hist.exec().point_seconds(), 1000, 1);
  for (const auto& e : resp.estimates()) {
    EXPECT_LE(e.turnaround().lo_seconds(), e.turnaround().point_seconds()) << e.kernel();
    EXPECT_GE(e.turnaround().hi_seconds(), e.turnaround().point_seconds()) << e.kernel();
  }
}

// ListJobHistory pages through the finished jobs, each once with what its
// events said, also across a predictor restart and with a submit-time
// filter; pending and cancelled jobs are not in it. Bad pages and a
// predictor without a job history are refused with a reason.
TEST(TurnaroundRpcTest, ListJobHistoryPagesThroughTheFinishedJobs) {
  TempDir dir;
  const int64_t t0 = 1700000000;
  auto list = [](PredictorUnderTest& p, int32_t size, const std::string& token, int64_t since,
                 v1::ListJobHistoryResponse* resp) {
    grpc::ClientContext ctx;
    v1::ListJobHistoryRequest req;
    req.set_page_size(size);
    req.set_page_token(token);
    req.set_submitted_since_unix_seconds(since);
    return p.stub().ListJobHistory(&ctx, req, resp);
  };
  std::string second_page;
  {
    PredictorUnderTest p(dir.File("histdb"));
    v1::RecordJobEventResponse resp;
    for (int i = 1; i <= 25; ++i) {
      const int64_t submit = t0 + i * 5000;
      ASSERT_TRUE(Send(p.stub(), Submitted(i, submit), &resp).ok());
      ASSERT_TRUE(Send(p.stub(), Started(i, submit + 60 + i, {0, 1}), &resp).ok());
      ASSERT_TRUE(
          Send(p.stub(), Finished(i, submit + 1060 + 2 * i, i % 2 ? 900.5 : -1), &resp).ok());
    }
    ASSERT_TRUE(Send(p.stub(), Submitted(26, t0 + 200000), &resp).ok());  // pending
    ASSERT_TRUE(Send(p.stub(), Submitted(27, t0 + 200000), &resp).ok());
    v1::JobEvent cancel;
    cancel.mutable_cancelled()->set_job_id(27);
    ASSERT_TRUE(Send(p.stub(), cancel, &resp).ok());
    v1::ListJobHistoryResponse first;
    ASSERT_TRUE(list(p, 4, "", 0, &first).ok());
    EXPECT_EQ(first.records_size(), 4);
    second_page = first.next_page_token();
    ASSERT_FALSE(second_page.empty());
  }
  PredictorUnderTest p(dir.File("histdb"));
  std::map<int64_t, v1::JobHistoryRecord> seen;
  std::string token;
  int pages = 0;
  do {
    v1::ListJobHistoryResponse resp;
    grpc::Status st = list(p, 4, token, 0, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.history_records(), 25);
    EXPECT_LE(resp.records_size(), 4);
    for (const auto& r : resp.records()) {
      EXPECT_TRUE(seen.emplace(r.job().job_id(), r).second) << r.job().job_id() << " twice";
    }
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 7);
  ASSERT_EQ(seen.size(), 25u);
  for (const auto& [i, r] : seen) {
    const int64_t submit = t0 + i * 5000;
    EXPECT_EQ(r.job().submit_unix_seconds(), submit) << i;
    EXPECT_EQ(r.start_unix_seconds(), submit + 60 + i) << i;
    EXPECT_EQ(r.finish_unix_seconds(), submit + 1060 + 2 * i) << i;
    EXPECT_EQ(r.cpu_seconds_per_task(), i % 2 ? 900.5 : -1) << i;
    EXPECT_EQ(r.job().procs(), 2);
    EXPECT_EQ(r.job().user(), 7);
    EXPECT_EQ(r.job().executable(), 3);
    EXPECT_EQ(r.job().requested_seconds(), 7200);
    EXPECT_EQ(r.cluster_nodes(), 4);
    EXPECT_EQ(r.queue_length_at_submit(), 0);
    EXPECT_DOUBLE_EQ(r.max_local_cpu_ratio(), 0.1);
  }
  // A token of the predictor before its restart goes on where it stopped.
  int rest = 0;
  for (token = second_page; !token.empty();) {
    v1::ListJobHistoryResponse resp;
    ASSERT_TRUE(list(p, 0, token, 0, &resp).ok());
    rest += resp.records_size();
    token = resp.next_page_token();
  }
  EXPECT_EQ(rest, 21);
  // Submitted at or after job 20's submit: jobs 20..25.
  std::set<int64_t> since;
  token.clear();
  do {
    v1::ListJobHistoryResponse resp;
    ASSERT_TRUE(list(p, 3, token, t0 + 20 * 5000, &resp).ok());
    for (const auto& r : resp.records()) since.insert(r.job().job_id());
    token = resp.next_page_token();
  } while (!token.empty());
  EXPECT_EQ(since, (std::set<int64_t>{20, 21, 22, 23, 24, 25}));

  v1::ListJobHistoryResponse resp;
  for (int32_t size : {-1, predictor::PredictorService::kMaxJobHistoryPage + 1}) {
    grpc::Status st = list(p, size, "", 0, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << size;
    EXPECT_NE(st.error_message().find("page_size"), std::string::npos) << st.error_message();
  }
  grpc::Status st = list(p, 4, "not a token", 0, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("cursor"), std::string::npos) << st.error_message();

  PredictorUnderTest none("");
  st = list(none, 4, "", 0, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("no job history"), std::string::npos) << st.error_message();
}

// ImportJobHistory appends records as ListJobHistory returns them (a copy of
// one predictor's history reads back field for field and estimates alike),
// each batch id once, also after a restart; a bad batch is refused whole,
// naming the record.
TEST(TurnaroundRpcTest, ImportJobHistoryAppendsEachBatchOnce) {
  TempDir dir;
  const int64_t t0 = 1700000000;
  auto list_all = [](PredictorUnderTest& p) {
    std::map<int64_t, v1::JobHistoryRecord> out;
    std::string token;
    do {
      grpc::ClientContext ctx;
      v1::ListJobHistoryRequest req;
      req.set_page_token(token);
      v1::ListJobHistoryResponse resp;
      EXPECT_TRUE(p.stub().ListJobHistory(&ctx, req, &resp).ok());
      for (const auto& r : resp.records()) out.emplace(r.job().job_id(), r);
      token = resp.next_page_token();
    } while (!token.empty());
    return out;
  };
  auto import = [](PredictorUnderTest& p, const std::vector<v1::JobHistoryRecord>& records,
                   const std::string& id, v1::ImportJobHistoryResponse* resp) {
    grpc::ClientContext ctx;
    v1::ImportJobHistoryRequest req;
    for (const auto& r : records) *req.add_records() = r;
    req.set_batch_id(id);
    return p.stub().ImportJobHistory(&ctx, req, resp);
  };
  auto estimate = [&](PredictorUnderTest& p) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(99, t0 + 150000);
    *req.mutable_snapshot() = Cluster(t0 + 150000, 4);
    v1::EstimateTurnaroundResponse resp;
    EXPECT_TRUE(p.stub().EstimateTurnaround(&ctx, req, &resp).ok());
    return resp.estimates(0).exec().point_seconds();
  };
  // The source: 8 jobs one after the other (queue and cluster fields are set
  // below, before the copy).
  PredictorUnderTest source(dir.File("source"));
  v1::RecordJobEventResponse ev;
  for (int i = 1; i <= 8; ++i) {
    const int64_t submit = t0 + i * 5000;
    ASSERT_TRUE(Send(source.stub(), Submitted(i, submit), &ev).ok());
    ASSERT_TRUE(Send(source.stub(), Started(i, submit + 60 * i, {0, 1}), &ev).ok());
    ASSERT_TRUE(
        Send(source.stub(), Finished(i, submit + 60 * i + 500 * i, i % 3 ? 400.25 : -1), &ev).ok());
  }
  const std::map<int64_t, v1::JobHistoryRecord> original = list_all(source);
  ASSERT_EQ(original.size(), 8u);
  // In the order they finished, as the source recorded them, with every
  // queue and cluster field set (the events above leave most at 0).
  std::map<int64_t, v1::JobHistoryRecord> want;
  std::vector<v1::JobHistoryRecord> records;
  for (auto [id, r] : original) {
    r.set_cpu_seconds_ahead(100.25 * id);
    r.set_cpu_seconds_backwards(50.5 * id);
    r.set_queue_length_at_submit(static_cast<int32_t>(id));
    r.set_queue_length_at_start(static_cast<int32_t>(id) + 1);
    r.set_shared_tasks(static_cast<int32_t>(id % 3));
    r.set_max_local_cpu_ratio(0.125 * (id % 5));
    r.set_cluster_nodes(id == 8 ? 200000 : 4);  // a replayed log's machine may be large
    r.mutable_policy()->set_job_selection(id % 2 ? v1::JOB_SELECTION_EASY : v1::JOB_SELECTION_FCFS);
    r.mutable_policy()->set_node_selection(id % 2 ? v1::NODE_SELECTION_NORMAL
                                                  : v1::NODE_SELECTION_UNIFORM);
    r.mutable_job()->set_cpu_ratio(id % 2 ? 0.5 : 0);
    records.push_back(r);
    want.emplace(id, r);
  }
  {
    PredictorUnderTest copy(dir.File("copy"));
    v1::ImportJobHistoryResponse resp;
    grpc::Status st = import(copy, {records.begin(), records.begin() + 5}, "copy-1of2", &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.imported(), 5);
    EXPECT_FALSE(resp.already_imported());
    EXPECT_EQ(resp.history_records(), 5);
    st = import(copy, {records.begin(), records.begin() + 5}, "copy-1of2", &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.imported(), 0);
    EXPECT_TRUE(resp.already_imported());
    EXPECT_EQ(resp.history_records(), 5);
  }
  PredictorUnderTest copy(dir.File("copy"));
  v1::ImportJobHistoryResponse resp;
  ASSERT_TRUE(import(copy, {records.begin(), records.begin() + 5}, "copy-1of2", &resp).ok());
  EXPECT_TRUE(resp.already_imported());
  ASSERT_TRUE(import(copy, {records.begin() + 5, records.end()}, "copy-2of2", &resp).ok());
  EXPECT_EQ(resp.imported(), 3);
  EXPECT_EQ(resp.history_records(), 8);
  const std::map<int64_t, v1::JobHistoryRecord> copied = list_all(copy);
  ASSERT_EQ(copied.size(), 8u);
  for (const auto& [id, r] : want) {
    EXPECT_EQ(copied.at(id).SerializeAsString(), r.SerializeAsString()) << "job " << id;
  }
  {
    // The source's records as they are, imported: the kernels estimate from
    // them as from the history the events made.
    PredictorUnderTest plain(dir.File("plain"));
    std::vector<v1::JobHistoryRecord> as_listed;
    for (const auto& [id, r] : original) as_listed.push_back(r);
    ASSERT_TRUE(import(plain, as_listed, "plain", &resp).ok());
    EXPECT_EQ(resp.imported(), 8);
    EXPECT_EQ(estimate(plain), estimate(source));
    EXPECT_NE(estimate(plain), 7200);  // from the history, not the request
  }

  // Refused whole: a good record first, then a bad one; nothing is added.
  v1::JobHistoryRecord good = records[0];
  good.mutable_job()->set_job_id(50);
  struct Bad {
    const char* what;
    std::function<void(v1::JobHistoryRecord*)> spoil;
    const char* message;
  };
  const std::vector<Bad> bads = {
      {"finish before start",
       [](v1::JobHistoryRecord* r) { r->set_finish_unix_seconds(r->start_unix_seconds() - 1); },
       "submit <= start <= finish"},
      {"start before submit",
       [](v1::JobHistoryRecord* r) {
         r->set_start_unix_seconds(r->job().submit_unix_seconds() - 1);
       },
       "submit <= start <= finish"},
      {"finish in the future",
       [](v1::JobHistoryRecord* r) { r->set_finish_unix_seconds(kNow + 3601 + 3600); },
       "clock + skew"},
      {"CPU beyond the run",
       [](v1::JobHistoryRecord* r) {
         r->set_cpu_seconds_per_task(
             static_cast<double>(r->finish_unix_seconds() - r->start_unix_seconds()) + 1.5);
       },
       "a task uses at most one CPU"},
      {"CPU not a number",
       [](v1::JobHistoryRecord* r) {
         r->set_cpu_seconds_per_task(std::numeric_limits<double>::quiet_NaN());
       },
       "finite"},
      {"local CPU above 1", [](v1::JobHistoryRecord* r) { r->set_max_local_cpu_ratio(1.5); },
       "max_local_cpu_ratio"},
      {"negative queue", [](v1::JobHistoryRecord* r) { r->set_queue_length_at_start(-1); },
       "queue_length_at_start"},
      {"infinite CPU ahead",
       [](v1::JobHistoryRecord* r) {
         r->set_cpu_seconds_ahead(std::numeric_limits<double>::infinity());
       },
       "cpu_seconds_ahead"},
      {"unknown policy",
       [](v1::JobHistoryRecord* r) {
         r->mutable_policy()->set_job_selection(static_cast<v1::JobSelection>(9));
       },
       "policy"},
      {"no procs", [](v1::JobHistoryRecord* r) { r->mutable_job()->set_procs(0); }, "procs"},
      {"machine above the SWF limit",
       [](v1::JobHistoryRecord* r) { r->set_cluster_nodes(1000001); },
       "cluster_nodes must be in [0, 1e+06], got 1000001"},
      {"negative job id", [](v1::JobHistoryRecord* r) { r->mutable_job()->set_job_id(-3); }, "job"},
  };
  for (const Bad& b : bads) {
    v1::JobHistoryRecord bad = records[1];
    b.spoil(&bad);
    grpc::Status st = import(copy, {good, bad}, "bad-batch", &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.what;
    EXPECT_NE(st.error_message().find("records[1]: "), std::string::npos) << st.error_message();
    EXPECT_NE(st.error_message().find(b.message), std::string::npos)
        << b.what << ": " << st.error_message();
  }
  EXPECT_EQ(list_all(copy).size(), 8u);
  // The id the refused batches named is still free.
  ASSERT_TRUE(import(copy, {good}, "bad-batch", &resp).ok());
  EXPECT_EQ(resp.imported(), 1);
  EXPECT_EQ(resp.history_records(), 9);

  for (const std::string& id : {std::string(), std::string("a b"), std::string(129, 'x'),
                                std::string("tab\there"), std::string("\xc3\xa9")}) {
    grpc::Status st = import(copy, {good}, id, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_NE(st.error_message().find("batch_id"), std::string::npos) << st.error_message();
  }
  std::vector<v1::JobHistoryRecord> too_many(predictor::PredictorService::kMaxJobHistoryPage + 1,
                                             good);
  grpc::Status st = import(copy, too_many, "too-many", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("1 to 20000 records, got 20001"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(list_all(copy).size(), 9u);
  // An empty batch is refused, so that it cannot use up its id: the records
  // sent later under it are imported.
  st = import(copy, {}, "empty-first", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("got 0"), std::string::npos) << st.error_message();
  ASSERT_TRUE(import(copy, {good}, "empty-first", &resp).ok());
  EXPECT_EQ(resp.imported(), 1);
  EXPECT_FALSE(resp.already_imported());
  EXPECT_EQ(resp.history_records(), 10);

  PredictorUnderTest none("");
  st = import(none, {good}, "x", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("no job history"), std::string::npos) << st.error_message();
}

// When a job finishes, the estimate last made for it under its id is scored
// against what happened: per kernel and time, the counters behind paper
// 002's D_v and the interval's coverage, with the user's requested time
// beside them as the run-time baseline. Jobs never estimated add nothing.
TEST(TurnaroundRpcTest, FinishedJobsScoreTheirEstimatesLive) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"), /*score_estimates=*/true);
  const int64_t t0 = 1700000000;
  v1::RecordJobEventResponse resp;
  constexpr const char* kScored = "sojourn_predictor_turnaround_scored_total";
  constexpr const char* kAbs = "sojourn_predictor_turnaround_abs_error_seconds_total";
  constexpr const char* kObserved = "sojourn_predictor_turnaround_observed_seconds_total";
  constexpr const char* kHits = "sojourn_predictor_turnaround_interval_hits_total";
  for (int i = 1; i <= 3; ++i) {  // 1000 s runs, never estimated
    const int64_t submit = t0 + i * 5000;
    ASSERT_TRUE(Send(p.stub(), Submitted(i, submit), &resp).ok());
    ASSERT_TRUE(Send(p.stub(), Started(i, submit + 60, {0, 1}), &resp).ok());
    ASSERT_TRUE(Send(p.stub(), Finished(i, submit + 1060, 900), &resp).ok());
  }
  for (const char* kernel : {"historical", "simulation", "hybrid"}) {
    for (const char* q : {"wait", "run", "turnaround"}) {
      EXPECT_EQ(p.Metric(kScored, kernel, q), 0) << kernel << " " << q;  // exported at 0
      EXPECT_EQ(p.Metric(kHits, kernel, q), 0) << kernel << " " << q;
    }
  }
  EXPECT_EQ(p.Metric(kScored, "user_estimate", "run"), 0);
  EXPECT_TRUE(std::isnan(p.Metric(kScored, "user_estimate", "wait")));

  // Job 10: estimated under its id, then it waits 60 s and runs 1500 s.
  const int64_t submit = t0 + 50000;
  grpc::ClientContext ctx;
  v1::EstimateTurnaroundRequest req;
  *req.mutable_job() = Job(10, submit);
  *req.mutable_snapshot() = Cluster(submit, 4);
  v1::EstimateTurnaroundResponse est;
  ASSERT_TRUE(p.stub().EstimateTurnaround(&ctx, req, &est).ok());
  ASSERT_EQ(est.estimates_size(), 3);
  ASSERT_TRUE(Send(p.stub(), Submitted(10, submit), &resp).ok());
  ASSERT_TRUE(Send(p.stub(), Started(10, submit + 60, {0, 1}), &resp).ok());
  ASSERT_TRUE(Send(p.stub(), Finished(10, submit + 1560, 900), &resp).ok());
  const double observed[3] = {60, 1500, 1560};
  const char* quantities[3] = {"wait", "run", "turnaround"};
  for (const auto& e : est.estimates()) {
    const v1::TimeInterval* parts[3] = {&e.wait(), &e.exec(), &e.turnaround()};
    for (int m = 0; m < 3; ++m) {
      SCOPED_TRACE(e.kernel() + " " + quantities[m]);
      EXPECT_EQ(p.Metric(kScored, e.kernel(), quantities[m]), 1);
      EXPECT_NEAR(p.Metric(kAbs, e.kernel(), quantities[m]),
                  std::abs(observed[m] - parts[m]->point_seconds()), 1e-6);
      EXPECT_EQ(p.Metric(kObserved, e.kernel(), quantities[m]), observed[m]);
      const bool hit =
          observed[m] >= parts[m]->lo_seconds() && observed[m] <= parts[m]->hi_seconds();
      EXPECT_EQ(p.Metric(kHits, e.kernel(), quantities[m]), hit ? 1 : 0);
    }
  }
  // The historical kernel learnt 1000 s from jobs 1-3: 500 s off, where the
  // user's 7200 s is 5700 s off.
  EXPECT_NEAR(p.Metric(kAbs, "historical", "run"), 500, 1);
  EXPECT_EQ(p.Metric(kScored, "user_estimate", "run"), 1);
  EXPECT_EQ(p.Metric(kAbs, "user_estimate", "run"), 5700);
  EXPECT_EQ(p.Metric(kObserved, "user_estimate", "run"), 1500);

  // Job 11, never estimated, finishes: nothing more is scored.
  ASSERT_TRUE(Send(p.stub(), Submitted(11, submit + 2000), &resp).ok());
  ASSERT_TRUE(Send(p.stub(), Started(11, submit + 2060, {0, 1}), &resp).ok());
  ASSERT_TRUE(Send(p.stub(), Finished(11, submit + 3000, 900), &resp).ok());
  EXPECT_EQ(p.Metric(kScored, "historical", "run"), 1);
  EXPECT_EQ(p.Metric(kScored, "user_estimate", "run"), 1);
}

// Malformed jobs and events for unknown jobs are refused with a message.
TEST(TurnaroundRpcTest, RejectsMalformedRequests) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    req.mutable_job()->set_procs(0);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("procs"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 2);
    auto* r = req.mutable_snapshot()->add_running();
    *r->mutable_spec() = Job(2, 1699990000);
    r->add_nodes(5);  // no node 5
    v1::EstimateTurnaroundResponse resp;
    EXPECT_EQ(p.stub().EstimateTurnaround(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // A waiting job cannot have been submitted after the snapshot was taken.
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 2);
    *req.mutable_snapshot()->add_waiting() = Job(2, 1700000001);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("waiting job 2"), std::string::npos) << s.error_message();
  }
  {
    // Snapshots past the documented limits are refused before any work,
    // with the limit in the message (60,000 jobs used to cost ~30 s).
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 4);
    for (int i = 0; i < 10001; ++i) *req.mutable_snapshot()->add_waiting() = Job(100 + i, 1700000000);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("10000"), std::string::npos) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 100001);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("100000"), std::string::npos) << s.error_message();
  }
  {
    // Within both counts but too much work per scheduling step: 1,001 jobs on
    // 100,000 nodes (10,000 on 100,000 kept a predictor busy for 90 s).
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 100000);
    for (int i = 0; i < 1001; ++i) *req.mutable_snapshot()->add_waiting() = Job(100 + i, 1700000000);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("jobs x nodes"), std::string::npos) << s.error_message();
  }
  {
    // At the limit it still answers.
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(1, 1700000000);
    *req.mutable_snapshot() = Cluster(1700000000, 4);
    for (int i = 0; i < 10000; ++i) *req.mutable_snapshot()->add_waiting() = Job(100 + i, 1700000000);
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  v1::RecordJobEventResponse resp;
  v1::JobEvent fin;
  fin.mutable_finished()->set_job_id(12345);
  fin.mutable_finished()->set_finish_unix_seconds(1700000000);
  EXPECT_EQ(Send(p.stub(), fin, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Send(p.stub(), v1::JobEvent(), &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Events that would poison the job history are refused and nothing of them
// is stored: times past the clock + 1 h (a finish at INT64_MAX used to give
// turnarounds of 9.2e18 s), non-finite CPU seconds, a start before the
// submit, a finish before the start, a start on no node. Events for a job
// never submitted are NOT_FOUND (a 'started' on no valid node used to say
// "outside the snapshot"). Estimates refuse absurd times and unknown enums.
TEST(TurnaroundRpcTest, RejectsEventsThatWouldPoisonTheHistory) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  const int64_t t = kNow - 50000;
  v1::RecordJobEventResponse resp;
  auto code = [&](const v1::JobEvent& e) {
    grpc::Status s = Send(p.stub(), e, &resp);
    EXPECT_FALSE(s.ok() || s.error_message().empty()) << e.ShortDebugString();
    return s.error_code();
  };
  // Never submitted: NOT_FOUND for every kind of event.
  EXPECT_EQ(code(Started(9999, t, {0})), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(code(Started(9999, t, {})), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(code(Finished(9999, t, 1)), grpc::StatusCode::NOT_FOUND);
  v1::JobEvent cancel;
  cancel.mutable_cancelled()->set_job_id(9999);
  EXPECT_EQ(code(cancel), grpc::StatusCode::NOT_FOUND);
  // Submits at absurd times.
  for (int64_t bad : {int64_t{0}, int64_t{-1}, kNow + 3601, INT64_MAX}) {
    EXPECT_EQ(code(Submitted(1, bad)), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  ASSERT_TRUE(Send(p.stub(), Submitted(1, t), &resp).ok());
  EXPECT_EQ(code(Started(1, t - 86400, {0, 1})), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(Started(1, INT64_MIN, {0, 1})), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(Started(1, kNow + 3601, {0, 1})), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(Started(1, t + 10, {})), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(Started(1, t + 10, {50, -3})), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Send(p.stub(), Started(1, t + 10, {0, 1}), &resp).ok());
  EXPECT_EQ(code(Finished(1, INT64_MAX, 100)), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(Finished(1, t + 5, 100)), grpc::StatusCode::INVALID_ARGUMENT);  // before start
  for (double cpu : {double{INFINITY}, std::nan(""), -1e308, -0.5}) {
    EXPECT_EQ(code(Finished(1, t + 1000, cpu)), grpc::StatusCode::INVALID_ARGUMENT) << cpu;
  }
  EXPECT_EQ(resp.history_records(), 0);  // nothing finished yet
  ASSERT_TRUE(Send(p.stub(), Finished(1, t + 1010, 900), &resp).ok());
  EXPECT_EQ(resp.history_records(), 1);

  // Estimates: the good history gives a sane answer; absurd requests are refused.
  auto estimate = [&](void (*edit)(v1::EstimateTurnaroundRequest*),
                      v1::EstimateTurnaroundResponse* out) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(2, kNow - 100);
    *req.mutable_snapshot() = Cluster(kNow - 100, 4);
    edit(&req);
    return p.stub().EstimateTurnaround(&ctx, req, out);
  };
  v1::EstimateTurnaroundResponse good;
  ASSERT_TRUE(estimate([](v1::EstimateTurnaroundRequest*) {}, &good).ok());
  for (const auto& e : good.estimates()) {
    EXPECT_LT(e.turnaround().point_seconds(), 10 * 86400) << e.kernel();
  }
  for (auto edit : std::vector<void (*)(v1::EstimateTurnaroundRequest*)>{
           [](auto* r) { r->mutable_snapshot()->set_now_unix_seconds(0); },
           [](auto* r) { r->mutable_snapshot()->set_now_unix_seconds(INT64_MIN); },
           [](auto* r) { r->mutable_snapshot()->set_now_unix_seconds(INT64_MAX); },
           [](auto* r) { r->mutable_job()->set_submit_unix_seconds(0); },
           [](auto* r) { r->mutable_job()->set_submit_unix_seconds(INT64_MAX); },
           [](auto* r) { r->mutable_job()->set_requested_seconds(-5); },
           [](auto* r) { r->mutable_job()->set_requested_seconds(INT64_MAX); },
           [](auto* r) {
             r->mutable_snapshot()->mutable_policy()->set_job_selection(
                 static_cast<v1::JobSelection>(99));
           },
           [](auto* r) {
             auto* run = r->mutable_snapshot()->add_running();
             *run->mutable_spec() = Job(3, kNow - 500);
             run->set_start_unix_seconds(kNow - 400);
             run->add_nodes(0);
             run->set_cpu_seconds_per_task(std::nan(""));
           }}) {
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = estimate(edit, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
  }
}

// Snapshots describing impossible clusters are refused naming the node or
// job: MPL_local of 2^31 - 1 (it overflowed the simulation), a running job
// with more CPU seconds than it has run, a job id listed twice (it was
// counted twice: a wait of 100 s became 711 s), the job estimated listed in
// its own snapshot. Ids 0 name no job and may repeat; running jobs beyond
// the snapshot's mpl_limit are what the cluster runs and are taken.
TEST(TurnaroundRpcTest, RefusesImpossibleSnapshots) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  const int64_t now = kNow - 100;
  auto estimate = [&](const v1::ClusterSnapshot& snapshot, int64_t job_id = 1) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(job_id, now);
    *req.mutable_snapshot() = snapshot;
    v1::EstimateTurnaroundResponse resp;
    grpc::Status s = p.stub().EstimateTurnaround(&ctx, req, &resp);
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << s.error_message();
    return s;
  };
  auto refused = [](const grpc::Status& s, const std::string& words) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << words;
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  };
  auto running = [&](v1::ClusterSnapshot* s, int64_t id, double cpu) {
    v1::RunningJob* r = s->add_running();
    *r->mutable_spec() = Job(id, now - 1000);
    r->set_start_unix_seconds(now - 300);
    r->add_nodes(0);
    r->add_nodes(1);
    r->set_cpu_seconds_per_task(cpu);
  };
  for (int32_t tasks : {std::numeric_limits<int32_t>::max(), 1001, -1}) {
    v1::ClusterSnapshot s = Cluster(now, 4);
    s.mutable_nodes(2)->set_local_tasks(tasks);
    refused(estimate(s), "node 2: local_tasks must be in [0, 1000]");
  }
  {
    v1::ClusterSnapshot s = Cluster(now, 4);
    for (auto& n : *s.mutable_nodes()) n.set_local_tasks(1000);
    EXPECT_TRUE(estimate(s).ok());
  }
  for (double cpu : {1e15, 301.5}) {
    v1::ClusterSnapshot s = Cluster(now, 4);
    running(&s, 3, cpu);
    refused(estimate(s), "it has run");
  }
  {
    v1::ClusterSnapshot s = Cluster(now, 4);
    running(&s, 3, -2);
    refused(estimate(s), "running job 3: cpu_seconds_per_task must be >= 0");
  }
  for (double cpu : {-1.0, 0.0, 301.0}) {
    v1::ClusterSnapshot s = Cluster(now, 4);
    running(&s, 3, cpu);
    EXPECT_TRUE(estimate(s).ok()) << cpu;
  }
  {
    v1::ClusterSnapshot s = Cluster(now, 4);
    running(&s, 3, -1);
    *s.add_waiting() = Job(3, now - 50);
    refused(estimate(s), "lists job 3 twice (running, then waiting)");
    s.clear_running();
    *s.add_waiting() = Job(3, now - 40);
    refused(estimate(s), "lists job 3 twice (waiting, then waiting)");
  }
  {
    v1::ClusterSnapshot s = Cluster(now, 4);
    *s.add_waiting() = Job(1, now - 50);
    refused(estimate(s), "job 1 is the job estimated");
    s.clear_waiting();
    running(&s, 1, -1);
    refused(estimate(s), "job 1 is the job estimated");
  }
  {
    // No ids (0): the job estimated and two waiting jobs, all simulated.
    v1::ClusterSnapshot s = Cluster(now, 2);
    *s.add_waiting() = Job(0, now - 50);
    *s.add_waiting() = Job(0, now - 40);
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = Job(0, now);
    *req.mutable_snapshot() = s;
    v1::EstimateTurnaroundResponse resp;
    ASSERT_TRUE(p.stub().EstimateTurnaround(&ctx, req, &resp).ok());
    EXPECT_NEAR(resp.estimates(1).wait().point_seconds(), 2 * 7200, 1) << resp.ShortDebugString();
  }
  {
    // Two running jobs on nodes 0-1 under mpl_limit 1 (placed under
    // another limit): simulated as they are.
    v1::ClusterSnapshot s = Cluster(now, 4);
    s.mutable_policy()->set_mpl_limit(1);
    running(&s, 3, -1);
    running(&s, 4, -1);
    EXPECT_TRUE(estimate(s).ok());
  }
}

// A job estimated was submitted at most turnaround::kMaxWaitSeconds (a year)
// before the snapshot: a submit of 1 (1970) used to answer OK with a wait of
// 56 years from the simulating kernels and 0 from the historical one. A
// waiting job of the snapshot that needs more nodes than it has could never
// start: INVALID_ARGUMENT naming it, as the job estimated with too many procs
// is FAILED_PRECONDITION ("can never start"); it used to be skipped silently.
TEST(TurnaroundRpcTest, RefusesSubmitsLongBeforeTheSnapshotAndJobsThatCouldNeverStart) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  const int64_t now = kNow - 100;
  auto estimate = [&](const v1::JobSpec& job, const v1::ClusterSnapshot& snapshot,
                      v1::EstimateTurnaroundResponse* resp) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = job;
    *req.mutable_snapshot() = snapshot;
    return p.stub().EstimateTurnaround(&ctx, req, resp);
  };
  v1::EstimateTurnaroundResponse resp;
  for (int64_t submit : {int64_t{1}, now - turnaround::kMaxWaitSeconds - 1}) {
    grpc::Status s = estimate(Job(1, submit), Cluster(now, 4), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << submit;
    EXPECT_NE(s.error_message().find("may have waited at most"), std::string::npos)
        << s.error_message();
  }
  // At the bound, and after it, the time already waited counts.
  grpc::Status s = estimate(Job(1, now - turnaround::kMaxWaitSeconds), Cluster(now, 4), &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = estimate(Job(1, now - 1000), Cluster(now, 4), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NEAR(resp.estimates(1).wait().point_seconds(), 1000, 1) << resp.ShortDebugString();

  v1::ClusterSnapshot big = Cluster(now, 4);
  v1::JobSpec wide = Job(9, now - 50);
  wide.set_procs(5);
  *big.add_waiting() = wide;
  s = estimate(Job(1, now), big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("waiting job 9 needs 5 nodes"), std::string::npos)
      << s.error_message();
  wide.set_job_id(1);
  wide.set_submit_unix_seconds(now);
  s = estimate(wide, Cluster(now, 4), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("can never start"), std::string::npos) << s.error_message();
  big.mutable_waiting(0)->set_procs(4);  // all the nodes: it can start
  EXPECT_TRUE(estimate(Job(1, now), big, &resp).ok());
}

// One job-id rule: a job the history keeps has an id > 0 (0 is what a client
// that forgot the field sends; it was recorded), the job estimated and the
// snapshot's jobs may be 0 (no id), no id is negative. And one rule for the
// job itself in its snapshot: an estimate's and a submit's snapshot do not
// hold it; a start's may hold it as running, started as the event says (the
// broker's does), never as waiting. A JobStarted listing the job running at
// another time or on other nodes, or a JobSubmitted listing it, was taken.
TEST(TurnaroundRpcTest, JobIdsAndTheJobItselfInItsSnapshot) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  const int64_t t = kNow - 50000;
  v1::RecordJobEventResponse resp;
  auto refused = [&](const v1::JobEvent& e, const std::string& words) {
    grpc::Status s = Send(p.stub(), e, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << e.ShortDebugString();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  };
  for (int64_t id : {0, -1}) {
    refused(Submitted(id, t), "job_id must be > 0");
    refused(Started(id, t, {0, 1}), "job_id must be > 0");
    refused(Finished(id, t, -1), "job_id must be > 0");
    v1::JobEvent cancel;
    cancel.mutable_cancelled()->set_job_id(id);
    refused(cancel, "job_id must be > 0");
  }
  v1::EstimateTurnaroundResponse est;
  auto estimate = [&](const v1::JobSpec& job, const v1::ClusterSnapshot& snapshot) {
    grpc::ClientContext ctx;
    v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = job;
    *req.mutable_snapshot() = snapshot;
    return p.stub().EstimateTurnaround(&ctx, req, &est);
  };
  grpc::Status s = estimate(Job(-1, t), Cluster(t, 4));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("job_id must be >= 0"), std::string::npos) << s.error_message();
  v1::ClusterSnapshot negative = Cluster(t, 4);
  *negative.add_waiting() = Job(-2, t - 10);
  s = estimate(Job(0, t), negative);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(estimate(Job(0, t), Cluster(t, 4)).ok());

  // A submit's snapshot is the queue without the job.
  v1::JobEvent submit = Submitted(5, t);
  *submit.mutable_submitted()->mutable_snapshot()->add_waiting() = Job(5, t);
  refused(submit, "job 5 is the job submitted and is also among the snapshot's waiting jobs");
  submit = Submitted(5, t);
  v1::RunningJob* self = submit.mutable_submitted()->mutable_snapshot()->add_running();
  *self->mutable_spec() = Job(5, t);
  self->set_start_unix_seconds(t);
  self->add_nodes(0);
  self->add_nodes(1);
  refused(submit, "job 5 is the job submitted and is also among the snapshot's running jobs");
  ASSERT_TRUE(Send(p.stub(), Submitted(5, t), &resp).ok());

  // A start's snapshot may hold the job as running, as the event starts it.
  auto started = [&](int64_t listed_start, const std::vector<int32_t>& listed_nodes) {
    v1::JobEvent e = Started(5, t + 10, {0, 1});
    v1::RunningJob* r = e.mutable_started()->mutable_snapshot()->add_running();
    *r->mutable_spec() = Job(5, t);
    r->set_start_unix_seconds(listed_start);
    for (int32_t n : listed_nodes) r->add_nodes(n);
    return e;
  };
  refused(started(t + 5, {0, 1}), "but the snapshot's running jobs list it started at");
  refused(started(t + 10, {2, 3}), "but the snapshot's running jobs list it started at");
  v1::JobEvent waiting = Started(5, t + 10, {0, 1});
  *waiting.mutable_started()->mutable_snapshot()->add_waiting() = Job(5, t);
  refused(waiting, "job 5 is the job started and is also among the snapshot's waiting jobs");
  s = Send(p.stub(), started(t + 10, {1, 0}), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Send(p.stub(), Finished(5, t + 1010, -1), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.history_records(), 1);
}

// Job events that contradict the job's state are refused, naming the job
// and its state, and change nothing: a second submit of a pending job (it
// replaced the record, losing the start), a second start, a finish of a job
// that never started; a finish with more CPU seconds per task than the run
// time (1e15 poisoned the history: later waits of 1.4e11 h).
TEST(TurnaroundRpcTest, RefusesEventsContradictingTheJobState) {
  TempDir dir;
  PredictorUnderTest p(dir.File("histdb"));
  const int64_t t = kNow - 50000;
  v1::RecordJobEventResponse resp;
  auto send = [&](const v1::JobEvent& e) { return Send(p.stub(), e, &resp); };
  auto expect = [](const grpc::Status& s, grpc::StatusCode code, const std::string& words) {
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  };
  ASSERT_TRUE(send(Submitted(1, t)).ok());
  expect(send(Submitted(1, t + 5)), grpc::StatusCode::ALREADY_EXISTS,
         "job 1 is already waiting (submitted at " + std::to_string(t) + ")");
  expect(send(Finished(1, t + 100, 50)), grpc::StatusCode::FAILED_PRECONDITION,
         "job 1 has not started");
  ASSERT_TRUE(send(Started(1, t + 10, {0, 1})).ok());
  expect(send(Submitted(1, t + 20)), grpc::StatusCode::ALREADY_EXISTS,
         "job 1 is already running (started at " + std::to_string(t + 10) + ")");
  expect(send(Started(1, t + 30, {0, 1})), grpc::StatusCode::FAILED_PRECONDITION,
         "job 1 already started at " + std::to_string(t + 10));
  for (double cpu : {1e15, 1001.5}) {
    expect(send(Finished(1, t + 1010, cpu)), grpc::StatusCode::INVALID_ARGUMENT,
           "more than its run time of 1000 s");
  }
  // The first submit and start stand: wait 10 s, run 1000 s.
  ASSERT_TRUE(send(Finished(1, t + 1010, 1001)).ok());
  EXPECT_EQ(resp.history_records(), 1);
  grpc::ClientContext ctx;
  v1::EstimateTurnaroundRequest req;
  *req.mutable_job() = Job(2, kNow - 100);
  *req.mutable_snapshot() = Cluster(kNow - 100, 4);
  *req.mutable_snapshot()->add_waiting() = Job(3, kNow - 200);
  v1::EstimateTurnaroundResponse est;
  ASSERT_TRUE(p.stub().EstimateTurnaround(&ctx, req, &est).ok());
  EXPECT_NEAR(est.estimates(0).exec().point_seconds(), 1000, 1);
  EXPECT_NEAR(est.estimates(0).wait().point_seconds(), 10, 1);
  for (const auto& e : est.estimates()) {
    EXPECT_LT(e.turnaround().point_seconds(), 10 * 86400) << e.kernel();
  }
  // Finished, the id may come again.
  EXPECT_TRUE(send(Submitted(1, t + 2000)).ok());
}

}  // namespace
}  // namespace sojourn
