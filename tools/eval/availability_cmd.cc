// `sojourn-eval availability`: backtests sojourn's semi-Markov TR and the
// baselines on a host trace under the protocol of issue 7 (paper 000 section
// 8.2 refined), with the training-ratio sweep (paper 000 Fig. 12) and the
// noise-injection robustness test (Fig. 14) as options.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/cli_util.h"
#include "common/text.h"
#include "models/availability/kernel.h"
#include "models/availability/window.h"
#include "models/baselines/availability_backtest.h"
#include "models/traces/traces.h"
#include "nlohmann/json.hpp"
#include "tools/eval/command.h"

namespace sojourn::eval {
namespace {

constexpr char kUsage[] = R"(usage: sojourn-eval availability --trace PATH [options]

Backtests availability prediction on a host trace: sojourn's semi-Markov TR
("smp": censoring-aware estimator with default options; "smp_paper": the
paper-literal estimator) beside the baselines last, bm, ar, ma, arma (paper 000
Table 4, p = q = 8), avail_quantile (HTCondor AvailTimeEstimate), on_fraction
(BOINC) and window_frequency (frequency of surviving same-clock windows).

Protocol (docs/EVALUATION.md): each host's days are split at ndays/2 (first half trains);
cells (host, day type, start hour, window 1..H h, initial state); training
windows = same-clock windows of the cell's length on training days of the type
ending in the training half; test windows on test days starting in the cell's state;
empirical TR = fraction surviving; relative error over cells with >= 3 test
windows and emp > 0; pooled Brier over test windows.

options:
  --trace PATH             trace file or directory (required)
  --format F               canonical | gwa | availability-matrix | auto (default auto)
  --json OUT               write the full report as JSON to OUT
  --cells OUT              write every scored cell as CSV to OUT (host, day_type,
                           start_hour, window_hours, init_state, n_test,
                           n_survived, emp_tr, then one predicted-TR column per
                           method), for analyses of your own. OUT, --json,
                           --days and --outages are checked first, written at the
                           end, and may name neither the --trace file nor each other
  --days OUT               write the population's failures by local day as CSV
                           to OUT (date, day_type, hosts, train_hosts, up_steps,
                           failures, failures_per_up_hour); the report and the
                           JSON ("population_by_day") summarise their spread
  --outages OUT            write every grid point as CSV to OUT (unix_seconds,
                           local_time, hosts_present, hosts_reporting, outage):
                           what the global-outage rule saw and dropped
  --step SECONDS           state grid step, a divisor of 3600 (default: the matrix
                           period; else 300, or for slower sampling the largest
                           divisor of 3600 not above the median sample period).
                           The grid may span at most 1e8 steps and 100 years
                           from the first to the last sample, and hold 4e8
                           host-points in all
  --utc-offset HOURS       local time = UTC + HOURS; the grid and the days are
                           local (default: 2 for gwa in Unix time (Bitbrains,
                           NL summer); 0 for gwa date-times (Materna: the
                           local wall clock) and the other formats); fixed all
                           year: a trace in Unix time from a zone with daylight
                           saving time has its summer windows an hour off its
                           winter ones (the predictor's --time_zone follows it)
  --time-zone ZONE         local time = the tz database zone ZONE (e.g.
                           Europe/Amsterdam, America/New_York) instead of a
                           fixed offset: days and window start hours follow the
                           lab's clock across daylight saving time, as the
                           predictor's --time_zone; a day is then 23 or 25
                           hours long, and a skipped clock hour has no test
                           window that day (training windows at it start at
                           the change, as the predictor cuts them). Not with
                           --utc-offset, nor with a trace in local date-times
                           (already on the lab's clock)
  --start T                availability matrix: time of column 0, Unix seconds or
                           UTC YYYY-MM-DD[THH:MM:SS], 1970-01-01..2200-12-31
                           (default 1999-07-06 = 931219200)
  --period SECONDS         availability matrix: probe period, 1..86400 (default 3600)
  --max-hosts N            read at most N hosts (default 0 = all)
  --history-days N         use the N most recent training days of the type, 0..36500
                           (default 0 = all)
  --train-ratio R          fraction of each host's days used for training (default 0.5)
  --max-window-hours H     longest window, 1..31 (default 10)
  --methods LIST           comma-separated subset of the methods (default all)
  --day-types LIST         weekday,weekend (default both)
  --th1 X / --th2 X        CPU load thresholds, th1 in (0, 1], th2 in [th1, 1]
                           (default 0.2 / 0.6)
  --grace SECONDS          load above th2 longer than this is S3, 0..31536000 (default 60)
  --working-set-mb X       free memory below this is S4, 0..1e12 (default 256)
  --revocation-gap SECONDS no sample for longer than this is S5, 1..31536000
                           (default max(900, 3 x the median sample period);
                           matrix: half the period)
  --outage-fraction F      grid points where fewer than F of the hosts present
                           (between their first and last sample) report are a
                           global monitoring outage; windows touching one are
                           excluded (default 0.5; 0 for the matrix; 0 disables)
  --outage-min-hosts N     the outage rule holds only where at least N hosts are
                           present; with fewer, a gap is the hosts' own S5
                           (default 10; 1..1000000)
  --smp-options LIST       set sojourn's EstimatorOptions for "smp" (its
                           improvements; library defaults otherwise), e.g.
                           prior_windows=5,recency_half_life_windows=4; keys:
                           censoring_aware, first_sojourn_kernel,
                           min_first_sojourn_windows, prior_windows,
                           recency_half_life_windows, borrow_below_windows,
                           other_day_type_weight, neighbor_window_weight,
                           neighbor_offset_seconds, recent_age_seconds,
                           long_age_seconds, per_class_age_prior,
                           age_prior_windows, frequency_weight,
                           empirical_bayes_prior, exact_age_first_sojourn,
                           host_frailty, frailty_by_day_type,
                           level_corrected_borrowing, load_band_first_sojourn.
                           Switches take 0/1 (false/true);
                           neighbor_offset_seconds an integer 0..86400,
                           recent_age_seconds and long_age_seconds integers
                           0..3153600000, borrow_below_windows 0..1000000
                           (default: always borrow; 0 = never),
                           frequency_weight 0..1, the rest 0 or a number
                           in [1e-6, 1e6] (window counts and weights)
  --smp-prior SRC          shrinkage prior when prior_windows > 0: hosts (the same
                           day type and start hour pooled over all hosts, default;
                           with host_frailty, on by default, its failure hazards
                           are scaled to each host's level against all hosts),
                           hours (this host's other start hours) or none
  --smp-age on|off         pass each window's age in its initial state to the
                           estimator (age conditioning; default on)
  --smp-frailty F          the host hazard ratio of smp (host_frailty): online
                           (default: from the host's history up to each test
                           window's start, as the predictor service has it; the
                           population's rates stay fitted on the training
                           halves; about 3.5 times slower on Bitbrains) or
                           training (from its training half only, as before
                           session 20)
  --smp-pool-at P          when smp's population is pooled: training (the
                           shrinkage prior from every host's training windows,
                           host frailty's rates and moments from every host's
                           training half; default), window (both from every
                           host's history up to each test window's start,
                           training and test days alike, as the predictor
                           service pools its hosts at a request) or prior
                           (only the prior as of the window start; also what
                           window does with --smp-frailty training). An
                           experiment (docs/EVALUATION.md, "the population as
                           of each window start"); prior and window need
                           --history-days 0, no recency_half_life_windows and
                           borrow_below_windows at its default or 0, else
                           training is used (the JSON's "smp_pool_at" says
                           which)
  --smp-population-days K  multiply every failure hazard of smp's kernel by the
                           population's level over the K days before each
                           window (its failures against the population's rates
                           at those clock times, credibility-weighted by how
                           much a day's level carries over to the next in the
                           training days; frailty.h), 1..28; default 0 = off.
                           An experiment (docs/EVALUATION.md, "one-month
                           slices"): the predictor service does not compute it
  --train-windows W        training windows of smp, smp_paper and window_frequency:
                           per-length (default: a window of L hours is predicted
                           from the same-clock windows of L hours, as the
                           predictor service cuts them for a request of L hours)
                           or longest (every length read off one estimate from
                           the windows of --max-window-hours, the older protocol)
  --min-test-windows N     cells with fewer test windows get no relative error,
                           1..1000000 (default 3)
  --reliability-bins N     bins of the reliability tables, 1..1000 (default 10)
  --threads N              worker threads, 1 or 2 (default 2)
  --sweep-train-ratios L   also run the weekday protocol for each training ratio in
                           the comma-separated list L, each in (0, 1) (paper 000 Fig. 12)
  --noise L                also run the noise-injection test (paper 000 Fig. 14) for
                           each number of injections in L, each 0..1000 (e.g. 0,1,2,4,10)
  --noise-windows L        window lengths (h) of the noise test, each 1..--max-window-hours
                           (default 1,2,3,5,10, those up to --max-window-hours)
  --seed N                 seed of the noise injection (default 1)
  --help                   this text
)";

// A CSV field, quoted (RFC 4180) when it holds a comma, a quote or a newline.
std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  return absl::StrCat("\"", absl::StrReplaceAll(v, {{"\"", "\"\""}}), "\"");
}

// --cells: one row per scored cell, one predicted-TR column per method.
void WriteCellsCsv(const backtest::BacktestResult& r, std::ostream& out) {
  out << "host,day_type,start_hour,window_hours,init_state,n_test,n_survived,emp_tr";
  for (const std::string& m : r.methods) out << "," << m;
  out << "\n";
  for (const backtest::CellResult& c : r.cells) {
    out << CsvField(r.hosts[c.host]) << "," << (c.day_type == 0 ? "weekday" : "weekend") << ","
        << c.hour << "," << c.hours << ",S" << c.init << "," << c.n_test << "," << c.n_survived
        << "," << absl::StrFormat("%.6g", c.emp());
    for (double p : c.pred) out << "," << absl::StrFormat("%.6g", p);
    out << "\n";
  }
}

// --days: one row per local day of the trace.
void WriteDaysCsv(const backtest::BacktestResult& r, int64_t step_seconds, std::ostream& out) {
  out << "date,day_type,hosts,train_hosts,up_steps,failures,failures_per_up_hour\n";
  for (const backtest::DayCount& d : r.days) {
    const double up_hours = d.up_steps * static_cast<double>(step_seconds) / 3600.0;
    out << absl::FormatTime("%Y-%m-%d", absl::FromUnixSeconds(d.day * 86400), absl::UTCTimeZone())
        << "," << (d.day_type == 0 ? "weekday" : "weekend") << "," << d.hosts << ","
        << d.train_hosts << "," << absl::StrFormat("%.0f", d.up_steps) << ","
        << absl::StrFormat("%.0f", d.failures) << ","
        << (up_hours > 0 ? absl::StrFormat("%.6g", d.failures / up_hours) : std::string()) << "\n";
  }
}

// --outages: one row per grid point of the trace.
void WriteOutagesCsv(const backtest::BacktestResult& r, const availability::LocalClock& clock,
                     std::ostream& out) {
  out << "unix_seconds,local_time,hosts_present,hosts_reporting,outage\n";
  for (const backtest::BacktestResult::GridPoint& p : r.grid_point_hosts) {
    out << p.unix_seconds << ","
        << absl::FormatTime("%Y-%m-%d %H:%M",
                            absl::FromUnixSeconds(p.unix_seconds + clock.OffsetAt(p.unix_seconds)),
                            absl::UTCTimeZone())
        << "," << p.present << "," << p.reporting << "," << (p.outage ? 1 : 0) << "\n";
  }
}

[[noreturn]] void Die(const std::string& reason) { DieUsage("sojourn-eval availability", reason); }

const std::vector<std::string> kOptions = {"trace",
                                           "format",
                                           "json",
                                           "cells",
                                           "days",
                                           "outages",
                                           "step",
                                           "utc-offset",
                                           "time-zone",
                                           "start",
                                           "period",
                                           "max-hosts",
                                           "history-days",
                                           "train-ratio",
                                           "max-window-hours",
                                           "methods",
                                           "day-types",
                                           "th1",
                                           "th2",
                                           "grace",
                                           "working-set-mb",
                                           "revocation-gap",
                                           "outage-fraction",
                                           "outage-min-hosts",
                                           "min-test-windows",
                                           "reliability-bins",
                                           "threads",
                                           "smp-options",
                                           "smp-prior",
                                           "smp-age",
                                           "smp-frailty",
                                           "smp-pool-at",
                                           "smp-population-days",
                                           "train-windows",
                                           "sweep-train-ratios",
                                           "noise",
                                           "noise-windows",
                                           "seed"};

// One --smp-options key: what it sets and the values it takes.
struct SmpOption {
  enum Kind { kBool, kNumber, kInteger } kind;
  double hi;  // largest value (numbers and integers; the smallest is 0)
  bool* b = nullptr;
  double* d = nullptr;
  int* i = nullptr;
  int64_t* i64 = nullptr;
};

// Longest age or offset an option may give: 100 years (the grid's span limit).
constexpr double kMaxSmpSeconds = 3153600000;
// Window counts and weights: 0 or in [kMinSmpNumber, kMaxSmpNumber]. Far
// outside any use (a window is a day), and inside what the estimator's
// arithmetic holds: 1.7e308 and subnormals such as 1e-310 made its
// predictions NaN (a crash, session 22).
constexpr double kMinSmpNumber = 1e-6;
constexpr double kMaxSmpNumber = 1e6;

void ApplySmpOptions(const std::string& text, availability::EstimatorOptions* o) {
  const double kAny = kMaxSmpNumber;
  const std::map<std::string, SmpOption> options = {
      {"censoring_aware", {SmpOption::kBool, 1, &o->censoring_aware}},
      {"first_sojourn_kernel", {SmpOption::kBool, 1, &o->first_sojourn_kernel}},
      {"min_first_sojourn_windows",
       {SmpOption::kNumber, kAny, nullptr, &o->min_first_sojourn_windows}},
      {"prior_windows", {SmpOption::kNumber, kAny, nullptr, &o->prior_windows}},
      {"recency_half_life_windows",
       {SmpOption::kNumber, kAny, nullptr, &o->recency_half_life_windows}},
      {"borrow_below_windows",
       {SmpOption::kInteger, 1e6, nullptr, nullptr, &o->borrow_below_windows}},
      {"other_day_type_weight", {SmpOption::kNumber, kAny, nullptr, &o->other_day_type_weight}},
      {"neighbor_window_weight", {SmpOption::kNumber, kAny, nullptr, &o->neighbor_window_weight}},
      // Windows start within one day: an offset of a day or more finds none.
      {"neighbor_offset_seconds",
       {SmpOption::kInteger, 86400, nullptr, nullptr, nullptr, &o->neighbor_offset_seconds}},
      {"recent_age_seconds",
       {SmpOption::kInteger, kMaxSmpSeconds, nullptr, nullptr, nullptr, &o->recent_age_seconds}},
      {"long_age_seconds",
       {SmpOption::kInteger, kMaxSmpSeconds, nullptr, nullptr, nullptr, &o->long_age_seconds}},
      {"per_class_age_prior", {SmpOption::kBool, 1, &o->per_class_age_prior}},
      {"age_prior_windows", {SmpOption::kNumber, kAny, nullptr, &o->age_prior_windows}},
      {"empirical_bayes_prior", {SmpOption::kBool, 1, &o->empirical_bayes_prior}},
      {"exact_age_first_sojourn", {SmpOption::kBool, 1, &o->exact_age_first_sojourn}},
      {"host_frailty", {SmpOption::kBool, 1, &o->host_frailty}},
      {"frailty_by_day_type", {SmpOption::kBool, 1, &o->frailty_by_day_type}},
      {"level_corrected_borrowing", {SmpOption::kBool, 1, &o->level_corrected_borrowing}},
      {"load_band_first_sojourn", {SmpOption::kBool, 1, &o->load_band_first_sojourn}},
      {"frequency_weight", {SmpOption::kNumber, 1, nullptr, &o->frequency_weight}},
  };
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    const std::string k(absl::StripAsciiWhitespace(item.substr(0, eq)));
    auto it = options.find(k);
    if (it == options.end()) {
      Die(absl::StrCat("--smp-options: unknown option '", Excerpt(k),
                       "' (try --help for the keys)"));
    }
    if (eq == absl::string_view::npos) {
      Die(absl::StrCat("--smp-options: malformed option '", Excerpt(std::string(item)),
                       "': want KEY=VALUE"));
    }
    const std::string value(absl::StripAsciiWhitespace(item.substr(eq + 1)));
    const SmpOption& opt = it->second;
    if (opt.kind == SmpOption::kBool) {
      // Only 0/1 or false/true: "2" or "0.5" was read as true.
      if (value == "1" || value == "true") {
        *opt.b = true;
      } else if (value == "0" || value == "false") {
        *opt.b = false;
      } else {
        Die(absl::StrCat("--smp-options: ", k, " wants 0 or 1 (false or true), got '",
                         Excerpt(value), "'"));
      }
      continue;
    }
    double v;
    const bool number = absl::SimpleAtod(value, &v) && std::isfinite(v);
    if (opt.kind == SmpOption::kInteger) {
      // Range-checked before the cast: 1e300 was cast to int64 unchecked.
      if (!number || v < 0 || v > opt.hi || v != std::floor(v)) {
        Die(absl::StrFormat("--smp-options: %s wants an integer in [0, %.0f], got '%s'", k, opt.hi,
                            Excerpt(value)));
      }
      if (opt.i != nullptr) *opt.i = static_cast<int>(v);
      if (opt.i64 != nullptr) *opt.i64 = static_cast<int64_t>(v);
      continue;
    }
    if (!number || v < 0 || v > opt.hi || (opt.hi == kAny && v > 0 && v < kMinSmpNumber)) {
      Die(opt.hi < kAny ? absl::StrFormat("--smp-options: %s wants a number in [0, %g], got '%s'",
                                          k, opt.hi, Excerpt(value))
                        : absl::StrFormat("--smp-options: %s wants 0 or a number in [%g, %g], got "
                                          "'%s'",
                                          k, kMinSmpNumber, kMaxSmpNumber, Excerpt(value)));
    }
    *opt.d = v;
  }
}

std::vector<std::string> GetList(const CommandLine& a, const std::string& k) {
  std::vector<std::string> out;
  if (!a.Has(k)) return out;
  for (absl::string_view s : absl::StrSplit(a.Get(k), ',', absl::SkipEmpty())) out.emplace_back(s);
  // "--methods ," read as "every method" (an empty list is the default).
  if (out.empty()) Die(absl::StrCat("--", k, " names nothing (leave it out for the default)"));
  return out;
}
std::vector<double> GetDoubleList(const CommandLine& a, const std::string& k) {
  std::vector<double> out;
  for (const std::string& s : GetList(a, k)) {
    double v;
    if (!absl::SimpleAtod(s, &v)) Die(absl::StrCat("--", k, ": '", s, "' is not a number"));
    out.push_back(v);
  }
  return out;
}
std::vector<int> GetIntList(const CommandLine& a, const std::string& k, std::vector<int> def,
                            int lo, int hi) {
  if (!a.Has(k)) return def;
  std::vector<int> out;
  for (const std::string& s : GetList(a, k)) {
    int v;
    if (!absl::SimpleAtoi(s, &v)) Die(absl::StrCat("--", k, ": '", s, "' is not an integer"));
    if (v < lo || v > hi) {
      Die(absl::StrCat("--", k, ": ", v, " is outside ", lo, "..", hi));
    }
    out.push_back(v);
  }
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// "%8.4f" of v, or "-" right-aligned when there is nothing to average.
std::string Num(double v, bool have, int width = 8, int precision = 4) {
  if (!have) return absl::StrFormat("%*s", width, "-");
  return absl::StrFormat("%*.*f", width, precision, v);
}

void PrintReport(const backtest::BacktestResult& r, const backtest::BacktestConfig& cfg) {
  const char* dt_names[2] = {"weekday", "weekend"};
  for (int dt = 0; dt < 2; ++dt) {
    std::printf(
        "\nAverage relative error |pred - emp| / emp over start hours, %s (window hours):\n",
        dt_names[dt]);
    std::printf("%-17s", "method");
    for (int L = 1; L <= cfg.max_window_hours; ++L) std::printf(" %7dh", L);
    std::printf("\n");
    for (size_t m = 0; m < r.methods.size(); ++m) {
      auto by_len = backtest::SummarizeByLength(r, m, cfg.max_window_hours, cfg.min_test_windows);
      std::printf("%-17s", r.methods[m].c_str());
      for (int L = 1; L <= cfg.max_window_hours; ++L) {
        const backtest::LengthSummary& ls = by_len[dt][L - 1];
        std::printf(" %s", Num(ls.avg_rel_err, ls.n > 0).c_str());
      }
      std::printf("\n");
    }
    std::printf("Brier score, %s (window hours):\n", dt_names[dt]);
    for (size_t m = 0; m < r.methods.size(); ++m) {
      auto by_len = backtest::SummarizeByLength(r, m, cfg.max_window_hours, cfg.min_test_windows);
      std::printf("%-17s", r.methods[m].c_str());
      for (int L = 1; L <= cfg.max_window_hours; ++L)
        std::printf(" %s", Num(by_len[dt][L - 1].brier, by_len[dt][L - 1].windows > 0).c_str());
      std::printf("\n");
    }
    std::printf("Mean predicted TR over all test windows, %s (first row: observed survival):\n",
                dt_names[dt]);
    for (size_t m = 0; m < r.methods.size(); ++m) {
      auto by_len = backtest::SummarizeByLength(r, m, cfg.max_window_hours, cfg.min_test_windows);
      if (m == 0) {
        std::printf("%-17s", "(observed)");
        for (int L = 1; L <= cfg.max_window_hours; ++L)
          std::printf(" %s",
                      Num(by_len[dt][L - 1].observed, by_len[dt][L - 1].windows > 0).c_str());
        std::printf("\n");
      }
      std::printf("%-17s", r.methods[m].c_str());
      for (int L = 1; L <= cfg.max_window_hours; ++L)
        std::printf(" %s",
                    Num(by_len[dt][L - 1].mean_pred, by_len[dt][L - 1].windows > 0).c_str());
      std::printf("\n");
    }
  }
  int64_t busy = 0;
  for (bool b : r.busy) busy += b;
  for (int busy_only = 0; busy_only < 2; ++busy_only) {
    std::printf("\nOverall, %s (%lld hosts):\n", busy_only ? "busy hosts" : "all hosts",
                static_cast<long long>(busy_only ? busy : static_cast<int64_t>(r.hosts.size())));
    std::printf("%-17s %9s %9s %9s %8s %8s %8s %9s\n", "method", "acc_grand", "acc_paper",
                "acc_worst", "brier", "cells", "dropped", "windows");
    for (size_t m = 0; m < r.methods.size(); ++m) {
      backtest::MethodSummary s =
          backtest::SummarizeMethod(r, m, busy_only != 0, cfg.min_test_windows);
      std::printf("%-17s %s %s %s %s %8lld %8lld %9lld\n", r.methods[m].c_str(),
                  Num(s.acc_grand, s.cells > 0, 9).c_str(),
                  Num(s.acc_paper_style, s.cells > 0, 9).c_str(),
                  Num(s.acc_worst, s.cells > 0, 9).c_str(), Num(s.brier, s.windows > 0, 8, 5).c_str(),
                  static_cast<long long>(s.cells), static_cast<long long>(s.cells_dropped),
                  static_cast<long long>(s.windows));
    }
  }
  std::printf(
      "\nReliability (all hosts): per predicted-TR bin, observed survival [test windows]\n");
  const int bins = cfg.reliability_bins;
  std::printf("%-17s", "method");
  for (int b = 0; b < bins; ++b) {
    std::printf(" %15s",
                absl::StrFormat("%.1f-%.1f", double(b) / bins, double(b + 1) / bins).c_str());
  }
  std::printf("\n");
  for (size_t m = 0; m < r.methods.size(); ++m) {
    std::printf("%-17s", r.methods[m].c_str());
    for (int b = 0; b < bins; ++b) {
      const backtest::ReliabilityBin& rb = r.reliability[m][b];
      if (rb.n == 0) {
        std::printf(" %15s", "-");
      } else {
        std::printf(" %15s", absl::StrFormat("%.3f [%lld]", rb.sum_outcome / rb.n,
                                             static_cast<long long>(rb.n))
                                 .c_str());
      }
    }
    std::printf("\n");
  }
  std::printf(
      "\ncells without training history (dropped for every method): %lld; "
      "global-outage grid points: %lld of %lld\n",
      static_cast<long long>(r.cells_without_history), static_cast<long long>(r.outage_points),
      static_cast<long long>(r.grid_points));
  if (r.outage_few_hosts_points > 0) {
    std::printf(
        "outage rule off at %lld grid points with fewer than %d hosts present (a gap there is "
        "the hosts' own S5; --outage-min-hosts)\n",
        static_cast<long long>(r.outage_few_hosts_points), cfg.outage_min_hosts);
  }
  if (r.frailty_variance > 0 || r.frailty_dispersion > 0) {
    std::printf("host frailty: between-host variance v = %.4g, within-host dispersion phi = %.4g\n",
                r.frailty_variance, r.frailty_dispersion);
  }
  if (cfg.smp_population_days > 0) {
    std::printf("population level over %d days: beta = %.4g from %d training days\n",
                cfg.smp_population_days, r.population_level_beta, r.population_level_pairs);
  }
  std::printf(
      "\npopulation failures per up hour by local day (all hosts; training / test days: of every "
      "host):\n%-8s %-6s %5s %10s %10s %15s\n",
      "day type", "days", "n", "rate", "sd(daily)", "overdispersion");
  for (int dt = 0; dt < 2; ++dt) {
    for (backtest::DayRole role : backtest::kDayRoles) {
      const backtest::DayDispersion d = backtest::SummarizeDays(r.days, dt, role, cfg.step_seconds);
      std::printf("%-8s %-6s %5d %10s %10s %15s\n", dt == 0 ? "weekday" : "weekend",
                  backtest::DayRoleName(role), d.days,
                  Num(d.rate_per_up_hour, d.days > 0, 10, 5).c_str(),
                  Num(d.sd_rate_per_up_hour, d.days > 1, 10, 5).c_str(),
                  Num(d.overdispersion, d.days > 1, 15, 2).c_str());
    }
  }
}

int RunAvailability(int argc, char** argv) {
  const CommandLine args =
      ParseCommandLine(argc - 1, argv + 1, "sojourn-eval availability", kUsage, kOptions);
  if (!args.Has("trace")) Die("--trace PATH is required (try --help)");
  const traces::ImportOptions io = TraceImportOptions(args, "sojourn-eval availability");

  backtest::BacktestConfig cfg;
  cfg.max_window_hours = static_cast<int>(args.GetIntInRange("max-window-hours", 10, 1, 31));
  cfg.history_days = static_cast<int>(args.GetIntInRange("history-days", 0, 0, 36500));
  cfg.train_ratio = args.GetDouble("train-ratio", 0.5);
  cfg.min_test_windows = static_cast<int>(args.GetIntInRange("min-test-windows", 3, 1, 1000000));
  cfg.reliability_bins = static_cast<int>(args.GetIntInRange("reliability-bins", 10, 1, 1000));
  cfg.threads = static_cast<int>(args.GetIntInRange("threads", 2, 1, 2));
  if (cfg.threads < 1 || cfg.threads > 2) Die("--threads must be 1 or 2");
  cfg.methods = GetList(args, "methods");
  for (const std::string& m : cfg.methods) {
    const auto& all = backtest::AllMethods();
    if (std::find(all.begin(), all.end(), m) == all.end()) {
      Die(absl::StrCat("--methods: unknown method '", m, "' (known: ", absl::StrJoin(all, ", "), ")"));
    }
  }
  cfg.day_types = GetList(args, "day-types");
  cfg.classifier.th1 = args.GetDouble("th1", cfg.classifier.th1);
  cfg.classifier.th2 = args.GetDouble("th2", cfg.classifier.th2);
  if (absl::Status st = ValidateThresholdFlags(cfg.classifier.th1, cfg.classifier.th2); !st.ok()) {
    Die(std::string(st.message()));
  }
  cfg.classifier.grace_seconds =
      args.GetIntInRange("grace", cfg.classifier.grace_seconds, 0, 31536000);
  cfg.classifier.guest_working_set_mb =
      args.GetDouble("working-set-mb", cfg.classifier.guest_working_set_mb);
  // The services' bound (ValidateClassifierFlags): more than any host has.
  if (absl::Status st = NumberFlagInRange("--working-set-mb", cfg.classifier.guest_working_set_mb,
                                          0, 1e12);
      !st.ok()) {
    Die(std::string(st.message()));
  }
  if (cfg.min_test_windows < 1) Die("--min-test-windows must be >= 1");

  ApplySmpOptions(args.Get("smp-options"), &cfg.smp_options);
  cfg.smp_prior = args.Get("smp-prior", "hosts");
  if (cfg.smp_prior != "hosts" && cfg.smp_prior != "hours" && cfg.smp_prior != "none") {
    Die("--smp-prior must be hosts, hours or none");
  }
  const std::string age = args.Get("smp-age", "on");
  if (age != "on" && age != "off") Die("--smp-age must be on or off");
  cfg.smp_pass_age = age == "on";
  const std::string frailty = args.Get("smp-frailty", "online");
  if (frailty != "training" && frailty != "online") {
    Die("--smp-frailty must be training or online, got '" + frailty + "'");
  }
  cfg.smp_online_frailty = frailty == "online";
  const std::string pool_at = args.Get("smp-pool-at", "training");
  if (pool_at == "training") {
    cfg.smp_pool_at = backtest::BacktestConfig::PoolAt::kTraining;
  } else if (pool_at == "prior") {
    cfg.smp_pool_at = backtest::BacktestConfig::PoolAt::kPrior;
  } else if (pool_at == "window") {
    cfg.smp_pool_at = backtest::BacktestConfig::PoolAt::kWindow;
  } else {
    Die("--smp-pool-at must be training, prior or window, got '" + pool_at + "'");
  }
  cfg.smp_population_days = static_cast<int>(args.GetIntInRange("smp-population-days", 0, 0, 28));
  const std::string windows = args.Get("train-windows", "per-length");
  if (windows != "per-length" && windows != "longest") {
    Die("--train-windows must be per-length or longest, got '" + windows + "'");
  }
  cfg.windows_per_length = windows == "per-length";

  std::vector<double> sweep = GetDoubleList(args, "sweep-train-ratios");
  for (double r : sweep) {
    if (!(r > 0 && r < 1)) Die(absl::StrCat("--sweep-train-ratios: ", r, " is outside (0, 1)"));
  }
  std::vector<int> noise = GetIntList(args, "noise", {}, 0, 1000);
  // The default lengths up to --max-window-hours (10 h failed after the
  // whole backtest when the windows were shorter).
  std::vector<int> default_noise_windows;
  for (int h : {1, 2, 3, 5, 10}) {
    if (h <= cfg.max_window_hours) default_noise_windows.push_back(h);
  }
  std::vector<int> noise_windows =
      GetIntList(args, "noise-windows", default_noise_windows, 1, cfg.max_window_hours);
  const int64_t seed = args.GetIntInRange("seed", 1, 0, INT64_MAX);

  // Explicit values are checked before the (possibly long) read; the defaults
  // of the grid step, time zone, outage rule and revocation gap depend on the
  // format found.
  if (args.Has("step")) (void)args.GetIntInRange("step", 1, 1, 3600);
  if (args.Has("revocation-gap")) (void)args.GetIntInRange("revocation-gap", 1, 1, 31536000);
  if (args.Has("outage-fraction")) {
    const double f = args.GetDouble("outage-fraction", 0);
    if (f < 0 || f > 1) Die("--outage-fraction must be in [0, 1]");
  }
  const int outage_min_hosts =
      static_cast<int>(args.GetIntInRange("outage-min-hosts", 10, 1, 1000000));
  if (const double off = args.GetDouble("utc-offset", 0); off < -14 || off > 14) {
    Die("--utc-offset wants -14..14 hours");
  }
  std::optional<availability::LocalClock> zone;
  if (args.Has("time-zone")) {
    if (args.Has("utc-offset")) Die("give --utc-offset or --time-zone, not both");
    absl::StatusOr<availability::LocalClock> z = availability::LocalClock::Zone(args.Get("time-zone"));
    if (!z.ok()) Die(absl::StrCat("--time-zone: ", z.status().message()));
    zone = *std::move(z);
  }
  {
    backtest::BacktestConfig early = cfg;
    early.step_seconds = args.GetInt("step", 300);
    if (absl::Status s = backtest::ValidateBacktestConfig(early); !s.ok()) {
      Die(std::string(s.message()));
    }
  }

  // Fail before the long run, not after it; and write nothing until the end,
  // so that a run that fails leaves an earlier --json or --cells intact.
  if (absl::Status st = CheckOutputsAreNotInputs(
          {{"--json", args.Get("json")},
           {"--cells", args.Get("cells")},
           {"--days", args.Get("days")},
           {"--outages", args.Get("outages")}},
          {{"--trace", args.Get("trace")}});
      !st.ok()) {
    Die(std::string(st.message()));
  }
  for (const char* out : {"json", "cells", "days", "outages"}) {
    if (!args.Has(out)) continue;
    if (absl::Status st = CheckWritableFile(args.Get(out)); !st.ok()) {
      Die(absl::StrCat("--", out, ": ", st.message()));
    }
  }

  auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "reading %s ...\n", args.Get("trace").c_str());
  traces::TraceFormat format_used = traces::TraceFormat::kAuto;
  auto traces = traces::ImportTrace(args.Get("trace"), io, &format_used);
  if (!traces.ok()) Die(std::string(traces.status().message()));
  if (traces->empty()) Die("the trace has no hosts");
  CheckMatrixOnlyOptions(args, format_used, "sojourn-eval availability");
  const double t_read = Seconds(t0);
  size_t samples = 0;
  for (const HostTrace& t : *traces) samples += t.samples.size();
  // The format read decides the defaults (matrix vs. sampled traces).
  const bool matrix = format_used == traces::TraceFormat::kAvailabilityMatrix;
  const bool gwa = format_used == traces::TraceFormat::kGwa;
  std::fprintf(stderr, "read %zu hosts, %zu samples in %.1f s (%s)\n", traces->size(), samples,
               t_read,
               matrix ? "availability matrix"
               : gwa  ? "gwa"
                      : "canonical");

  const traces::SampledGridDefaults grid =
      SampledGridFor(*traces, !matrix && (!args.Has("step") || !args.Has("revocation-gap")));
  cfg.step_seconds = args.GetInt("step", matrix ? io.period_seconds : grid.step_seconds);
  if (matrix && !args.Has("step") && (cfg.step_seconds <= 0 || 3600 % cfg.step_seconds != 0)) {
    Die(absl::StrCat("the matrix period (--period ", io.period_seconds,
                     " s) is the grid step and must divide 3600 s; pass --step to choose another"));
  }
  if (zone.has_value()) {
    if (traces->front().wall_clock_timestamps) {
      Die("--time-zone: the trace's timestamps are local date-times, already on the lab's clock; "
          "leave --time-zone out");
    }
    cfg.clock = *zone;
  } else {
    cfg.clock = static_cast<int>(
        std::lround(args.GetDouble("utc-offset", DefaultUtcOffsetHours(gwa, *traces)) * 3600));
  }
  cfg.outage_fraction = args.GetDouble("outage-fraction", matrix ? 0.0 : 0.5);
  cfg.outage_min_hosts = outage_min_hosts;
  cfg.keep_grid_points = args.Has("outages");
  cfg.classifier.revocation_gap_seconds =
      args.GetInt("revocation-gap", matrix ? std::max<int64_t>(1, cfg.step_seconds / 2)
                                           : grid.revocation_gap_seconds);
  if (cfg.classifier.revocation_gap_seconds <= 0) Die("--revocation-gap must be positive");
  WarnLoadAboveOne(*traces);
  if (!matrix) WarnHostsSlowerThanGap(*traces, cfg.classifier.revocation_gap_seconds);
  if (cfg.outage_fraction < 0 || cfg.outage_fraction > 1)
    Die("--outage-fraction must be in [0, 1]");
  if (absl::Status st = traces::CheckGridSize(
          *traces, cfg.step_seconds, kStateGridLimits,
          "pass a larger --step (a divisor of 3600) or cut the trace");
      !st.ok()) {
    Die(std::string(st.message()));
  }

  int last_pct = -1;
  auto last_print = std::chrono::steady_clock::now();
  std::string phase = "backtest";
  // Every 10 % and at least every 30 s while it moves (one long host
  // reports by day type and start hour).
  cfg.progress = [&](double f) {
    const int pct = static_cast<int>(f * 100);
    const auto now = std::chrono::steady_clock::now();
    if (pct / 10 != last_pct / 10 || (pct == 100 && last_pct != 100) ||
        (pct != last_pct && now - last_print >= std::chrono::seconds(30))) {
      std::fprintf(stderr, "  %s: %d%% done\n", phase.c_str(), pct);
      last_pct = pct;
      last_print = now;
    }
  };
  auto t1 = std::chrono::steady_clock::now();
  auto result = backtest::RunBacktest(*traces, cfg);
  if (!result.ok()) Die(std::string(result.status().message()));
  const double t_backtest = Seconds(t1);
  std::fprintf(stderr, "backtest: %zu cells in %.1f s\n", result->cells.size(), t_backtest);
  {
    int64_t test_windows = 0, scored_cells = 0;
    for (const backtest::CellResult& c : result->cells) {
      test_windows += c.n_test;
      scored_cells += c.n_test >= cfg.min_test_windows && c.n_survived > 0;
    }
    if (test_windows > 0 && scored_cells == 0) {
      // Brier scores exist but every relative error is empty.
      std::fprintf(stderr,
                   "warning: no cell has %d test windows with at least one survivor, so every "
                   "relative error is empty (%lld test windows in %zu cells): the test half "
                   "holds too few days of each type; give the trace more days, or pass a "
                   "smaller --min-test-windows or another --train-ratio\n",
                   cfg.min_test_windows, static_cast<long long>(test_windows),
                   result->cells.size());
    }
    // One day type without a relative error while the other has them (a
    // trace of two weeks has its weekends in one half only): its entries are
    // null in the JSON; say which and why rather than let it pass unsaid.
    if (scored_cells > 0) {
      for (int dt = 0; dt < 2; ++dt) {
        const char* name = dt == 0 ? "weekday" : "weekend";
        if (!cfg.day_types.empty() &&
            std::find(cfg.day_types.begin(), cfg.day_types.end(), name) == cfg.day_types.end()) {
          continue;  // not asked for
        }
        int64_t dt_windows = 0, dt_scored = 0, cells = 0;
        for (const backtest::CellResult& c : result->cells) {
          if (c.day_type != dt) continue;
          ++cells;
          dt_windows += c.n_test;
          dt_scored += c.n_test >= cfg.min_test_windows && c.n_survived > 0;
        }
        if (dt_scored > 0) continue;
        int train_days = 0, test_days = 0;
        for (const backtest::DayCount& d : result->days) {
          if (d.day_type != dt || d.hosts == 0) continue;
          train_days += d.train_hosts > 0;
          test_days += d.train_hosts < d.hosts;
        }
        std::fprintf(stderr,
                     "warning: no %s relative error (%lld test windows in %lld cells, none with "
                     "%d test windows and a survivor; %s days with hosts up: %d in a training "
                     "part, %d in a test part): the %s entries are null; give the trace more "
                     "%s days, or pass a smaller --min-test-windows or another --train-ratio\n",
                     name, static_cast<long long>(dt_windows), static_cast<long long>(cells),
                     cfg.min_test_windows, name, train_days, test_days, name, name);
      }
    }
    if (test_windows == 0) {
      // Every average below is empty ("-" here, null in the JSON): say why
      // that usually happens rather than let it pass for a result.
      std::fprintf(stderr,
                   "warning: no test window was scored (%lld grid points of %lld s, revocation "
                   "gap %lld s, %lld cells without training history); a grid on which every "
                   "point is S5 (hosts never up, or a revocation gap shorter than the sample "
                   "period) or too few days give this: check the trace, --step, "
                   "--revocation-gap and --train-ratio\n",
                   static_cast<long long>(result->grid_points),
                   static_cast<long long>(cfg.step_seconds),
                   static_cast<long long>(cfg.classifier.revocation_gap_seconds),
                   static_cast<long long>(result->cells_without_history));
    }
  }

  std::printf("sojourn-eval availability: %s\n", args.Get("trace").c_str());
  std::printf(
      "%zu hosts, grid %lld s, %s, train ratio %.2f, history days %s, windows 1..%d h, "
      "training windows %s\n",
      traces->size(), static_cast<long long>(cfg.step_seconds),
      cfg.clock.has_zone() ? cfg.clock.zone_name().c_str()
                           : absl::StrFormat("UTC%+.1f", cfg.clock.OffsetAt(0) / 3600.0).c_str(),
      cfg.train_ratio, cfg.history_days > 0 ? std::to_string(cfg.history_days).c_str() : "all",
      cfg.max_window_hours, cfg.windows_per_length ? "per length" : "of the longest length");
  PrintReport(*result, cfg);

  nlohmann::json j = backtest::ResultToJson(*result, cfg);
  j["trace"] = args.Get("trace");
  j["smp_options"] = args.Get("smp-options");
  j["smp_prior"] = cfg.smp_prior;
  j["smp_age"] = cfg.smp_pass_age;
  j["smp_frailty"] = cfg.smp_online_frailty ? "online" : "training";
  j["smp_pool_at"] =
      result->smp_pool_at == backtest::BacktestConfig::PoolAt::kWindow  ? "window"
      : result->smp_pool_at == backtest::BacktestConfig::PoolAt::kPrior ? "prior"
                                                                          : "training";
  j["timing_seconds"] = {{"read", t_read}, {"backtest", t_backtest}};

  if (!sweep.empty()) {
    // Paper 000 Fig. 12: weekday windows, different training/test ratios.
    std::printf("\nTraining-ratio sweep (weekdays): average / max-average relative error\n");
    std::printf("%-7s", "ratio");
    for (const std::string& m : result->methods) std::printf(" %21s", m.c_str());
    std::printf("\n");
    for (double ratio : sweep) {
      backtest::BacktestConfig c = cfg;
      c.train_ratio = ratio;
      c.day_types = {"weekday"};
      phase = absl::StrFormat("sweep %.2f", ratio);
      last_pct = -1;
      auto r = backtest::RunBacktest(*traces, c);
      if (!r.ok()) Die(std::string(r.status().message()));
      std::printf("%-7.2f", ratio);
      nlohmann::json row;
      for (size_t m = 0; m < r->methods.size(); ++m) {
        auto by_len = backtest::SummarizeByLength(*r, m, c.max_window_hours, c.min_test_windows);
        double sum = 0, worst = 0;
        for (const auto& ls : by_len[0]) {
          sum += ls.avg_rel_err;
          worst = std::max(worst, ls.avg_rel_err);
        }
        const double avg = sum / c.max_window_hours;
        backtest::MethodSummary s = backtest::SummarizeMethod(*r, m, false, c.min_test_windows);
        std::printf(" %10.4f / %8.4f", avg, worst);
        row[r->methods[m]] = {{"avg_rel_err", avg},
                              {"max_avg_rel_err", worst},
                              {"brier", s.brier},
                              {"cells", s.cells}};
      }
      std::printf("\n");
      j["train_ratio_sweep"][absl::StrFormat("%.2f", ratio)] = row;
    }
  }

  if (!noise.empty()) {
    auto t2 = std::chrono::steady_clock::now();
    auto nr = backtest::RunNoiseInjection(*traces, cfg, noise, noise_windows,
                                          static_cast<uint64_t>(seed));
    if (!nr.ok()) Die(std::string(nr.status().message()));
    std::printf(
        "\nNoise injection (paper 000 Fig. 14): mean |TR_noisy - TR_clean| / TR_clean, "
        "weekday windows from 08:00 in S1\n");
    for (const auto& [method, table] : nr->discrepancy) {
      std::printf("%s\n%-12s", method.c_str(), "injections");
      for (int w : nr->window_hours) std::printf(" %8dh", w);
      std::printf("\n");
      for (size_t k = 0; k < nr->injections.size(); ++k) {
        std::printf("%-12d", nr->injections[k]);
        for (size_t w = 0; w < nr->window_hours.size(); ++w) std::printf(" %9.4f", table[k][w]);
        std::printf("\n");
        for (size_t w = 0; w < nr->window_hours.size(); ++w) {
          j["noise_injection"][method][std::to_string(nr->injections[k])]
           [std::to_string(nr->window_hours[w])] = {{"discrepancy", table[k][w]},
                                                    {"hosts", nr->hosts[method][k][w]}};
        }
      }
    }
    std::fprintf(stderr, "noise injection: %.1f s\n", Seconds(t2));
  }

  // --cells, --outages, --days: each written whole, or the run fails naming it.
  auto write_csv = [&](const char* flag, const std::function<void(std::ostream&)>& write) {
    if (!args.Has(flag)) return;
    const std::string path = args.Get(flag);
    std::ofstream out(path);
    if (!out) Die(absl::StrCat("--", flag, ": cannot write ", path));
    write(out);
    out.close();
    if (!out) Die(absl::StrCat("write error on ", path));
  };
  write_csv("cells", [&](std::ostream& out) { WriteCellsCsv(*result, out); });
  write_csv("outages",
            [&](std::ostream& out) { WriteOutagesCsv(*result, cfg.clock, out); });
  write_csv("days", [&](std::ostream& out) { WriteDaysCsv(*result, cfg.step_seconds, out); });

  std::printf("\ntiming: read %.1f s, backtest %.1f s, total %.1f s\n", t_read, t_backtest,
              Seconds(t0));
  if (args.Has("json")) {
    if (absl::Status st = WriteTextFile(args.Get("json"), JsonText(j, 1) + "\n"); !st.ok()) {
      Die(std::string(st.message()));
    }
  }
  return 0;
}

EvalCommandRegistrar reg("availability",
                         "backtest availability prediction (SMP TR vs baselines) on a host trace",
                         RunAvailability);

}  // namespace
}  // namespace sojourn::eval
