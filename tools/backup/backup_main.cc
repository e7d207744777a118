// sojourn-backup: the online backups a service keeps with --backup_dir
// (common/db_backup.h): list them, verify their checksums, restore one into a
// new database directory. It reads the backup directory only; the service
// may keep appending to it meanwhile.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cli_util.h"
#include "common/db_backup.h"
#include "nlohmann/json.hpp"

namespace {

constexpr char kUsage[] =
    "usage: sojourn-backup COMMAND --backup-dir DIR [options]\n"
    "\n"
    "The online backups a state manager, predictor or broker keeps with --backup_dir\n"
    "(RocksDB BackupEngine: consistent copies taken while the service runs,\n"
    "incremental, checksummed). A running service may keep adding backups meanwhile.\n"
    "\n"
    "commands:\n"
    "  list      the backups, oldest first: id, time (UTC), size, files, service,\n"
    "            database they were taken of  [--json]\n"
    "  verify    reads every file of the backups and checks its size and checksum\n"
    "            [--id N: only backup N]; exit 1 naming the first damaged backup\n"
    "  restore   --db-path DIR [--id N]: restores backup N (default: the newest)\n"
    "            into DIR, which must not exist or be empty (nothing is replaced),\n"
    "            and checks that the database opens. Then start the service with\n"
    "            --db_path / --histdb_path / --data_dir DIR.\n"
    "\n"
    "Exit codes: 0 done, 1 a backup is damaged or the restore failed, 2 bad usage\n"
    "or a refused request (no backups there, no such backup, DIR not empty).\n";

std::string Utc(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

// 2 for what the user can change (usage, a refused request), 1 for damage or
// an I/O failure.
int Fail(const absl::Status& s) {
  std::fprintf(stderr, "sojourn-backup: %s\n", std::string(s.message()).c_str());
  const bool refused = absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
                       absl::IsFailedPrecondition(s) || absl::IsAlreadyExists(s);
  return refused ? sojourn::kExitUsage : 1;
}

int List(const std::string& dir, bool json) {
  absl::StatusOr<std::vector<sojourn::BackupSummary>> all = sojourn::ListBackups(dir);
  if (!all.ok()) return Fail(all.status());
  if (json) {
    nlohmann::json out = {{"backup_dir", dir}, {"backups", nlohmann::json::array()}};
    for (const sojourn::BackupSummary& b : *all) {
      out["backups"].push_back({{"id", b.id},
                                {"unix_seconds", b.unix_seconds},
                                {"time_utc", Utc(b.unix_seconds)},
                                {"size_bytes", b.size_bytes},
                                {"files", b.files},
                                {"service", b.service},
                                {"db_path", b.db_path}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (all->empty()) {
    std::printf("no backups in %s yet\n", dir.c_str());
    return 0;
  }
  std::printf("%4s  %-19s  %12s  %6s  %-9s  %s\n", "ID", "TIME (UTC)", "SIZE", "FILES", "SERVICE",
              "DATABASE");
  for (const sojourn::BackupSummary& b : *all) {
    std::printf("%4u  %-19s  %12s  %6u  %-9s  %s\n", b.id, Utc(b.unix_seconds).c_str(),
                absl::StrFormat("%.1f MiB", static_cast<double>(b.size_bytes) / 1048576.0).c_str(),
                b.files, b.service.empty() ? "?" : b.service.c_str(), b.db_path.c_str());
  }
  return 0;
}

int Verify(const std::string& dir, int64_t id) {
  std::vector<uint32_t> ids;
  if (id > 0) {
    ids.push_back(static_cast<uint32_t>(id));
  } else {
    absl::StatusOr<std::vector<sojourn::BackupSummary>> all = sojourn::ListBackups(dir);
    if (!all.ok()) return Fail(all.status());
    if (all->empty()) return Fail(absl::NotFoundError(absl::StrCat("no backups in ", dir)));
    for (const sojourn::BackupSummary& b : *all) ids.push_back(b.id);
  }
  for (uint32_t i : ids) {
    if (absl::Status s = sojourn::VerifyBackup(dir, i); !s.ok()) return Fail(s);
    std::printf("backup %u: ok\n", i);
  }
  return 0;
}

int Restore(const std::string& dir, int64_t id, const std::string& db_path) {
  absl::StatusOr<sojourn::BackupSummary> b =
      sojourn::RestoreBackup(dir, static_cast<uint32_t>(id), db_path);
  if (!b.ok()) return Fail(b.status());
  std::printf("restored backup %u (%s UTC, %s's database %s) into %s\n", b->id,
              Utc(b->unix_seconds).c_str(), b->service.empty() ? "?" : b->service.c_str(),
              b->db_path.c_str(), db_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? sojourn::kExitUsage : 0;
  }
  const std::string command = argv[1];
  if (command != "list" && command != "verify" && command != "restore") {
    sojourn::DieUsage("sojourn-backup",
                      absl::StrCat("unknown command '", command, "' (list, verify, restore)"));
  }
  const std::string program = "sojourn-backup " + command;
  const sojourn::CommandLine cl = sojourn::ParseCommandLine(
      argc - 2, argv + 2, program, kUsage,
      command == "list"     ? std::vector<std::string>{"backup-dir"}
      : command == "verify" ? std::vector<std::string>{"backup-dir", "id"}
                            : std::vector<std::string>{"backup-dir", "id", "db-path"},
      command == "list" ? std::vector<std::string>{"json"} : std::vector<std::string>{});
  const std::string dir = cl.Get("backup-dir");
  if (dir.empty()) sojourn::DieUsage(program, "--backup-dir is required");
  const int64_t id = cl.GetIntInRange("id", 0, 1, 0xffffffffLL);
  int rc = 0;
  if (command == "list") {
    rc = List(dir, cl.Flag("json"));
  } else if (command == "verify") {
    rc = Verify(dir, id);
  } else {
    const std::string db_path = cl.Get("db-path");
    if (db_path.empty()) sojourn::DieUsage(program, "--db-path is required");
    rc = Restore(dir, id, db_path);
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "sojourn-backup: cannot write to standard output: %s\n",
                 std::strerror(errno));
    return 1;
  }
  return rc;
}
