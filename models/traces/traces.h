// Importers of host traces into the canonical sample format (DESIGN.md,
// "Trace formats"). Pure library: no gRPC types.
//
// Every importer reports bad input as absl::InvalidArgumentError whose message
// names the file, the line and the reason, e.g.
//   "trace.csv:17: timestamp 1372629600 is earlier than the previous row of host vm1"
#ifndef SOJOURN_MODELS_TRACES_TRACES_H_
#define SOJOURN_MODELS_TRACES_TRACES_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "common/output_file.h"

namespace sojourn::traces {

enum class TraceFormat { kAuto, kCanonical, kGwa, kAvailabilityMatrix };

// Parses "canonical", "gwa", "availability-matrix" or "auto".
absl::StatusOr<TraceFormat> ParseTraceFormat(const std::string& name);

struct ImportOptions {
  TraceFormat format = TraceFormat::kAuto;
  // availability-matrix: Unix time of column 0 and the probe period. The
  // default start is 1999-07-06 00:00 UTC (the shared Microsoft trace).
  int64_t start_unix_seconds = 931219200;
  int64_t period_seconds = 3600;
  // Keep at most this many hosts (0 = all), in the order of the source.
  int max_hosts = 0;
};

// Reads a trace from PATH: a canonical CSV (optionally .gz/.xz; a field may
// be an RFC 4180 quoted field, so a host name can hold commas), a Grid
// Workloads Archive per-VM directory or .tar.xz/.tar.gz of per-VM CSVs, or an
// availability matrix (one host per line of 0/1 values, optionally .gz).
// GWA columns are found by header name: load = "CPU usage [%]" / 100, free
// memory = ("Memory capacity provisioned [KB]" - "Memory usage [KB]") / 1024,
// or the capacity's share left by "Memory usage [%]" where there is no [KB]
// column. GWA timestamps are Unix seconds (GWA-T-12, despite "[ms]"), Unix
// milliseconds (a value beyond 1e11), or local date-times "DD.MM.YYYY
// HH:MM[:SS]" / "YYYY-MM-DD HH:MM[:SS]" (GWA-T-13 Materna), read as UTC and
// flagged HostTrace::wall_clock_timestamps; GWA numbers may have a decimal
// comma. kAuto picks the format from the path and the first line.
absl::StatusOr<std::vector<HostTrace>> ImportTrace(const std::string& path,
                                                   const ImportOptions& options);
// The same; `*format_used` (if not null) receives the format that was read
// (never kAuto), so callers can pick format-specific defaults.
absl::StatusOr<std::vector<HostTrace>> ImportTrace(const std::string& path,
                                                   const ImportOptions& options,
                                                   TraceFormat* format_used);

// Defaults of the state grid for a sampled (canonical or GWA) trace, from its
// sampling period P (the median over hosts of each host's median sample
// spacing; hosts with fewer than two samples do not count; 300 s when none
// has two): the grid step is 300 s, or for slower sampling the largest
// divisor of 3600 s not above P, so that every grid step holds a sample; the
// revocation gap is max(900 s, 3 P), S5 after two missed samples (900 s for
// the 5-minute Bitbrains samples, the protocol of docs/EVALUATION.md). An hourly canonical
// trace thus gets a 3600 s grid and a 3 h gap instead of a grid on which
// every point is a revocation.
struct SampledGridDefaults {
  int64_t period_seconds = 300;
  int64_t step_seconds = 300;
  int64_t revocation_gap_seconds = 900;
};
SampledGridDefaults DefaultSampledGrid(const std::vector<HostTrace>& traces);

// Bounds of a dense time grid over a trace (the availability state grid, the
// usage bins): `span_points` for the grid from the earliest to the latest
// sample of any host (the global outage grid, the hourly scheduling loop),
// `host_points` for one host's grid from its first to its last sample,
// `total_points` for the hosts' grids together; `span_seconds` bounds the
// time covered whatever the step (work per day of trace, e.g. the
// availability backtest's windows, does not shrink with a coarser grid).
// Point limits count points, not steps: a grid spanning N steps has N + 1
// points (a limit of "10,000 days of 300 s" is 2,880,001 points).
struct GridLimits {
  double span_points = 0;
  double host_points = 0;
  double total_points = 0;
  double span_seconds = 0;
};

// InvalidArgumentError when a grid of `step_seconds` over `traces` would
// exceed `limits`: a few samples years apart would otherwise allocate (or
// loop over) billions of points. The message names the span, the step and
// the limit, then `advice` (e.g. "pass a larger --step") when a grid point
// limit is exceeded; when the span itself is above limits.span_seconds, which
// no step can help, it says so and advises cutting the trace instead. Hosts
// without samples do not count. Computed in floating point: timestamps may
// be anywhere in int64.
absl::Status CheckGridSize(const std::vector<HostTrace>& traces, int64_t step_seconds,
                           const GridLimits& limits, const std::string& advice);

// Writes host samples as a canonical CSV trace (DESIGN.md "Trace formats") a
// batch of rows at a time, so a trace larger than memory can be written
// (`sojourn export` pages through a state manager's history). The header is
// host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores; every number is
// written in the shortest form that reads back as the same double
// (std::to_chars), an unknown free memory (NaN), total memory or core count
// (0) as an empty field, so ImportTrace gives back exactly what was written.
// A host name with a comma or a quote, or starting or ending with a blank, is
// an RFC 4180 quoted field (read back as written); one with a line break, or
// a host's rows out of time order (also across calls), are refused, and a
// refused call writes nothing.
//
// The file is an OutputFile (common/output_file.h): PATH "-" is standard
// output, a PATH ending in .gz is gzip-compressed, and PATH is written whole by
// Finish() or not at all (a process killed half way leaves PATH.tmp).
class CanonicalCsvWriter {
 public:
  // InvalidArgumentError when PATH is a directory or PATH.tmp cannot be
  // created (the message names the file and the reason).
  static absl::StatusOr<std::unique_ptr<CanonicalCsvWriter>> Open(const std::string& path);
  ~CanonicalCsvWriter();
  CanonicalCsvWriter(const CanonicalCsvWriter&) = delete;
  CanonicalCsvWriter& operator=(const CanonicalCsvWriter&) = delete;

  // Appends rows of `host`, in time order and not before the host's rows
  // written earlier. total_mem_mb and cpu_cores (0 = unknown) go on every
  // row, as the reader takes the largest.
  absl::Status Write(const std::string& host, const std::vector<HostSample>& samples,
                     double total_mem_mb, int cpu_cores);
  // Flushes, closes and renames PATH.tmp to PATH. Rows written: rows().
  absl::Status Finish();
  int64_t rows() const { return rows_; }
  // The file being written until Finish() renames it ("" for standard output).
  const std::string& tmp_path() const { return out_->tmp_path(); }

 private:
  CanonicalCsvWriter() = default;

  std::unique_ptr<OutputFile> out_;
  // Rows of the batch being written, handed to out_ a megabyte at a time.
  std::string buffer_;
  // Each host's newest timestamp written.
  std::map<std::string, int64_t> last_unix_;
  int64_t rows_ = 0;
};

// Writes `traces` with a CanonicalCsvWriter (attributes from each trace).
absl::Status WriteCanonicalCsv(const std::vector<HostTrace>& traces, const std::string& path);

}  // namespace sojourn::traces

#endif  // SOJOURN_MODELS_TRACES_TRACES_H_
