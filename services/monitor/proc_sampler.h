// Samples the host this process runs on from /proc (paper 000 section 7.2):
// CPU busy fraction excluding registered guest processes, available memory,
// and swap-in/out rates.
#ifndef SOJOURN_SERVICES_MONITOR_PROC_SAMPLER_H_
#define SOJOURN_SERVICES_MONITOR_PROC_SAMPLER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "sojourn/v1/common.pb.h"

namespace sojourn::monitor {

// Raw counters read at one instant.
struct ProcCounters {
  // Sums over all CPUs from /proc/stat, in clock ticks.
  uint64_t total_ticks = 0;
  uint64_t idle_ticks = 0;  // idle + iowait
  // utime + stime of each guest pid that still exists, in clock ticks.
  std::map<int, uint64_t> guest_ticks;
  double mem_available_mb = 0;
  double mem_total_mb = 0;
  uint64_t pswpin = 0;
  uint64_t pswpout = 0;
  int cpus = 0;
};

// One process as /proc/<pid>/stat shows it.
struct ProcessInfo {
  // Field 3: 'R', 'S', ... ; 'Z' (zombie) and 'X' (dead) have exited.
  char state = '?';
  // Field 22, starttime: clock ticks after boot at which the process started.
  // With the pid, it names one process: a pid reused by a later process has
  // another start time. Unset when the line has no such field.
  std::optional<uint64_t> start_ticks;
  bool exited() const { return state == 'Z' || state == 'X'; }
};

// Not thread-safe: one sampler per monitor thread.
class ProcSampler {
 public:
  // `proc_root` is "/proc" on a real host (tests may point it at a directory
  // laid out like /proc).
  explicit ProcSampler(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  absl::StatusOr<ProcCounters> Read(const std::set<int>& guest_pids) const;

  // Reads the counters and returns the sample for the interval since the
  // previous call; std::nullopt on the first call and after a counter reset
  // (a counter went backwards, e.g. a guest pid was reused, or the interval
  // is empty), which only restarts the interval.
  absl::StatusOr<std::optional<HostSample>> Sample(int64_t unix_seconds,
                                                   const std::set<int>& guest_pids);

  // The process `pid` under the proc root: NOT_FOUND when it has no entry
  // there (the process is gone), another error when its stat cannot be read
  // or parsed. Const, so safe beside a sampling thread.
  absl::StatusOr<ProcessInfo> Process(int pid) const;

  // Static attributes (cores, total memory, clock rate from /proc/cpuinfo).
  sojourn::v1::HostAttributes Attributes() const;

  // Computes a sample from two readings (exposed for tests). Returns nullopt
  // when any counter went backwards or no time passed.
  static std::optional<HostSample> Diff(const ProcCounters& prev, const ProcCounters& now,
                                        double seconds);

 private:
  std::string proc_root_;
  std::optional<ProcCounters> prev_;
  int64_t prev_unix_ = 0;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_PROC_SAMPLER_H_
