// sojourn-eval turnaround: backtests the CISNE turnaround kernels (paper 002)
// and the baselines on an SWF job log, in replay or simulate mode.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_util.h"
#include "models/turnaround/evaluation.h"
#include "models/turnaround/hist_db_rocksdb.h"
#include "models/turnaround/swf.h"
#include "nlohmann/json.hpp"
#include "tools/eval/command.h"

namespace sojourn::eval {
namespace {

namespace ta = ::sojourn::turnaround;

constexpr char kProgram[] = "sojourn-eval turnaround";

constexpr char kHelp[] = R"(usage: sojourn-eval turnaround --swf PATH [--mode replay|simulate] [--json OUT] [options]

Backtests the turnaround kernels of CISNE (paper 002: historical, simulation,
hybrid) and the baselines user_estimate, last_two (Tsafrir) and template_mean
(Smith) on a Standard Workload Format log. Reports D_v
(equation 13, percent), adjusted R^2 and interval coverage for turnaround,
wait and execution time, and the mean cost of one estimate.

  --swf PATH          SWF job log (required): plain, gzip, xz, bzip2, zstd or lz4;
                      fractional times are rounded to whole seconds
  --mode MODE         replay (default): the log's own waits and runtimes are the
                      truth; each job is estimated at submit time from the jobs
                      finished before it and the queue rebuilt from the log.
                      simulate: the log drives the off-line simulator on a
                      non-dedicated cluster with local load; simulated times are
                      the truth.
  --json OUT          also write the results as JSON to OUT
  --policy P          job selection: fcfs or easy (EASY backfilling).
                      Default: easy in replay, fcfs in simulate.
  --nsp P             node selection: normal or uniform.
                      Default: normal in replay, uniform in simulate.
  --mpl N             multiprogramming limit (parallel tasks per node), 1..1000.
                      Default: 1 in replay, 4 in simulate.
  --nodes N           simulate: cluster size, 1..1000000; job sizes are scaled
                      by N / MaxProcs (else MaxNodes) of the log header
                      (default 64)
  --local-load PCT    simulate: percent of nodes with a local user, Table 2
                      profiles, hyper-exponential sessions (default 75)
  --seed N            simulate: local-load random seed, 0..2^63-1 (default 1)
  --max-jobs N        use only the first N jobs of the log, 0..2^63-1
                      (default 0: all)
  --on-malformed M    reject (default): a malformed job line stops the run
                      with its line number; skip: report and skip it. Times
                      (fields 2, 3, 4, 6, 9, 18) above 1e12 s, sizes (fields
                      5, 8) above 1000000 and a MaxNodes / MaxProcs header
                      above 1000000 are malformed. Jobs needing more
                      processors than the header's machine (the larger of
                      MaxNodes and MaxProcs) are kept, and a MaxNodes /
                      MaxProcs that is no positive integer is ignored; both
                      with a warning on stderr.
  --histdb DIR        keep the job history in a RocksDB store in DIR (default:
                      in memory). DIR must be new or empty: the records of an
                      earlier run would change the estimates.
  --histdb-reuse      let --histdb DIR hold an earlier run's records
  --remtime M         simulation kernel RemTime: prop, mpl (default) or cpu
  --cputime M         simulation kernel CPUtime_cur: mpl or cpu (default)
  --threshold X       historical similarity threshold (default 0.05)
  --window N          newest records read per template, 1..10000000 (default 500)
  --help              this text

Simulate refuses a log whose local-load model would need more than 5e7 session
events (span x nodes x local load / 5760 s mean session): about 190 years of
log on 64 nodes at 75 %; an event costs about 1-2 us (up to 2 minutes).
Every estimate simulates every node, so a run costs about 0.3-1.3 us per job
estimated and node, more with long queues (the
header's MaxProcs, else MaxNodes, else (with a warning) the largest job, in
replay: a job's size, field 5, counts processors, one task per simulated node;
--nodes in simulate): above 5e8
node-estimates (2 to 10 minutes) the run says how long it may take and how --max-jobs shortens it,
then goes on, with progress at least every 10 seconds.
Jobs without a processor count (fields 5 and 8 both 0 or -1) are skipped with
a count. A run that scores nothing prints '-' (null in the JSON) and says why.
--json may not name the --swf file.

Progress goes to stderr; the tables to stdout. Exit code 2 on bad input.
)";

struct Args {
  std::string swf, mode = "replay", json, policy, nsp, histdb, on_malformed = "reject";
  std::string remtime = "mpl", cputime = "cpu";
  int mpl = -1, nodes = 64, window = 500;
  double local_load = 75, threshold = 0.05;
  uint64_t seed = 1;
  int64_t max_jobs = 0;
  bool histdb_reuse = false;
};

[[noreturn]] void Usage(const std::string& reason) {
  std::fprintf(stderr, "%s: %s\n", kProgram, reason.c_str());
  std::exit(2);
}

int IntInRange(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  absl::StatusOr<int64_t> n = ParseIntInRange(flag, v, lo, hi);
  if (!n.ok()) Usage(std::string(n.status().message()));
  return static_cast<int>(*n);
}

// "--seed wants an integer in [0, 9223372036854775807], got '-1'" rather than
// "'-1' is not a number".
int64_t Int64InRange(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  absl::StatusOr<int64_t> n = ParseIntInRange(flag, v, lo, hi);
  if (!n.ok()) Usage(std::string(n.status().message()));
  return *n;
}

double ParseNumber(const std::string& flag, const std::string& v) {
  double out;
  if (!absl::SimpleAtod(v, &out) || !std::isfinite(out)) {
    Usage(absl::StrCat(flag, ": '", v, "' is not a number"));
  }
  return out;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  const CommandLine cl = ParseCommandLine(
      argc - 1, argv + 1, kProgram, kHelp,
      {"swf", "mode", "json", "policy", "nsp", "histdb", "on-malformed", "remtime", "cputime", "mpl",
       "nodes", "window", "local-load", "threshold", "seed", "max-jobs"},
      {"histdb-reuse"});
  a.histdb_reuse = cl.Flag("histdb-reuse");
  for (const auto& [name, v] : cl.ordered()) {
    const std::string key = "--" + name;
    std::string value = v;
    if (key == "--swf") a.swf = value;
    else if (key == "--mode") a.mode = value;
    else if (key == "--json") a.json = value;
    else if (key == "--policy") a.policy = value;
    else if (key == "--nsp") a.nsp = value;
    else if (key == "--histdb") a.histdb = value;
    else if (key == "--on-malformed") a.on_malformed = value;
    else if (key == "--remtime") a.remtime = value;
    else if (key == "--cputime") a.cputime = value;
    else if (key == "--mpl") a.mpl = IntInRange(key, value, 1, 1000);
    else if (key == "--nodes") a.nodes = IntInRange(key, value, 1, ta::kSwfMaxNodes);
    else if (key == "--window") a.window = IntInRange(key, value, 1, 10'000'000);
    else if (key == "--local-load") {
      if (!value.empty() && value.back() == '%') value.pop_back();
      a.local_load = ParseNumber(key, value);
    } else if (key == "--threshold") a.threshold = ParseNumber(key, value);
    else if (key == "--seed") a.seed = Int64InRange(key, value, 0, INT64_MAX);
    else if (key == "--max-jobs") a.max_jobs = Int64InRange(key, value, 0, INT64_MAX);
  }
  if (a.swf.empty()) Usage("--swf PATH is required (try --help)");
  if (a.mode != "replay" && a.mode != "simulate") Usage("--mode must be replay or simulate");
  if (a.mode == "replay") {
    // Replay takes the machine and the times from the log: these were
    // ignored without a word.
    for (const char* flag : {"nodes", "local-load", "seed"}) {
      if (cl.Has(flag)) {
        Usage(absl::StrCat("--", flag,
                           " is for --mode simulate (replay takes the machine and the times "
                           "from the log)"));
      }
    }
  }
  if (a.on_malformed != "reject" && a.on_malformed != "skip") Usage("--on-malformed must be reject or skip");
  if (a.nodes < 1) Usage("--nodes must be >= 1");
  if (a.local_load < 0 || a.local_load > 100) Usage("--local-load must be a percentage 0..100");
  if (a.window < 1) Usage("--window must be >= 1");
  if (a.threshold < 0) Usage("--threshold must be >= 0");
  if (a.max_jobs < 0) Usage("--max-jobs must be >= 0");
  if (a.mpl == 0 || a.mpl < -1) Usage("--mpl must be >= 1");
  if (a.histdb_reuse && a.histdb.empty()) Usage("--histdb-reuse needs --histdb DIR");
  // Checked before the (possibly long) read and run, not after them.
  if (absl::Status st = CheckOutputsAreNotInputs({{"--json", a.json}}, {{"--swf", a.swf}});
      !st.ok()) {
    Usage(std::string(st.message()));
  }
  if (!a.json.empty()) {
    if (absl::Status st = CheckWritableFile(a.json); !st.ok()) {
      Usage(absl::StrCat("--json: ", st.message()));
    }
  }
  if (!a.histdb.empty()) {
    // The services' rule: a directory, empty or holding a RocksDB database
    // (with --histdb-reuse, RocksDB's files went in among unrelated ones).
    if (absl::Status st = CheckDatabaseDirectory(a.histdb, "--histdb"); !st.ok()) {
      Usage(std::string(st.message()));
    }
  }
  if (!a.histdb.empty() && !a.histdb_reuse) {
    std::error_code ec;
    if (std::filesystem::is_directory(a.histdb, ec) &&
        !std::filesystem::is_empty(a.histdb, ec)) {
      Usage(absl::StrCat("--histdb: ", a.histdb,
                         " is not empty; its records would change the estimates (use a new or "
                         "empty directory, or pass --histdb-reuse)"));
    }
  }
  return a;
}

nlohmann::json Num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// "%*.*f" of v, or "-" right-aligned when it is not a number (nothing scored).
std::string Cell(double v, int width, int precision) {
  if (!std::isfinite(v)) return absl::StrFormat("%*s", width, "-");
  return absl::StrFormat("%*.*f", width, precision, v);
}

// Node-estimates (jobs estimated x nodes of the cluster) above which a run
// warns that it will be long.
// Every estimate of the simulation-based kernels and baselines rebuilds and
// scans the whole cluster (models/turnaround: ClusterModel, the snapshot's
// node list, EASY's reservation). Measured on the shared SDSC-SP2 log with
// its job sizes and machine scaled up (session 24): a replay costs about
// 0.46 us per node and job on 1,024 processors (28 s) and 0.32 us on 16,384
// (316 s for 9.8e8); the simulate mode's non-dedicated nodes took up to
// 1.3 us (session 19, before the faster node selection). 5e8 is about 2 to
// 10 minutes; the shared SDSC-SP2 log needs 7.6e6, a log of ANL Intrepid's
// size (163,840 processors, 68,936 jobs) 1.1e10: --max-jobs 3000.
constexpr double kMaxNodeEstimates = 5e8;

int RunTurnaround(int argc, char** argv) {
  Args args = ParseArgs(argc, argv);
  const bool replay = args.mode == "replay";
  ta::EvalConfig config;
  config.mode = replay ? ta::EvalMode::kReplay : ta::EvalMode::kSimulate;
  auto jsel = ta::ParseJobSelection(args.policy.empty() ? (replay ? "easy" : "fcfs") : args.policy);
  if (!jsel.ok()) Usage(std::string(jsel.status().message()));
  auto nsel = ta::ParseNodeSelection(args.nsp.empty() ? (replay ? "normal" : "uniform") : args.nsp);
  if (!nsel.ok()) Usage(std::string(nsel.status().message()));
  config.policy.job_selection = *jsel;
  config.policy.node_selection = *nsel;
  config.policy.mpl_limit = args.mpl > 0 ? args.mpl : (replay ? 1 : 4);
  config.nodes = args.nodes;
  config.local_load = args.local_load / 100.0;
  config.seed = args.seed;
  config.max_jobs = args.max_jobs;
  config.estimator.similarity_threshold = args.threshold;
  config.estimator.history_window = args.window;
  if (args.remtime == "prop") config.estimator.remtime = ta::RemTimeMethod::kProp;
  else if (args.remtime == "mpl") config.estimator.remtime = ta::RemTimeMethod::kMpl;
  else if (args.remtime == "cpu") config.estimator.remtime = ta::RemTimeMethod::kCpu;
  else Usage("--remtime must be prop, mpl or cpu");
  if (args.cputime == "mpl") config.estimator.cputime = ta::CpuTimeMethod::kMpl;
  else if (args.cputime == "cpu") config.estimator.cputime = ta::CpuTimeMethod::kCpu;
  else Usage("--cputime must be mpl or cpu");
  config.progress = [](const std::string& msg) { std::fprintf(stderr, "%s\n", msg.c_str()); };

  ta::SwfReadOptions ro;
  ro.on_malformed = args.on_malformed == "skip" ? ta::SwfReadOptions::OnMalformed::kSkip
                                                : ta::SwfReadOptions::OnMalformed::kReject;
  std::fprintf(stderr, "turnaround: reading %s\n", args.swf.c_str());
  absl::StatusOr<ta::SwfLog> log = ta::ReadSwf(args.swf, ro);
  if (!log.ok()) Usage(std::string(log.status().message()));
  for (const ta::SwfIssue& issue : log->warnings) {
    std::fprintf(stderr, "%s:%lld: warning: %s\n", args.swf.c_str(),
                 static_cast<long long>(issue.line), issue.reason.c_str());
  }
  if (log->oversized_jobs > 1) {
    std::fprintf(stderr,
                 "warning: %lld jobs of %s need more processors than the header's machine; they "
                 "are kept, and replay squeezes them onto it (their estimates may be poor)\n",
                 static_cast<long long>(log->oversized_jobs), args.swf.c_str());
  }
  // The first ones name their lines; a log with thousands of them (6,000
  // fractional run times) printed thousands of lines.
  constexpr size_t kSkippedShown = 20;
  for (size_t i = 0; i < log->skipped.size() && i < kSkippedShown; ++i) {
    const ta::SwfIssue& issue = log->skipped[i];
    std::fprintf(stderr, "%s:%lld: skipped malformed line: %s\n", args.swf.c_str(),
                 static_cast<long long>(issue.line), issue.reason.c_str());
  }
  if (log->skipped.size() > kSkippedShown) {
    std::fprintf(stderr, "%s: %zu more malformed lines skipped (%zu in all)\n", args.swf.c_str(),
                 log->skipped.size() - kSkippedShown, log->skipped.size());
  }
  if (log->jobs.empty()) Usage(absl::StrCat(args.swf, ": no job lines"));
  bool no_waits = false;
  if (replay) {
    bool any_wait = false;
    for (const ta::SwfJob& j : log->jobs) any_wait = any_wait || j.wait_time >= 0;
    if (!any_wait) {
      // The tables would be empty: say why rather than let it pass.
      no_waits = true;
      std::fprintf(stderr,
                   "warning: no job of %s has a wait time (field 3 is -1 everywhere); replay "
                   "needs the log's waits, so no job is estimated or scored ('-' in the tables, "
                   "null in the JSON): use --mode simulate\n",
                   args.swf.c_str());
    }
  }
  // Jobs without a processor count (fields 5 and 8 both 0 or -1: in the SWF
  // definition, typically jobs cancelled before they started) cannot be
  // placed. Simulate skips them (as jobs that never ran); replay estimated
  // them as 1-processor jobs. Both skip them now, with a count; replay
  // through an unknown wait (field 3), which it skips as never leaving the
  // queue, so that they still count in the log's jobs.
  // The jobs the run uses: the first --max-jobs of the log.
  const int64_t considered = args.max_jobs > 0
                                 ? std::min<int64_t>(args.max_jobs, log->jobs.size())
                                 : static_cast<int64_t>(log->jobs.size());
  {
    int64_t no_procs = 0;
    for (int64_t i = 0; i < considered; ++i) {
      ta::SwfJob& j = log->jobs[i];
      if (j.procs() > 0) continue;
      ++no_procs;
      if (replay) j.wait_time = -1;
    }
    if (no_procs > 0) {
      std::fprintf(stderr,
                   "turnaround: %lld jobs have no processor count (fields 5 and 8 are 0 or -1, "
                   "e.g. cancelled before they started): skipped, not estimated\n",
                   static_cast<long long>(no_procs));
    }
    if (replay && !no_waits) {
      int64_t no_wait = 0;
      for (int64_t i = 0; i < considered; ++i) {
        no_wait += log->jobs[i].wait_time < 0 && log->jobs[i].procs() > 0;
      }
      if (no_wait > 0) {
        std::fprintf(stderr,
                     "turnaround: %lld jobs have no wait time (field 3 is -1): replay cannot "
                     "place them in the queue, so they are neither estimated nor queued ahead "
                     "of others\n",
                     static_cast<long long>(no_wait));
      }
    }
  }
  // The cost grows with jobs x nodes (kMaxNodeEstimates): say before it
  // starts that a run will be long, with the estimate and the way out.
  {
    int64_t jobs = 0, max_procs = 1;
    for (int64_t i = 0; i < considered; ++i) {
      const ta::SwfJob& j = log->jobs[i];
      max_procs = std::max(max_procs, j.procs());
      jobs += replay ? j.wait_time >= 0 : (j.run_time >= 0 && j.procs() > 0);
    }
    const int64_t nodes =
        replay ? (log->header.cluster_size() > 0 ? log->header.cluster_size() : max_procs)
               : args.nodes;
    if (replay && log->header.cluster_size() <= 0) {
      // The machine decides the queue replay rebuilds: a log cut without its
      // header would be replayed on a smaller one, silently.
      std::fprintf(stderr,
                   "warning: %s has no usable MaxProcs or MaxNodes header line: the machine is taken as "
                   "%lld node%s, its largest job; if it was larger, add '; MaxNodes: N' at the top "
                   "of the log\n",
                   args.swf.c_str(), static_cast<long long>(nodes), nodes == 1 ? "" : "s");
    }
    const double work = static_cast<double>(jobs) * static_cast<double>(nodes);
    if (work > kMaxNodeEstimates) {
      std::fprintf(stderr, "%s\n",
                   absl::StrFormat(
                       "warning: %s: %d jobs to estimate on %d nodes (%s) are %.3g "
                       "node-estimates (each estimate simulates every node: about 0.3-1.3 us "
                       "per node and job, more with long queues; here %.0f-%.0f minutes); "
                       "--max-jobs %d%s keeps it within about 2-10 minutes",
                       args.swf, jobs, nodes,
                       replay ? (log->header.cluster_size() > 0 ? "the header's MaxProcs / MaxNodes"
                                                                : "the largest job")
                              : "--nodes",
                       work, work * 0.3e-6 / 60, work * 1.3e-6 / 60,
                       static_cast<int64_t>(kMaxNodeEstimates / static_cast<double>(nodes)),
                       replay ? "" : " or fewer --nodes")
                       .c_str());
    }
  }
  std::fprintf(stderr, "turnaround: %zu jobs, %zu malformed lines skipped; mode %s, policy %s+%s, MPL %d\n",
               log->jobs.size(), log->skipped.size(), args.mode.c_str(),
               ta::JobSelectionName(config.policy.job_selection),
               ta::NodeSelectionName(config.policy.node_selection), config.policy.mpl_limit);

  std::unique_ptr<ta::HistDb> db;
  if (args.histdb.empty()) {
    db = std::make_unique<ta::InMemoryHistDb>();
  } else {
    auto opened = ta::RocksHistDb::Open(args.histdb, {});
    if (!opened.ok()) Usage(std::string(opened.status().message()));
    db = *std::move(opened);
  }
  absl::StatusOr<ta::EvalReport> report = ta::RunEvaluation(*log, config, *db);
  if (!report.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, std::string(report.status().message()).c_str());
    return report.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }

  std::printf("turnaround %s on %s: %lld jobs in log, %lld estimated, %lld scored, %d nodes, "
              "policy %s+%s MPL %d%s, mean queue %.1f, %.0f s\n",
              args.mode.c_str(), args.swf.c_str(), static_cast<long long>(report->jobs_in_log),
              static_cast<long long>(report->jobs_estimated), static_cast<long long>(report->jobs_scored),
              report->cluster_nodes, ta::JobSelectionName(config.policy.job_selection),
              ta::NodeSelectionName(config.policy.node_selection), config.policy.mpl_limit,
              replay ? "" : absl::StrFormat(", local load %.0f%%, seed %d", args.local_load, args.seed).c_str(),
              report->mean_queue_length, report->seconds);
  std::printf("%-14s | %9s %7s %6s | %9s %7s %6s | %9s %7s %6s | %8s %8s\n", "kernel", "turn Dv%",
              "R2adj", "cov", "wait Dv%", "R2adj", "cov", "exec Dv%", "R2adj", "cov", "mean us", "med us");
  for (int k = 0; k < ta::kNumKernels; ++k) {
    const auto& s = report->summary[k];
    // "-" where there is nothing to average (JSON null), not "nan".
    std::printf("%-14s | %s %s %s | %s %s %s | %s %s %s | %s %s\n",
                ta::KernelName(static_cast<ta::Kernel>(k)), Cell(s[0].dv, 9, 1).c_str(),
                Cell(s[0].r2_adj, 7, 3).c_str(), Cell(s[0].coverage, 6, 3).c_str(),
                Cell(s[1].dv, 9, 1).c_str(), Cell(s[1].r2_adj, 7, 3).c_str(),
                Cell(s[1].coverage, 6, 3).c_str(), Cell(s[2].dv, 9, 1).c_str(),
                Cell(s[2].r2_adj, 7, 3).c_str(), Cell(s[2].coverage, 6, 3).c_str(),
                Cell(report->cost_us_mean[k], 8, 1).c_str(),
                Cell(report->cost_us_median[k], 8, 1).c_str());
  }
  if (report->jobs_scored == 0 && !no_waits) {
    std::fprintf(stderr,
                 "warning: no job of %s was scored (%lld in the log, %lld estimated): a job is "
                 "scored when it finishes with a known wait and run time (fields 3 and 4) and "
                 "can run on the cluster; the tables are empty ('-', null in the JSON)\n",
                 args.swf.c_str(), static_cast<long long>(report->jobs_in_log),
                 static_cast<long long>(report->jobs_estimated));
  }

  if (!args.json.empty()) {
    nlohmann::json j;
    j["command"] = "turnaround";
    j["swf"] = args.swf;
    j["mode"] = args.mode;
    j["config"] = {{"policy", ta::JobSelectionName(config.policy.job_selection)},
                   {"nsp", ta::NodeSelectionName(config.policy.node_selection)},
                   {"mpl", config.policy.mpl_limit},
                   {"nodes", report->cluster_nodes},
                   {"local_load_pct", replay ? 0.0 : args.local_load},
                   {"seed", args.seed},
                   {"threshold", args.threshold},
                   {"window", args.window},
                   {"remtime", args.remtime},
                   {"cputime", args.cputime},
                   {"max_jobs", args.max_jobs}};
    j["jobs"] = {{"in_log", report->jobs_in_log},
                 {"estimated", report->jobs_estimated},
                 {"scored", report->jobs_scored},
                 {"estimate_failures", report->estimate_failures},
                 {"malformed_skipped", log->skipped.size()},
                 {"mean_queue_length", report->mean_queue_length}};
    j["dv_unit"] = "percent";
    j["seconds"] = report->seconds;
    for (int k = 0; k < ta::kNumKernels; ++k) {
      const std::string name = ta::KernelName(static_cast<ta::Kernel>(k));
      for (int m = 0; m < 3; ++m) {
        const ta::MetricSummary& s = report->summary[k][m];
        j["summary"][name][ta::kMetricNames[m]] = {
            {"dv", Num(s.dv)}, {"r2_adj", Num(s.r2_adj)}, {"coverage", Num(s.coverage)}, {"n", s.n}};
      }
      j["cost_us_per_estimate"][name] = Num(report->cost_us_mean[k]);
      j["cost_us_median"][name] = Num(report->cost_us_median[k]);
    }
    if (absl::Status st = WriteTextFile(args.json, JsonText(j, 2) + "\n"); !st.ok()) {
      Usage(absl::StrCat("--json: ", st.message()));
    }
  }
  return 0;
}

const EvalCommandRegistrar kRegistrar("turnaround",
                                      "backtest the turnaround kernels on an SWF job log",
                                      RunTurnaround);

}  // namespace
}  // namespace sojourn::eval
