// Online backups of a service's RocksDB database (the state manager's
// samples, the predictor's job history, the broker's job queue) with
// RocksDB's BackupEngine: consistent point-in-time copies taken while the
// service writes, incremental (a table file already in the backup directory
// is not copied again), checksummed, and restorable with sojourn-backup.
//
//   auto backup = DbBackup::Open(config, store->db(), clock, &metrics);
//   (*backup)->Start();   // one backup when due, then every config.interval
//   ...
//   (*backup)->Stop();
//
// The schedule survives restarts: the next backup is due one interval after
// the database's newest one in the directory (at once when there is none),
// by the time recorded with it. Each backup records the service and the database it came
// from (its path and RocksDB identity); a directory holding another service's
// backups is refused, and so is one another process is backing up into (a
// lock file), because two BackupEngines appending to one directory may
// destroy it. Only backups of the database being backed up are rotated: those
// of another database in the directory (the one a database moved aside was
// restored from, say) are kept until deleted with sojourn-backup.
//
// Readers (ListBackups, VerifyBackup, RestoreBackup) hold a shared lock on a
// second lock file while they read, and the service deletes old backups only
// under it exclusively: RocksDB leaves a read beside another engine's
// deletion unspecified.
#ifndef SOJOURN_COMMON_DB_BACKUP_H_
#define SOJOURN_COMMON_DB_BACKUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace rocksdb {
class BackupEngine;
class DB;
}  // namespace rocksdb

namespace sojourn {

class Metrics;

// One backup in a backup directory.
struct BackupSummary {
  uint32_t id = 0;
  // When it was taken (the service's clock); RocksDB's own timestamp for a
  // backup made by another tool.
  int64_t unix_seconds = 0;
  uint64_t size_bytes = 0;  // its files' payload, shared files included
  uint32_t files = 0;
  std::string service;      // "statemgr", "predictor", "broker"; "" if unknown
  std::string db_path;      // the database it was taken of
  std::string db_identity;  // RocksDB's identity of that database
  // RocksDB could not read its description (meta/ID): only the id is known,
  // and it can be neither verified nor restored.
  bool damaged = false;
  // BackupNow only: about how many bytes it had to copy (the live files the
  // previous backup did not hold, and the memtables it flushed).
  uint64_t new_bytes = 0;
};

struct DbBackupConfig {
  std::string service;     // recorded with each backup; the directory must hold only its own
  std::string backup_dir;  // created if missing
  std::string db_path;     // recorded, and named in messages
  absl::Duration interval = absl::Hours(24);
  int keep = 7;  // backups kept after each new one (the oldest are deleted)
  // A backup is not started while it could leave fewer MiB than this free
  // on the backup directory's disk, or twice as many when that is the
  // database's disk: the service itself refuses writes below this reserve
  // (--min_free_disk_mb), as RocksDB aborts on a full disk, and a backup must
  // not bring it there. When that is all that stops it, the oldest backup is
  // deleted first if `keep` are there.
  int64_t min_free_disk_mb = 0;
  // How long the deletion of old backups waits for readers (sojourn-backup)
  // of the directory before it is left to the next backup.
  absl::Duration reader_wait = absl::Seconds(60);
};

// Start-up check of a service's --backup_dir against its database directory
// `db_path` (given by `db_flag`): not inside the database, the database not
// inside it, a directory (or creatable), writable, and either empty or a
// backup directory (RocksDB's meta/ subdirectory), not a dangling symbolic
// link. INVALID_ARGUMENT with a one-line reason naming --backup_dir. Leaves
// nothing behind. "" = off (OK).
absl::Status CheckBackupDirectory(const std::string& backup_dir, const std::string& db_path,
                                  absl::string_view db_flag);

// The service's --backup_* flags (common/db_backup_flags.cc) checked, as a
// config for `service` and its database at `db_path`; backup_dir "" = off.
absl::StatusOr<DbBackupConfig> DbBackupConfigFromFlags(absl::string_view service,
                                                       const std::string& db_path,
                                                       absl::string_view db_flag,
                                                       int64_t min_free_disk_mb);

class DbBackup {
 public:
  // Opens (creating) config.backup_dir for backups of `db`, which must
  // outlive this object. FAILED_PRECONDITION when the directory holds
  // another service's backups or another process is backing up into it;
  // other codes for I/O errors.
  // `metrics` (may be null) gets sojourn_backup_* (deploy/README.md).
  static absl::StatusOr<std::unique_ptr<DbBackup>> Open(const DbBackupConfig& config,
                                                        rocksdb::DB* db, Clock& clock,
                                                        Metrics* metrics);
  ~DbBackup();
  DbBackup(const DbBackup&) = delete;
  DbBackup& operator=(const DbBackup&) = delete;

  // Takes a backup now (flushing the memtables first, so it needs no log
  // files), then deletes this database's backups but the newest config.keep.
  // RESOURCE_EXHAUSTED when the backup's new files would not fit above the
  // reserve; CANCELLED when Stop() interrupted it (nothing of it is kept).
  absl::StatusOr<BackupSummary> BackupNow();

  // When the background thread takes the next backup: an interval after the
  // newest backup of this database (at once when it has none), but no later
  // than an interval from now
  // (a backup stamped in the future, by a clock set wrong, does not stop
  // the schedule).
  absl::Time NextDue() const;

  // The backups in the directory, oldest first, damaged ones included.
  std::vector<BackupSummary> List() const;
  // Backups in the directory of another database than this one.
  int OtherDatabaseBackups() const;

  // Starts the background thread (once): a backup whenever NextDue() has
  // come; after a failure, again min(interval, 1 h) later. Each outcome is
  // logged.
  void Start();
  // Interrupts a backup in progress and joins the thread. Idempotent, and
  // safe to call from several threads.
  void Stop();

  // Blocks until the background thread has attempted `n` backups in all (ok
  // or not) or `timeout` has passed; whether it had.
  bool AwaitAttempts(int n, absl::Duration timeout) const;

 private:
  DbBackup(const DbBackupConfig& config, rocksdb::DB* db, Clock& clock, Metrics* metrics,
           std::unique_ptr<rocksdb::BackupEngine> engine, int lock_fd, int read_lock_fd,
           std::string identity);
  void Run();
  void ExportState();  // the gauges of the newest backup
  // Deletes this database's good backups but the newest `keep`, under the
  // readers' lock; returns how many it deleted.
  int Purge(int keep);
  // A good backup of this database (its identity; a backup without one, of
  // its path).
  bool Mine(const BackupSummary& b) const;
  std::vector<uint32_t> MineIds() const;  // oldest first
  // The bytes of backup `id`'s files that no other backup shares.
  uint64_t BytesOnlyIn(uint32_t id) const;
  // Takes the readers' lock exclusively; false after config.reader_wait of
  // readers, on Stop(), or on an error.
  bool LockOutReaders();

  const DbBackupConfig config_;
  rocksdb::DB* const db_;
  Clock& clock_;
  Metrics* const metrics_;
  std::unique_ptr<rocksdb::BackupEngine> engine_;
  const int lock_fd_;
  const int read_lock_fd_;
  const std::string identity_;  // RocksDB's identity of db_
  absl::Mutex stop_mu_;         // serializes Start() and Stop()
  mutable absl::Mutex mu_;
  absl::Time next_due_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

// A service's backups as its flags configured them: Open, then Start. Null
// when config.backup_dir is empty (no backups). The caller stops it (or
// destroys it) before closing `db`. INVALID_ARGUMENT / FAILED_PRECONDITION:
// the configuration's fault (the service exits 2). A backup directory that
// cannot be read otherwise (I/O) is logged and gives null too, with the
// metrics of a failed backup: the service serves without backups.
absl::StatusOr<std::unique_ptr<DbBackup>> StartDbBackup(const DbBackupConfig& config,
                                                        rocksdb::DB* db, Clock& clock,
                                                        Metrics* metrics);

// sojourn-backup's operations. The first three read a backup directory a
// service may be appending to meanwhile.
// The backups in `dir`, oldest first, damaged ones included. NOT_FOUND when
// it is no backup directory.
absl::StatusOr<std::vector<BackupSummary>> ListBackups(const std::string& dir);
// Reads every file of backup `id` and compares its size and checksum with
// the ones recorded. DATA_LOSS naming the file when one differs or is
// missing, or when the backup's description is unreadable; NOT_FOUND for no
// such backup.
absl::Status VerifyBackup(const std::string& dir, uint32_t id);
// Restores backup `id` (0 = the newest; DATA_LOSS when the newest is
// damaged, naming the newest good one) into `db_path`, which must not exist
// or be an empty directory (nothing stored is replaced) and not lie inside
// `dir`, gives the result the database identity the backup recorded (so
// that the service goes on rotating the same database's backups), and
// checks that it opens. Run as root, the restored files get the owner of
// the directory they were restored into (or of its parent, for a new one):
// a service running as its own user must be able to write them. Returns
// the backup restored.
absl::StatusOr<BackupSummary> RestoreBackup(const std::string& dir, uint32_t id,
                                            const std::string& db_path);
// Deletes backup `id` (good or damaged). FAILED_PRECONDITION while a service
// is backing up into `dir`: stop it first.
absl::Status DeleteBackup(const std::string& dir, uint32_t id);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_DB_BACKUP_H_
