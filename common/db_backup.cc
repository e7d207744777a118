#include "common/db_backup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
constexpr char kLockFile[] = "sojourn-backup.lock";

// app_metadata of a backup: "sojourn-backup-v1\nservice=...\nunix_seconds=...\ndb_path=...".
std::string EncodeMeta(absl::string_view service, int64_t unix_seconds, absl::string_view db_path) {
  return absl::StrCat(kMetaFormat, "\nservice=", service, "\nunix_seconds=", unix_seconds,
                      "\ndb_path=", db_path);
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
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(lines[i], '=');
    if (kv.first == "service") s.service = std::string(kv.second);
    if (kv.first == "db_path") {
      // The path may itself hold '='.
      s.db_path = std::string(lines[i].substr(std::string("db_path=").size()));
    }
    int64_t t = 0;
    if (kv.first == "unix_seconds" && absl::SimpleAtoi(kv.second, &t)) s.unix_seconds = t;
  }
  return s;
}

std::vector<BackupSummary> SummarizeAll(const rocksdb::BackupEngineReadOnlyBase& engine) {
  std::vector<rocksdb::BackupInfo> infos;
  engine.GetBackupInfo(&infos);
  std::vector<BackupSummary> out;
  out.reserve(infos.size());
  for (const rocksdb::BackupInfo& info : infos) out.push_back(Summarize(info));
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

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> OpenReadOnly(
    const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::path(dir) / "meta", ec)) {
    return absl::NotFoundError(
        absl::StrCat("'", dir, "' holds no backups (no meta/ directory of RocksDB's backups)"));
  }
  rocksdb::BackupEngineReadOnly* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngineReadOnly::Open(rocksdb::BackupEngineOptions(dir),
                                                            rocksdb::Env::Default(), &raw);
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine(raw);
  if (!s.ok()) return FromRocksStatus(s, absl::StrCat("cannot read the backups in ", dir));
  return engine;
}

}  // namespace

absl::Status CheckBackupDirectory(const std::string& backup_dir, const std::string& db_path,
                                  absl::string_view db_flag) {
  if (backup_dir.empty()) return absl::OkStatus();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backup_dir '", Excerpt(backup_dir), "' ", why));
  };
  std::error_code ec;
  const fs::path backup = fs::weakly_canonical(fs::absolute(backup_dir, ec), ec);
  const fs::path db = fs::weakly_canonical(fs::absolute(db_path, ec), ec);
  auto within = [](const fs::path& inner, const fs::path& outer) {
    auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
    return o == outer.end();  // every component of outer starts inner
  };
  if (!db_path.empty() && within(backup, db)) {
    return bad(absl::StrCat("is inside the database (", db_flag, " '", Excerpt(db_path),
                            "'): a backup must live outside it"));
  }
  if (!db_path.empty() && within(db, backup)) {
    return bad(absl::StrCat("holds the database (", db_flag, " '", Excerpt(db_path),
                            "'): give the backups a directory of their own"));
  }
  const fs::file_status st = fs::status(backup_dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return bad("exists and is not a directory");
    if (access(backup_dir.c_str(), R_OK | W_OK | X_OK) != 0) {
      return bad(absl::StrCat("is not writable (", std::strerror(errno), ")"));
    }
    if (fs::is_directory(fs::path(backup_dir) / "meta", ec)) return absl::OkStatus();
    fs::directory_iterator it(backup_dir, ec);
    if (ec) return bad(absl::StrCat("cannot be listed (", ec.message(), ")"));
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == kLockFile) continue;
      return bad(absl::StrCat("holds other files but no backups (no meta/ directory, e.g. '",
                              it->path().filename().string(),
                              "'): give an empty or new directory"));
    }
    return absl::OkStatus();
  }
  // Missing: created with its parents on opening. Find the nearest existing
  // ancestor and check that a directory can be made in it.
  fs::path at = fs::absolute(backup_dir, ec).parent_path();
  while (!at.empty() && !fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) {
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
  std::error_code ec;
  fs::create_directories(config.backup_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat("--backup_dir '", config.backup_dir,
                                                      "' cannot be created (", ec.message(), ")"));
  }
  // Two BackupEngines appending to one directory may destroy it (RocksDB's
  // backup_engine.h): one process at a time, held until exit.
  const std::string lock_path = (fs::path(config.backup_dir) / kLockFile).string();
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--backup_dir: cannot open ", lock_path, " (", std::strerror(errno), ")"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("--backup_dir '", config.backup_dir, "' is in use by another process (",
                     std::strerror(err), "): give each service its own backup directory"));
  }
  rocksdb::BackupEngineOptions options(config.backup_dir);
  options.max_background_operations = 1;
  rocksdb::BackupEngine* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngine::Open(options, rocksdb::Env::Default(), &raw);
  std::unique_ptr<rocksdb::BackupEngine> engine(raw);
  if (!s.ok()) {
    close(fd);
    return FromRocksStatus(
        s, absl::StrCat("--backup_dir '", config.backup_dir, "': cannot open the backups"));
  }
  for (const BackupSummary& b : SummarizeAll(*engine)) {
    if (b.service != config.service) {
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          "--backup_dir '", config.backup_dir, "' holds backup ", b.id, " of ",
          b.service.empty() ? std::string("another program") : "the " + b.service + "'s database",
          ", not the ", config.service, "'s: give each service its own backup directory"));
    }
  }
  std::unique_ptr<DbBackup> backup(new DbBackup(config, db, clock, metrics, std::move(engine), fd));
  return backup;
}

DbBackup::DbBackup(const DbBackupConfig& config, rocksdb::DB* db, Clock& clock, Metrics* metrics,
                   std::unique_ptr<rocksdb::BackupEngine> engine, int lock_fd)
    : config_(config),
      db_(db),
      clock_(clock),
      metrics_(metrics),
      engine_(std::move(engine)),
      lock_fd_(lock_fd) {
  const std::vector<BackupSummary> all = List();
  absl::MutexLock l(&mu_);
  next_due_ = all.empty() ? clock_.Now()
                          : absl::FromUnixSeconds(all.back().unix_seconds) + config_.interval;
  if (metrics_ != nullptr) {
    for (const char* outcome : {"ok", "failed"}) {
      metrics_->DeclareCounter("sojourn_backups_total",
                               "Backups of the service's database attempted, by outcome",
                               {{"outcome", outcome}});
    }
    metrics_->Set("sojourn_backup_interval_seconds",
                  "Time between two backups (--backup_interval_seconds)", {},
                  absl::ToDoubleSeconds(config_.interval));
  }
}

DbBackup::~DbBackup() {
  Stop();
  engine_.reset();
  close(lock_fd_);
}

std::vector<BackupSummary> DbBackup::List() const { return SummarizeAll(*engine_); }

absl::Time DbBackup::NextDue() const {
  absl::MutexLock l(&mu_);
  return next_due_;
}

void DbBackup::ExportState() {
  if (metrics_ == nullptr) return;
  const std::vector<BackupSummary> all = List();
  metrics_->Set("sojourn_backups_kept", "Backups in --backup_dir", {},
                static_cast<double>(all.size()));
  metrics_->Set("sojourn_backup_last_success_timestamp_seconds",
                "When the newest backup in --backup_dir was taken (0 = none yet)", {},
                all.empty() ? 0.0 : static_cast<double>(all.back().unix_seconds));
  metrics_->Set("sojourn_backup_size_bytes",
                "Size of the newest backup (its files, shared ones included)", {},
                all.empty() ? 0.0 : static_cast<double>(all.back().size_bytes));
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
  const double free_mib = FreeMib(config_.backup_dir);
  const double needed_mib = static_cast<double>(needed) / (1024.0 * 1024.0);
  if (free_mib >= 0 && free_mib - needed_mib < static_cast<double>(config_.min_free_disk_mb)) {
    return fail(absl::ResourceExhaustedError(absl::StrFormat(
        "backup of %s skipped: it needs about %.1f MiB and %.1f MiB are free on the disk of "
        "--backup_dir '%s', which would leave less than the %d MiB kept free "
        "(--min_free_disk_mb): free some space or lower --backup_keep",
        config_.db_path, needed_mib, free_mib, config_.backup_dir, config_.min_free_disk_mb)));
  }
  rocksdb::CreateBackupOptions create;
  create.flush_before_backup = true;
  create.decrease_background_thread_cpu_priority = true;
  create.background_thread_cpu_priority = rocksdb::CpuPriority::kLow;
  rocksdb::BackupID id = 0;
  rocksdb::IOStatus s = engine_->CreateNewBackupWithMetadata(
      create, db_, EncodeMeta(config_.service, at, config_.db_path), &id);
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
  absl::Status purged =
      FromRocksStatus(engine_->PurgeOldBackups(static_cast<uint32_t>(config_.keep)),
                      absl::StrCat("deleting old backups in ", config_.backup_dir));
  if (!purged.ok()) SOJOURN_LOG(WARNING, "%s", purged.ToString());
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
  SOJOURN_LOG(INFO, "backup %d of %s in %s: %s in %d files, %s new, %.1f s; %d kept", made.id,
              config_.db_path, config_.backup_dir, Mib(made.size_bytes), made.files, Mib(needed),
              absl::ToDoubleSeconds(absl::Now() - started), List().size());
  return made;
}

void DbBackup::Start() {
  ExportState();
  thread_ = std::thread([this] { Run(); });
}

void DbBackup::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  engine_->StopBackup();
  if (thread_.joinable()) thread_.join();
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
    if (made.ok() || stopping_) continue;
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
  if (!backup.ok()) return backup.status();
  const absl::Time due = (*backup)->NextDue();
  SOJOURN_LOG(INFO, "backups of %s in %s every %s, %d kept (%d there); next %s", config.db_path,
              config.backup_dir, absl::FormatDuration(config.interval), config.keep,
              (*backup)->List().size(),
              due <= clock.Now()
                  ? std::string("now")
                  : absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", due, absl::UTCTimeZone()));
  (*backup)->Start();
  return backup;
}

absl::StatusOr<std::vector<BackupSummary>> ListBackups(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  return SummarizeAll(**engine);
}

absl::Status VerifyBackup(const std::string& dir, uint32_t id) {
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  rocksdb::BackupInfo info;
  if (!(*engine)->GetBackupInfo(id, &info).ok()) {
    return absl::NotFoundError(absl::StrCat("no backup ", id, " in ", dir));
  }
  rocksdb::IOStatus s = (*engine)->VerifyBackup(id, /*verify_with_checksum=*/true);
  if (s.ok()) return absl::OkStatus();
  // A file that is missing, shorter or different is damage, whatever RocksDB
  // calls it.
  return absl::DataLossError(
      absl::StrCat("backup ", id, " in ", dir, " is damaged: ", s.ToString()));
}

absl::StatusOr<BackupSummary> RestoreBackup(const std::string& dir, uint32_t id,
                                            const std::string& db_path) {
  std::error_code ec;
  if (fs::exists(db_path, ec)) {
    if (!fs::is_directory(db_path, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", db_path, "' exists and is not a directory"));
    }
    if (fs::directory_iterator(db_path, ec) != fs::directory_iterator()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", db_path, "' is not empty: restore into a new directory (nothing is replaced)"));
    }
  }
  absl::StatusOr<std::unique_ptr<rocksdb::BackupEngineReadOnly>> engine = OpenReadOnly(dir);
  if (!engine.ok()) return engine.status();
  rocksdb::BackupInfo info;
  rocksdb::Status found =
      id == 0 ? (*engine)->GetLatestBackupInfo(&info) : (*engine)->GetBackupInfo(id, &info);
  if (!found.ok()) {
    return absl::NotFoundError(id == 0 ? absl::StrCat("no backup in ", dir)
                                       : absl::StrCat("no backup ", id, " in ", dir));
  }
  fs::create_directories(db_path, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create '", db_path, "' (", ec.message(), ")"));
  }
  rocksdb::IOStatus s =
      (*engine)->RestoreDBFromBackup(rocksdb::RestoreOptions(), info.backup_id, db_path, db_path);
  if (!s.ok()) {
    return FromRocksStatus(
        s, absl::StrCat("restoring backup ", info.backup_id, " of ", dir, " into ", db_path));
  }
  // The restored database must open, as the service will open it.
  rocksdb::DB* raw = nullptr;
  rocksdb::Status opened = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), db_path, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);
  if (!opened.ok()) {
    return FromRocksStatus(opened,
                           absl::StrCat("the database restored into ", db_path, " does not open"));
  }
  return Summarize(info);
}

}  // namespace sojourn
