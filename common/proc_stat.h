// Reading a process's own entries under /proc (proc(5)): the fields of
// /proc/<pid>/stat, shared by the monitor's guest accounting, and the
// figures every Prometheus client exports about its own process (the
// "process_*" metrics of the Prometheus client guidelines, which
// prometheus-cpp 1.0 does not provide).
//
//   auto usage = ReadProcessUsage();              // this process, real /proc
//   if (usage.ok()) Set("process_resident_memory_bytes", usage->resident_bytes);
#ifndef SOJOURN_COMMON_PROC_STAT_H_
#define SOJOURN_COMMON_PROC_STAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sojourn {

// The whole of a file under /proc (whose size stat() gives as 0). NOT_FOUND
// naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadProcFile(const std::string& path);

// The fields of a /proc/<pid>/stat line from field 3 (the state) on:
// field N of proc(5) is element N - 3. The command, field 2, is in
// parentheses and may hold spaces and ')' (a process may name itself
// "a) b"), so the fields are those after the last ')'. The views point
// into `stat`. DATA_LOSS when there is no ')' or no field after it.
absl::StatusOr<std::vector<absl::string_view>> PidStatFields(absl::string_view stat);

// What a process uses, read from <proc_root>/<pid>/ and <proc_root>/stat.
struct ProcessUsage {
  // utime + stime (fields 14 and 15), in seconds.
  double cpu_seconds = 0;
  // Boot time (btime of <proc_root>/stat) plus starttime (field 22).
  double start_unix_seconds = 0;
  // vsize (field 23).
  double virtual_bytes = 0;
  // rss (field 24) pages.
  double resident_bytes = 0;
  // Entries of <proc_root>/<pid>/fd.
  int64_t open_fds = 0;
  // The soft limit "Max open files" of <proc_root>/<pid>/limits; unset when
  // it says "unlimited" or the file has no such line.
  std::optional<int64_t> max_fds;
};

// Reads the usage of process `pid` ("self" for this one). `ticks_per_second`
// and `page_size` are this machine's (sysconf) unless a test lays out a
// /proc of its own. NOT_FOUND when the process's stat cannot be read,
// DATA_LOSS naming the file when a field is malformed or missing, or when
// the fd directory cannot be listed.
absl::StatusOr<ProcessUsage> ReadProcessUsage(const std::string& proc_root = "/proc",
                                              const std::string& pid = "self",
                                              int64_t ticks_per_second = 0, int64_t page_size = 0);

// The limits on open files (RLIMIT_NOFILE) of RaiseOpenFileLimit, -1 for
// unlimited: the soft limit before it, and the hard limit, which is the soft
// limit after it.
struct OpenFileLimit {
  int64_t before = 0;
  int64_t hard = 0;
};

// Raises this process's soft limit on open files to its hard limit. Every
// connection a service holds is a descriptor, and a broker holds one from
// each registered host's state manager: with the soft limit of 1024 that
// Debian's shells and systemd units start processes with (hard 524288), a
// broker stopped accepting connections at about 1,000 hosts ("accept4: Too
// many open files"), and the next hosts' calls waited out their deadlines.
// The soft limit is low only for programs that use select(), whose
// FD_SETSIZE is 1024; nothing in sojourn does (gRPC uses epoll, the /metrics
// server and RocksDB poll or neither). Call first in main(). INTERNAL when
// the limit cannot be read or set.
absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit();

}  // namespace sojourn

#endif  // SOJOURN_COMMON_PROC_STAT_H_
