// Online backups (common/db_backup.h) of a real RocksDB database on disk:
// what a restore gives back, the schedule on an injected clock, the refusals.
#include "common/db_backup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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

// A database in a temporary directory and backups of it in "b", on a fake
// clock; the tests' common setup.
class DbBackupTest : public ::testing::Test {
 protected:
  DbBackupTest() : db_(OpenDb(tmp_.File("db"))) {}

  // Opens the backups of db() (config: Config(Backups(), DbPath()) changed
  // by `edit`), failing the test when it cannot.
  DbBackup& Backup(const std::function<void(DbBackupConfig&)>& edit = nullptr,
                   Metrics* metrics = nullptr) {
    DbBackupConfig c = Config(Backups(), DbPath());
    if (edit) edit(c);
    auto opened = DbBackup::Open(c, db_.get(), clock_, metrics);
    EXPECT_THAT(opened.status(), IsOk());
    backup_ = opened.ok() ? std::move(*opened) : nullptr;
    if (backup_ == nullptr) std::abort();
    return *backup_;
  }
  std::string DbPath() const { return tmp_.File("db"); }
  std::string Backups() const { return tmp_.File("b"); }

  TempDir tmp_;
  std::unique_ptr<rocksdb::DB> db_;
  FakeClock clock_;
  std::unique_ptr<DbBackup> backup_;
};

// Each backup restores the database as it was when taken, the later writes
// absent; the newest is the default; verify passes on every backup.
TEST_F(DbBackupTest, RestoresEachBackupAsItWas) {
  DbBackup& backup = Backup();
  Put(*db_, 0, 1000);
  auto first = backup.BackupNow();
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->service, "statemgr");
  EXPECT_EQ(first->db_path, DbPath());
  EXPECT_EQ(first->unix_seconds, absl::ToUnixSeconds(clock_.Now()));
  clock_.Advance(absl::Hours(1));
  Put(*db_, 1000, 1500);  // in the memtable only: the backup flushes it
  auto second = backup.BackupNow();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_GT(second->id, first->id);
  Put(*db_, 1500, 1600);  // after the last backup: in neither

  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, first->id);
  EXPECT_EQ((*listed)[1].unix_seconds, first->unix_seconds + 3600);
  for (const BackupSummary& b : *listed) EXPECT_THAT(VerifyBackup(Backups(), b.id), IsOk());

  bool prefix = false;
  auto r1 = RestoreBackup(Backups(), first->id, tmp_.File("r1"));
  ASSERT_THAT(r1.status(), IsOk());
  EXPECT_EQ(CountKeys(tmp_.File("r1"), &prefix), 1000);
  EXPECT_TRUE(prefix);
  auto latest = RestoreBackup(Backups(), 0, tmp_.File("r2/"));
  ASSERT_THAT(latest.status(), IsOk());
  EXPECT_EQ(latest->id, second->id);
  EXPECT_EQ(CountKeys(tmp_.File("r2"), &prefix), 1500);
  EXPECT_TRUE(prefix);
}

// A backup shares the table files the previous one holds: two backups of a
// large database with a small change take far less than twice its size.
TEST_F(DbBackupTest, BackupsAreIncremental) {
  DbBackup& backup = Backup();
  Put(*db_, 0, 4000, 1000);  // about 4 MB
  ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions()).ok());
  auto first = backup.BackupNow();
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_GT(first->size_bytes, 4'000'000u);
  EXPECT_GE(first->new_bytes, first->size_bytes - 100'000);  // all of it was new
  Put(*db_, 4000, 4010, 1000);
  ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions()).ok());
  auto second = backup.BackupNow();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_GT(second->size_bytes, first->size_bytes);  // each backup is whole...
  EXPECT_LT(DirBytes(Backups()), first->size_bytes + first->size_bytes / 10);  // ...not copied
  EXPECT_LT(second->new_bytes, first->new_bytes / 2);  // and the estimate knows it
}

// Writes going on during a backup: the restored database is a consistent
// point in time (keys written in order come back as a prefix).
TEST_F(DbBackupTest, ConsistentUnderConcurrentWrites) {
  DbBackup& backup = Backup();
  Put(*db_, 0, 2000);
  std::atomic<bool> done{false};
  std::atomic<int> written{2000};
  std::thread writer([&] {
    for (int i = 2000; !done.load() && i < 2'000'000; ++i) {
      ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), Key(i), std::string(100, 'v')).ok());
      written.store(i + 1);
    }
  });
  while (written.load() < 3000) std::this_thread::yield();  // the writer is under way
  auto made = backup.BackupNow();
  const int before_end = written.load();
  done.store(true);
  writer.join();
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_THAT(RestoreBackup(Backups(), 0, tmp_.File("r")).status(), IsOk());
  bool prefix = false;
  const int n = CountKeys(tmp_.File("r"), &prefix);
  EXPECT_TRUE(prefix) << "a hole in the restored keys";
  EXPECT_GE(n, 3000);
  EXPECT_LE(n, before_end);
}

// Older backups are deleted: `keep` newest remain.
TEST_F(DbBackupTest, KeepsTheNewest) {
  DbBackup& backup = Backup([](DbBackupConfig& c) { c.keep = 2; });
  std::vector<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    Put(*db_, i * 10, i * 10 + 10);
    auto made = backup.BackupNow();
    ASSERT_THAT(made.status(), IsOk());
    ids.push_back(made->id);
  }
  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, ids[2]);
  EXPECT_EQ((*listed)[1].id, ids[3]);
  EXPECT_EQ(RestoreBackup(Backups(), ids[0], tmp_.File("r")).status().code(),
            absl::StatusCode::kNotFound);
}

// The background thread backs up at once when the directory has no backup,
// then one interval after the newest; a restarted service keeps the schedule
// of the backups already there.
TEST_F(DbBackupTest, ScheduleFollowsTheNewestBackup) {
  Metrics metrics("statemgr");
  const absl::Time t0 = clock_.Now();
  DbBackup& backup = Backup(nullptr, &metrics);
  EXPECT_EQ(backup.NextDue(), t0);
  backup.Start();
  ASSERT_TRUE(backup.AwaitAttempts(1, absl::Seconds(30)));
  EXPECT_EQ(backup.List().size(), 1u);
  EXPECT_EQ(backup.NextDue(), t0 + absl::Hours(24));
  clock_.Advance(absl::Hours(23));
  EXPECT_FALSE(backup.AwaitAttempts(2, absl::Milliseconds(100)));
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(backup.AwaitAttempts(2, absl::Seconds(30)));
  EXPECT_EQ(backup.List().size(), 2u);
  EXPECT_THAT(metrics.Render(),
              HasSubstr(absl::StrCat("sojourn_backup_last_success_timestamp_seconds{service="
                                     "\"statemgr\"} ",
                                     absl::ToUnixSeconds(t0 + absl::Hours(24)))));
  EXPECT_THAT(metrics.Render(),
              HasSubstr("sojourn_backups_total{service=\"statemgr\",outcome=\"ok\"} 2"));
  // Stop() from two threads at once, then again; Start() after Stop() does nothing.
  std::thread other([&] { backup.Stop(); });
  backup.Stop();
  other.join();
  backup.Stop();
  backup.Start();
  backup_.reset();

  clock_.Advance(absl::Hours(6));  // restarted 6 h after the last backup
  EXPECT_EQ(Backup().NextDue(), t0 + absl::Hours(48));
}

// A backup stamped in the future (a clock set wrong) does not stop the
// schedule: the next one is due an interval from now.
TEST_F(DbBackupTest, AFutureBackupDoesNotStopTheSchedule) {
  const absl::Time now = clock_.Now();
  clock_.Advance(absl::Hours(24 * 365 * 10));
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  backup_.reset();
  clock_.Set(now);
  EXPECT_EQ(Backup().NextDue(), now + absl::Hours(24));
}

// A backup that would leave less than min_free_disk_mb free is not taken,
// counted as failed, and retried later by the thread.
TEST_F(DbBackupTest, RefusesToFillTheDisk) {
  Put(*db_, 0, 100);
  Metrics metrics("broker");
  DbBackup& backup = Backup(
      [](DbBackupConfig& c) {
        c.service = "broker";
        c.min_free_disk_mb = int64_t{1} << 40;  // more than any disk here
      },
      &metrics);
  backup.Start();
  ASSERT_TRUE(backup.AwaitAttempts(1, absl::Seconds(30)));
  EXPECT_TRUE(backup.List().empty());
  EXPECT_EQ(backup.NextDue(), clock_.Now() + absl::Hours(1));  // min(interval, 1 h)
  EXPECT_THAT(metrics.Render(),
              HasSubstr("sojourn_backups_total{service=\"broker\",outcome=\"failed\"} 1"));
  backup.Stop();
  auto direct = backup.BackupNow();
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kResourceExhausted);
  // The database is on the same disk: twice the reserve is kept.
  EXPECT_THAT(direct.status().message(),
              HasSubstr("must keep 2199023255552 MiB free (--min_free_disk_mb twice over"));
}

// One directory, one service, one process.
TEST_F(DbBackupTest, RefusesASharedDirectory) {
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  auto second = DbBackup::Open(Config(Backups(), DbPath()), db_.get(), clock_, nullptr);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another process"));
  EXPECT_EQ(DeleteBackup(Backups(), 1).code(), absl::StatusCode::kFailedPrecondition);
  backup_.reset();
  DbBackupConfig c = Config(Backups(), DbPath());
  c.service = "predictor";
  auto other = DbBackup::Open(c, db_.get(), clock_, nullptr);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("holds backup 1 of the statemgr's database"));
}

// A database started anew where a damaged one was moved aside: its backups
// rotate among themselves and never delete the old database's.
TEST_F(DbBackupTest, KeepsAnotherDatabasesBackups) {
  Put(*db_, 0, 100);
  ASSERT_THAT(Backup([](DbBackupConfig& c) { c.keep = 2; }).BackupNow().status(), IsOk());
  backup_.reset();
  db_.reset();
  fs::rename(DbPath(), tmp_.File("db.damaged"));
  db_ = OpenDb(DbPath());  // empty, with a new identity
  DbBackup& fresh = Backup([](DbBackupConfig& c) { c.keep = 2; });
  EXPECT_EQ(fresh.OtherDatabaseBackups(), 1);
  EXPECT_EQ(fresh.NextDue(), clock_.Now());  // it has no backup yet
  for (int i = 0; i < 3; ++i) ASSERT_THAT(fresh.BackupNow().status(), IsOk());
  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 3u);  // the old database's and the new one's newest 2
  EXPECT_EQ((*listed)[0].id, 1u);
  bool prefix = false;
  ASSERT_THAT(RestoreBackup(Backups(), 1, tmp_.File("r")).status(), IsOk());
  EXPECT_EQ(CountKeys(tmp_.File("r"), &prefix), 100);
}

// A restored database keeps the identity of the one backed up, so its
// service goes on rotating the same backups.
TEST_F(DbBackupTest, RestoreKeepsTheDatabase) {
  Put(*db_, 0, 100);
  ASSERT_THAT(Backup([](DbBackupConfig& c) { c.keep = 2; }).BackupNow().status(), IsOk());
  backup_.reset();
  std::string identity;
  ASSERT_TRUE(db_->GetDbIdentity(identity).ok());
  db_.reset();
  fs::rename(DbPath(), tmp_.File("db.damaged"));
  ASSERT_THAT(RestoreBackup(Backups(), 0, DbPath()).status(), IsOk());
  db_ = OpenDb(DbPath());
  std::string restored;
  ASSERT_TRUE(db_->GetDbIdentity(restored).ok());
  EXPECT_EQ(restored, identity);
  DbBackup& again = Backup([](DbBackupConfig& c) { c.keep = 2; });
  EXPECT_EQ(again.OtherDatabaseBackups(), 0);
  for (int i = 0; i < 2; ++i) ASSERT_THAT(again.BackupNow().status(), IsOk());
  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  EXPECT_EQ(listed->size(), 2u);  // the first one rotated out
}

// Old backups are deleted only while no reader (sojourn-backup) holds the
// directory; a reader makes the deletion wait for the next backup.
TEST_F(DbBackupTest, DeletesNothingUnderAReader) {
  DbBackup& backup = Backup([](DbBackupConfig& c) {
    c.keep = 1;
    c.reader_wait = absl::ZeroDuration();
  });
  ASSERT_THAT(backup.BackupNow().status(), IsOk());
  const int reader = open((Backups() + "/sojourn-backup.read.lock").c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(flock(reader, LOCK_SH), 0);
  ASSERT_THAT(backup.BackupNow().status(), IsOk());
  EXPECT_EQ(backup.List().size(), 2u);  // the reader kept backup 1
  close(reader);
  ASSERT_THAT(backup.BackupNow().status(), IsOk());
  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, 3u);
}

// A damaged file: verify finds it, and the restore refuses it.
TEST_F(DbBackupTest, VerifyAndRestoreFindADamagedFile) {
  Put(*db_, 0, 500);
  auto made = Backup().BackupNow();
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_THAT(VerifyBackup(Backups(), made->id), IsOk());
  std::string sst;
  for (const auto& e : fs::recursive_directory_iterator(Backups())) {
    if (e.path().extension() == ".sst") sst = e.path().string();
  }
  ASSERT_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');  // same size, different content
  }
  absl::Status verified = VerifyBackup(Backups(), made->id);
  EXPECT_EQ(verified.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verified.message(), HasSubstr(".sst"));
  EXPECT_FALSE(RestoreBackup(Backups(), made->id, tmp_.File("out/r")).ok());
  // Nothing half-restored is left where the service would look, nor beside it.
  EXPECT_FALSE(fs::exists(tmp_.File("out")));
  fs::create_directories(tmp_.File("empty"));
  EXPECT_FALSE(RestoreBackup(Backups(), made->id, tmp_.File("empty")).ok());
  EXPECT_TRUE(fs::is_empty(tmp_.File("empty")));
  for (const auto& e : fs::directory_iterator(tmp_.path())) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr("restoring"))) << e.path();
  }
  EXPECT_EQ(VerifyBackup(Backups(), made->id + 5).code(), absl::StatusCode::kNotFound);
  fs::remove(sst);  // and a missing one
  EXPECT_EQ(VerifyBackup(Backups(), made->id).code(), absl::StatusCode::kDataLoss);
}

// A backup whose description RocksDB cannot read is listed as damaged, fails
// verify, and is not silently replaced by an older one on restore.
TEST_F(DbBackupTest, ADamagedNewestBackupIsNotSkipped) {
  Put(*db_, 0, 100);
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  Put(*db_, 100, 200);
  ASSERT_THAT(backup_->BackupNow().status(), IsOk());
  backup_.reset();
  std::ofstream(Backups() + "/meta/2", std::ios::trunc) << "garbage";
  auto listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_FALSE((*listed)[0].damaged);
  EXPECT_TRUE((*listed)[1].damaged);
  EXPECT_EQ(VerifyBackup(Backups(), 2).code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(VerifyBackup(Backups(), 1), IsOk());
  auto newest = RestoreBackup(Backups(), 0, tmp_.File("r"));
  EXPECT_EQ(newest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(newest.status().message(), HasSubstr("--id 1 restores the newest good one"));
  EXPECT_FALSE(fs::exists(tmp_.File("r")));
  ASSERT_THAT(RestoreBackup(Backups(), 1, tmp_.File("r")).status(), IsOk());
  // No service holds the directory now: the damaged backup can go.
  ASSERT_THAT(DeleteBackup(Backups(), 2), IsOk());
  listed = ListBackups(Backups());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(DeleteBackup(Backups(), 7).code(), absl::StatusCode::kNotFound);
}

// A backup directory RocksDB cannot read (here a description that is a
// directory) does not stop the service: it serves without backups, and the
// metrics say a backup failed, so SojournBackupOverdue fires.
TEST_F(DbBackupTest, AnUnreadableDirectoryLeavesTheServiceWithoutBackups) {
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  backup_.reset();
  fs::create_directories(Backups() + "/meta/5");
  Metrics metrics("statemgr");
  auto started = StartDbBackup(Config(Backups(), DbPath()), db_.get(), clock_, &metrics);
  ASSERT_THAT(started.status(), IsOk());
  EXPECT_EQ(*started, nullptr);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("sojourn_backups_total{service=\"statemgr\",outcome=\"failed\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("sojourn_backup_last_success_timestamp_seconds{service=\"statemgr\"} 0"));
  EXPECT_THAT(text, HasSubstr("sojourn_backup_interval_seconds{service=\"statemgr\"} 86400"));
  // The configuration's faults still stop it.
  DbBackupConfig other = Config(Backups(), DbPath());
  other.service = "broker";
  fs::remove(Backups() + "/meta/5");
  EXPECT_EQ(StartDbBackup(other, db_.get(), clock_, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A restore never replaces anything: a non-empty target is refused as it is,
// and so is a target inside the backups.
TEST_F(DbBackupTest, RestoreRefusesANonEmptyTarget) {
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  fs::create_directories(tmp_.File("target"));
  std::ofstream(tmp_.File("target/keep.txt")) << "mine";
  auto r = RestoreBackup(Backups(), 0, tmp_.File("target"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs::directory_iterator(tmp_.File("target"))->path().filename(), "keep.txt");
  EXPECT_EQ(RestoreBackup(Backups(), 0, Backups() + "/restored").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListBackups(DbPath()).status().code(), absl::StatusCode::kNotFound);
}

// Run as root (as the restore of a systemd service's database is), the
// restored files get the owner of the directory they go into.
TEST_F(DbBackupTest, RestoreAsRootGivesTheFilesTheirOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  ASSERT_THAT(Backup().BackupNow().status(), IsOk());
  fs::create_directories(tmp_.File("state"));
  ASSERT_EQ(chown(tmp_.File("state").c_str(), 65534, 65534), 0);
  ASSERT_THAT(RestoreBackup(Backups(), 0, tmp_.File("state/new/db")).status(), IsOk());
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp_.File("state"))) {
    struct stat st;
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u) << e.path();
    EXPECT_EQ(st.st_gid, 65534u) << e.path();
    ++files;
  }
  EXPECT_GE(files, 5);  // new/, db/, CURRENT, MANIFEST, OPTIONS, ...
}

TEST(CheckBackupDirectoryTest, Refusals) {
  TempDir tmp;
  fs::create_directories(tmp.File("db"));
  fs::create_directories(tmp.File("foreign"));
  std::ofstream(tmp.File("foreign/notes.txt")) << "x";
  std::ofstream(tmp.File("file")) << "x";
  fs::create_directories(tmp.File("locked-only"));
  std::ofstream(tmp.File("locked-only/sojourn-backup.lock"));
  std::ofstream(tmp.File("locked-only/sojourn-backup.read.lock"));
  fs::create_symlink(tmp.File("nowhere"), tmp.File("dangling"));
  const std::string db = tmp.File("db");
  EXPECT_THAT(CheckBackupDirectory("", db, "--db_path"), IsOk());
  EXPECT_THAT(CheckBackupDirectory(tmp.File("new/deeper"), db, "--db_path"), IsOk());
  EXPECT_THAT(CheckBackupDirectory(tmp.File("locked-only"), db, "--db_path"), IsOk());
  EXPECT_FALSE(fs::exists(tmp.File("new")));  // nothing left behind
  struct Case {
    std::string dir;
    std::string db;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {db, db, "is inside the database (--db_path"},
           {tmp.File("db/backups"), db, "is inside the database"},
           {tmp.File("db/../db/./x"), db, "is inside the database"},
           // A database not created yet, named with a trailing slash.
           {tmp.File("new-db/backups"), tmp.File("new-db/"), "is inside the database"},
           {tmp.File("new-db/backups/"), tmp.File("new-db//"), "is inside the database"},
           {tmp.path(), db, "holds the database"},
           {tmp.File("file"), db, "exists and is not a directory"},
           {tmp.File("foreign"), db, "holds other files but no backups"},
           {tmp.File("file/sub"), db, "cannot be created"},
           {tmp.File("dangling"), db, "is a symbolic link to nothing"},
           {tmp.File("dangling/"), db, "is a symbolic link to nothing"},
           {tmp.File("dangling/sub"), db, "is a symbolic link to nothing"},
       }) {
    absl::Status s = CheckBackupDirectory(c.dir, c.db, "--db_path");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.dir;
    EXPECT_THAT(s.message(), HasSubstr(c.want)) << c.dir;
    EXPECT_THAT(s.message(), HasSubstr("--backup_dir")) << c.dir;
  }
}

}  // namespace
}  // namespace sojourn
