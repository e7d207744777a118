// Importer for the Standard Workload Format (SWF v2.2) of the Parallel
// Workloads Archive: header comments (`; Key: value`) and 18 numeric fields
// per job, -1 meaning unknown. Time and memory fields may be fractional (the
// definition permits floating-point times) and are rounded to whole seconds
// and KB; counts and ids are whole numbers. Plain files and gzip are read, and
// xz, bzip2, zstd and lz4 by their magic bytes.
#ifndef SOJOURN_MODELS_TURNAROUND_SWF_H_
#define SOJOURN_MODELS_TURNAROUND_SWF_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/output_file.h"
#include "models/turnaround/job.h"

namespace sojourn::turnaround {

// Largest time (fields 2, 3, 4, 6, 9 and 18, seconds) a job line may hold:
// about 31,700 years. Real logs stay far below (a few years of submit times,
// runtimes of days); a larger value is a corrupt or synthetic line, and
// submit + wait + runtime of such values would overflow int64 downstream.
inline constexpr int64_t kSwfMaxSeconds = 1'000'000'000'000;
// Largest node or processor count (header MaxNodes / MaxProcs and job fields
// 5 and 8). The largest machines in the Parallel Workloads Archive have
// 163,840 processors (ANL Intrepid); the simulators allocate per node, so a
// corrupt header such as MaxNodes 9223372036854775807 must not get through.
inline constexpr int64_t kSwfMaxNodes = 1'000'000;
// Longest line ReadSwf takes (a job line is about 100 bytes).
inline constexpr size_t kMaxSwfLineBytes = size_t{16} << 20;

// One SWF job line; every field is -1 when unknown.
struct SwfJob {
  int64_t line = 0;  // 1-based line number in the file
  int64_t job_number = -1;
  int64_t submit_time = -1;
  int64_t wait_time = -1;
  int64_t run_time = -1;
  int64_t allocated_procs = -1;
  double avg_cpu_time = -1;  // per processor
  double used_memory_kb = -1;
  int64_t requested_procs = -1;
  int64_t requested_time = -1;
  int64_t requested_memory_kb = -1;
  int64_t status = -1;
  int64_t user = -1;
  int64_t group = -1;
  int64_t executable = -1;
  int64_t queue = -1;
  int64_t partition = -1;
  int64_t preceding_job = -1;
  int64_t think_time = -1;

  // Processors the job used: allocated, else requested, else -1.
  int64_t procs() const { return allocated_procs > 0 ? allocated_procs : requested_procs; }
  // True when both the wait and the run time are known (turnaround truth).
  bool has_turnaround() const { return wait_time >= 0 && run_time >= 0; }
};

// Header fields the importer understands; `fields` keeps every `Key: value`
// line verbatim (repeated keys such as Queue are joined with '\n').
struct SwfHeader {
  std::string version;
  int64_t unix_start_time = -1;
  int64_t time_zone = 0;  // seconds offset of TimeZone, 0 if absent
  std::string time_zone_string;
  int64_t max_jobs = -1;
  int64_t max_records = -1;
  int64_t max_nodes = -1;
  int64_t max_procs = -1;
  int64_t max_runtime = -1;
  int64_t max_memory = -1;
  bool allow_overuse = false;
  int64_t max_queues = -1;
  int64_t max_partitions = -1;
  std::map<std::string, std::string> fields;

  // Cluster size for simulation, in the unit of a job's size (field 5, the
  // allocated processors; one task per simulated node): MaxProcs, else
  // MaxNodes, else -1. Logs of multi-processor nodes have MaxNodes below
  // MaxProcs (HPC2N 120 / 240, SDSC-BLUE 144 / 1152): MaxNodes first halved
  // (or worse) the machine the jobs' processors were replayed on.
  int64_t cluster_size() const { return max_procs > 0 ? max_procs : max_nodes; }
};

struct SwfIssue {
  int64_t line = 0;
  std::string reason;
};

struct SwfLog {
  SwfHeader header;
  std::vector<SwfJob> jobs;
  // Malformed job lines that were skipped (OnMalformed::kSkip).
  std::vector<SwfIssue> skipped;
  // Lines read but doubtful, for the reader to report: a MaxNodes / MaxProcs
  // header that is no positive integer (ignored), the first job needing more
  // processors than the header's machine.
  std::vector<SwfIssue> warnings;
  // Jobs needing more processors (SwfJob::procs) than the header's machine
  // (the larger of MaxNodes and MaxProcs); they are kept.
  int64_t oversized_jobs = 0;
};

struct SwfReadOptions {
  enum class OnMalformed { kReject, kSkip };
  // kReject: the first malformed job line fails the read with
  // InvalidArgumentError "<path>:<line>: <reason>". kSkip: it is recorded in
  // SwfLog::skipped and reading continues. Malformed lines include times
  // above kSwfMaxSeconds, sizes above kSwfMaxNodes and NUL bytes; a MaxNodes
  // or MaxProcs header above kSwfMaxNodes is malformed too (skipped: the
  // header value is ignored). Jobs larger than the header's machine and a
  // MaxNodes / MaxProcs that is no positive integer are not malformed: they
  // are reported in SwfLog::warnings. A UTF-8 byte-order mark at the start of
  // the file is skipped.
  OnMalformed on_malformed = OnMalformed::kReject;
  // Stop after this many job lines (0 = all).
  int64_t max_jobs = 0;
};

// Reads PATH (plain, gzip, xz, bzip2, zstd or lz4, told by its first bytes).
// NotFound if it cannot be opened; InvalidArgument if it is a directory or a
// zip archive; DataLoss naming the last complete line if a compressed stream
// is truncated or corrupt.
absl::StatusOr<SwfLog> ReadSwf(const std::string& path, const SwfReadOptions& options);
// Parses SWF text already in memory; `name` is used in error messages.
absl::StatusOr<SwfLog> ParseSwf(const std::string& text, const std::string& name,
                                const SwfReadOptions& options);

// One job line: the 18 fields in order, separated by blanks (-1 unknown);
// avg_cpu_time and used_memory_kb in their shortest round-trip decimal form,
// so that ParseSwf reads back the same job.
std::string FormatSwfJob(const SwfJob& job);

// Writes an SWF log to `out` (common/output_file.h) and finishes it: one
// "; Key: value" line per `header` entry, in order, then one line per job.
// InvalidArgument (and nothing written) when a header key holds a colon or
// an entry a line break; DataLoss when writing fails.
absl::Status WriteSwf(const std::vector<std::pair<std::string, std::string>>& header,
                      const std::vector<SwfJob>& jobs, OutputFile* out);

// The job as the predictor sees it at submit time (no wait/run/cpu truth).
// Procs are clamped to >= 1; the CPU fraction is left unknown.
JobSpec ToJobSpec(const SwfJob& job);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_SWF_H_
