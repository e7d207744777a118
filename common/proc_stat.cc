#include "common/proc_stat.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sojourn {
namespace {

// Field `n` (1-based, as proc(5) numbers them; n >= 3) of `fields`, the
// result of PidStatFields, as an unsigned number.
absl::StatusOr<uint64_t> StatField(const std::vector<absl::string_view>& fields, size_t n,
                                   const std::string& path) {
  uint64_t v = 0;
  if (n - 3 >= fields.size() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[n - 3]), &v)) {
    return absl::DataLossError(absl::StrCat("malformed ", path, ": no number in field ", n));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

absl::StatusOr<std::vector<absl::string_view>> PidStatFields(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::DataLossError("no ')' after the command");
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (fields.empty()) return absl::DataLossError("no field after the command");
  return fields;
}

absl::StatusOr<ProcessUsage> ReadProcessUsage(const std::string& proc_root, const std::string& pid,
                                              int64_t ticks_per_second, int64_t page_size) {
  if (ticks_per_second <= 0) ticks_per_second = sysconf(_SC_CLK_TCK);
  if (page_size <= 0) page_size = sysconf(_SC_PAGESIZE);
  const std::string dir = absl::StrCat(proc_root, "/", pid);
  const std::string stat_path = dir + "/stat";
  auto stat = ReadProcFile(stat_path);
  if (!stat.ok()) return stat.status();
  auto fields = PidStatFields(*stat);
  if (!fields.ok()) {
    return absl::DataLossError(
        absl::StrCat("malformed ", stat_path, ": ", fields.status().message()));
  }
  ProcessUsage u;
  auto utime = StatField(*fields, 14, stat_path);
  auto stime = StatField(*fields, 15, stat_path);
  auto start = StatField(*fields, 22, stat_path);
  auto vsize = StatField(*fields, 23, stat_path);
  auto rss = StatField(*fields, 24, stat_path);
  for (const auto* f : {&utime, &stime, &start, &vsize, &rss}) {
    if (!f->ok()) return f->status();
  }
  const double tps = static_cast<double>(ticks_per_second);
  u.cpu_seconds = static_cast<double>(*utime + *stime) / tps;
  u.virtual_bytes = static_cast<double>(*vsize);
  u.resident_bytes = static_cast<double>(*rss) * static_cast<double>(page_size);

  // The start is in ticks after boot; boot is btime in the system's stat.
  const std::string sys_stat_path = proc_root + "/stat";
  auto sys_stat = ReadProcFile(sys_stat_path);
  if (!sys_stat.ok()) return sys_stat.status();
  std::optional<uint64_t> btime;
  for (absl::string_view line : absl::StrSplit(*sys_stat, '\n')) {
    uint64_t v = 0;
    if (absl::ConsumePrefix(&line, "btime ") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v)) {
      btime = v;
    }
  }
  if (!btime.has_value()) {
    return absl::DataLossError(absl::StrCat("malformed ", sys_stat_path, ": no btime line"));
  }
  u.start_unix_seconds = static_cast<double>(*btime) + static_cast<double>(*start) / tps;

  // Listing the directory opens one more descriptor, which is counted, as
  // the Go and Python clients count it.
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++u.open_fds;
  }
  if (ec) {
    return absl::DataLossError(absl::StrCat("cannot list ", dir, "/fd: ", ec.message()));
  }

  // "Max open files            1024                 524288               files"
  auto limits = ReadProcFile(dir + "/limits");
  if (limits.ok()) {
    for (absl::string_view line : absl::StrSplit(*limits, '\n')) {
      if (!absl::ConsumePrefix(&line, "Max open files")) continue;
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t soft = 0;
      if (!f.empty() && absl::SimpleAtoi(f[0], &soft)) u.max_fds = soft;
    }
  }
  return u;
}

absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  const auto value = [](rlim_t v) {
    return v == RLIM_INFINITY ? int64_t{-1} : static_cast<int64_t>(v);
  };
  OpenFileLimit out;
  out.before = value(limit.rlim_cur);
  out.hard = value(limit.rlim_max);
  if (limit.rlim_cur != limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE) to ", out.hard, ": ", std::strerror(errno)));
    }
  }
  return out;
}

}  // namespace sojourn
