// Small helpers for command-line front ends: one-line errors with exit code 2,
// human durations ("2h", "90m", "45s", "1.5h").
#ifndef SOJOURN_COMMON_CLI_UTIL_H_
#define SOJOURN_COMMON_CLI_UTIL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sojourn {

// Exit code for bad input / bad usage in every sojourn CLI.
inline constexpr int kExitUsage = 2;

// Prints "<program>: <reason>" on stderr and exits with kExitUsage.
[[noreturn]] void DieUsage(absl::string_view program, absl::string_view reason);

// Longest duration ParsePositiveDuration accepts (100 years): anything longer
// is a typo or an overflow, and would not fit the services' int64 seconds
// arithmetic once added to a timestamp.
inline constexpr absl::Duration kMaxDuration = absl::Hours(24 * 365 * 100);

// Parses a positive duration such as "2h", "90m", "45s", "1.5h", "1h30m", "30d", "1d12h" or a
// bare number of seconds. Rejects negative, zero, non-finite ("nan", "inf")
// and overlong (>= kMaxDuration) durations.
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text);

// Parses `text` as an integer in [lo, hi]; `flag` (e.g. "--nodes") names the
// option in the error: "--nodes wants an integer in [1, 1000000], got 'x'".
absl::StatusOr<int64_t> ParseIntInRange(absl::string_view flag, absl::string_view text, int64_t lo,
                                        int64_t hi);

// Fails unless `path` can be opened for writing, without truncating an
// existing file (a run that fails later leaves a previous result intact) and
// without leaving a new empty file behind. Lets the commands refuse a bad
// --json before a long computation rather than after it.
absl::Status CheckWritableFile(const std::string& path);

// Writes `text` to `path` (truncating it) and closes it, checking every
// step: an error at close -- a full disk shows only there, when the text fits
// the stream's buffer -- is an error too ("write error on PATH (No space left
// on device)"). INVALID_ARGUMENT, for the commands' exit code 2.
absl::Status WriteTextFile(const std::string& path, absl::string_view text);

// Start-up checks of a numeric flag: OK when lo <= value <= hi, else
// INVALID_ARGUMENT "--flag must be in [lo, hi], got value" (">= lo" when hi
// is the type's maximum; ", `note`" after the range when given, e.g. "(a
// year)"). NaN is never in range. Two names rather than overloads: an int
// flag would convert to either type.
absl::Status IntFlagInRange(absl::string_view flag, int64_t value, int64_t lo, int64_t hi,
                            absl::string_view note = "");
absl::Status NumberFlagInRange(absl::string_view flag, double value, double lo, double hi,
                               absl::string_view note = "");

// The CPU load thresholds of the five-state classifier (paper 000 section 4),
// as every tool that takes them accepts them (the state manager and the
// monitor's flags, sojourn-eval availability and schedule): --th1 in (0, 1],
// --th2 in [--th1, 1]. INVALID_ARGUMENT naming the flag otherwise.
absl::Status ValidateThresholdFlags(double th1, double th2);

// Checks `path`, given by `flag` (e.g. "--db_path"), as the directory of a
// RocksDB database a service opens with create_if_missing, before opening it:
// not empty, a directory (or missing, with an existing writable parent
// directory to create it in), writable, and either empty or already holding
// a RocksDB database (a CURRENT file): RocksDB would otherwise scatter its
// files among someone else's. INVALID_ARGUMENT with a one-line reason naming
// `flag`. Leaves nothing behind.
absl::Status CheckDatabaseDirectory(const std::string& path, absl::string_view flag);

// Default of the services' --min_free_disk_mb.
inline constexpr int64_t kDefaultMinFreeDiskMb = 256;

// The start-up error line of a service whose database under `flag`
// (`path`) did not open: "--db_path PATH: DATA_LOSS: ...", with what to do
// when RocksDB found it damaged (DATA_LOSS).
std::string DatabaseOpenError(absl::string_view flag, const std::string& path,
                              const absl::Status& status);

// The disk reserve of a service's RocksDB database at `path` (its nearest
// existing parent while it does not exist yet): RESOURCE_EXHAUSTED, naming
// `flag` and the free space, when fewer than `min_free_mb` MiB are free for
// unprivileged use. RocksDB 7.8 as Debian builds it aborts (an assertion in
// WritableFileWriter) when a write meets a full disk, and a database that
// has met one refuses every write until it is reopened; writes are refused
// here first, and nothing stored is touched. 0 = no reserve (always OK).
absl::Status CheckFreeDisk(const std::string& path, int64_t min_free_mb, absl::string_view flag);

// The options of one command line: "--key value", "--key=value" and bare
// "--flag". Every front end (sojourn, each sojourn-eval subcommand) parses
// with ParseCommandLine, so they accept and reject the same shapes.
class CommandLine {
 public:
  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  std::string Get(const std::string& key, const std::string& def = "") const;
  bool Flag(const std::string& name) const { return flags_.count(name) > 0; }
  // Numbers; a value that does not parse exits with kExitUsage and
  // "--key: 'value' is not a number" / "... is not an integer".
  double GetDouble(const std::string& key, double def) const;
  int64_t GetInt(const std::string& key, int64_t def) const;
  // An integer in [lo, hi]; anything else exits with kExitUsage and
  // "--key wants an integer in [lo, hi], got 'value'". Use it rather than
  // static_cast<int>(GetInt(...)), which wraps 4294967297 to 1.
  int64_t GetIntInRange(const std::string& key, int64_t def, int64_t lo, int64_t hi) const;
  // Valued options in command-line order (each at most once: a repeated
  // option exits with kExitUsage, "option --key is given twice").
  const std::vector<std::pair<std::string, std::string>>& ordered() const { return ordered_; }

 private:
  friend CommandLine ParseCommandLine(int, char**, absl::string_view, absl::string_view,
                                      const std::vector<std::string>&,
                                      const std::vector<std::string>&);
  std::string program_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::pair<std::string, std::string>> ordered_;
};

// Parses argv[0..argc) (the options only: pass argc - 1, argv + 1 after a
// subcommand). Keys are given without "--". "--help"/"-h" prints `help` on
// stdout and exits 0; a stray argument, an unknown option, a missing value or
// a value given to a flag exits with kExitUsage and a one-line reason
// prefixed by `program`.
CommandLine ParseCommandLine(int argc, char** argv, absl::string_view program,
                             absl::string_view help, const std::vector<std::string>& valued,
                             const std::vector<std::string>& flags = {});

}  // namespace sojourn

#endif  // SOJOURN_COMMON_CLI_UTIL_H_
