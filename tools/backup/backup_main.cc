// sojourn-backup: the online backups a service keeps with --backup_dir
// (common/db_backup.h): list them, verify their checksums, restore one into a
// new database directory, delete one. list, verify and restore only read the
// backup directory, and the service may keep backing up meanwhile.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/build_info.h"
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
    "  list      the backups, oldest first: id, status, time (UTC), size, files,\n"
    "            service, database they were taken of  [--json]\n"
    "  verify    reads every file of every backup [--id N: of backup N] and checks\n"
    "            its size and checksum; exit 1 when one is damaged\n"
    "  restore   --db-path DIR [--id N]: restores backup N (default: the newest;\n"
    "            refused when the newest is damaged) into DIR, which must not\n"
    "            exist or be empty (nothing is replaced) and must lie outside the\n"
    "            backup directory; it is restored beside DIR, checked to open,\n"
    "            then renamed into place (a failure leaves nothing). The database\n"
    "            keeps the identity it had. Run as root, the files get the owner\n"
    "            of DIR (or of its nearest existing parent, for a new DIR). Then\n"
    "            start the service with --db_path / --histdb_path / --data_dir DIR.\n"
    "  delete    --id N: deletes backup N (e.g. a damaged one), and RocksDB the\n"
    "            leftovers of other damaged ones; only while no service is\n"
    "            backing up into the directory\n"
    "\n"
    "Exit codes: 0 done, 1 a backup is damaged or an operation failed, 2 bad usage\n"
    "or a refused request (no backups there, no such backup, DIR not empty).\n"
    "'sojourn-backup --version' names the build.\n";

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
      if (b.damaged) {
        out["backups"].push_back({{"id", b.id}, {"damaged", true}});
        continue;
      }
      out["backups"].push_back({{"id", b.id},
                                {"damaged", false},
                                {"unix_seconds", b.unix_seconds},
                                {"time_utc", Utc(b.unix_seconds)},
                                {"size_bytes", b.size_bytes},
                                {"files", b.files},
                                {"service", b.service},
                                {"db_path", b.db_path},
                                {"db_identity", b.db_identity}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (all->empty()) {
    std::printf("no backups in %s yet\n", dir.c_str());
    return 0;
  }
  std::printf("%4s  %-7s  %-19s  %12s  %6s  %-9s  %s\n", "ID", "STATUS", "TIME (UTC)", "SIZE",
              "FILES", "SERVICE", "DATABASE");
  for (const sojourn::BackupSummary& b : *all) {
    if (b.damaged) {
      std::printf("%4u  %-7s  (RocksDB cannot read its description meta/%u or one of its files)\n",
                  b.id, "DAMAGED", b.id);
      continue;
    }
    std::printf("%4u  %-7s  %-19s  %12s  %6u  %-9s  %s\n", b.id, "ok", Utc(b.unix_seconds).c_str(),
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
  if (ids.size() == 1) {
    if (absl::Status s = sojourn::VerifyBackup(dir, ids[0]); !s.ok()) return Fail(s);
    std::printf("backup %u: ok\n", ids[0]);
    return 0;
  }
  // All of them, each on its own line; one summary line on stderr.
  std::vector<uint32_t> failed;
  for (uint32_t i : ids) {
    absl::Status s = sojourn::VerifyBackup(dir, i);
    if (s.ok()) {
      std::printf("backup %u: ok\n", i);
    } else if (absl::IsNotFound(s)) {  // listed, then rotated out by the service
      std::printf("backup %u: deleted meanwhile (the service rotated it out)\n", i);
    } else {
      std::printf("backup %u: %s\n", i, std::string(s.message()).c_str());
      failed.push_back(i);
    }
  }
  if (failed.empty()) return 0;
  std::fprintf(stderr, "sojourn-backup: %zu of %zu backups in %s failed verification: %s\n",
               failed.size(), ids.size(), dir.c_str(), absl::StrJoin(failed, ", ").c_str());
  return 1;
}

int Restore(const std::string& dir, int64_t id, const std::string& db_path) {
  absl::StatusOr<sojourn::BackupSummary> b =
      sojourn::RestoreBackup(dir, static_cast<uint32_t>(id), db_path);
  if (!b.ok()) return Fail(b.status());
  std::printf("restored backup %u (taken %s UTC of the %s's database %s) into %s\n", b->id,
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
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::fputs(sojourn::VersionText("sojourn-backup").c_str(), stdout);
    return 0;
  }
  const std::string command = argv[1];
  if (command != "list" && command != "verify" && command != "restore" && command != "delete") {
    sojourn::DieUsage("sojourn-backup", absl::StrCat("unknown command '", command,
                                                     "' (list, verify, restore, delete)"));
  }
  const std::string program = "sojourn-backup " + command;
  const sojourn::CommandLine cl = sojourn::ParseCommandLine(
      argc - 2, argv + 2, program, kUsage,
      command == "list"      ? std::vector<std::string>{"backup-dir"}
      : command == "restore" ? std::vector<std::string>{"backup-dir", "id", "db-path"}
                             : std::vector<std::string>{"backup-dir", "id"},
      command == "list" ? std::vector<std::string>{"json"} : std::vector<std::string>{});
  const std::string dir = cl.Get("backup-dir");
  if (dir.empty()) sojourn::DieUsage(program, "--backup-dir is required");
  const int64_t id = cl.GetIntInRange("id", 0, 1, 0xffffffffLL);
  int rc = 0;
  if (command == "list") {
    rc = List(dir, cl.Flag("json"));
  } else if (command == "verify") {
    rc = Verify(dir, id);
  } else if (command == "delete") {
    if (id == 0) sojourn::DieUsage(program, "--id is required");
    if (absl::Status s = sojourn::DeleteBackup(dir, static_cast<uint32_t>(id)); !s.ok()) {
      rc = Fail(s);
    } else {
      std::printf("deleted backup %lld of %s\n", static_cast<long long>(id), dir.c_str());
    }
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
