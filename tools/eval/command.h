// Subcommand registry of the `sojourn-eval` tool. Each subcommand lives in its
// own <name>_cmd.cc and registers itself with a static EvalCommandRegistrar:
//
//   static int RunTrModel(int argc, char** argv);  // argv[0] is the subcommand
//   static sojourn::eval::EvalCommandRegistrar reg("tr-model",
//       "print the TR curve of a smp-tr-v1 model", RunTrModel);
//
// A subcommand returns the process exit code: 0 success, 2 bad input (with a
// one-line reason on stderr), 1 other failure.
#ifndef SOJOURN_TOOLS_EVAL_COMMAND_H_
#define SOJOURN_TOOLS_EVAL_COMMAND_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/cli_util.h"
#include "models/traces/traces.h"
#include "nlohmann/json.hpp"

namespace sojourn::eval {

struct EvalCommand {
  std::string summary;
  std::function<int(int, char**)> run;
};

std::map<std::string, EvalCommand>& EvalCommands();

struct EvalCommandRegistrar {
  EvalCommandRegistrar(const std::string& name, const std::string& summary,
                       std::function<int(int, char**)> run) {
    EvalCommands()[name] = EvalCommand{summary, std::move(run)};
  }
};

// Largest state grids availability and schedule build (traces::CheckGridSize):
// 1e8 steps (1e8 + 1 points) from the first to the last sample (3 years at
// 1 s), 4e8 host-points in all (about 8 GB; the shared Bitbrains trace, 100
// hosts x 3 months at 300 s, has 2.6e6; a year of 300 hosts at 300 s 3.2e7), and 100
// years (3.16e9 s) whatever the step: the backtest's work grows with the days.
inline constexpr traces::GridLimits kStateGridLimits{1e8 + 1, 1e8 + 1, 4e8, 3.1536e9};

// Latest --start of an availability matrix (2201-01-01, exclusive); the
// earliest is the Unix epoch. Far outside any trace, and far from int64
// overflow when columns x period are added.
inline constexpr int64_t kMaxStartUnixSeconds = 7289654400;

// True when paths `a` and `b` name the same file: std::filesystem::equivalent
// when both exist (also through links, "./x" or "../d/x"), else the same
// absolute, normalized path.
inline bool SameFile(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec_a, ec_b;
  if (fs::exists(a, ec_a) && fs::exists(b, ec_b)) {
    std::error_code ec;
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  std::error_code ec;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a, ec), ec).lexically_normal();
  const fs::path pb = fs::weakly_canonical(fs::absolute(b, ec), ec).lexically_normal();
  return pa == pb;
}

// True when `dir` is an existing directory and `path` lies inside it (at any
// depth, also through links): a GWA trace is a directory of per-VM files, and
// `--json DIR/1.csv` replaced one of them (session 22).
inline bool IsInsideDirectory(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || ec) return false;
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec).lexically_normal();
  if (ec) return false;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec).lexically_normal();
  if (ec) return false;
  const fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

// InvalidArgument when an output option names the same file as an input or
// as another output: `sojourn-eval availability --trace X --cells X` emptied
// the trace before reading it, and `--json X` on the trace or SWF log
// replaced it with the results. `outputs` and `inputs` are (flag, path)
// pairs; an empty path is an option not given.
inline absl::Status CheckOutputsAreNotInputs(
    const std::vector<std::pair<std::string, std::string>>& outputs,
    const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [in_flag, in_path] : inputs) {
      if (!in_path.empty() && SameFile(path, in_path)) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " ", path, " is the input ", in_flag, " ", in_path,
                         ": writing it would destroy the input; choose another output file"));
      }
      if (!in_path.empty() && IsInsideDirectory(path, in_path)) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " ", path, " is inside the input directory ", in_flag, " ", in_path,
            ": it could replace a trace file or be read as one; choose a path outside it"));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].second.empty() && SameFile(path, outputs[j].second)) {
        return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is also ",
                                                       outputs[j].first,
                                                       ": choose two different output files"));
      }
    }
  }
  return absl::OkStatus();
}

// The text of a --json report, made before its file is opened (a failure
// here must not truncate an earlier result): invalid UTF-8 in a string (a
// host name read from a trace) becomes U+FFFD instead of throwing
// (`sojourn-eval usage` aborted on one and left an empty file, session 22).
inline std::string JsonText(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// --start of an availability matrix (availability, schedule): Unix seconds
// or a UTC date YYYY-MM-DD[THH:MM:SS], 1970-01-01..2200-12-31. InvalidArgument
// naming --start otherwise.
inline absl::StatusOr<int64_t> ParseMatrixStart(const std::string& text) {
  int64_t v = 0;
  absl::Time t;
  std::string err;
  if (absl::SimpleAtoi(text, &v)) {
    // Column times are start + column x period: a start near int64's ends
    // overflowed silently (0 cells), and year 99999 is no trace.
  } else if (absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &err) ||
             absl::ParseTime("%Y-%m-%dT%H:%M:%S", text, absl::UTCTimeZone(), &t, &err)) {
    v = absl::ToUnixSeconds(t);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--start: '", text, "' is neither Unix seconds nor YYYY-MM-DD[THH:MM:SS]"));
  }
  if (v < 0 || v >= kMaxStartUnixSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("--start: '", text, "' is outside 1970-01-01..2200-12-31"));
  }
  return v;
}

// The trace options of availability and schedule: --format, --start and
// --period (of an availability matrix), --max-hosts. A bad value exits 2
// with `program`'s one-line reason.
inline traces::ImportOptions TraceImportOptions(const CommandLine& args,
                                                const std::string& program) {
  traces::ImportOptions io;
  auto f = traces::ParseTraceFormat(args.Get("format", "auto"));
  if (!f.ok()) DieUsage(program, f.status().message());
  io.format = *f;
  if (args.Has("start")) {
    // Unix seconds, or a UTC date / date-time.
    absl::StatusOr<int64_t> start = ParseMatrixStart(args.Get("start"));
    if (!start.ok()) DieUsage(program, start.status().message());
    io.start_unix_seconds = *start;
  }
  io.period_seconds = args.GetIntInRange("period", io.period_seconds, 1, 86400);
  io.max_hosts = static_cast<int>(args.GetIntInRange("max-hosts", 0, 0, INT32_MAX));
  return io;
}

// --start and --period describe an availability matrix's columns: with a
// trace of another format (read as `used`) they would be ignored unsaid.
inline void CheckMatrixOnlyOptions(const CommandLine& args, traces::TraceFormat used,
                                   const std::string& program) {
  if (used == traces::TraceFormat::kAvailabilityMatrix) return;
  for (const char* option : {"start", "period"}) {
    if (args.Has(option)) {
      DieUsage(program, absl::StrCat("--", option,
                                     " applies to availability matrices only; this trace has "
                                     "its own timestamps"));
    }
  }
}

// Default --utc-offset (hours) of a trace: 2 for a GWA trace in Unix time
// (GWA-T-12 Bitbrains, the Netherlands in summer), 0 for a GWA trace whose
// timestamps are the local wall clock (GWA-T-13 Materna's date-times; the
// importer reads them as UTC) and for the other formats. Said on stderr for
// the wall clock, where the default differs from the help's "2 for gwa".
inline double DefaultUtcOffsetHours(bool gwa, const std::vector<HostTrace>& t) {
  if (!gwa) return 0.0;
  if (!t.empty() && t.front().wall_clock_timestamps) {
    std::fprintf(stderr,
                 "timestamps are local date-times (wall clock): local time is taken as they "
                 "are (default --utc-offset 0)\n");
    int64_t dropped = 0, hosts = 0;
    for (const HostTrace& h : t) {
      dropped += h.repeated_rows_dropped;
      hosts += h.repeated_rows_dropped > 0;
    }
    if (dropped > 0) {
      std::fprintf(stderr,
                   "%lld rows of %lld hosts dropped: the second pass of an hour the clock "
                   "repeated at the end of daylight saving time\n",
                   static_cast<long long>(dropped), static_cast<long long>(hosts));
    }
    return 0.0;
  }
  return 2.0;
}

// traces::DefaultSampledGrid of a sampled trace, said on stderr when it is
// not the 5-minute default and `note` (the user left --step or
// --revocation-gap to it).
inline traces::SampledGridDefaults SampledGridFor(const std::vector<HostTrace>& t, bool note) {
  const traces::SampledGridDefaults grid = traces::DefaultSampledGrid(t);
  if (note && grid.period_seconds > 300) {
    std::fprintf(stderr,
                 "median sample period %lld s: default grid step %lld s, revocation gap %lld s\n",
                 static_cast<long long>(grid.period_seconds),
                 static_cast<long long>(grid.step_seconds),
                 static_cast<long long>(grid.revocation_gap_seconds));
  }
  return grid;
}

// Says on stderr when the trace's cpu_load looks like a percentage: a sample
// above 2, or most samples above 1. The column is a fraction of the machine
// (DESIGN.md, "Host samples"); a trace in percent reads as a machine loaded
// above th2 (S3) nearly all the time, and nothing else would tell. Samples a
// little above 1 are real (the shared Bitbrains trace: 1.9 % of its samples,
// up to 1.54, a VM using more than its nominal capacity) and S3 either way.
// Returns how many samples are above 1 when it warns, else 0.
inline int64_t WarnLoadAboveOne(const std::vector<HostTrace>& t) {
  int64_t above = 0, total = 0, hosts = 0;
  const HostTrace* example = nullptr;
  const HostSample* max = nullptr;
  for (const HostTrace& h : t) {
    int64_t n = 0;
    for (const HostSample& s : h.samples) {
      if (!(s.cpu_load > 1)) continue;
      ++n;
      if (max == nullptr || s.cpu_load > max->cpu_load) {
        max = &s;
        example = &h;
      }
    }
    above += n;
    hosts += n > 0;
    total += static_cast<int64_t>(h.samples.size());
  }
  if (above == 0 || (max->cpu_load <= 2 && above * 2 <= total)) return 0;
  {
    std::fprintf(stderr,
                 "warning: %lld of %lld samples (%lld hosts) have cpu_load above 1, up to %g "
                 "(host %s at %lld); cpu_load is a fraction of the machine, 0..1, and a sample "
                 "above th2 is busy (S3): a trace in percent must be divided by 100\n",
                 static_cast<long long>(above), static_cast<long long>(total),
                 static_cast<long long>(hosts), max->cpu_load, example->host.c_str(),
                 static_cast<long long>(max->unix_seconds));
  }
  return above;
}

// Says on stderr which hosts are sampled less often than the revocation gap:
// every gap between two of their samples is a revocation (S5), so they are
// down nearly all the time and hardly scored. The default gap follows the
// median period over all hosts, so one slow host among fast ones is the case.
// Returns how many hosts.
inline int64_t WarnHostsSlowerThanGap(const std::vector<HostTrace>& t, int64_t gap_seconds) {
  std::vector<std::pair<std::string, int64_t>> slow;
  for (const HostTrace& h : t) {
    if (h.samples.size() < 2) continue;
    std::vector<int64_t> d;
    d.reserve(h.samples.size() - 1);
    for (size_t i = 1; i < h.samples.size(); ++i) {
      d.push_back(h.samples[i].unix_seconds - h.samples[i - 1].unix_seconds);
    }
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    if (d[d.size() / 2] > gap_seconds) slow.emplace_back(h.host, d[d.size() / 2]);
  }
  if (!slow.empty()) {
    std::string names;
    for (size_t i = 0; i < slow.size() && i < 5; ++i) {
      absl::StrAppend(&names, i > 0 ? ", " : "", slow[i].first, " (", slow[i].second, " s)");
    }
    if (slow.size() > 5) absl::StrAppend(&names, " and ", slow.size() - 5, " more");
    std::fprintf(stderr,
                 "warning: %zu host%s sampled less often than the revocation gap of %lld s, so "
                 "every gap between %s samples is a revocation (S5): %s; pass a --revocation-gap "
                 "above %s median period\n",
                 slow.size(), slow.size() == 1 ? " is" : "s are",
                 static_cast<long long>(gap_seconds), slow.size() == 1 ? "its" : "their",
                 names.c_str(), slow.size() == 1 ? "its" : "their");
  }
  return static_cast<int64_t>(slow.size());
}

}  // namespace sojourn::eval

#endif  // SOJOURN_TOOLS_EVAL_COMMAND_H_
