// `sojourn-eval schedule`: the trace-driven scheduling experiment of paper 000
// section 8.4 (proactive vs Condor-like vs round robin vs omniscient) with the
// ranking code of the broker (models/scheduling).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cli_util.h"
#include "common/text.h"
#include "models/scheduling/simulation.h"
#include "models/traces/traces.h"
#include "nlohmann/json.hpp"
#include "tools/eval/command.h"

namespace sojourn::eval {
namespace {

constexpr char kUsage[] = R"(usage: sojourn-eval schedule --trace PATH [options]

Trace-driven scheduling experiment of paper 000 section 8.4. Jobs are submitted
at seeded random times between 6 AM and 10 PM (local), each with every task
length; every policy (proactive, condor, round_robin, omniscient) places each
job on a host of the trace using the broker's ranking code; the trace decides
whether the host stays usable. No host usable at submission: retried after
5 min, then unscheduled. A failed job restarts from the beginning (same
policy, at the failure time) until it finishes.

proactive uses TR from the availability library (same-clock windows of the
horizon length ending before the job's hour: trained on the past only) as the
predictor service computes it for the broker: shrunk towards the same window
pooled over every host of the trace, host frailty, the host's age in its
state; and the aggregated one-step-ahead load forecast. Clock rates are not in the traces:
each host draws one (seeded) from --clock-mhz.

options:
  --trace PATH             trace file or directory (required)
  --format F               canonical | gwa | availability-matrix | auto (default auto)
  --json OUT               write summary[policy] and by_length[policy][hours] as JSON
  --submissions N          submission times per replicate, 1..100000 (default 60; x 7
                           lengths = 420 jobs, the paper's experiment size)
  --lengths LIST           task lengths in hours, each in (0, 8760] (default 0.5,1,2,3,4,5,6)
  --seed N                 seed of submission times, pools and clock rates, 0..2^63-1
                           (default 1)
  --replicates N           independent replicates with seeds seed..seed+N-1, 1..1000, each
                           with its own submission times, pools and clock rates; the summary
                           pools their jobs and each replicate is listed too (default 10:
                           one paper-size run of 420 jobs sees only a handful of failures).
                           Replicates x submissions x lengths may be at most 1000000 jobs
                           (each placed by 4 policies: about 1 to 5 ms per job on a trace
                           of 100 hosts, so 1e6 jobs take about 15 to 80 minutes)
  --pool N                 each submission sees a random pool of N hosts of the
                           trace, 0..1000000 (the paper's testbed had 20; default 20;
                           0 = all)
  --clock-mhz MIN,MAX      range of the hosts' clock rates, 0 < MIN <= MAX <= 1000000
                           (default 1000,3000)
  --horizon-hours H        length of the TR curve behind MTTF/JCTF, in (0, 168]
                           (default 24)
  --history-days N         most recent training days of the day type, 0..36500
                           (default 0 = all)
  --proactive-tr W         service (default): proactive's TR as the predictor
                           service computes it (population prior, host frailty,
                           age); own: from the host's own windows only (the
                           plain censoring-aware SMP, without those three;
                           this command's default before sojourn's service
                           pipeline was simulated)
  --warmup-days N          no submissions on the first N days, 1..36500 (default 7)
  --retry-seconds S        retry delay, 1..604800 (default 300)
  --step SECONDS           state grid step, a divisor of 3600 (default: the matrix
                           period; else 300, or for slower sampling the largest
                           divisor of 3600 not above the median sample period).
                           The grid may span at most 1e8 steps and 100 years
                           from the first to the last sample, and hold 4e8
                           host-points in all
  --utc-offset HOURS       local time = UTC + HOURS (default 2 for gwa in Unix
                           time, else 0; gwa date-times are the local clock)
  --start T                availability matrix: time of column 0, Unix seconds or
                           UTC YYYY-MM-DD[THH:MM:SS], 1970-01-01..2200-12-31
                           (default 1999-07-06 = 931219200)
  --period SECONDS         availability matrix: probe period, 1..86400 (default 3600)
  --max-hosts N            read at most N hosts (default 0 = all)
  --th1 X / --th2 X        CPU load thresholds, th1 in (0, 1], th2 in [th1, 1]
                           (default 0.2 / 0.6)
  --working-set-mb X       free memory below this is S4, 0..1e12 (default 256)
  --revocation-gap SECONDS no sample for longer is S5, 1..31536000 (default max(900,
                           3 x the median sample period); matrix: half the period)
  --help                   this text

Progress goes to stderr (every 10 % of the submissions and at least every
30 s); the tables to stdout. Exit code 2 on bad input.
)";

// Most jobs (replicates x submissions x lengths) a run may simulate; each is
// placed by every policy. 7e8 (--submissions 100000 --replicates 1000) were
// accepted: days of work.
constexpr int64_t kMaxScheduleJobs = 1000000;
// Fastest clock rate --clock-mhz takes (1 THz): 1e308 was accepted.
constexpr double kMaxClockMhz = 1e6;

[[noreturn]] void Die(const std::string& reason) { DieUsage("sojourn-eval schedule", reason); }

const std::vector<std::string> kOptions = {
    "trace", "format", "json", "submissions", "replicates", "pool", "lengths", "seed", "clock-mhz", "horizon-hours",
    "history-days", "proactive-tr", "warmup-days", "retry-seconds", "step", "utc-offset", "start", "period",
    "max-hosts", "th1", "th2", "working-set-mb", "revocation-gap"};

std::vector<double> NumList(const std::string& k, const std::string& text) {
  std::vector<double> out;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v;
    if (!absl::SimpleAtod(s, &v) || !std::isfinite(v)) {
      Die(absl::StrCat("--", k, ": '", s, "' is not a number"));
    }
    out.push_back(v);
  }
  return out;
}

std::string LengthKey(double hours) { return absl::StrFormat("%g", hours); }

// A rate or mean over no job is null, not 0 (a policy that scheduled nothing
// did not fail nothing in no time).
nlohmann::json StatsJson(const scheduling::PolicyStats& s) {
  auto over = [](int64_t n, double v) { return n > 0 ? nlohmann::json(v) : nlohmann::json(); };
  return {{"failure_rate", over(s.scheduled, s.failure_rate)},
          {"unscheduled_rate", over(s.jobs, s.unscheduled_rate)},
          {"avg_makespan_s", over(s.finished, s.avg_makespan_s)},
          {"slowdown_vs_omniscient", over(s.finished, s.slowdown_vs_omniscient)},
          {"jobs", s.jobs},
          {"scheduled", s.scheduled},
          {"failed", s.failed},
          {"restarts", s.restarts},
          {"unfinished", s.unfinished}};
}

// Pools the lengths >= min_hours of one policy (failure rate etc. over those jobs).
scheduling::PolicyStats Pool(const std::map<double, scheduling::PolicyStats>& by_len,
                             double min_hours, double omniscient_avg) {
  scheduling::PolicyStats p;
  for (const auto& [h, s] : by_len) {
    if (h < min_hours) continue;
    p.jobs += s.jobs;
    p.scheduled += s.scheduled;
    p.unscheduled += s.unscheduled;
    p.failed += s.failed;
    p.restarts += s.restarts;
    p.unfinished += s.unfinished;
    p.finished += s.finished;
    p.sum_makespan_s += s.sum_makespan_s;
  }
  p.failure_rate = p.scheduled > 0 ? static_cast<double>(p.failed) / p.scheduled : 0;
  p.unscheduled_rate = p.jobs > 0 ? static_cast<double>(p.unscheduled) / p.jobs : 0;
  p.avg_makespan_s = p.finished > 0 ? p.sum_makespan_s / p.finished : 0;
  p.slowdown_vs_omniscient = omniscient_avg > 0 ? p.avg_makespan_s / omniscient_avg - 1 : 0;
  return p;
}

int RunSchedule(int argc, char** argv) {
  const CommandLine args =
      ParseCommandLine(argc - 1, argv + 1, "sojourn-eval schedule", kUsage, kOptions);
  if (!args.Has("trace")) Die("--trace PATH is required (try --help)");
  const traces::ImportOptions io = TraceImportOptions(args, "sojourn-eval schedule");

  scheduling::ScheduleConfig cfg;
  cfg.submissions = static_cast<int>(args.GetIntInRange("submissions", 60, 1, 100000));
  cfg.pool_size = static_cast<int>(args.GetIntInRange("pool", 20, 0, 1000000));
  if (args.Has("lengths")) cfg.lengths_hours = NumList("lengths", args.Get("lengths"));
  for (size_t i = 0; i < cfg.lengths_hours.size(); ++i) {
    const double l = cfg.lengths_hours[i];
    if (!(l > 0 && l <= 8760)) Die("--lengths must be hours in (0, 8760]");
    // The JSON keys lengths by their shortest text (by_length["1"]): two
    // lengths with one key would lose one's results.
    for (size_t k = 0; k < i; ++k) {
      if (LengthKey(cfg.lengths_hours[k]) == LengthKey(l)) {
        Die(absl::StrFormat("--lengths names %g hours twice (lengths must differ in their "
                            "first 6 significant digits)", l));
      }
    }
  }
  const int64_t seed = args.GetIntInRange("seed", 1, 0, INT64_MAX);
  cfg.seed = static_cast<uint64_t>(seed);
  cfg.replicates = static_cast<int>(args.GetIntInRange("replicates", 10, 1, 1000));
  if (seed > INT64_MAX - (cfg.replicates - 1)) {
    Die(absl::StrFormat("--seed %d with --replicates %d: the replicates' seeds seed..seed+%d "
                        "must stay within 0..2^63-1",
                        seed, cfg.replicates, cfg.replicates - 1));
  }
  if (args.Has("clock-mhz")) {
    auto c = NumList("clock-mhz", args.Get("clock-mhz"));
    if (c.size() != 2 || !(c[0] > 0) || c[1] < c[0] || c[1] > kMaxClockMhz) {
      Die("--clock-mhz needs MIN,MAX with 0 < MIN <= MAX <= 1000000 (MHz)");
    }
    cfg.clock_min_mhz = c[0];
    cfg.clock_max_mhz = c[1];
  }
  {
    // The work estimate, before the trace is read: a run of days is refused.
    const double jobs = static_cast<double>(cfg.replicates) * cfg.submissions *
                        static_cast<double>(cfg.lengths_hours.size());
    if (jobs > static_cast<double>(kMaxScheduleJobs)) {
      Die(absl::StrFormat(
          "--replicates %d x --submissions %d x %d --lengths are %.0f jobs, above the limit of "
          "%d (each placed by 4 policies, about 1 to 5 ms per job on 100 hosts: %.3g to %.3g "
          "hours here); pass fewer --replicates or --submissions",
          cfg.replicates, cfg.submissions, cfg.lengths_hours.size(), jobs, kMaxScheduleJobs,
          jobs * 1e-3 / 3600, jobs * 5e-3 / 3600));
    }
  }
  const double horizon_hours = args.GetDouble("horizon-hours", 24);
  if (!(horizon_hours > 0) || horizon_hours > 168) Die("--horizon-hours must be in (0, 168]");
  cfg.horizon_seconds = static_cast<int64_t>(horizon_hours * 3600);
  cfg.history_days = static_cast<int>(args.GetIntInRange("history-days", 0, 0, 36500));
  const std::string proactive_tr = args.Get("proactive-tr", "service");
  if (proactive_tr != "service" && proactive_tr != "own") {
    Die("--proactive-tr must be service or own, got '" + Excerpt(proactive_tr) + "'");
  }
  cfg.service_pipeline = proactive_tr == "service";
  if (args.Has("warmup-days") && args.GetInt("warmup-days", 7) < 1) {
    Die("--warmup-days must be >= 1 (proactive needs some history)");
  }
  cfg.warmup_days = static_cast<int>(args.GetIntInRange("warmup-days", 7, 1, 36500));
  // A retry delay near int64's end overflowed the retry time and looped.
  cfg.retry_seconds = args.GetIntInRange("retry-seconds", 300, 1, 604800);
  cfg.classifier.th1 = args.GetDouble("th1", cfg.classifier.th1);
  cfg.classifier.th2 = args.GetDouble("th2", cfg.classifier.th2);
  if (absl::Status st = ValidateThresholdFlags(cfg.classifier.th1, cfg.classifier.th2); !st.ok()) {
    Die(std::string(st.message()));
  }
  cfg.classifier.guest_working_set_mb =
      args.GetDouble("working-set-mb", cfg.classifier.guest_working_set_mb);
  // The services' bound (ValidateClassifierFlags): more than any host has.
  if (absl::Status st = NumberFlagInRange("--working-set-mb", cfg.classifier.guest_working_set_mb,
                                          0, 1e12);
      !st.ok()) {
    Die(std::string(st.message()));
  }

  // The same grid rule as availability: windows start on the hour.
  if (args.Has("step")) {
    const int64_t step = args.GetIntInRange("step", 1, 1, 3600);
    if (3600 % step != 0) Die(absl::StrCat("--step ", step, " s must divide 3600 s"));
  }
  if (args.Has("revocation-gap")) (void)args.GetIntInRange("revocation-gap", 1, 1, 31536000);
  if (absl::Status st = CheckOutputsAreNotInputs({{"--json", args.Get("json")}},
                                                 {{"--trace", args.Get("trace")}});
      !st.ok()) {
    Die(std::string(st.message()));
  }
  if (args.Has("json")) {
    if (absl::Status st = CheckWritableFile(args.Get("json")); !st.ok()) {
      Die(absl::StrCat("--json: ", st.message()));
    }
  }
  if (const double off = args.GetDouble("utc-offset", 0); off < -14 || off > 14) {
    Die("--utc-offset wants -14..14 hours");
  }

  // Read the trace last: every option above is checked first. The grid step,
  // time zone and revocation gap default by the format found.
  const auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "reading %s ...\n", args.Get("trace").c_str());
  traces::TraceFormat used = traces::TraceFormat::kAuto;
  auto traces = traces::ImportTrace(args.Get("trace"), io, &used);
  if (!traces.ok()) Die(std::string(traces.status().message()));
  if (traces->empty()) Die("the trace has no hosts");
  CheckMatrixOnlyOptions(args, used, "sojourn-eval schedule");
  const bool matrix = used == traces::TraceFormat::kAvailabilityMatrix;
  const bool gwa = used == traces::TraceFormat::kGwa;
  const traces::SampledGridDefaults grid =
      SampledGridFor(*traces, !matrix && (!args.Has("step") || !args.Has("revocation-gap")));
  cfg.step_seconds = args.GetInt("step", matrix ? io.period_seconds : grid.step_seconds);
  if (cfg.step_seconds <= 0 || 3600 % cfg.step_seconds != 0) {
    Die(absl::StrCat("the matrix period (--period ", io.period_seconds,
                     " s) is the grid step and must divide 3600 s; pass --step to choose another"));
  }
  if (absl::Status st = traces::CheckGridSize(
          *traces, cfg.step_seconds, kStateGridLimits,
          "pass a larger --step (a divisor of 3600) or cut the trace");
      !st.ok()) {
    Die(std::string(st.message()));
  }
  cfg.utc_offset_seconds =
      static_cast<int>(std::lround(args.GetDouble("utc-offset", DefaultUtcOffsetHours(gwa, *traces)) * 3600));
  cfg.horizon_seconds -= cfg.horizon_seconds % cfg.step_seconds;
  if (cfg.horizon_seconds <= 0) Die("--horizon-hours is shorter than one step");
  cfg.classifier.revocation_gap_seconds =
      args.GetInt("revocation-gap", matrix ? std::max<int64_t>(1, cfg.step_seconds / 2)
                                           : grid.revocation_gap_seconds);
  if (cfg.classifier.revocation_gap_seconds <= 0) Die("--revocation-gap must be positive");
  WarnLoadAboveOne(*traces);
  if (!matrix) WarnHostsSlowerThanGap(*traces, cfg.classifier.revocation_gap_seconds);

  int last_pct = -1;
  const auto sim_start = std::chrono::steady_clock::now();
  auto last_print = sim_start;
  cfg.progress = [&](double f) {
    // Every 10 %, and at least every 30 s with the time left: a long run
    // must not look hung between two tenths.
    const int pct = static_cast<int>(f * 100);
    const auto now = std::chrono::steady_clock::now();
    if (pct / 10 != last_pct / 10 || now - last_print >= std::chrono::seconds(30)) {
      const double elapsed = std::chrono::duration<double>(now - sim_start).count();
      if (f > 0 && f < 1) {
        std::fprintf(stderr, "  scheduled %d%% of the submissions (%.0f s, about %.0f s left)\n",
                     pct, elapsed, elapsed * (1 - f) / f);
      } else {
        std::fprintf(stderr, "  scheduled %d%% of the submissions (%.0f s)\n", pct, elapsed);
      }
      last_pct = pct;
      last_print = now;
    }
  };
  std::fprintf(stderr, "read %zu hosts; simulating ...\n", traces->size());
  auto r = scheduling::RunScheduleExperiment(*traces, cfg);
  if (!r.ok()) Die(std::string(r.status().message()));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("sojourn-eval schedule: %s\n", args.Get("trace").c_str());
  std::printf("%d hosts (pool %d per submission), %d days, grid %llds, UTC%+.1f, %lld jobs "
              "(%d replicates x %d submissions x %zu lengths), seeds %lld..%lld, TR horizon %.0fh "
              "(proactive TR: %s), clock %.0f-%.0f MHz\n",
              r->hosts, cfg.pool_size, r->days, static_cast<long long>(cfg.step_seconds),
              cfg.utc_offset_seconds / 3600.0, static_cast<long long>(r->jobs), cfg.replicates,
              cfg.submissions, cfg.lengths_hours.size(), static_cast<long long>(cfg.seed),
              static_cast<long long>(cfg.seed) + (cfg.replicates - 1), horizon_hours,
              proactive_tr.c_str(), cfg.clock_min_mhz, cfg.clock_max_mhz);
  for (scheduling::Policy p : cfg.policies) {
    const auto& s = r->summary.at(scheduling::PolicyName(p));
    if (s.jobs > 0 && s.unscheduled * 2 > s.jobs) {
      std::fprintf(stderr,
                   "warning: %s left %lld of its %lld jobs unscheduled (no usable host within "
                   "--retry-seconds of their submission); a trace whose hosts are up on few of "
                   "its %d days (e.g. a stray timestamp far from the others) does this\n",
                   scheduling::PolicyName(p), static_cast<long long>(s.unscheduled),
                   static_cast<long long>(s.jobs), r->days);
    }
  }
  std::printf("\n%-12s %9s %9s %9s %12s %9s %9s %9s\n", "policy", "failure", "unsched",
              "restarts", "makespan_h", "slowdown", "finished", "unfinish");
  for (scheduling::Policy p : cfg.policies) {
    const auto& s = r->summary.at(scheduling::PolicyName(p));
    std::printf("%-12s %9.4f %9.4f %9lld %12.3f %9.4f %9lld %9lld\n", scheduling::PolicyName(p),
                s.failure_rate, s.unscheduled_rate, static_cast<long long>(s.restarts),
                s.avg_makespan_s / 3600, s.slowdown_vs_omniscient,
                static_cast<long long>(s.finished), static_cast<long long>(s.unfinished));
  }
  std::printf("\nBy task length (hours): failure rate / average makespan (h)\n%-12s", "policy");
  for (double h : cfg.lengths_hours) std::printf(" %15s", LengthKey(h).c_str());
  std::printf("\n");
  for (scheduling::Policy p : cfg.policies) {
    std::printf("%-12s", scheduling::PolicyName(p));
    for (double h : cfg.lengths_hours) {
      const auto& s = r->by_length.at(scheduling::PolicyName(p)).at(h);
      std::printf(" %15s",
                  absl::StrFormat("%.3f / %.2f", s.failure_rate, s.avg_makespan_s / 3600).c_str());
    }
    std::printf("\n");
  }
  // Jobs of 2 h and more pooled (issue 6 acceptance compares these).
  std::map<std::string, scheduling::PolicyStats> long_jobs;
  {
    const std::string omni = scheduling::PolicyName(scheduling::Policy::kOmniscient);
    double omni_avg = 0;
    if (r->by_length.count(omni)) omni_avg = Pool(r->by_length.at(omni), 2.0, 0).avg_makespan_s;
    std::printf("\nJobs of 2 h and more, pooled:\n%-12s %9s %9s %12s %9s\n", "policy", "failure",
                "failed", "makespan_h", "slowdown");
    for (scheduling::Policy p : cfg.policies) {
      const std::string name = scheduling::PolicyName(p);
      long_jobs[name] = Pool(r->by_length.at(name), 2.0, omni_avg);
      const auto& s = long_jobs[name];
      std::printf("%-12s %9.4f %9lld %12.3f %9.4f\n", name.c_str(), s.failure_rate,
                  static_cast<long long>(s.failed), s.avg_makespan_s / 3600,
                  s.slowdown_vs_omniscient);
    }
  }
  // Each replicate's jobs of 2 h and more: failures per policy (the spread
  // behind the pooled numbers).
  std::vector<std::map<std::string, scheduling::PolicyStats>> rep_long(r->replicates.size());
  {
    const std::string omni = scheduling::PolicyName(scheduling::Policy::kOmniscient);
    std::printf("\nPer replicate, jobs of 2 h and more: failed/scheduled; average makespan (h) of "
                "all lengths\n%-6s", "seed");
    for (scheduling::Policy p : cfg.policies) std::printf(" %22s", scheduling::PolicyName(p));
    std::printf("\n");
    for (size_t i = 0; i < r->replicates.size(); ++i) {
      const auto& rep = r->replicates[i];
      double omni_avg = 0;
      if (rep.by_length.count(omni)) omni_avg = Pool(rep.by_length.at(omni), 2.0, 0).avg_makespan_s;
      std::printf("%-6llu", static_cast<unsigned long long>(rep.seed));
      for (scheduling::Policy p : cfg.policies) {
        const std::string name = scheduling::PolicyName(p);
        rep_long[i][name] = Pool(rep.by_length.at(name), 2.0, omni_avg);
        const auto& s = rep_long[i][name];
        std::printf(" %22s", absl::StrFormat("%lld/%lld; %.3f", static_cast<long long>(s.failed),
                                             static_cast<long long>(s.scheduled),
                                             rep.summary.at(name).avg_makespan_s / 3600)
                                 .c_str());
      }
      std::printf("\n");
    }
  }
  std::printf("\nTR curves computed %lld, cache hits %lld; %.1f s\n",
              static_cast<long long>(r->tr_computed), static_cast<long long>(r->tr_cache_hits),
              secs);

  if (args.Has("json")) {
    nlohmann::json j;
    j["trace"] = args.Get("trace");
    j["hosts"] = r->hosts;
    j["days"] = r->days;
    j["jobs"] = r->jobs;
    j["seed"] = cfg.seed;
    j["replicate_count"] = cfg.replicates;
    j["submissions"] = cfg.submissions;
    j["pool"] = cfg.pool_size;
    j["horizon_hours"] = horizon_hours;
    j["proactive_tr"] = proactive_tr;
    j["step_seconds"] = cfg.step_seconds;
    j["clock_mhz"] = {cfg.clock_min_mhz, cfg.clock_max_mhz};
    for (const auto& [name, s] : r->summary) j["summary"][name] = StatsJson(s);
    for (const auto& [name, m] : r->by_length) {
      for (const auto& [h, s] : m) j["by_length"][name][LengthKey(h)] = StatsJson(s);
    }
    for (const auto& [name, s] : long_jobs) j["summary_2h_plus"][name] = StatsJson(s);
    for (size_t i = 0; i < r->replicates.size(); ++i) {
      const auto& rep = r->replicates[i];
      nlohmann::json jr;
      jr["seed"] = rep.seed;
      for (const auto& [name, s] : rep.summary) jr["summary"][name] = StatsJson(s);
      for (const auto& [name, s] : rep_long[i]) jr["summary_2h_plus"][name] = StatsJson(s);
      j["replicates"].push_back(std::move(jr));
    }
    j["timing_seconds"] = secs;
    if (absl::Status st = WriteTextFile(args.Get("json"), JsonText(j, 1) + "\n"); !st.ok()) {
      Die(std::string(st.message()));
    }
  }
  return 0;
}

EvalCommandRegistrar reg("schedule",
                         "section 8.4 scheduling experiment: proactive vs condor vs round robin "
                         "vs omniscient on a host trace",
                         RunSchedule);

}  // namespace
}  // namespace sojourn::eval
