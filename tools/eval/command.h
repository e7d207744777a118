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

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/traces/traces.h"

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
// 1e8 points from the first to the last sample (3 years at 1 s), 4e8
// host-points in all (about 8 GB; the shared Bitbrains trace, 100 hosts x 3
// months at 300 s, has 2.6e6; a year of 300 hosts at 300 s 3.2e7), and 100
// years (3.16e9 s) whatever the step: the backtest's work grows with the days.
inline constexpr traces::GridLimits kStateGridLimits{1e8, 1e8, 4e8, 3.1536e9};

// Latest --start of an availability matrix (2201-01-01, exclusive); the
// earliest is the Unix epoch. Far outside any trace, and far from int64
// overflow when columns x period are added.
inline constexpr int64_t kMaxStartUnixSeconds = 7289654400;

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

}  // namespace sojourn::eval

#endif  // SOJOURN_TOOLS_EVAL_COMMAND_H_
