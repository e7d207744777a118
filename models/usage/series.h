// 5-minute use series of one host (paper 003, section 2: "Machine resource use
// is sampled at a fixed rate (currently, once every 5 minutes)"). Pure
// library: no gRPC types. Thread-compatible value types.
#ifndef SOJOURN_MODELS_USAGE_SERIES_H_
#define SOJOURN_MODELS_USAGE_SERIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/host_sample.h"

namespace sojourn::usage {

inline constexpr int64_t kBinSeconds = 300;  // 5 minutes
inline constexpr int kBinsPerDay = 288;      // 24 h
inline constexpr int kBinsPerHour = 12;
inline constexpr int kObjectBins = 2 * kBinsPerDay;  // 48 h objects (section 2)

enum class Resource { kCpu = 0, kMemory = 1 };

// "cpu" or "mem".
const char* ResourceName(Resource resource);
// Accepts "cpu", "mem", "memory", "ram".
absl::StatusOr<Resource> ParseResource(absl::string_view name);

// Resource use of one host as a fraction 0..1 of its capacity, one value per
// 5-minute bin. Bin 0 starts at a (local) midnight, so bin b lies at
// b % kBinsPerDay five-minute steps after the midnight of day b / kBinsPerDay.
// NaN marks a bin without data (host down or not sampled).
struct UsageSeries {
  // Unix time of the start of bin 0 (a midnight in the host's local time).
  int64_t origin_unix = 0;
  // Local time = UTC + this offset; days start at local midnight.
  int64_t utc_offset_seconds = 0;
  std::vector<double> cpu;
  // 1 - free memory / total memory.
  std::vector<double> mem;

  const std::vector<double>& of(Resource r) const { return r == Resource::kCpu ? cpu : mem; }
  std::vector<double>& of(Resource r) { return r == Resource::kCpu ? cpu : mem; }
  int64_t bins() const { return static_cast<int64_t>(cpu.size()); }
  // Bin holding Unix time `unix_seconds` (floor; may be negative or >= bins()).
  int64_t BinOf(int64_t unix_seconds) const;
  int64_t UnixOfBin(int64_t bin) const { return origin_unix + bin * kBinSeconds; }
  // First bin with a value for `r`, or -1 when there is none.
  int64_t FirstValidBin(Resource r) const;
  // Extends both series with NaN (or truncates) to exactly `bins` bins.
  void Resize(int64_t bins);
};

struct ResampleOptions {
  // Days (and so 48 h objects) start at local midnight, local = UTC + offset.
  // Default 0: UTC midnight.
  int64_t utc_offset_seconds = 0;
  // A sample's value fills the following empty bins for less than this many
  // seconds after the sample (a sample reports the state of one sampling
  // period). 0 = the trace's period_seconds, or 300 s when unknown.
  int64_t hold_seconds = 0;
  // Bin 0 starts here (a local midnight at or before the first sample)
  // instead of at the local midnight of the first sample: a series resampled
  // from the latest samples only lines up with one of the whole history.
  std::optional<int64_t> origin_unix;
};

// Resamples a host trace into 5-minute bins: the mean of the samples in a bin,
// else the last sample while it holds, else NaN. CPU use is cpu_load; memory
// use is 1 - free/total with total = trace.total_mem_mb, or the largest free
// memory seen when the trace does not give the total. Fails with
// InvalidArgument on an empty trace or samples out of time order.
absl::StatusOr<UsageSeries> Resample(const HostTrace& trace, const ResampleOptions& options = {});

}  // namespace sojourn::usage

#endif  // SOJOURN_MODELS_USAGE_SERIES_H_
