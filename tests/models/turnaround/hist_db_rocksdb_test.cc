#include "models/turnaround/hist_db_rocksdb.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/transaction_log.h"

namespace sojourn::turnaround {
namespace {

JobRecord Rec(int64_t id, int32_t user, int32_t exe, int32_t procs, int64_t exec) {
  JobRecord r;
  r.spec.job_id = id;
  r.spec.submit_time = 1000 + id;
  r.spec.user = user;
  r.spec.group = 3;
  r.spec.executable = exe;
  r.spec.queue = 2;
  r.spec.procs = procs;
  r.spec.requested_time = 3600;
  r.spec.cpu_fraction = 0.75;
  r.wait_time = 10 * id;
  r.exec_time = exec;
  r.cpu_time_per_task = exec * 0.5;
  r.cpu_ahead = 123.5;
  r.cpu_backwards = 456.25;
  r.queue_len_submit = 4;
  r.queue_len_start = 2;
  r.shared_tasks = 3;
  r.max_local_cpu = 0.4;
  r.start_time = 2000 + id;
  r.cluster_nodes = 64;
  r.job_selection = JobSelection::kEasyBackfilling;
  r.node_selection = NodeSelection::kUniform;
  return r;
}

class RocksHistDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::filesystem::path(tmp ? tmp : "/tmp") /
           ("histdb_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// The codec round-trips every field.
TEST_F(RocksHistDbTest, CodecRoundTrip) {
  JobRecord r = Rec(7, -1, 2147483647, 128, 99);
  auto back = DecodeJobRecord(EncodeJobRecord(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->spec.user, -1);
  EXPECT_EQ(back->spec.executable, 2147483647);
  EXPECT_EQ(back->spec.procs, 128);
  EXPECT_DOUBLE_EQ(back->spec.cpu_fraction, 0.75);
  EXPECT_EQ(back->wait_time, 70);
  EXPECT_DOUBLE_EQ(back->cpu_backwards, 456.25);
  EXPECT_EQ(back->shared_tasks, 3);
  EXPECT_DOUBLE_EQ(back->max_local_cpu, 0.4);
  EXPECT_EQ(back->job_selection, JobSelection::kEasyBackfilling);
  EXPECT_EQ(back->node_selection, NodeSelection::kUniform);
  EXPECT_EQ(back->cluster_nodes, 64);
  EXPECT_EQ(DecodeJobRecord("garbage").status().code(), absl::StatusCode::kDataLoss);
}

// A record of version 1 (written before the cluster's node count was kept:
// the same fields without the last one) is read, with the count unknown; a
// version-2 record cut short is not.
TEST_F(RocksHistDbTest, ReadsVersion1Records) {
  std::string v2 = EncodeJobRecord(Rec(7, 5, 9, 16, 99));
  ASSERT_EQ(v2[0], 2);
  std::string v1 = v2.substr(0, v2.size() - 4);
  v1[0] = 1;
  auto back = DecodeJobRecord(v1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cluster_nodes, -1);
  EXPECT_EQ(back->spec.job_id, 7);
  EXPECT_EQ(back->spec.procs, 16);
  EXPECT_EQ(back->exec_time, 99);
  EXPECT_EQ(back->start_time, 2007);
  EXPECT_EQ(back->node_selection, NodeSelection::kUniform);
  EXPECT_EQ(DecodeJobRecord(v2.substr(0, v2.size() - 4)).status().code(),
            absl::StatusCode::kDataLoss);
  v1[0] = 3;
  EXPECT_EQ(DecodeJobRecord(v1).status().code(), absl::StatusCode::kDataLoss);
  JobRecord corrupt = Rec(7, 5, 9, 16, 99);
  corrupt.cluster_nodes = -5;
  EXPECT_EQ(DecodeJobRecord(EncodeJobRecord(corrupt)).status().code(), absl::StatusCode::kDataLoss);
}

// Scan pages through every record once, whatever its template (user -1,
// sizes around the 0xff key byte), also across a reopen and with records put
// half way; a cursor it did not make is refused.
TEST_F(RocksHistDbTest, ScanReturnsEveryRecordOnce) {
  std::map<int64_t, JobRecord> put;
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok());
    auto empty = (*db)->Scan("", 10);
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_TRUE(empty->records.empty());
    EXPECT_EQ(empty->next_cursor, "");
    for (int64_t id = 1; id <= 200; ++id) {
      JobRecord r = Rec(id, static_cast<int32_t>(id % 7) - 1, static_cast<int32_t>(id % 3),
                        static_cast<int32_t>(254 + id % 4), 10 * id);
      ASSERT_TRUE((*db)->Put(r).ok());
      put[id] = r;
    }
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok());
  std::map<int64_t, JobRecord> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = (*db)->Scan(cursor, 7);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->records.size(), 7u);
    for (const JobRecord& r : page->records) {
      EXPECT_TRUE(seen.emplace(r.spec.job_id, r).second) << "job " << r.spec.job_id << " twice";
    }
    cursor = page->next_cursor;
    // Half way, a record is put: the scan goes on without repeating any.
    if (++pages == 10) {
      JobRecord late = Rec(201, 3, 1, 255, 5);
      ASSERT_TRUE((*db)->Put(late).ok());
      put[201] = late;
    }
  } while (!cursor.empty());
  EXPECT_GE(pages, 29);  // 200 records at 7 a page
  seen.erase(201);       // in the scan or not: either is right
  put.erase(201);
  ASSERT_EQ(seen.size(), put.size());
  for (const auto& [id, r] : put) {
    const JobRecord& s = seen[id];
    EXPECT_EQ(s.spec.user, r.spec.user) << id;
    EXPECT_EQ(s.spec.procs, r.spec.procs) << id;
    EXPECT_EQ(s.exec_time, r.exec_time) << id;
    EXPECT_EQ(s.cluster_nodes, 64) << id;
  }
  auto whole = (*db)->Scan("", 1000);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->records.size(), 201u);
  EXPECT_EQ(whole->next_cursor, "");

  auto first = (*db)->Scan("", 1);
  ASSERT_TRUE(first.ok());
  const std::string good = first->next_cursor;
  ASSERT_EQ(good.size(), 44u);
  std::string other_index = good;
  other_index[3] = '1';  // 'i' 1 ...: the next template level's index
  for (const std::string& bad : {std::string("12"), std::string("zz"), good.substr(2), good + "00",
                                 other_index, std::string(44, 'G')}) {
    auto page = (*db)->Scan(bad, 5);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ((*db)->Scan("", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// History, template stats and pending jobs survive closing and reopening the
// store; new records after the reopen are still returned newest first.
TEST_F(RocksHistDbTest, SurvivesReopen) {
  const TemplateKey app = TemplateKey::For(Rec(0, 5, 7, 2, 0).spec, TemplateLevel::kUserExecutableProcs);
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Put(Rec(1, 5, 7, 2, 100)).ok());
    ASSERT_TRUE((*db)->Put(Rec(2, 6, 7, 2, 999)).ok());
    ASSERT_TRUE((*db)->Put(Rec(3, 5, 7, 2, 300)).ok());
    ASSERT_TRUE((*db)->PutPending(Rec(9, 5, 7, 2, -1)).ok());
    EXPECT_EQ((*db)->size(), 3);
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->size(), 3);
  auto recs = (*db)->Recent(app, 10);
  ASSERT_TRUE(recs.ok()) << recs.status();
  ASSERT_EQ(recs->size(), 2u);
  EXPECT_EQ((*recs)[0].spec.job_id, 3);
  EXPECT_EQ((*recs)[1].spec.job_id, 1);
  EXPECT_DOUBLE_EQ((*recs)[0].cpu_ahead, 123.5);
  auto stats = (*db)->Stats(app);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->count, 2);
  EXPECT_DOUBLE_EQ(stats->mean_exec(), 200);
  auto pending = (*db)->GetPending(9);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->spec.user, 5);
  ASSERT_TRUE((*db)->Put(Rec(4, 5, 7, 2, 500)).ok());
  recs = (*db)->Recent(app, 2);
  ASSERT_EQ(recs->size(), 2u);
  EXPECT_EQ((*recs)[0].spec.job_id, 4);
  EXPECT_EQ((*recs)[1].spec.job_id, 3);
  stats = (*db)->Stats(app);
  EXPECT_EQ(stats->count, 3);
  EXPECT_DOUBLE_EQ(stats->mean_exec(), 300);
  ASSERT_TRUE((*db)->ErasePending(9).ok());
  EXPECT_EQ((*db)->GetPending(9).status().code(), absl::StatusCode::kNotFound);
}

// A finish is one write: the record and the end of its pending entry. Two
// writes, and a predictor stopped between them, kept the job pending beside
// its record, and the broker's resend of the finish recorded it again.
TEST_F(RocksHistDbTest, PutFinishedIsOneWrite) {
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->PutPending(Rec(9, 5, 7, 2, -1)).ok());
    const rocksdb::SequenceNumber before = (*db)->db()->GetLatestSequenceNumber();
    ASSERT_TRUE((*db)->PutFinished(Rec(9, 5, 7, 2, 300), 9).ok());
    std::unique_ptr<rocksdb::TransactionLogIterator> updates;
    ASSERT_TRUE((*db)->db()->GetUpdatesSince(before + 1, &updates).ok());
    int writes = 0;
    for (; updates->Valid(); updates->Next()) ++writes;
    EXPECT_EQ(writes, 1);
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->size(), 1);
  EXPECT_EQ((*db)->GetPending(9).status().code(), absl::StatusCode::kNotFound);
}

// PutBatch appends like as many Puts (every template's newest records and
// sums as an in-memory store filled one Put at a time), once per id, and the
// id outlives a reopen; an empty id is no id.
TEST_F(RocksHistDbTest, PutBatchAppendsOncePerId) {
  const JobRecord before = Rec(100, 1, 7, 2, 50);
  std::vector<JobRecord> first, second;
  for (int64_t id = 1; id <= 30; ++id) {
    (id <= 20 ? first : second)
        .push_back(Rec(id, static_cast<int32_t>(id % 3), 7 + static_cast<int32_t>(id % 2),
                       1 + static_cast<int32_t>(id % 4), 100 * id));
  }
  InMemoryHistDb expected;
  ASSERT_TRUE(expected.Put(before).ok());
  for (const auto* batch : {&first, &second}) {
    for (const JobRecord& r : *batch) ASSERT_TRUE(expected.Put(r).ok());
  }
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Put(before).ok());
    auto written = (*db)->PutBatch(first, "import-1of2");
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_TRUE(*written);
    EXPECT_EQ((*db)->size(), 21);
    written = (*db)->PutBatch(first, "import-1of2");
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_FALSE(*written);
    EXPECT_EQ((*db)->size(), 21);
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->size(), 21);
  EXPECT_FALSE(*(*db)->PutBatch(first, "import-1of2"));
  EXPECT_TRUE(*(*db)->PutBatch(second, "import-2of2"));
  EXPECT_FALSE(*(*db)->PutBatch(second, "import-2of2"));
  EXPECT_EQ((*db)->size(), 31);
  for (const JobRecord& r : second) {
    for (int level = 0; level < kNumTemplateLevels; ++level) {
      const TemplateKey key = TemplateKey::For(r.spec, static_cast<TemplateLevel>(level));
      auto got = (*db)->Recent(key, 100);
      auto want = expected.Recent(key, 100);
      ASSERT_TRUE(got.ok() && want.ok());
      ASSERT_EQ(got->size(), want->size()) << "level " << level;
      for (size_t i = 0; i < got->size(); ++i) {
        EXPECT_EQ(EncodeJobRecord((*got)[i]), EncodeJobRecord((*want)[i])) << i;
      }
      auto got_stats = (*db)->Stats(key);
      auto want_stats = expected.Stats(key);
      ASSERT_TRUE(got_stats.ok() && want_stats.ok());
      EXPECT_EQ(EncodeTemplateStats(*got_stats), EncodeTemplateStats(*want_stats));
    }
  }
  // No id: written every time. An empty batch keeps its id.
  EXPECT_TRUE(*(*db)->PutBatch({Rec(200, 1, 7, 2, 50)}, ""));
  EXPECT_TRUE(*(*db)->PutBatch({Rec(200, 1, 7, 2, 50)}, ""));
  EXPECT_TRUE(*(*db)->PutBatch({}, "empty"));
  EXPECT_FALSE(*(*db)->PutBatch({Rec(201, 1, 7, 2, 50)}, "empty"));
  EXPECT_EQ((*db)->size(), 33);
  // A batch is scanned like the records put one at a time.
  auto page = (*db)->Scan("", 1000);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->records.size(), 33u);
}

// Templates whose key bytes end in 0xff are still separated from the next key.
TEST_F(RocksHistDbTest, PrefixBoundaryAt0xff) {
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Put(Rec(1, 5, 7, 255, 100)).ok());
  ASSERT_TRUE((*db)->Put(Rec(2, 5, 7, 256, 200)).ok());
  auto recs = (*db)->Recent(TemplateKey::For(Rec(0, 5, 7, 255, 0).spec,
                                             TemplateLevel::kUserExecutableProcs), 10);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].spec.job_id, 1);
}

// A store written with the old layout (no format key, but history) is refused
// rather than misread.
TEST_F(RocksHistDbTest, RefusesOtherLayout) {
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Put(Rec(1, 5, 7, 2, 100)).ok());
  }
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options opts;
    ASSERT_TRUE(rocksdb::DB::Open(opts, dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), "mformat").ok());
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
}

// A layout-2 store (written before job records kept the cluster's size) is
// read, with its version-1 records, and marked layout 3, which a build that
// reads only layout 2 refuses at open; a later layout is refused here.
TEST_F(RocksHistDbTest, UpgradesLayout2AndRefusesLaterOnes) {
  auto set_format = [this](const std::string& format) {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "mformat", format).ok());
  };
  auto format = [this]() {
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "mformat", &value).ok());
    return value;
  };
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Put(Rec(1, 5, 7, 2, 100)).ok());
  }
  EXPECT_EQ(format(), "3");
  set_format("2");
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    auto page = (*db)->Scan("", 10);
    ASSERT_TRUE(page.ok());
    ASSERT_EQ(page->records.size(), 1u);
    EXPECT_EQ(page->records[0].exec_time, 100);
  }
  EXPECT_EQ(format(), "3");
  set_format("4");
  auto db = RocksHistDb::Open(dir_.string(), {});
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("has layout 4"), std::string::npos) << db.status();
}

// A non-empty database without the job history's markers (a state
// manager's --db_path given as --histdb_path) is refused, not stamped as a
// job history and written into (before: Open succeeded and wrote "mformat").
TEST_F(RocksHistDbTest, RefusesForeignDatabase) {
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options opts;
    opts.create_if_missing = true;
    ASSERT_TRUE(rocksdb::DB::Open(opts, dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), std::string("m\0host", 6), "meta").ok());
  }
  auto db = RocksHistDb::Open(dir_.string(), {});
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> raw_db(raw);
    std::string value;
    EXPECT_TRUE(raw_db->Get(rocksdb::ReadOptions(), "mformat", &value).IsNotFound());
  }
  // An empty directory still becomes a job history.
  std::filesystem::remove_all(dir_);
  EXPECT_TRUE(RocksHistDb::Open(dir_.string(), {}).ok());
}

// Each template's stats as stored, decoded (the 's' keys).
std::vector<TemplateStats> StoredStats(const std::string& dir) {
  std::vector<TemplateStats> out;
  rocksdb::DB* raw = nullptr;
  EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("s"); it->Valid() && it->key().starts_with("s"); it->Next()) {
    auto t = DecodeTemplateStats(it->value().ToString());
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out.push_back(*t);
  }
  return out;
}

// Template stats an earlier version summed from an unbounded CPU time (a
// finish with 1e15 CPU-s per task was stored as such) are summed again from
// the template's records, bounded by their run times, when read; the next
// Put() writes the repaired sums.
TEST_F(RocksHistDbTest, RebuildsStatsSummedFromUnboundedCpuTimes) {
  const JobRecord good = Rec(1, 5, 7, 2, 100);  // 50 CPU-s per task, CPU(J) 0.75
  JobRecord absurd = Rec(2, 5, 7, 2, 200);
  absurd.cpu_time_per_task = 1e15;  // read as 201
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Put(good).ok());
    ASSERT_TRUE((*db)->Put(absurd).ok());
  }
  {
    // What an earlier version stored: the same records, 1e15 in the sums.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    int templates = 0;
    for (it->Seek("s"); it->Valid() && it->key().starts_with("s"); it->Next()) {
      auto t = DecodeTemplateStats(it->value().ToString());
      ASSERT_TRUE(t.ok()) << t.status();
      t->sum_cpu_per_task += 1e15 - 201;
      t->sum_cpu_total += (1e15 - 201) * 2;
      t->sum_isolated_exec += (1e15 - 201) / 0.75;
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), it->key(), EncodeTemplateStats(*t)).ok());
      ++templates;
    }
    EXPECT_EQ(templates, kNumTemplateLevels);
  }
  for (const TemplateStats& t : StoredStats(dir_.string())) EXPECT_FALSE(t.CpuTimesBounded());
  {
    auto db = RocksHistDb::Open(dir_.string(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    for (int level = 0; level < kNumTemplateLevels; ++level) {
      auto stats = (*db)->Stats(TemplateKey::For(good.spec, static_cast<TemplateLevel>(level)));
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(stats->count, 2);
      EXPECT_EQ(stats->cpu_count, 2);
      EXPECT_DOUBLE_EQ(stats->mean_exec(), 150);
      EXPECT_DOUBLE_EQ(stats->mean_cpu_per_task(), (50 + 201) / 2.0);
      EXPECT_DOUBLE_EQ(stats->mean_cpu_total(), 50 + 201);
      EXPECT_DOUBLE_EQ(stats->mean_isolated_exec(), (50 / 0.75 + 201 / 0.75) / 2);
    }
    ASSERT_TRUE((*db)->Put(Rec(3, 5, 7, 2, 300)).ok());
    auto stats = (*db)->Stats(TemplateKey::For(good.spec, TemplateLevel::kUser));
    EXPECT_EQ(stats->count, 3);
    EXPECT_DOUBLE_EQ(stats->mean_cpu_per_task(), (50 + 201 + 150) / 3.0);
  }
  for (const TemplateStats& t : StoredStats(dir_.string())) {
    EXPECT_TRUE(t.CpuTimesBounded());
    EXPECT_EQ(t.count, 3);
  }
}

// A second open of a locked directory fails cleanly.
TEST_F(RocksHistDbTest, SecondOpenFails) {
  auto db = RocksHistDb::Open(dir_.string(), {});
  ASSERT_TRUE(db.ok());
  auto again = RocksHistDb::Open(dir_.string(), {});
  EXPECT_FALSE(again.ok());
}

}  // namespace
}  // namespace sojourn::turnaround
