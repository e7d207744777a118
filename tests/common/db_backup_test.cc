// Online backups (common/db_backup.h) of a real RocksDB database on disk:
// what a restore gives back, the schedule on an injected clock, the refusals.
#include "common/db_backup.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

namespace fs = std::filesystem;
using sojourn::testing::IsOk;
using sojourn::testing::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<rocksdb::DB> OpenDb(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<rocksdb::DB>(raw);
}

std::string Key(int i) { return absl::StrFormat("k%08d", i); }

// Values that do not compress, so that file sizes follow what was written.
void Put(rocksdb::DB& db, int from, int to, size_t value_bytes = 100) {
  for (int i = from; i < to; ++i) {
    std::string value(value_bytes, '\0');
    uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
    for (char& c : value) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), Key(i), value).ok());
  }
}

// The keys k00000000.. present, and whether they are exactly 0..n-1.
int CountKeys(const std::string& path, bool* prefix) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  if (db == nullptr) return -1;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  int n = 0;
  *prefix = true;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
    if (it->key().ToString() != Key(n)) *prefix = false;
  }
  return n;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

DbBackupConfig Config(const std::string& backup_dir, const std::string& db_path) {
  DbBackupConfig c;
  c.service = "statemgr";
  c.backup_dir = backup_dir;
  c.db_path = db_path;
  c.interval = absl::Hours(24);
  c.keep = 7;
  return c;
}

// Each backup restores the database as it was when taken, the later writes
// absent; the newest is the default; verify passes on every backup.
TEST(DbBackupTest, RestoresEachBackupAsItWas) {
  TempDir tmp;
  const std::string db_path = tmp.File("db");
  const std::string backups = tmp.File("backups");
  auto db = OpenDb(db_path);
  FakeClock clock;
  auto backup = DbBackup::Open(Config(backups, db_path), db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  Put(*db, 0, 1000);
  auto first = (*backup)->BackupNow();
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->service, "statemgr");
  EXPECT_EQ(first->db_path, db_path);
  EXPECT_EQ(first->unix_seconds, absl::ToUnixSeconds(clock.Now()));
  clock.Advance(absl::Hours(1));
  Put(*db, 1000, 1500);  // in the memtable only: the backup flushes it
  auto second = (*backup)->BackupNow();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_GT(second->id, first->id);
  Put(*db, 1500, 1600);  // after the last backup: in neither

  auto listed = ListBackups(backups);
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, first->id);
  EXPECT_EQ((*listed)[1].unix_seconds, first->unix_seconds + 3600);
  for (const BackupSummary& b : *listed) EXPECT_THAT(VerifyBackup(backups, b.id), IsOk());

  bool prefix = false;
  auto r1 = RestoreBackup(backups, first->id, tmp.File("r1"));
  ASSERT_THAT(r1.status(), IsOk());
  EXPECT_EQ(CountKeys(tmp.File("r1"), &prefix), 1000);
  EXPECT_TRUE(prefix);
  auto latest = RestoreBackup(backups, 0, tmp.File("r2"));
  ASSERT_THAT(latest.status(), IsOk());
  EXPECT_EQ(latest->id, second->id);
  EXPECT_EQ(CountKeys(tmp.File("r2"), &prefix), 1500);
  EXPECT_TRUE(prefix);
}

// A backup shares the table files the previous one holds: two backups of a
// large database with a small change take far less than twice its size.
TEST(DbBackupTest, BackupsAreIncremental) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  Put(*db, 0, 4000, 1000);  // about 4 MB
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  auto first = (*backup)->BackupNow();
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_GT(first->size_bytes, 4'000'000u);
  EXPECT_GE(first->new_bytes, first->size_bytes - 100'000);  // all of it was new
  Put(*db, 4000, 4010, 1000);
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  auto second = (*backup)->BackupNow();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_GT(second->size_bytes, first->size_bytes);  // each backup is whole...
  EXPECT_LT(DirBytes(tmp.File("b")), first->size_bytes + first->size_bytes / 10);  // ...not copied
  EXPECT_LT(second->new_bytes, first->new_bytes / 2);  // and the estimate knows it
}

// Writes going on during a backup: the restored database is a consistent
// point in time (keys written in order come back as a prefix).
TEST(DbBackupTest, ConsistentUnderConcurrentWrites) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  Put(*db, 0, 2000);
  std::atomic<bool> done{false};
  std::atomic<int> written{2000};
  std::thread writer([&] {
    for (int i = 2000; !done.load() && i < 2'000'000; ++i) {
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), Key(i), std::string(100, 'v')).ok());
      written.store(i + 1);
    }
  });
  while (written.load() < 3000) std::this_thread::yield();  // the writer is under way
  auto made = (*backup)->BackupNow();
  const int before_end = written.load();
  done.store(true);
  writer.join();
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_THAT(RestoreBackup(tmp.File("b"), 0, tmp.File("r")).status(), IsOk());
  bool prefix = false;
  const int n = CountKeys(tmp.File("r"), &prefix);
  EXPECT_TRUE(prefix) << "a hole in the restored keys";
  EXPECT_GE(n, 3000);
  EXPECT_LE(n, before_end);
}

// Older backups are deleted: `keep` newest remain.
TEST(DbBackupTest, KeepsTheNewest) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  DbBackupConfig c = Config(tmp.File("b"), tmp.File("db"));
  c.keep = 2;
  auto backup = DbBackup::Open(c, db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  std::vector<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    Put(*db, i * 10, i * 10 + 10);
    auto made = (*backup)->BackupNow();
    ASSERT_THAT(made.status(), IsOk());
    ids.push_back(made->id);
  }
  auto listed = ListBackups(tmp.File("b"));
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, ids[2]);
  EXPECT_EQ((*listed)[1].id, ids[3]);
  EXPECT_EQ(RestoreBackup(tmp.File("b"), ids[0], tmp.File("r")).status().code(),
            absl::StatusCode::kNotFound);
}

// The background thread backs up at once when the directory has no backup,
// then one interval after the newest; a restarted service keeps the schedule
// of the backups already there.
TEST(DbBackupTest, ScheduleFollowsTheNewestBackup) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  Metrics metrics("statemgr");
  const absl::Time t0 = clock.Now();
  {
    auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, &metrics);
    ASSERT_THAT(backup.status(), IsOk());
    EXPECT_EQ((*backup)->NextDue(), t0);
    (*backup)->Start();
    ASSERT_TRUE((*backup)->AwaitAttempts(1, absl::Seconds(30)));
    EXPECT_EQ((*backup)->List().size(), 1u);
    EXPECT_EQ((*backup)->NextDue(), t0 + absl::Hours(24));
    clock.Advance(absl::Hours(23));
    EXPECT_FALSE((*backup)->AwaitAttempts(2, absl::Milliseconds(100)));
    clock.Advance(absl::Hours(1));
    ASSERT_TRUE((*backup)->AwaitAttempts(2, absl::Seconds(30)));
    EXPECT_EQ((*backup)->List().size(), 2u);
    EXPECT_THAT(metrics.Render(),
                HasSubstr(absl::StrCat("sojourn_backup_last_success_timestamp_seconds{service="
                                       "\"statemgr\"} ",
                                       absl::ToUnixSeconds(t0 + absl::Hours(24)))));
    EXPECT_THAT(metrics.Render(),
                HasSubstr("sojourn_backups_total{service=\"statemgr\",outcome=\"ok\"} 2"));
    (*backup)->Stop();
  }
  clock.Advance(absl::Hours(6));  // restarted 6 h after the last backup
  auto again = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ((*again)->NextDue(), t0 + absl::Hours(48));
}

// A backup that would leave less than min_free_disk_mb free is not taken,
// counted as failed, and retried later by the thread.
TEST(DbBackupTest, RefusesToFillTheDisk) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  Put(*db, 0, 100);
  FakeClock clock;
  Metrics metrics("broker");
  DbBackupConfig c = Config(tmp.File("b"), tmp.File("db"));
  c.service = "broker";
  c.min_free_disk_mb = int64_t{1} << 40;  // more than any disk here
  auto backup = DbBackup::Open(c, db.get(), clock, &metrics);
  ASSERT_THAT(backup.status(), IsOk());
  (*backup)->Start();
  ASSERT_TRUE((*backup)->AwaitAttempts(1, absl::Seconds(30)));
  EXPECT_TRUE((*backup)->List().empty());
  EXPECT_EQ((*backup)->NextDue(), clock.Now() + absl::Hours(1));  // min(interval, 1 h)
  EXPECT_THAT(metrics.Render(),
              HasSubstr("sojourn_backups_total{service=\"broker\",outcome=\"failed\"} 1"));
  (*backup)->Stop();
  auto direct = (*backup)->BackupNow();
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(direct.status().message(), HasSubstr("--min_free_disk_mb"));
}

// One directory, one service, one process.
TEST(DbBackupTest, RefusesASharedDirectory) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  {
    auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
    ASSERT_THAT(backup.status(), IsOk());
    ASSERT_THAT((*backup)->BackupNow().status(), IsOk());
    auto second = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(), HasSubstr("in use by another process"));
  }
  DbBackupConfig c = Config(tmp.File("b"), tmp.File("db"));
  c.service = "predictor";
  auto other = DbBackup::Open(c, db.get(), clock, nullptr);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("holds backup 1 of the statemgr's database"));
}

// A damaged backup file is found by verify, and the restore refuses it.
TEST(DbBackupTest, VerifyAndRestoreFindDamage) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  Put(*db, 0, 500);
  FakeClock clock;
  auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  auto made = (*backup)->BackupNow();
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_THAT(VerifyBackup(tmp.File("b"), made->id), IsOk());
  std::string sst;
  for (const auto& e : fs::recursive_directory_iterator(tmp.File("b"))) {
    if (e.path().extension() == ".sst") sst = e.path().string();
  }
  ASSERT_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');  // same size, different content
  }
  absl::Status verified = VerifyBackup(tmp.File("b"), made->id);
  EXPECT_EQ(verified.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verified.message(), HasSubstr(".sst"));
  EXPECT_FALSE(RestoreBackup(tmp.File("b"), made->id, tmp.File("r")).ok());
  EXPECT_EQ(VerifyBackup(tmp.File("b"), made->id + 5).code(), absl::StatusCode::kNotFound);
}

// A restore never replaces anything: a non-empty target is refused as it is.
TEST(DbBackupTest, RestoreRefusesANonEmptyTarget) {
  TempDir tmp;
  auto db = OpenDb(tmp.File("db"));
  FakeClock clock;
  auto backup = DbBackup::Open(Config(tmp.File("b"), tmp.File("db")), db.get(), clock, nullptr);
  ASSERT_THAT(backup.status(), IsOk());
  ASSERT_THAT((*backup)->BackupNow().status(), IsOk());
  fs::create_directories(tmp.File("target"));
  std::ofstream(tmp.File("target/keep.txt")) << "mine";
  auto r = RestoreBackup(tmp.File("b"), 0, tmp.File("target"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs::directory_iterator(tmp.File("target"))->path().filename(), "keep.txt");
  EXPECT_EQ(ListBackups(tmp.File("db")).status().code(), absl::StatusCode::kNotFound);
}

TEST(DbBackupTest, CheckBackupDirectory) {
  TempDir tmp;
  fs::create_directories(tmp.File("db"));
  fs::create_directories(tmp.File("foreign"));
  std::ofstream(tmp.File("foreign/notes.txt")) << "x";
  std::ofstream(tmp.File("file")) << "x";
  fs::create_directories(tmp.File("locked-only"));
  std::ofstream(tmp.File("locked-only/sojourn-backup.lock"));
  const std::string db = tmp.File("db");
  EXPECT_THAT(CheckBackupDirectory("", db, "--db_path"), IsOk());
  EXPECT_THAT(CheckBackupDirectory(tmp.File("new/deeper"), db, "--db_path"), IsOk());
  EXPECT_THAT(CheckBackupDirectory(tmp.File("locked-only"), db, "--db_path"), IsOk());
  EXPECT_FALSE(fs::exists(tmp.File("new")));  // nothing left behind
  struct Case {
    std::string dir;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {db, "is inside the database (--db_path"},
           {tmp.File("db/backups"), "is inside the database"},
           {tmp.File("db/../db/./x"), "is inside the database"},
           {tmp.path(), "holds the database"},
           {tmp.File("file"), "exists and is not a directory"},
           {tmp.File("foreign"), "holds other files but no backups"},
           {tmp.File("file/sub"), "cannot be created"},
       }) {
    absl::Status s = CheckBackupDirectory(c.dir, db, "--db_path");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.dir;
    EXPECT_THAT(s.message(), HasSubstr(c.want)) << c.dir;
    EXPECT_THAT(s.message(), HasSubstr("--backup_dir")) << c.dir;
  }
}

}  // namespace
}  // namespace sojourn
