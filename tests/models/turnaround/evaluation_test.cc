#include "models/turnaround/evaluation.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/turnaround/hist_db.h"
#include "models/turnaround/hist_db_rocksdb.h"

namespace sojourn::turnaround {
namespace {

// Every record of `db` in the order it was put.
std::vector<JobRecord> AllRecords(const HistDb& db) {
  std::vector<JobRecord> out;
  std::string cursor;
  do {
    auto page = db.Scan(cursor, 1000);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    out.insert(out.end(), page->records.begin(), page->records.end());
    cursor = page->next_cursor;
  } while (!cursor.empty());
  return out;
}

// ReplayHistory gives the records a replay backtest stores (`sojourn-eval
// turnaround --histdb`), in the same order, with the log's job numbers, its
// missing requests unknown and the times shifted: the demo excerpt of
// SDSC-SP2 (2,000 jobs).
TEST(ReplayHistoryTest, RecordsTheReplaysHistory) {
  const char* src = std::getenv("SOJOURN_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto log = ReadSwf(std::string(src) + "/data/demo/sdsc-sp2-2000jobs.swf.gz", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EvalConfig config;
  config.policy = {JobSelection::kFcfs, NodeSelection::kUniform, 1};
  InMemoryHistDb db;
  ASSERT_TRUE(RunEvaluation(*log, config, db).ok());
  const std::vector<JobRecord> stored = AllRecords(db);

  constexpr int64_t kOffset = 893466664;
  std::vector<int64_t> lines;
  auto replayed = ReplayHistory(*log, config, kOffset, &lines);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  ASSERT_EQ(replayed->size(), stored.size());
  ASSERT_EQ(lines.size(), stored.size());
  int64_t finished = 0;
  for (const SwfJob& j : log->jobs) finished += j.has_turnaround();
  EXPECT_EQ(static_cast<int64_t>(stored.size()), finished);
  // The replay numbers jobs by submit order (stable).
  std::vector<SwfJob> by_submit = log->jobs;
  std::stable_sort(by_submit.begin(), by_submit.end(),
                   [](const SwfJob& a, const SwfJob& b) { return a.submit_time < b.submit_time; });
  int64_t unknown_requests = 0, queued = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    const SwfJob& job = by_submit[static_cast<size_t>(stored[i].spec.job_id)];
    JobRecord want = stored[i];
    want.spec.job_id = job.job_number;
    want.spec.requested_time = job.requested_time > 0 ? job.requested_time : -1;
    want.spec.submit_time += kOffset;
    want.start_time += kOffset;
    EXPECT_EQ(EncodeJobRecord((*replayed)[i]), EncodeJobRecord(want)) << "record " << i;
    EXPECT_EQ(lines[i], job.line);
    EXPECT_EQ((*replayed)[i].spec.submit_time, kOffset + job.submit_time);
    EXPECT_EQ((*replayed)[i].exec_time, job.run_time);
    unknown_requests += want.spec.requested_time < 0;
    queued += want.queue_len_submit > 0;
  }
  // The queue state is rebuilt from the log, not left at zero.
  EXPECT_GT(queued, 100);
  EXPECT_EQ(unknown_requests,
            std::count_if(log->jobs.begin(), log->jobs.end(), [](const SwfJob& j) {
              return j.has_turnaround() && j.requested_time <= 0;
            }));
}

// Jobs that never ran are left out; the records come in finish order; a CPU
// time beyond the run time is unknown; the policy is the configured one.
TEST(ReplayHistoryTest, KeepsFinishedJobsInFinishOrder) {
  constexpr char kLog[] =
      "; MaxNodes: 4\n"
      "  5   0   10   100  2   50  -1  2  200  -1  1  3  1  9  1 -1 -1 -1\n"
      "  6  20    0    10  1  900  -1  1   -1  -1  1  3  1  9  1 -1 -1 -1\n"
      "  7  30   -1    -1  1   -1  -1  1  100  -1  5  3  1  9  1 -1 -1 -1\n"
      "  8  40    5    -1  1   -1  -1  1  100  -1  5  3  1  9  1 -1 -1 -1\n";
  auto log = ParseSwf(kLog, "mem", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EvalConfig config;
  config.policy = {JobSelection::kEasyBackfilling, NodeSelection::kNormal, 1};
  std::vector<int64_t> lines;
  auto records = ReplayHistory(*log, config, 0, &lines);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  // Job 6 (20 + 0 + 10 = 30) finishes before job 5 (0 + 10 + 100 = 110).
  EXPECT_EQ((*records)[0].spec.job_id, 6);
  EXPECT_EQ((*records)[1].spec.job_id, 5);
  EXPECT_EQ(lines, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ((*records)[0].cpu_time_per_task, -1);  // 900 s of CPU in a 10 s run
  EXPECT_EQ((*records)[0].spec.requested_time, -1);
  EXPECT_EQ((*records)[0].cluster_nodes, 4);
  // Job 6 started beside job 5 on 4 nodes: none shared.
  EXPECT_EQ((*records)[0].shared_tasks, 0);
  EXPECT_EQ((*records)[1].wait_time, 10);
  EXPECT_EQ((*records)[1].cpu_time_per_task, 50);
  EXPECT_EQ((*records)[1].spec.requested_time, 200);
  EXPECT_EQ((*records)[1].job_selection, JobSelection::kEasyBackfilling);
}

}  // namespace
}  // namespace sojourn::turnaround
