#include "models/usage/series.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/text.h"

namespace sojourn::usage {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

}  // namespace

const char* ResourceName(Resource resource) { return resource == Resource::kCpu ? "cpu" : "mem"; }

absl::StatusOr<Resource> ParseResource(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n == "cpu") return Resource::kCpu;
  if (n == "mem" || n == "memory" || n == "ram") return Resource::kMemory;
  return absl::InvalidArgumentError(absl::StrCat("unknown resource '", Excerpt(name), "' (cpu or mem)"));
}

int64_t UsageSeries::BinOf(int64_t unix_seconds) const {
  return FloorDiv(unix_seconds - origin_unix, kBinSeconds);
}

int64_t UsageSeries::FirstValidBin(Resource r) const {
  const std::vector<double>& v = of(r);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isnan(v[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

void UsageSeries::Resize(int64_t bins) {
  cpu.resize(bins, kNaN);
  mem.resize(bins, kNaN);
}

absl::StatusOr<UsageSeries> Resample(const HostTrace& trace, const ResampleOptions& options) {
  if (trace.samples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("host '", trace.host, "' has no samples"));
  }
  for (size_t i = 1; i < trace.samples.size(); ++i) {
    if (trace.samples[i].unix_seconds < trace.samples[i - 1].unix_seconds) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", trace.host, "': sample ", i, " is earlier than the previous one"));
    }
  }
  const int64_t hold = options.hold_seconds > 0   ? options.hold_seconds
                       : trace.period_seconds > 0 ? trace.period_seconds
                                                  : kBinSeconds;
  double total_mem = trace.total_mem_mb;
  if (!(total_mem > 0)) {
    total_mem = 0;
    for (const HostSample& s : trace.samples) {
      if (s.has_free_mem()) total_mem = std::max(total_mem, s.free_mem_mb);
    }
  }

  UsageSeries out;
  out.utc_offset_seconds = options.utc_offset_seconds;
  const int64_t first_local = trace.samples.front().unix_seconds + options.utc_offset_seconds;
  out.origin_unix = FloorDiv(first_local, 86400) * 86400 - options.utc_offset_seconds;
  if (options.origin_unix.has_value()) {
    if (*options.origin_unix > out.origin_unix ||
        (*options.origin_unix + options.utc_offset_seconds) % 86400 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host '", trace.host, "': origin ", *options.origin_unix,
          " is not a local midnight at or before the first sample"));
    }
    out.origin_unix = *options.origin_unix;
  }
  const int64_t last_bin = out.BinOf(trace.samples.back().unix_seconds);
  out.Resize(last_bin + 1);

  std::vector<double> cpu_sum(out.bins(), 0.0), mem_sum(out.bins(), 0.0);
  std::vector<int> cpu_n(out.bins(), 0), mem_n(out.bins(), 0);
  for (const HostSample& s : trace.samples) {
    const int64_t b = out.BinOf(s.unix_seconds);
    if (!std::isnan(s.cpu_load)) {
      cpu_sum[b] += Clamp01(s.cpu_load);
      ++cpu_n[b];
    }
    if (s.has_free_mem() && total_mem > 0) {
      mem_sum[b] += Clamp01(1.0 - s.free_mem_mb / total_mem);
      ++mem_n[b];
    }
  }
  // Carry a sample into following empty bins while it holds.
  size_t next = 0;
  int64_t last_t = std::numeric_limits<int64_t>::min() / 2;
  double last_cpu = kNaN, last_mem = kNaN;
  for (int64_t b = 0; b < out.bins(); ++b) {
    const int64_t bin_start = out.UnixOfBin(b);
    const int64_t bin_end = bin_start + kBinSeconds;
    // Remember the latest sample before this bin's end.
    while (next < trace.samples.size() && trace.samples[next].unix_seconds < bin_end) {
      const HostSample& s = trace.samples[next];
      last_t = s.unix_seconds;
      last_cpu = std::isnan(s.cpu_load) ? kNaN : Clamp01(s.cpu_load);
      last_mem =
          (s.has_free_mem() && total_mem > 0) ? Clamp01(1.0 - s.free_mem_mb / total_mem) : kNaN;
      ++next;
    }
    const bool holds = bin_start - last_t < hold;
    out.cpu[b] = cpu_n[b] > 0 ? cpu_sum[b] / cpu_n[b] : (holds ? last_cpu : kNaN);
    out.mem[b] = mem_n[b] > 0 ? mem_sum[b] / mem_n[b] : (holds ? last_mem : kNaN);
  }
  return out;
}

}  // namespace sojourn::usage
