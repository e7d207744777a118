// The canonical host sample of DESIGN.md ("Trace formats"): one measurement
// of one host. Every importer produces it, the monitor streams it, the
// statemgr stores it, and the models consume it.
#ifndef SOJOURN_COMMON_HOST_SAMPLE_H_
#define SOJOURN_COMMON_HOST_SAMPLE_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace sojourn {

struct HostSample {
  // Unix seconds, UTC.
  int64_t unix_seconds = 0;
  // Host CPU load (excluding guest processes) as a fraction 0..1 of the machine.
  double cpu_load = 0.0;
  // Free memory in MiB; NaN when unknown.
  double free_mem_mb = std::numeric_limits<double>::quiet_NaN();
  // Pages swapped in/out per second since the previous sample; NaN when unknown.
  double swap_in_per_s = std::numeric_limits<double>::quiet_NaN();
  double swap_out_per_s = std::numeric_limits<double>::quiet_NaN();

  bool has_free_mem() const { return !std::isnan(free_mem_mb); }
};

// Longest sampling period a monitor may report and a state manager accepts
// (PushSamplesRequest.period_seconds): one day.
inline constexpr int64_t kMaxPeriodSeconds = 86400;

// Why a state manager would refuse to store `s` (nullptr when it would
// not): the value checks of PushSamples, shared with the places that read
// samples back from disk (the statemgr's store at start-up, the monitor's
// spool), so a damaged record is left out there instead of poisoning what
// follows. NaN memory and swap values mean "unknown" and are fine.
inline const char* SampleProblem(const HostSample& s) {
  if (s.unix_seconds <= 0) return "timestamp must be > 0";
  if (!std::isfinite(s.cpu_load) || s.cpu_load < 0 || s.cpu_load > 1.05) {
    return "cpu_load is outside [0, 1]";
  }
  for (double v : {s.free_mem_mb, s.swap_in_per_s, s.swap_out_per_s}) {
    if (!std::isnan(v) && !(std::isfinite(v) && v >= 0)) {
      return "free memory and swap rates must be finite and >= 0";
    }
  }
  return nullptr;
}

// All samples of one host, in time order.
struct HostTrace {
  std::string host;
  std::vector<HostSample> samples;
  // Nominal sampling period of the source (seconds); 0 when unknown.
  int64_t period_seconds = 0;
  // Total memory of the host in MiB when the source says it (0 when unknown).
  double total_mem_mb = 0;
  // Logical CPUs of the host when the source says it (0 when unknown): the
  // canonical format's optional cpu_cores column, GWA's "CPU cores".
  int cpu_cores = 0;
  // The samples' times are the local wall clock read as if it were UTC (a GWA
  // trace that writes date-times, e.g. GWA-T-13 Materna), not Unix time: the
  // trace's local time is UTC+0, whatever the place it was recorded.
  bool wall_clock_timestamps = false;
  // With wall_clock_timestamps: rows of the hour the clock repeated at the end
  // of daylight saving time (its second pass), dropped on import.
  int64_t repeated_rows_dropped = 0;
};

}  // namespace sojourn

#endif  // SOJOURN_COMMON_HOST_SAMPLE_H_
