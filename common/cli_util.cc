#include "common/cli_util.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sojourn {

void DieUsage(absl::string_view program, absl::string_view reason) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
               static_cast<int>(reason.size()), reason.data());
  std::exit(kExitUsage);
}

namespace {

// absl::ParseDuration, which knows no days, after a leading count of days:
// "30d", "1.5d", "1d12h" ("d" is no unit of absl's, so the first 'd' ends
// the days).
bool ParseWithDays(absl::string_view text, absl::Duration* d) {
  const size_t pos = text.find('d');
  if (pos == absl::string_view::npos) return absl::ParseDuration(text, d);
  // A plain count: no sign (absl refuses "-0h12m" too) and no blank.
  const absl::string_view count = text.substr(0, pos);
  if (count.empty() || !(absl::ascii_isdigit(count[0]) || count[0] == '.')) return false;
  double days = 0;
  if (!absl::SimpleAtod(count, &days) || !std::isfinite(days)) return false;
  absl::Duration rest = absl::ZeroDuration();
  const absl::string_view tail = text.substr(pos + 1);
  if (!tail.empty() && (tail[0] == '-' || tail[0] == '+' || !absl::ParseDuration(tail, &rest))) {
    return false;
  }
  *d = days * absl::Hours(24) + rest;
  return true;
}

}  // namespace

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    if (!std::isfinite(seconds)) {
      return absl::InvalidArgumentError(
          absl::StrCat("duration must be a finite number of seconds, got '", text, "'"));
    }
    d = absl::Seconds(seconds);
  } else if (!ParseWithDays(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse duration '", text, "' (use e.g. 2h, 90m, 45s, 30d)"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration must be positive, got '", text, "'"));
  }
  // absl saturates overflowing durations ("1e30", "99999999999h") to infinity.
  if (d >= kMaxDuration) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration must be shorter than 100 years, got '", text, "'"));
  }
  return d;
}

absl::StatusOr<int64_t> ParseIntInRange(absl::string_view flag, absl::string_view text, int64_t lo,
                                        int64_t hi) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " wants an integer in [", lo, ", ", hi, "], got '", text, "'"));
  }
  return v;
}

absl::Status CheckWritableFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": it is a directory"));
  }
  const bool existed = fs::exists(path, ec);
  {
    std::ofstream probe(path, std::ios::app);
    if (!probe) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, " (", std::strerror(errno), ")"));
    }
  }
  if (!existed) fs::remove(path, ec);
  return absl::OkStatus();
}

std::string DatabaseOpenError(absl::string_view flag, const std::string& path,
                              const absl::Status& status) {
  return absl::StrCat(flag, " ", path, ": ", status.ToString(),
                      absl::IsDataLoss(status)
                          ? " (the database is damaged: restore it from a backup, e.g. "
                            "'sojourn-backup restore --backup-dir DIR --db-path NEW' for one "
                            "taken with --backup_dir, or move the directory aside to start "
                            "with an empty one)"
                          : "");
}

absl::Status WriteTextFile(const std::string& path, absl::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, " (", std::strerror(errno), ")"));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = written ? 0 : errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (!written || err != 0) {
    return absl::InvalidArgumentError(absl::StrCat("write error on ", path, " (",
                                                   std::strerror(err != 0 ? err : EIO), ")"));
  }
  return absl::OkStatus();
}

absl::Status IntFlagInRange(absl::string_view flag, int64_t value, int64_t lo, int64_t hi,
                            absl::string_view note) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  const std::string range = hi == std::numeric_limits<int64_t>::max()
                                ? absl::StrCat(" must be >= ", lo)
                                : absl::StrCat(" must be in [", lo, ", ", hi, "]");
  return absl::InvalidArgumentError(
      absl::StrCat(flag, range, note.empty() ? "" : " ", note, ", got ", value));
}

absl::Status NumberFlagInRange(absl::string_view flag, double value, double lo, double hi,
                               absl::string_view note) {
  if (value >= lo && value <= hi) return absl::OkStatus();  // false for NaN
  return absl::InvalidArgumentError(absl::StrCat(flag, " must be a number in [", lo, ", ", hi,
                                                 "]", note.empty() ? "" : " ", note, ", got ",
                                                 value));
}

absl::Status ValidateThresholdFlags(double th1, double th2) {
  if (!(th1 > 0 && th1 <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--th1 must be a number in (0, 1], got ", th1));
  }
  if (!(th2 >= th1 && th2 <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--th2 must be a number in [--th1, 1] = [", th1, ", 1], got ", th2));
  }
  return absl::OkStatus();
}

absl::Status CheckDatabaseDirectory(const std::string& path, absl::string_view flag) {
  namespace fs = std::filesystem;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' ", why));
  };
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " is empty: give the directory of the RocksDB database"));
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return bad("exists and is not a directory");
    if (access(path.c_str(), R_OK | W_OK | X_OK) != 0) {
      return bad(absl::StrCat("is not writable (", std::strerror(errno), ")"));
    }
    if (fs::exists(fs::path(path) / "CURRENT", ec)) return absl::OkStatus();  // a RocksDB
    fs::directory_iterator it(path, ec);
    if (ec) return bad(absl::StrCat("cannot be listed (", ec.message(), ")"));
    if (it != fs::directory_iterator()) {
      return bad(absl::StrCat(
          "holds other files but no RocksDB database (no CURRENT file, e.g. '",
          it->path().filename().string(), "'): give an empty or new directory"));
    }
    return absl::OkStatus();
  }
  // Missing: RocksDB creates the directory itself, but not its parents. Try
  // it (and remove it again) to learn whether it can.
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  fs::path parent = fs::path(trimmed).parent_path();
  if (parent.empty()) parent = ".";
  const fs::file_status pst = fs::status(parent, ec);
  if (!fs::exists(pst)) {
    return bad(absl::StrCat("cannot be created: its parent directory '", parent.string(),
                            "' does not exist"));
  }
  if (!fs::is_directory(pst)) {
    return bad(absl::StrCat("cannot be created: '", parent.string(), "' is not a directory"));
  }
  if (mkdir(trimmed.c_str(), 0755) != 0) {
    return bad(absl::StrCat("cannot be created (", std::strerror(errno), ")"));
  }
  rmdir(trimmed.c_str());
  return absl::OkStatus();
}

std::string CommandLine::Get(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

double CommandLine::GetDouble(const std::string& key, double def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    DieUsage(program_, absl::StrCat("--", key, ": '", it->second, "' is not a number"));
  }
  return v;
}

int64_t CommandLine::GetInt(const std::string& key, int64_t def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    DieUsage(program_, absl::StrCat("--", key, ": '", it->second, "' is not an integer"));
  }
  return v;
}

int64_t CommandLine::GetIntInRange(const std::string& key, int64_t def, int64_t lo,
                                   int64_t hi) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  absl::StatusOr<int64_t> v = ParseIntInRange(absl::StrCat("--", key), it->second, lo, hi);
  if (!v.ok()) DieUsage(program_, v.status().message());
  return *v;
}

absl::Status CheckFreeDisk(const std::string& path, int64_t min_free_mb,
                           absl::string_view flag) {
  if (min_free_mb <= 0 || path.empty()) return absl::OkStatus();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at(path);
  while (!at.empty() && !fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) {
    at = at.parent_path();
  }
  if (at.empty()) at = ".";
  struct statvfs vfs;
  if (statvfs(at.c_str(), &vfs) != 0) return absl::OkStatus();  // unknown: do not block writes
  const double free_mb = static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) /
                         (1024.0 * 1024.0);
  if (free_mb >= static_cast<double>(min_free_mb)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "only %.1f MiB free on the disk of %s '%s', below the %d MiB kept free "
      "(--min_free_disk_mb); nothing was written: free some space",
      free_mb, flag, path, min_free_mb));
}

CommandLine ParseCommandLine(int argc, char** argv, absl::string_view program,
                             absl::string_view help, const std::vector<std::string>& valued,
                             const std::vector<std::string>& flags) {
  auto known = [](const std::vector<std::string>& list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  };
  CommandLine out;
  out.program_ = std::string(program);
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fwrite(help.data(), 1, help.size(), stdout);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) {
      DieUsage(program, absl::StrCat("unexpected argument '", arg, "' (try --help)"));
    }
    std::string key = arg.substr(2), value;
    const size_t eq = key.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (known(flags, key)) {
      if (has_value) DieUsage(program, absl::StrCat("--", key, " takes no value"));
      out.flags_.insert(key);
      continue;
    }
    if (!known(valued, key)) {
      DieUsage(program, absl::StrCat("unknown option --", key, " (try --help)"));
    }
    // The last of two used to win silently (`--hosts a --hosts b` dropped a).
    if (out.values_.count(key) != 0) {
      DieUsage(program, absl::StrCat("option --", key, " is given twice"));
    }
    if (!has_value) {
      if (i + 1 >= argc) DieUsage(program, absl::StrCat("option --", key, " needs a value"));
      value = argv[++i];
    }
    out.values_[key] = value;
    out.ordered_.emplace_back(key, value);
  }
  return out;
}

}  // namespace sojourn
