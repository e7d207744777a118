#include "models/turnaround/hist_db.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::turnaround {
namespace {

JobRecord Rec(int64_t id, int32_t user, int32_t exe, int32_t procs, int64_t exec) {
  JobRecord r;
  r.spec.job_id = id;
  r.spec.user = user;
  r.spec.executable = exe;
  r.spec.procs = procs;
  r.spec.queue = 1;
  r.wait_time = 10;
  r.exec_time = exec;
  r.cpu_time_per_task = exec / 2.0;
  return r;
}

class InMemoryHistDbTest : public ::testing::Test {
 protected:
  InMemoryHistDb db_;
};

// Recent() returns only the template's records, newest first, at most limit.
TEST_F(InMemoryHistDbTest, RecentIsPerTemplateNewestFirst) {
  ASSERT_TRUE(db_.Put(Rec(1, 5, 7, 2, 100)).ok());
  ASSERT_TRUE(db_.Put(Rec(2, 6, 7, 2, 999)).ok());  // other user
  ASSERT_TRUE(db_.Put(Rec(3, 5, 7, 2, 300)).ok());
  ASSERT_TRUE(db_.Put(Rec(4, 5, 7, 4, 500)).ok());  // other size
  auto app = TemplateKey::For(Rec(0, 5, 7, 2, 0).spec, TemplateLevel::kUserExecutableProcs);
  auto recs = db_.Recent(app, 10);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 2u);
  EXPECT_EQ((*recs)[0].spec.job_id, 3);
  EXPECT_EQ((*recs)[1].spec.job_id, 1);
  auto one = db_.Recent(app, 1);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].spec.job_id, 3);
  auto user = db_.Recent(TemplateKey::For(Rec(0, 5, 0, 0, 0).spec, TemplateLevel::kUser), 10);
  ASSERT_EQ(user->size(), 3u);
  EXPECT_EQ((*user)[0].spec.job_id, 4);
  EXPECT_EQ(db_.size(), 4);
}

// Scan pages through the records once each, in the order they were put;
// records put after the last page are in a scan started again.
TEST_F(InMemoryHistDbTest, ScanReturnsEveryRecordOnce) {
  auto empty = db_.Scan("", 3);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->records.empty());
  EXPECT_EQ(empty->next_cursor, "");
  for (int64_t id = 1; id <= 10; ++id) {
    ASSERT_TRUE(db_.Put(Rec(id, static_cast<int32_t>(id % 3), 7, 2, 100 * id)).ok());
  }
  std::vector<int64_t> ids;
  std::string cursor;
  do {
    auto page = db_.Scan(cursor, 3);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->records.size(), 3u);
    for (const JobRecord& r : page->records) ids.push_back(r.spec.job_id);
    cursor = page->next_cursor;
  } while (!cursor.empty());
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  auto last = db_.Scan("9", 5);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->records.size(), 1u);
  EXPECT_EQ(last->records[0].exec_time, 1000);
  EXPECT_EQ(last->next_cursor, "");
  for (const char* bad : {"11", "-1", "x", "3x", "+3", " 3"}) {
    EXPECT_EQ(db_.Scan(bad, 5).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(db_.Scan("", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// PutBatch appends in order, like as many Puts, once per non-empty id.
TEST_F(InMemoryHistDbTest, PutBatchAppendsOncePerId) {
  ASSERT_TRUE(db_.Put(Rec(1, 5, 7, 2, 100)).ok());
  const std::vector<JobRecord> batch = {Rec(2, 5, 7, 2, 200), Rec(3, 6, 7, 2, 300),
                                        Rec(4, 5, 7, 2, 400)};
  auto written = db_.PutBatch(batch, "a-1of1");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(*written);
  EXPECT_EQ(db_.size(), 4);
  written = db_.PutBatch(batch, "a-1of1");
  ASSERT_TRUE(written.ok());
  EXPECT_FALSE(*written);
  EXPECT_EQ(db_.size(), 4);
  auto app = db_.Recent(
      TemplateKey::For(Rec(0, 5, 7, 2, 0).spec, TemplateLevel::kUserExecutableProcs), 10);
  ASSERT_TRUE(app.ok());
  std::vector<int64_t> ids;
  for (const JobRecord& r : *app) ids.push_back(r.spec.job_id);
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 2, 1}));
  // No id: written every time.
  EXPECT_TRUE(*db_.PutBatch({Rec(5, 5, 7, 2, 500)}, ""));
  EXPECT_TRUE(*db_.PutBatch({Rec(5, 5, 7, 2, 500)}, ""));
  EXPECT_EQ(db_.size(), 6);
  // An empty batch keeps its id too.
  EXPECT_TRUE(*db_.PutBatch({}, "empty"));
  EXPECT_FALSE(*db_.PutBatch({Rec(6, 5, 7, 2, 600)}, "empty"));
  EXPECT_EQ(db_.size(), 6);
}

// Stats keep running sums per template: mean exec (100+300)/2, CPU (50+150)/2.
TEST_F(InMemoryHistDbTest, StatsSumPerTemplate) {
  ASSERT_TRUE(db_.Put(Rec(1, 5, 7, 2, 100)).ok());
  ASSERT_TRUE(db_.Put(Rec(3, 5, 7, 2, 300)).ok());
  auto s = db_.Stats(TemplateKey::For(Rec(0, 5, 7, 2, 0).spec, TemplateLevel::kUserExecutableProcs));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 2);
  EXPECT_DOUBLE_EQ(s->mean_exec(), 200);
  EXPECT_DOUBLE_EQ(s->mean_cpu_per_task(), 100);
  EXPECT_DOUBLE_EQ(s->mean_cpu_total(), 200);
  // isolated runs: CPU fraction 0.5 each
  EXPECT_DOUBLE_EQ(s->mean_isolated_cpu_fraction(), 0.5);
  EXPECT_DOUBLE_EQ(s->mean_isolated_exec(), 200);  // no declared CPU(J): observed times
  // Declared CPU(J) 0.25 and 200 CPU-s per task: 800 s in isolation, although
  // the (shared) run took 400 s.
  JobRecord shared = Rec(5, 8, 1, 1, 400);
  shared.spec.cpu_fraction = 0.25;
  shared.cpu_time_per_task = 200;
  shared.shared_tasks = 2;
  ASSERT_TRUE(db_.Put(shared).ok());
  auto d = db_.Stats(TemplateKey::For(shared.spec, TemplateLevel::kUser));
  EXPECT_DOUBLE_EQ(d->mean_isolated_exec(), 800);
  EXPECT_EQ(d->isolated_cpu_count, 0);
  auto none = db_.Stats(TemplateKey::For(Rec(0, 9, 9, 9, 0).spec, TemplateLevel::kUser));
  EXPECT_EQ(none->count, 0);
}

// A record's CPU time counts as at most its run time + kCpuTimeSlackSeconds
// (a task uses at most one CPU): 1e15 CPU-s in 100 s count as 101; not a
// number or negative counts as unknown.
TEST_F(InMemoryHistDbTest, StatsBoundCpuTimeByRunTime) {
  JobRecord absurd = Rec(1, 5, 7, 2, 100);
  absurd.cpu_time_per_task = 1e15;
  absurd.spec.cpu_fraction = 0.5;
  ASSERT_TRUE(db_.Put(absurd).ok());
  JobRecord nan = Rec(2, 5, 7, 2, 300);
  nan.cpu_time_per_task = std::nan("");
  ASSERT_TRUE(db_.Put(nan).ok());
  auto s = db_.Stats(TemplateKey::For(absurd.spec, TemplateLevel::kUserExecutableProcs));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cpu_count, 1);
  EXPECT_DOUBLE_EQ(s->mean_cpu_per_task(), 101);
  EXPECT_DOUBLE_EQ(s->mean_cpu_total(), 202);
  EXPECT_DOUBLE_EQ(s->mean_isolated_cpu_fraction(), 1);
  EXPECT_DOUBLE_EQ(s->mean_isolated_exec(), (101 / 0.5 + 300) / 2);
  EXPECT_TRUE(s->CpuTimesBounded());
  TemplateStats old = *s;
  old.sum_cpu_per_task += 1e15;  // as an earlier version summed it
  EXPECT_FALSE(old.CpuTimesBounded());
  old.sum_cpu_per_task = std::nan("");
  EXPECT_FALSE(old.CpuTimesBounded());
}

// Pending jobs can be stored, read back and erased.
TEST_F(InMemoryHistDbTest, PendingRoundTrip) {
  JobRecord r = Rec(42, 1, 2, 3, -1);
  r.cpu_ahead = 77;
  ASSERT_TRUE(db_.PutPending(r).ok());
  auto got = db_.GetPending(42);
  ASSERT_TRUE(got.ok());
  EXPECT_DOUBLE_EQ(got->cpu_ahead, 77);
  ASSERT_TRUE(db_.ErasePending(42).ok());
  EXPECT_EQ(db_.GetPending(42).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sojourn::turnaround
