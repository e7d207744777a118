// The backup flags of the three services with a RocksDB database (statemgr,
// predictor, broker; common/db_backup.h), defined once; each binary's --help
// lists them (common/flags_usage.cc).
#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/cli_util.h"
#include "common/db_backup.h"

ABSL_FLAG(std::string, backup_dir, "",
          "directory of online backups of this service's database (RocksDB BackupEngine: "
          "consistent, incremental, checksummed; created if missing, outside the database; "
          "restore with sojourn-backup). Empty = no backups");
ABSL_FLAG(int64_t, backup_interval_seconds, 86400,
          "with --backup_dir: a backup this long after the newest one there (at start-up when "
          "there is none), then at this interval; 60 to 31622400 (a year)");
ABSL_FLAG(int64_t, backup_keep, 7, "with --backup_dir: how many backups are kept (newest)");

namespace sojourn {

absl::StatusOr<DbBackupConfig> DbBackupConfigFromFlags(absl::string_view service,
                                                       const std::string& db_path,
                                                       absl::string_view db_flag,
                                                       int64_t min_free_disk_mb) {
  DbBackupConfig config;
  config.service = std::string(service);
  config.backup_dir = absl::GetFlag(FLAGS_backup_dir);
  // Recorded with each backup: where it came from, wherever the tool runs.
  std::error_code ec;
  config.db_path = db_path.empty() ? db_path : std::filesystem::absolute(db_path, ec).string();
  config.min_free_disk_mb = min_free_disk_mb;
  const int64_t interval = absl::GetFlag(FLAGS_backup_interval_seconds);
  const int64_t keep = absl::GetFlag(FLAGS_backup_keep);
  if (absl::Status s = IntFlagInRange("--backup_interval_seconds", interval, 60, 366 * 86400,
                                      "(a minute to a year)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = IntFlagInRange("--backup_keep", keep, 1, 1000); !s.ok()) return s;
  if (!config.backup_dir.empty() && db_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backup_dir needs a database to back up, and ", db_flag, " is empty"));
  }
  if (absl::Status s = CheckBackupDirectory(config.backup_dir, db_path, db_flag); !s.ok()) {
    return s;
  }
  config.interval = absl::Seconds(interval);
  config.keep = static_cast<int>(keep);
  return config;
}

}  // namespace sojourn
