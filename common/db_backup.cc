#include "common/db_backup.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/rocks_status.h"
#include "common/text.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/backup_engine.h"

namespace sojourn {
namespace {

namespace fs = std::filesystem;

constexpr char kMetaFormat[] = "sojourn-backup-v1";
// Held exclusively by the service backing up into the directory.
constexpr char kLockFile[] = "sojourn-backup.lock";
// Held shared by readers, exclusively by the service while it deletes.
constexpr char kReadLockFile[] = "sojourn-backup.read.lock";

// app_metadata of a backup: "sojourn-backup-v1" then key=value lines.
std::string EncodeMeta(absl::string_view service, int64_t unix_seconds,
                       absl::string_view db_identity, absl::string_view db_path) {
  return absl::StrCat(kMetaFormat, "\nservice=", service, "\nunix_seconds=", unix_seconds,
                      "\ndb_identity=", db_identity, "\ndb_path=", db_path);
}

BackupSummary Summarize(const rocksdb::BackupInfo& info) {
  BackupSummary s;
  s.id = info.backup_id;
  s.unix_seconds = info.timestamp;
  s.size_bytes = info.size;
  s.files = info.number_files;
  std::vector<absl::string_view> lines = absl::StrSplit(info.app_metadata, '\n');
  if (lines.empty() || lines[0] != kMetaFormat) return s;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t eq = lines[i].find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view key = lines[i].substr(0, eq);
    const absl::string_view value = lines[i].substr(eq + 1);  // a path may hold '='
    int64_t t = 0;
    if (key == "service") s.service = std::string(value);
    if (key == "db_path") s.db_path = std::string(value);
    if (key == "db_identity") s.db_identity = std::string(value);
    if (key == "unix_seconds" && absl::SimpleAtoi(value, &t)) s.unix_seconds = t;
  }
  return s;
}

// Good and damaged backups, by id.
std::vector<BackupSummary> SummarizeAll(const rocksdb::BackupEngineReadOnlyBase& engine) {
  std::vector<rocksdb::BackupInfo> infos;
  engine.GetBackupInfo(&infos);
  std::vector<BackupSummary> out;
  out.reserve(infos.size());
  for (const rocksdb::BackupInfo& info : infos) out.push_back(Summarize(info));
  std::vector<rocksdb::BackupID> corrupt;
  engine.GetCorruptedBackups(&corrupt);
  for (rocksdb::BackupID id : corrupt) {
    BackupSummary s;
    s.id = id;
    s.damaged = true;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const BackupSummary& a, const BackupSummary& b) { return a.id < b.id; });
  return out;
}

// Free MiB for unprivileged use on the disk of `path`; -1 when unknown.
double FreeMib(const std::string& path) {
  struct statvfs vfs;
  if (statvfs(path.c_str(), &vfs) != 0) return -1;
  return static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) / (1024.0 * 1024.0);
}

bool SameDisk(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev;
}

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// Absolute, symbolic links resolved where they exist, no "." / ".." and no
// trailing separator: "a/db/" and "a/./db" name "a/db".
fs::path Normalized(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec).lexically_normal();
  while (p.has_relative_path() && p.filename().empty()) p = p.parent_path();
  return p;
}

bool Within(const fs::path& inner, const fs::path& outer) {
  auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end();  // every component of outer starts inner
}

// The readers' lock file of `dir`, shared while a reader works (exclusive
// for a deletion); no lock when the file is absent (no service has backed
// up there yet) or cannot be opened.
class ReadLock {
 public:
  explicit ReadLock(const std::string& dir, bool exclusive = false)
      : fd_(open((fs::path(dir) / kReadLockFile).c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ >= 0) flock(fd_, exclusive ? LOCK_EX : LOCK_SH);
  }
  ~ReadLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  ReadLock(const ReadLock&) = delete;
  ReadLock& operator=(const ReadLock&) = delete;

 private:
  const int fd_;
};

// NOT_FOUND unless `dir` is a backup directory (RocksDB's meta/).
absl::Status CheckHoldsBackups(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(fs::path(dir) / "meta", ec)) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("'", dir, "' holds no backups (no meta/ directory of RocksDB's backups)"));
}

// The writers' lock of `dir` (an open descriptor holding it; close it to let
// go): two BackupEngines appending to one directory may destroy it
// (RocksDB's backup_engine.h). FAILED_PRECONDITION with `in_use` when another
// process holds it.
absl::StatusOr<int> LockForWriting(const std::string& dir, absl::string_view in_use) {
  const std::string lock_path = (fs::path(dir) / kLockFile).string();
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", lock_path, " (", std::strerror(errno), ")"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return absl::FailedPreconditionError(in_use);
  }
  return fd;
}

// The metrics every service with --backup_dir exports from start-up.
void DeclareBackupMetrics(Metrics& metrics, absl::Duration interval) {
  for (const char* outcome : {"ok", "failed"}) {
    metrics.DeclareCounter("sojourn_backups_total",
                           "Backups of the service's database attempted, by outcome",
                           {{"outcome", outcome}});
  }
  metrics.Set("sojourn_backup_interval_seconds",
              "Time between two backups (--backup_interval_seconds)", {},
              absl::ToDoubleSeconds(interval));
}

absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> OpenReadOnly(
    const std::string& dir) {
  if (absl::Status s = CheckHoldsBackups(dir); !s.ok()) return s;
  rocksdb::BackupEngineReadOnly* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngineReadOnly::Open(rocksdb::BackupEngineOptions(dir),
                                                            rocksdb::Env::Default(), &raw);
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine(raw);
  if (!s.ok()) return FromRocksStatus(s, absl::StrCat("cannot read the backups in ", dir));
  return engine;
}

absl::Status DamagedError(const std::string& dir, uint32_t id) {
  return absl::DataLossError(absl::StrCat("backup ", id, " in ", dir,
                                          " is damaged: RocksDB cannot read its description (meta/",
                                          id, ") or one of its files"));
}

// Gives `root` and everything under it `uid`:`gid`, never following a
// symbolic link (nftw with FTW_PHYS, lchown): a link swapped in by the
// directory's owner does not get root to give away other files.
thread_local uid_t chown_uid;
thread_local gid_t chown_gid;
thread_local int chown_errno;

int ChownOne(const char* path, const struct stat*, int, struct FTW*) {
  if (lchown(path, chown_uid, chown_gid) != 0) {
    chown_errno = errno;
    return 1;  // stops the walk
  }
  return 0;
}

absl::Status ChownTree(const fs::path& root, uid_t uid, gid_t gid) {
  chown_uid = uid;
  chown_gid = gid;
  chown_errno = 0;
  if (nftw(root.c_str(), ChownOne, 16, FTW_PHYS | FTW_MOUNT) != 0) {
    return absl::InternalError(absl::StrCat("cannot give the files under ", root.string(),
                                            " their owner (",
                                            std::strerror(chown_errno ? chown_errno : errno), ")"));
  }
  return absl::OkStatus();
}

// Writes `text` to `path` durably: a temporary file, fsync, rename.
absl::Status WriteFileDurably(const fs::path& path, absl::string_view text) {
  const std::string tmp = path.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) close(fd);
  ok = ok && rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write ", path.string(), " (", std::strerror(err ? err : errno), ")"));
  }
  return absl::OkStatus();
}

void SyncDirectory(const fs::path& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

}  // namespace

absl::Status CheckBackupDirectory(const std::string& backup_dir, const std::string& db_path,
                                  absl::string_view db_flag) {
  if (backup_dir.empty()) return absl::OkStatus();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backup_dir '", Excerpt(backup_dir), "' ", why));
  };
  const fs::path backup = Normalized(backup_dir);
  const fs::path db = Normalized(db_path);
  if (!db_path.empty() && Within(backup, db)) {
    return bad(absl::StrCat("is inside the database (", db_flag, " '", Excerpt(db_path),
                            "'): a backup must live outside it"));
  }
  if (!db_path.empty() && Within(db, backup)) {
    return bad(absl::StrCat("holds the database (", db_flag, " '", Excerpt(db_path),
                            "'): give the backups a directory of their own"));
  }
  std::error_code ec;
  std::string trimmed = backup_dir;  // "dl/" names the link "dl" as well
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::file_status st = fs::status(trimmed, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return bad("exists and is not a directory");
    if (access(backup_dir.c_str(), R_OK | W_OK | X_OK) != 0) {
      return bad(absl::StrCat("is not writable (", std::strerror(errno), ")"));
    }
    if (fs::is_directory(fs::path(backup_dir) / "meta", ec)) return absl::OkStatus();
    fs::directory_iterator it(backup_dir, ec);
    if (ec) return bad(absl::StrCat("cannot be listed (", ec.message(), ")"));
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      const fs::path name = it->path().filename();
      if (name == kLockFile || name == kReadLockFile) continue;
      return bad(absl::StrCat("holds other files but no backups (no meta/ directory, e.g. '",
                              name.string(), "'): give an empty or new directory"));
    }
    return absl::OkStatus();
  }
  // Missing: created with its parents on opening. Find the nearest existing
  // ancestor and check that a directory can be made in it; a symbolic link
  // to nothing on the way could not be created through.
  fs::path at = fs::absolute(trimmed, ec);
  while (!at.empty() && !fs::exists(at, ec)) {
    if (fs::is_symlink(fs::symlink_status(at, ec))) {
      return bad(
          absl::StrCat("cannot be created: '", at.string(), "' is a symbolic link to nothing"));
    }
    if (!at.has_parent_path() || at.parent_path() == at) break;
    at = at.parent_path();
  }
  if (!fs::is_directory(at, ec)) {
    return bad(absl::StrCat("cannot be created: '", at.string(), "' is not a directory"));
  }
  if (access(at.c_str(), W_OK | X_OK) != 0) {
    return bad(
        absl::StrCat("cannot be created in '", at.string(), "' (", std::strerror(errno), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DbBackup>> DbBackup::Open(const DbBackupConfig& config,
                                                         rocksdb::DB* db, Clock& clock,
                                                         Metrics* metrics) {
  if (config.interval <= absl::ZeroDuration() || config.keep < 1) {
    return absl::InvalidArgumentError("backup interval and number kept must be positive");
  }
  std::string identity;
  if (rocksdb::Status s = db->GetDbIdentity(identity); !s.ok()) {
    return FromRocksStatus(s, "reading the database's identity");
  }
  std::error_code ec;
  fs::create_directories(config.backup_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat("--backup_dir '", config.backup_dir,
                                                      "' cannot be created (", ec.message(), ")"));
  }
  // One process at a time, held until exit.
  absl::StatusOr<int> locked = LockForWriting(
      config.backup_dir, absl::StrCat("--backup_dir '", config.backup_dir,
                                      "' is in use by another process: give each service its "
                                      "own backup directory"));
  if (!locked.ok()) return locked.status();
  const int fd = *locked;
  const std::string read_lock_path = (fs::path(config.backup_dir) / kReadLockFile).string();
  const int read_fd = open(read_lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (read_fd < 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("--backup_dir: cannot open ", read_lock_path,
                                                      " (", std::strerror(errno), ")"));
  }
  auto fail = [&](absl::Status s) {
    close(read_fd);
    close(fd);
    return s;
  };
  rocksdb::BackupEngineOptions options(config.backup_dir);
  options.max_background_operations = 1;
  rocksdb::BackupEngine* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngine::Open(options, rocksdb::Env::Default(), &raw);
  std::unique_ptr<rocksdb::BackupEngine> engine(raw);
  if (!s.ok()) {
    return fail(FromRocksStatus(
        s, absl::StrCat("--backup_dir '", config.backup_dir, "': cannot open the backups")));
  }
  for (const BackupSummary& b : SummarizeAll(*engine)) {
    if (!b.damaged && b.service != config.service) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "--backup_dir '", config.backup_dir, "' holds backup ", b.id, " of ",
          b.service.empty() ? std::string("another program") : "the " + b.service + "'s database",
          ", not the ", config.service, "'s: give each service its own backup directory")));
    }
  }
  std::unique_ptr<DbBackup> backup(new DbBackup(config, db, clock, metrics, std::move(engine), fd,
                                                read_fd, std::move(identity)));
  return backup;
}

DbBackup::DbBackup(const DbBackupConfig& config, rocksdb::DB* db, Clock& clock, Metrics* metrics,
                   std::unique_ptr<rocksdb::BackupEngine> engine, int lock_fd, int read_lock_fd,
                   std::string identity)
    : config_(config),
      db_(db),
      clock_(clock),
      metrics_(metrics),
      engine_(std::move(engine)),
      lock_fd_(lock_fd),
      read_lock_fd_(read_lock_fd),
      identity_(std::move(identity)) {
  // This database's newest backup: another database's (one moved aside,
  // say) does not make this one's first backup wait.
  int64_t newest = std::numeric_limits<int64_t>::min();
  for (const BackupSummary& b : List()) {
    if (Mine(b)) newest = std::max(newest, b.unix_seconds);
  }
  const absl::Time now = clock_.Now();
  if (newest > absl::ToUnixSeconds(now) + 300) {
    SOJOURN_LOG(WARNING,
                "the newest backup in %s is stamped %s, after this clock (%s): was a clock "
                "wrong? The next backup is due an interval from now",
                config_.backup_dir,
                absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(newest),
                                 absl::UTCTimeZone()),
                absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", now, absl::UTCTimeZone()));
  }
  absl::MutexLock l(&mu_);
  next_due_ = newest == std::numeric_limits<int64_t>::min()
                  ? now
                  : std::min(absl::FromUnixSeconds(newest), now) + config_.interval;
  if (metrics_ != nullptr) DeclareBackupMetrics(*metrics_, config_.interval);
}

DbBackup::~DbBackup() {
  Stop();
  engine_.reset();
  close(read_lock_fd_);
  close(lock_fd_);
}

std::vector<BackupSummary> DbBackup::List() const { return SummarizeAll(*engine_); }

int DbBackup::OtherDatabaseBackups() const {
  int n = 0;
  for (const BackupSummary& b : List()) n += !b.damaged && !Mine(b);
  return n;
}

absl::Time DbBackup::NextDue() const {
  absl::MutexLock l(&mu_);
  return next_due_;
}

void DbBackup::ExportState() {
  if (metrics_ == nullptr) return;
  const std::vector<BackupSummary> all = List();
  const BackupSummary* newest = nullptr;
  int good = 0;
  for (const BackupSummary& b : all) {  // by id: the last one made of this database
    if (!Mine(b)) continue;
    ++good;
    newest = &b;
  }
  metrics_->Set("sojourn_backups_kept", "Good backups of the database in --backup_dir", {}, good);
  metrics_->Set("sojourn_backup_last_success_timestamp_seconds",
                "When the newest backup of the database in --backup_dir was taken (0 = none yet)",
                {}, newest == nullptr ? 0.0 : static_cast<double>(newest->unix_seconds));
  metrics_->Set("sojourn_backup_size_bytes",
                "Size of the newest backup (its files, shared ones included)", {},
                newest == nullptr ? 0.0 : static_cast<double>(newest->size_bytes));
}

bool DbBackup::Mine(const BackupSummary& b) const {
  return !b.damaged &&
         (b.db_identity == identity_ || (b.db_identity.empty() && b.db_path == config_.db_path));
}

std::vector<uint32_t> DbBackup::MineIds() const {
  std::vector<uint32_t> mine;
  for (const BackupSummary& b : List()) {
    if (Mine(b)) mine.push_back(b.id);
  }
  return mine;
}

uint64_t DbBackup::BytesOnlyIn(uint32_t id) const {
  std::vector<rocksdb::BackupInfo> infos;
  engine_->GetBackupInfo(&infos, /*include_file_details=*/true);
  std::map<std::string, int> users;
  for (const rocksdb::BackupInfo& info : infos) {
    for (const rocksdb::BackupFileInfo& f : info.file_details) ++users[f.relative_filename];
  }
  uint64_t bytes = 0;
  for (const rocksdb::BackupInfo& info : infos) {
    if (info.backup_id != id) continue;
    for (const rocksdb::BackupFileInfo& f : info.file_details) {
      if (users[f.relative_filename] == 1) bytes += f.size;
    }
  }
  return bytes;
}

bool DbBackup::LockOutReaders() {
  const absl::Time give_up = absl::Now() + config_.reader_wait;
  while (flock(read_lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    absl::MutexLock l(&mu_);
    if (stopping_ || absl::Now() >= give_up) return false;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
  }
  return true;
}

int DbBackup::Purge(int keep) {
  const std::vector<uint32_t> mine = MineIds();
  if (static_cast<int>(mine.size()) <= keep) return 0;
  // RocksDB leaves a read by another engine (sojourn-backup) beside a
  // deletion unspecified: wait for the readers, a minute at most and never
  // past a shutdown; the deletion waits for the next backup otherwise.
  if (!LockOutReaders()) {
    SOJOURN_LOG(WARNING,
                "old backups in %s not deleted now: a reader (sojourn-backup) held the "
                "directory, or the service is stopping; they go after the next backup",
                config_.backup_dir);
    return 0;
  }
  int deleted = 0;
  for (size_t i = 0; i + keep < mine.size(); ++i) {
    rocksdb::IOStatus s = engine_->DeleteBackup(mine[i]);
    if (s.ok()) {
      ++deleted;
    } else {
      SOJOURN_LOG(WARNING, "deleting backup %d in %s: %s", mine[i], config_.backup_dir,
                  s.ToString());
    }
  }
  flock(read_lock_fd_, LOCK_UN);
  return deleted;
}

absl::StatusOr<BackupSummary> DbBackup::BackupNow() {
  const absl::Time started = absl::Now();
  const int64_t at = absl::ToUnixSeconds(clock_.Now());
  auto fail = [&](absl::Status s) -> absl::Status {
    if (metrics_ != nullptr) {
      metrics_->Increment("sojourn_backups_total", "", {{"outcome", "failed"}});
    }
    return s;
  };
  // What this backup would add: the live files the newest backup does not
  // have and the memtables it flushes first. A shared table file is named
  // "shared_checksum/<number>_s<session>_<size>.sst" (RocksDB 7.8 leaves
  // file_number and file_type of a backup's files unset): matched on its
  // number and size.
  std::set<std::pair<uint64_t, uint64_t>> have;
  rocksdb::BackupInfo latest;
  if (engine_->GetLatestBackupInfo(&latest, /*include_file_details=*/true).ok()) {
    for (const rocksdb::BackupFileInfo& f : latest.file_details) {
      const std::string name = fs::path(f.relative_filename).filename().string();
      uint64_t number = 0;
      const size_t digits = name.find_first_not_of("0123456789");
      if (digits == 0 || digits == std::string::npos || !absl::EndsWith(name, ".sst") ||
          !absl::SimpleAtoi(name.substr(0, digits), &number)) {
        continue;
      }
      have.insert({number, f.size});
    }
  }
  rocksdb::LiveFilesStorageInfoOptions live_options;
  live_options.wal_size_for_flush = std::numeric_limits<uint64_t>::max();  // no flush here
  std::vector<rocksdb::LiveFileStorageInfo> live;
  uint64_t needed = 0;
  if (db_->GetLiveFilesStorageInfo(live_options, &live).ok()) {
    for (const rocksdb::LiveFileStorageInfo& f : live) {
      if (f.file_type == rocksdb::kTableFile && have.count({f.file_number, f.size})) continue;
      if (f.file_type == rocksdb::kWalFile) continue;  // flushed, not copied
      needed += f.size;
    }
  }
  uint64_t memtables = 0;
  if (db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &memtables)) needed += memtables;
  // On the database's own disk, the backup leaves the service its whole
  // reserve and as much again.
  const bool same_disk = SameDisk(config_.backup_dir, config_.db_path);
  const double reserve_mib =
      static_cast<double>(config_.min_free_disk_mb) * (same_disk ? 2.0 : 1.0);
  const double needed_mib = static_cast<double>(needed) / (1024.0 * 1024.0);
  auto fits = [&](double* free_mib) {
    *free_mib = FreeMib(config_.backup_dir);
    return *free_mib < 0 || *free_mib - needed_mib >= reserve_mib;
  };
  double free_mib = 0;
  if (!fits(&free_mib) && config_.keep > 1) {
    // Deleting the oldest backup early helps only by the files no other
    // backup shares.
    const std::vector<uint32_t> mine = MineIds();
    if (static_cast<int>(mine.size()) >= config_.keep && free_mib >= 0 &&
        free_mib + static_cast<double>(BytesOnlyIn(mine.front())) / (1024.0 * 1024.0) -
                needed_mib >=
            reserve_mib &&
        Purge(config_.keep - 1) > 0) {
      SOJOURN_LOG(WARNING, "deleted the oldest backup in %s early to make room for the next one",
                  config_.backup_dir);
      ExportState();
    }
  }
  if (!fits(&free_mib)) {
    return fail(absl::ResourceExhaustedError(absl::StrFormat(
        "backup of %s skipped: it needs about %.1f MiB and %.1f MiB are free on the disk of "
        "--backup_dir '%s', which must keep %.0f MiB free (--min_free_disk_mb%s): free some "
        "space there, or give the backups another disk",
        config_.db_path, needed_mib, free_mib, config_.backup_dir, reserve_mib,
        same_disk ? " twice over, as it is the database's disk" : "")));
  }
  rocksdb::CreateBackupOptions create;
  create.flush_before_backup = true;
  create.decrease_background_thread_cpu_priority = true;
  create.background_thread_cpu_priority = rocksdb::CpuPriority::kLow;
  rocksdb::BackupID id = 0;
  rocksdb::IOStatus s = engine_->CreateNewBackupWithMetadata(
      create, db_, EncodeMeta(config_.service, at, identity_, config_.db_path), &id);
  if (!s.ok()) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) {  // not a failure: the service is stopping
        return absl::CancelledError(
            absl::StrCat("backup of ", config_.db_path, " interrupted by shutdown"));
      }
    }
    return fail(FromRocksStatus(
        s, absl::StrCat("backup of ", config_.db_path, " into ", config_.backup_dir)));
  }
  Purge(config_.keep);
  rocksdb::BackupInfo info;
  BackupSummary made;
  made.id = id;
  made.unix_seconds = at;
  if (engine_->GetBackupInfo(id, &info).ok()) made = Summarize(info);
  made.new_bytes = needed;
  {
    absl::MutexLock l(&mu_);
    next_due_ = absl::FromUnixSeconds(at) + config_.interval;
  }
  if (metrics_ != nullptr) {
    metrics_->Increment("sojourn_backups_total", "", {{"outcome", "ok"}});
    metrics_->Set("sojourn_backup_duration_seconds", "How long the last backup took", {},
                  absl::ToDoubleSeconds(absl::Now() - started));
  }
  ExportState();
  SOJOURN_LOG(INFO, "backup %d of %s in %s: %s in %d files, about %s new, %.1f s; %d kept", made.id,
              config_.db_path, config_.backup_dir, Mib(made.size_bytes), made.files, Mib(needed),
              absl::ToDoubleSeconds(absl::Now() - started), MineIds().size());
  return made;
}

void DbBackup::Start() {
  absl::MutexLock stop(&stop_mu_);
  {
    absl::MutexLock l(&mu_);
    if (stopping_ || thread_.joinable()) return;
  }
  ExportState();
  thread_ = std::thread([this] { Run(); });
}

void DbBackup::Stop() {
  absl::MutexLock stop(&stop_mu_);
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (!thread_.joinable()) return;
  engine_->StopBackup();
  thread_.join();
}

void DbBackup::Run() {
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    if (clock_.Now() < next_due_) {
      clock_.SleepUntil(next_due_, &mu_, &stopping_);
      continue;
    }
    mu_.Unlock();
    absl::StatusOr<BackupSummary> made = BackupNow();
    mu_.Lock();
    ++attempts_;
    if (made.ok()) continue;
    if (absl::IsCancelled(made.status())) {
      SOJOURN_LOG(INFO, "%s; nothing of it was kept", made.status().message());
      continue;
    }
    const absl::Duration retry = std::min(config_.interval, absl::Hours(1));
    next_due_ = clock_.Now() + retry;
    SOJOURN_LOG(WARNING, "%s; next attempt in %s", made.status().ToString(),
                absl::FormatDuration(retry));
  }
}

bool DbBackup::AwaitAttempts(int n, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  const auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attempts_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

absl::StatusOr<std::unique_ptr<DbBackup>> StartDbBackup(const DbBackupConfig& config,
                                                        rocksdb::DB* db, Clock& clock,
                                                        Metrics* metrics) {
  if (config.backup_dir.empty()) return std::unique_ptr<DbBackup>();
  absl::StatusOr<std::unique_ptr<DbBackup>> backup = DbBackup::Open(config, db, clock, metrics);
  if (!backup.ok() &&
      (absl::IsInvalidArgument(backup.status()) || absl::IsFailedPrecondition(backup.status()))) {
    return backup.status();  // the configuration: the service does not start
  }
  if (!backup.ok()) {
    // The backup directory cannot be read (an I/O error, a description file
    // RocksDB cannot open): the service still serves its database, without
    // backups, and SojournBackupOverdue fires.
    SOJOURN_LOG(ERROR, "%s; the service runs WITHOUT backups until it is restarted",
                backup.status().ToString());
    if (metrics != nullptr) {
      DeclareBackupMetrics(*metrics, config.interval);
      metrics->Increment("sojourn_backups_total", "", {{"outcome", "failed"}});
      metrics->Set("sojourn_backup_last_success_timestamp_seconds",
                   "When the newest backup of the database in --backup_dir was taken (0 = none "
                   "yet)",
                   {}, 0);
    }
    return std::unique_ptr<DbBackup>();
  }
  const absl::Time due = (*backup)->NextDue();
  SOJOURN_LOG(INFO, "backups of %s in %s every %s, %d kept (%d there); next %s", config.db_path,
              config.backup_dir, absl::FormatDuration(config.interval), config.keep,
              (*backup)->List().size(),
              due <= clock.Now()
                  ? std::string("now")
                  : absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", due, absl::UTCTimeZone()));
  if (const int others = (*backup)->OtherDatabaseBackups(); others > 0) {
    SOJOURN_LOG(WARNING,
                "%s holds %d backup(s) of another database than %s (sojourn-backup list shows "
                "them): they are kept, not rotated; 'sojourn-backup delete' removes them",
                config.backup_dir, others, config.db_path);
  }
  (*backup)->Start();
  return backup;
}

absl::StatusOr<std::vector<BackupSummary>> ListBackups(const std::string& dir) {
  ReadLock lock(dir);
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  return SummarizeAll(**engine);
}

absl::Status VerifyBackup(const std::string& dir, uint32_t id) {
  ReadLock lock(dir);
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  for (const BackupSummary& b : SummarizeAll(**engine)) {
    if (b.id == id && b.damaged) return DamagedError(dir, id);
  }
  rocksdb::BackupInfo info;
  if (!(*engine)->GetBackupInfo(id, &info).ok()) {
    return absl::NotFoundError(absl::StrCat("no backup ", id, " in ", dir));
  }
  rocksdb::IOStatus s = (*engine)->VerifyBackup(id, /*verify_with_checksum=*/true);
  if (s.ok()) return absl::OkStatus();
  // A file that is missing, shorter or different is damage; anything else
  // (permissions, a failing disk) is reported as it is.
  if (s.IsCorruption() || s.IsNotFound() || s.IsPathNotFound()) {
    return absl::DataLossError(
        absl::StrCat("backup ", id, " in ", dir, " is damaged: ", s.ToString()));
  }
  return FromRocksStatus(s, absl::StrCat("verifying backup ", id, " in ", dir));
}

absl::StatusOr<BackupSummary> RestoreBackup(const std::string& dir, uint32_t id,
                                            const std::string& db_path) {
  std::error_code ec;
  const fs::path target = Normalized(db_path);
  const bool existed = fs::exists(target, ec);
  if (existed) {
    if (!fs::is_directory(target, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", db_path, "' exists and is not a directory"));
    }
    if (fs::directory_iterator(target, ec) != fs::directory_iterator()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", db_path, "' is not empty: restore into a new directory (nothing is replaced)"));
    }
  }
  if (Within(target, Normalized(dir))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", db_path, "' is inside the backup directory '", dir, "': restore outside it"));
  }
  ReadLock lock(dir);
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  const std::vector<BackupSummary> all = SummarizeAll(**engine);
  const BackupSummary* chosen = nullptr;
  for (const BackupSummary& b : all) {
    if (id == 0 || b.id == id) chosen = &b;  // id 0: the last, the newest
  }
  if (chosen == nullptr) {
    return absl::NotFoundError(id == 0 ? absl::StrCat("no backup in ", dir)
                                       : absl::StrCat("no backup ", id, " in ", dir));
  }
  if (chosen->damaged) {
    const BackupSummary* good = nullptr;
    for (const BackupSummary& b : all) {
      if (!b.damaged) good = &b;
    }
    absl::Status damaged = DamagedError(dir, chosen->id);
    return absl::DataLossError(absl::StrCat(
        damaged.message(),
        good == nullptr ? std::string("; no backup there is good")
                        : absl::StrCat("; --id ", good->id, " restores the newest good one")));
  }
  // The owner the files get when root restores: that of the nearest
  // directory that existed before (the target itself, when it did).
  fs::path reference = target;
  while (!fs::exists(reference, ec) && reference.has_parent_path() &&
         reference.parent_path() != reference) {
    reference = reference.parent_path();
  }
  struct stat owner;
  if (stat(reference.c_str(), &owner) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot stat '", reference.string(), "'"));
  }
  // The directories made on the way to the target, outermost first.
  std::vector<fs::path> made;
  for (fs::path p = target.parent_path();
       !fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p; p = p.parent_path()) {
    made.insert(made.begin(), p);
  }
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create '", target.parent_path().string(), "' (", ec.message(), ")"));
  }
  // Restored beside the target and renamed into place once it opens: a
  // failure leaves no half-restored database where the service would look.
  const fs::path staging =
      target.parent_path() / absl::StrCat(".", target.filename().string(), ".restoring-", getpid());
  fs::remove_all(staging, ec);
  auto undo = [&](absl::Status s) -> absl::Status {
    // A failed restore returns at its first failed file while RocksDB's copy
    // thread may still write the others (seen under AddressSanitizer): the
    // engine's destructor joins it before the staging directory goes.
    engine->reset();
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    for (auto it = made.rbegin(); it != made.rend(); ++it) fs::remove(*it, ignored);  // if empty
    return s;
  };
  rocksdb::IOStatus restored = (*engine)->RestoreDBFromBackup(rocksdb::RestoreOptions(), chosen->id,
                                                              staging.string(), staging.string());
  if (!restored.ok()) {
    return undo(FromRocksStatus(
        restored, absl::StrCat("restoring backup ", chosen->id, " of ", dir, " into ", db_path)));
  }
  // The database it was: the service keeps rotating this database's backups
  // (RocksDB would give the restored files a new identity at their first
  // opening, and the old backups would count as another database's).
  if (!chosen->db_identity.empty()) {
    if (absl::Status s = WriteFileDurably(staging / "IDENTITY", chosen->db_identity); !s.ok()) {
      return undo(s);
    }
  }
  {  // The restored database must open, as the service will open it.
    rocksdb::DB* raw = nullptr;
    rocksdb::Status opened =
        rocksdb::DB::OpenForReadOnly(rocksdb::Options(), staging.string(), &raw);
    std::unique_ptr<rocksdb::DB> db(raw);
    if (!opened.ok()) {
      return undo(FromRocksStatus(opened, absl::StrCat("the database restored from backup ",
                                                       chosen->id, " does not open")));
    }
  }
  if (geteuid() == 0) {
    if (absl::Status s = ChownTree(staging, owner.st_uid, owner.st_gid); !s.ok()) return undo(s);
    for (const fs::path& p : made) {
      if (lchown(p.c_str(), owner.st_uid, owner.st_gid) != 0) {
        return undo(absl::InternalError(
            absl::StrCat("cannot give ", p.string(), " its owner (", std::strerror(errno), ")")));
      }
    }
  }
  // rename(2) replaces an empty directory.
  if (rename(staging.c_str(), target.c_str()) != 0) {
    return undo(absl::InternalError(absl::StrCat("cannot move the restored database to ", db_path,
                                                 " (", std::strerror(errno), ")")));
  }
  SyncDirectory(target.parent_path());
  return *chosen;
}

absl::Status DeleteBackup(const std::string& dir, uint32_t id) {
  if (absl::Status s = CheckHoldsBackups(dir); !s.ok()) return s;
  absl::StatusOr<int> locked = LockForWriting(
      dir,
      absl::StrCat("a service is backing up into ", dir, ": stop it before deleting a backup"));
  if (!locked.ok()) return locked.status();
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{*locked};
  ReadLock readers(dir, /*exclusive=*/true);  // no reader is mid-way
  rocksdb::BackupEngine* raw = nullptr;
  rocksdb::IOStatus s =
      rocksdb::BackupEngine::Open(rocksdb::BackupEngineOptions(dir), rocksdb::Env::Default(), &raw);
  std::unique_ptr<rocksdb::BackupEngine> engine(raw);
  if (!s.ok()) return FromRocksStatus(s, absl::StrCat("cannot open the backups in ", dir));
  bool known = false;
  for (const BackupSummary& b : SummarizeAll(*engine)) known = known || b.id == id;
  if (!known) return absl::NotFoundError(absl::StrCat("no backup ", id, " in ", dir));
  return FromRocksStatus(engine->DeleteBackup(id),
                         absl::StrCat("deleting backup ", id, " in ", dir));
}

}  // namespace sojourn
