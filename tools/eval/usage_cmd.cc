// sojourn-eval usage: backtests the usage forecasters (paper 003) on a host
// trace with the protocol pinned in issues 5 and 8:
//   - per host, the first 60 % of days train (use patterns), the rest test;
//   - availability matrix (section 3): alpha 10..90 %, eta 10..240 min, 100
//     seeded random tests per cell per host and resource, mu_A per method;
//   - scheduling comparison (section 4.2): at every hour of the test period,
//     a random pool of 15 valid hosts, n = 3 chosen by each method for h in
//     2, 4, 6 hours, performance = 1 - mean CPU use of the chosen hosts;
//     better / equivalent / worse with the 2 % band;
//   - the same blocks on the "active" subset (use > 10 % in at least 5 % of
//     training samples) and, for availability matrices, as summary_desktops
//     with down-time counted as full use.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/cli_util.h"
#include "models/traces/traces.h"
#include "models/usage/forecasters.h"
#include "models/usage/patterns.h"
#include "models/usage/series.h"
#include "nlohmann/json.hpp"
#include "tools/eval/command.h"

namespace sojourn::eval {
namespace {

using usage::DowntimePolicy;
using usage::Forecaster;
using usage::kBinsPerDay;
using usage::kBinsPerHour;
using usage::Resource;
using usage::UsagePatterns;
using usage::UsageSeries;
using json = nlohmann::json;

constexpr char kProgram[] = "sojourn-eval usage";

constexpr char kHelp[] = R"(usage: sojourn-eval usage --trace PATH [options]

Backtests the usage forecasters of LUPA (paper 003) and sojourn's best-of
selector on a host trace: the availability matrix of section 3 (mu_A per
method) and the scheduling comparison of section 4.2 (UPA vs last4).

Protocol (pinned): per host the first 60 % of days train the use patterns,
the remaining days are tested. 100 seeded tests per (alpha, eta) cell, host
and resource; alpha = 10..90 %, eta = 10, 20, 30, 60, 90, 120, 240 min.
Scheduling: at each hour of the test period a random pool of 15 valid hosts,
n = 3 hosts chosen per method, h = 2, 4, 6 h, equivalence band 0.02.
Blocks: summary (all hosts), summary_active (pairs whose use exceeds 10 % in
at least 5 % of training samples), summary_desktops (availability-matrix
traces, down-time counted as full use).

options:
  --trace PATH          trace file or directory (required)
  --format NAME         auto (default), canonical, gwa, availability-matrix
  --json OUT            write the full results as JSON to OUT
  --max-hosts N         use only the first N hosts (default 0 = all)
  --downtime POLICY     discard | full-use (default: full-use for
                        availability matrices, discard otherwise)
  --clusters K          number of use classes, 1..1000 (default 5)
  --linkage NAME        centroid (default), ward, single, complete
  --normalization NAME  variational (default) or pure
  --utc-offset-hours H  days start at local midnight, local = UTC + H, -14..14
                        (default 0)
  --residual-steps K    upa: fit the k-step residual coefficients for
                        k = 1..K instead of phi^k, K in 0..2016 (a week of
                        5-minute steps; default 0: phi^k)
  --unestimated-phi X   upa: residual coefficient of a host whose phi cannot
                        be estimated (under a day of residual pairs, or all
                        residuals zero); default 0.999 (the deviation
                        persists); 0 = the paper's forecast there
  --threshold-answers M state (default): a resource whose training values
                        are all 0 or 1 (an availability matrix) answers the
                        tests with the more likely state of each forecast
                        bin; mean: with the forecast value itself
  --seed N              seed of all random draws (default 1)
  --tests N             tests per matrix cell, 1..100000 (default 100)
  --sweep               also run the UPA parameter sweep of section 3
                        (4 linkages x k in 5, 10 x pure / variational; upa_paper)
  --help                this text

Methods: upa (sojourn's UPA: the paper's forecast plus a decaying residual
with the per-host coefficient fitted on the training data), upa_paper (the
paper-literal UPA), last4, persist, same_time_yesterday (forecasters), always_yes
(answers yes to every test), best_of (per-host selector, falling back to the
data-age rule), adaptive (LUPA's data-age rule of section 4.2 with the idle
rule). Progress goes to stderr; tables to stdout.

Limits: a host may span at most 10,000 days (27 years) from its first to its
last sample, and so may the whole trace; the hosts' 5-minute bins may total
at most 1e8 (300 hosts x 3 years); beyond, the run is refused (exit 2).
)";

// Largest usage grids (traces::CheckGridSize): 10,000 days per host and over
// the whole trace (the day clustering is quadratic in days: 11,600 days took
// 25 s), 1e8 bins in all (about 4 GB with the resampling buffers).
constexpr traces::GridLimits kUsageBinLimits{10000.0 * 288 + 1, 10000.0 * 288 + 1, 1e8,
                                              10000.0 * 86400};

constexpr double kTrainFraction = 0.6;
constexpr int kPoolSize = 15;
constexpr int kChosen = 3;
constexpr int kSchedHours[] = {2, 4, 6};
constexpr double kBand = 0.02;
constexpr double kActiveUse = 0.10;
constexpr double kActiveShare = 0.05;

// Methods of the availability matrix, in output order.
const std::vector<std::string> kMatrixMethods = {
    "upa",        "upa_paper", "last4",   "persist", "same_time_yesterday",
    "always_yes", "best_of",   "adaptive"};
// Methods of the scheduling comparison.
const std::vector<std::string> kSchedMethods = {
    "rr", "upa", "upa_paper", "last4", "persist", "same_time_yesterday", "best_of", "adaptive"};

struct Args {
  std::string trace;
  std::string format = "auto";
  std::string json_out;
  int max_hosts = 0;
  std::string downtime;  // empty: by format
  usage::PatternOptions patterns;
  int64_t utc_offset_seconds = 0;
  uint64_t seed = 1;
  int tests = 100;
  bool sweep = false;
  bool state_answers = true;  // --threshold-answers state
};

[[noreturn]] void Usage(const std::string& reason) {
  std::fprintf(stderr, "%s: %s (try --help)\n", kProgram, reason.c_str());
  std::exit(2);
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  const CommandLine cl = ParseCommandLine(
      argc - 1, argv + 1, kProgram, kHelp,
      {"trace", "format", "json", "max-hosts", "downtime", "clusters", "linkage", "normalization",
       "normalisation", "utc-offset-hours", "seed", "tests", "residual-steps",
       "unestimated-phi", "threshold-answers"},
      {"sweep"});
  a.sweep = cl.Flag("sweep");
  for (const auto& option : cl.ordered()) {
    const std::string key = "--" + option.first;
    const std::string& value = option.second;
    // Range-checked: static_cast<int> of an unbounded value wrapped
    // 2147483648 to a negative and 4294967297 to 1.
    auto to_int = [&](int64_t lo, int64_t hi) {
      absl::StatusOr<int64_t> v = ParseIntInRange(key, value, lo, hi);
      if (!v.ok()) Usage(std::string(v.status().message()));
      return *v;
    };
    if (key == "--trace") {
      a.trace = value;
    } else if (key == "--format") {
      a.format = value;
    } else if (key == "--json") {
      a.json_out = value;
    } else if (key == "--max-hosts") {
      a.max_hosts = static_cast<int>(to_int(0, INT32_MAX));
    } else if (key == "--downtime") {
      auto p = usage::ParseDowntimePolicy(value);
      if (!p.ok()) Usage(std::string(p.status().message()));
      a.downtime = value;
    } else if (key == "--clusters") {
      a.patterns.clusters = static_cast<int>(to_int(1, 1000));
    } else if (key == "--linkage") {
      auto l = usage::ParseLinkage(value);
      if (!l.ok()) Usage(std::string(l.status().message()));
      a.patterns.linkage = *l;
    } else if (key == "--normalization" || key == "--normalisation") {
      auto n = usage::ParseNormalization(value);
      if (!n.ok()) Usage(std::string(n.status().message()));
      a.patterns.normalization = *n;
    } else if (key == "--utc-offset-hours") {
      double h;
      if (!absl::SimpleAtod(value, &h) || !(std::abs(h) <= 14))  // also refuses nan
        Usage("--utc-offset-hours wants -14..14");
      a.utc_offset_seconds = static_cast<int64_t>(std::lround(h * 3600));
    } else if (key == "--residual-steps") {
      a.patterns.residual_steps = static_cast<int>(to_int(0, 2016));
    } else if (key == "--unestimated-phi") {
      double phi;
      if (!absl::SimpleAtod(value, &phi) || !(phi >= 0 && phi <= usage::kMaxResidualPhi)) {
        Usage(absl::StrCat("--unestimated-phi wants a number in [0, ", usage::kMaxResidualPhi,
                           "], got '", value, "'"));
      }
      a.patterns.unestimated_residual_phi = phi;
    } else if (key == "--threshold-answers") {
      if (value != "state" && value != "mean") {
        Usage(absl::StrCat("--threshold-answers wants state or mean, got '", value, "'"));
      }
      a.state_answers = value == "state";
    } else if (key == "--seed") {
      a.seed = static_cast<uint64_t>(to_int(0, INT64_MAX));
    } else if (key == "--tests") {
      a.tests = static_cast<int>(to_int(1, 100000));
    }
  }
  if (a.trace.empty()) Usage("--trace is required");
  // Before the (possibly long) run, not after it.
  if (absl::Status st = CheckOutputsAreNotInputs({{"--json", a.json_out}}, {{"--trace", a.trace}});
      !st.ok()) {
    Usage(std::string(st.message()));
  }
  if (!a.json_out.empty()) {
    if (absl::Status st = CheckWritableFile(a.json_out); !st.ok()) {
      Usage(absl::StrCat("--json: ", st.message()));
    }
  }
  return a;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x7F4A7C159E3779B9ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return x;
}

// One host-resource pair under test.
struct Pair {
  int host = 0;
  Resource resource = Resource::kCpu;
  bool active = false;
  int64_t train_end = 0;  // first test bin
  int64_t first_valid = -1;
  // Training values all 0 or 1 (usage::IsBinaryUse) and --threshold-answers
  // state: tests are answered with usage::ToThresholdAnswer.
  bool binary_use = false;
  UsagePatterns patterns, backtest;
  usage::RecentErrorTable table;
  // Results.
  std::map<std::string, double> mu_a;
  std::map<std::string, double> sweep;
  std::map<std::string, int> best_of_choice;
  int tests = 0;
};

struct Host {
  std::string name;
  UsageSeries series;
  int days = 0;
  int train_days = 0;
  int64_t train_end = 0;
  int pair[2] = {-1, -1};  // index into pairs, -1 when the resource has no data
};

struct Context {
  Args args;
  DowntimePolicy downtime = DowntimePolicy::kDiscard;
  usage::AdaptiveOptions adaptive;
  usage::SelectorOptions selector;
};

const UsagePatterns* Usable(const UsagePatterns& p) { return p.empty() ? nullptr : &p; }

// Forecast with method `m` for pair `p` at bin t over `horizon` bins. The
// forecasters fall back to persistence when they cannot answer, and to full
// use (answer "no") when nothing is known. Returns the forecaster that
// answered (for best_of / adaptive).
Forecaster Predict(const Context& ctx, const Host& host, const Pair& p, const std::string& m,
                   int64_t t, int horizon, std::vector<double>* out,
                   const UsagePatterns* upa_patterns = nullptr) {
  const std::vector<double>& s = host.series.of(p.resource);
  out->assign(horizon, 1.0);
  Forecaster f = Forecaster::kPersist;
  if (m == "upa") {
    f = Forecaster::kUpa;
  } else if (m == "upa_paper") {
    f = Forecaster::kUpaPaper;
  } else if (m == "last4") {
    f = Forecaster::kLast4;
  } else if (m == "persist") {
    f = Forecaster::kPersist;
  } else if (m == "same_time_yesterday") {
    f = Forecaster::kSameTimeYesterday;
  } else if (m == "best_of" || m == "adaptive") {
    const usage::MethodChoice rule = usage::DataAgeRule(s, t, p.first_valid, horizon, ctx.downtime,
                                                        Usable(p.patterns), ctx.adaptive);
    f = m == "adaptive"
            ? rule.method
            : usage::SelectBest(p.table.Recent(t, horizon), rule, ctx.selector.min_points).method;
  }
  const UsagePatterns* pat = upa_patterns != nullptr ? upa_patterns : Usable(p.patterns);
  if (usage::Forecast(f, s, t, horizon, ctx.downtime, pat, out->data())) return f;
  if (usage::Forecast(Forecaster::kPersist, s, t, horizon, ctx.downtime, nullptr, out->data())) {
    return Forecaster::kPersist;
  }
  out->assign(horizon, 1.0);
  return Forecaster::kPersist;
}

// Draws the matrix tests of one pair: for every cell `tests` start bins in
// the test period whose eta bins are all known.
struct MatrixTest {
  int alpha = 0, eta = 0;
  int64_t t = 0;
};

std::vector<MatrixTest> DrawTests(const Context& ctx, const Host& host, const Pair& p) {
  std::vector<MatrixTest> out;
  const std::vector<double>& s = host.series.of(p.resource);
  const int64_t n = static_cast<int64_t>(s.size());
  for (size_t e = 0; e < usage::kEtaMinutes.size(); ++e) {
    const int eta_bins = usage::kEtaMinutes[e] / 5;
    const int64_t lo = std::max<int64_t>(p.train_end, kBinsPerDay);
    const int64_t hi = n - eta_bins;  // inclusive
    if (hi < lo) continue;
    for (int a = 0; a < usage::kNumAlphas; ++a) {
      std::mt19937_64 rng(
          Mix(Mix(ctx.args.seed, p.host * 2 + static_cast<int>(p.resource)), e * 16 + a));
      std::uniform_int_distribution<int64_t> pick(lo, hi);
      int got = 0;
      for (int attempt = 0; got < ctx.args.tests && attempt < 50 * ctx.args.tests; ++attempt) {
        const int64_t t = pick(rng);
        bool ok = true;
        for (int i = 0; ok && i < eta_bins; ++i) {
          ok = !std::isnan(usage::HistoryValue(s, t + i, ctx.downtime));
        }
        if (!ok) continue;
        out.push_back({a, static_cast<int>(e), t});
        ++got;
      }
    }
  }
  return out;
}

// mu_A of one method over the drawn tests: mean over cells of the share of
// correct answers (section 3).
double MuA(const std::vector<MatrixTest>& tests, const std::vector<char>& correct) {
  std::vector<int> ok(usage::kNumAlphas * usage::kEtaMinutes.size(), 0), n(ok.size(), 0);
  for (size_t i = 0; i < tests.size(); ++i) {
    const int cell = tests[i].eta * usage::kNumAlphas + tests[i].alpha;
    ok[cell] += correct[i];
    ++n[cell];
  }
  double sum = 0;
  int cells = 0;
  for (size_t c = 0; c < ok.size(); ++c) {
    if (n[c] == 0) continue;
    sum += static_cast<double>(ok[c]) / n[c];
    ++cells;
  }
  return cells > 0 ? sum / cells : std::nan("");
}

void RunMatrix(const Context& ctx, const std::vector<Host>& hosts, Pair* p,
               const std::vector<std::pair<std::string, UsagePatterns>>& sweep) {
  const Host& host = hosts[p->host];
  const std::vector<double>& s = host.series.of(p->resource);
  const std::vector<MatrixTest> tests = DrawTests(ctx, host, *p);
  p->tests = static_cast<int>(tests.size());
  if (tests.empty()) return;
  // Actual answers.
  std::vector<char> actual(tests.size());
  std::vector<double> buf(usage::kTestHorizonBins);
  for (size_t i = 0; i < tests.size(); ++i) {
    const int eta_bins = usage::kEtaMinutes[tests[i].eta] / 5;
    for (int b = 0; b < eta_bins; ++b)
      buf[b] = usage::HistoryValue(s, tests[i].t + b, ctx.downtime);
    actual[i] = usage::StaysAvailable(buf.data(), eta_bins, usage::Alpha(tests[i].alpha));
  }
  std::vector<char> correct(tests.size());
  std::vector<double> pred;
  for (const std::string& m : kMatrixMethods) {
    for (size_t i = 0; i < tests.size(); ++i) {
      const int eta_bins = usage::kEtaMinutes[tests[i].eta] / 5;
      bool yes = true;
      if (m != "always_yes") {
        const Forecaster f = Predict(ctx, host, *p, m, tests[i].t, eta_bins, &pred);
        if (m == "best_of") ++p->best_of_choice[usage::ForecasterName(f)];
        usage::ToThresholdAnswer(p->binary_use, pred.data(), eta_bins);
        yes = usage::StaysAvailable(pred.data(), eta_bins, usage::Alpha(tests[i].alpha));
      }
      correct[i] = yes == static_cast<bool>(actual[i]);
    }
    p->mu_a[m] = MuA(tests, correct);
  }
  for (const auto& [name, patterns] : sweep) {
    for (size_t i = 0; i < tests.size(); ++i) {
      const int eta_bins = usage::kEtaMinutes[tests[i].eta] / 5;
      Predict(ctx, host, *p, "upa_paper", tests[i].t, eta_bins, &pred, Usable(patterns));
      usage::ToThresholdAnswer(p->binary_use, pred.data(), eta_bins);
      correct[i] = usage::StaysAvailable(pred.data(), eta_bins, usage::Alpha(tests[i].alpha)) ==
                   static_cast<bool>(actual[i]);
    }
    p->sweep[name] = MuA(tests, correct);
  }
}

// One scheduling test: the performance of every method.
struct SchedTest {
  int h = 0;
  bool active_pool = false;
  int pool = 0;
  std::map<std::string, double> perf;
};

// Mean use of `s` over bins [t, t + bins), NaN if a bin is unknown.
double MeanUse(const std::vector<double>& s, int64_t t, int bins, DowntimePolicy d) {
  double sum = 0;
  for (int i = 0; i < bins; ++i) {
    const double v = usage::HistoryValue(s, t + i, d);
    if (std::isnan(v)) return v;
    sum += v;
  }
  return sum / bins;
}

std::vector<SchedTest> RunScheduling(const Context& ctx, const std::vector<Host>& hosts,
                                     const std::vector<Pair>& pairs, bool active_only) {
  std::vector<SchedTest> out;
  std::vector<int> cands;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const int pi = hosts[h].pair[0];
    if (pi < 0) continue;
    if (active_only && !pairs[pi].active) continue;
    cands.push_back(static_cast<int>(h));
  }
  int pool_size = kPoolSize;
  if (static_cast<int>(cands.size()) < kPoolSize) {
    if (!active_only || static_cast<int>(cands.size()) < 2 * kChosen) return out;
    pool_size = static_cast<int>(cands.size());
  }
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (int h : cands) {
    t0 = std::min(t0, hosts[h].series.UnixOfBin(hosts[h].train_end));
    t1 = std::max(t1, hosts[h].series.UnixOfBin(hosts[h].series.bins()));
  }
  // The first whole hour at or after t0 (a ceiling that also holds before
  // 1970: (t0 + 3599) / 3600 truncated towards zero and lost an hour).
  if (const int64_t past = ((t0 % 3600) + 3600) % 3600; past != 0) t0 += 3600 - past;
  std::vector<double> pred;
  for (int64_t tu = t0; tu < t1; tu += 3600) {
    for (int hours : kSchedHours) {
      const int bins = hours * kBinsPerHour;
      std::vector<int> valid;
      for (int h : cands) {
        const Host& host = hosts[h];
        const int64_t t = host.series.BinOf(tu);
        if (t < host.train_end || t < kBinsPerDay || t + bins > host.series.bins()) continue;
        if (std::isnan(MeanUse(host.series.cpu, t, bins, ctx.downtime))) continue;
        valid.push_back(h);
      }
      if (static_cast<int>(valid.size()) < pool_size) continue;
      std::mt19937_64 rng(Mix(Mix(ctx.args.seed, static_cast<uint64_t>(tu)), hours));
      std::shuffle(valid.begin(), valid.end(), rng);
      valid.resize(pool_size);
      SchedTest test;
      test.h = hours;
      test.active_pool = active_only;
      test.pool = pool_size;
      std::vector<double> actual(pool_size);
      for (int i = 0; i < pool_size; ++i) {
        const Host& host = hosts[valid[i]];
        actual[i] = MeanUse(host.series.cpu, host.series.BinOf(tu), bins, ctx.downtime);
      }
      auto perf_of = [&](const std::vector<int>& chosen) {
        double sum = 0;
        for (int i : chosen) sum += actual[i];
        return 1.0 - sum / chosen.size();
      };
      // RR: the pool is in random order; the first n (section 4.2).
      std::vector<int> order(pool_size);
      std::iota(order.begin(), order.end(), 0);
      test.perf["rr"] = perf_of(std::vector<int>(order.begin(), order.begin() + kChosen));
      for (const std::string& m : kSchedMethods) {
        if (m == "rr") continue;
        std::vector<double> predicted(pool_size);
        for (int i = 0; i < pool_size; ++i) {
          const Host& host = hosts[valid[i]];
          const Pair& p = pairs[host.pair[0]];
          Predict(ctx, host, p, m, host.series.BinOf(tu), bins, &pred);
          predicted[i] = std::accumulate(pred.begin(), pred.end(), 0.0) / bins;
        }
        std::vector<int> idx = order;
        std::stable_sort(idx.begin(), idx.end(),
                         [&](int a, int b) { return predicted[a] < predicted[b]; });
        test.perf[m] = perf_of(std::vector<int>(idx.begin(), idx.begin() + kChosen));
      }
      out.push_back(std::move(test));
    }
  }
  return out;
}

json Compare(const std::vector<SchedTest>& tests, const std::string& a, const std::string& b) {
  int better = 0, equivalent = 0, worse = 0;
  for (const SchedTest& t : tests) {
    const double d = t.perf.at(a) - t.perf.at(b);
    if (d > kBand) {
      ++better;
    } else if (d < -kBand) {
      ++worse;
    } else {
      ++equivalent;
    }
  }
  // No test: the shares are unknown (null), not 0.
  if (tests.empty()) {
    return json{{"better", nullptr}, {"equivalent", nullptr}, {"worse", nullptr}, {"tests", 0}};
  }
  const double n = static_cast<double>(tests.size());
  return json{{"better", better / n},
              {"equivalent", equivalent / n},
              {"worse", worse / n},
              {"tests", tests.size()}};
}

json Block(const std::vector<const Pair*>& pairs, const std::vector<SchedTest>& sched,
           const std::vector<Host>& hosts) {
  json b;
  std::map<std::string, double> sum;
  std::map<std::string, std::map<std::string, double>> by_res;
  std::map<std::string, int> res_n;
  std::map<std::string, double> sweep_sum;
  std::map<std::string, long> choice;
  std::vector<char> seen(hosts.size(), 0);
  int n = 0, binary = 0;
  for (const Pair* p : pairs) {
    if (p->tests == 0) continue;
    ++n;
    binary += p->binary_use ? 1 : 0;
    seen[p->host] = 1;
    const std::string r = usage::ResourceName(p->resource);
    ++res_n[r];
    for (const auto& [m, v] : p->mu_a) {
      sum[m] += v;
      by_res[r][m] += v;
    }
    for (const auto& [m, v] : p->sweep) sweep_sum[m] += v;
    for (const auto& [m, c] : p->best_of_choice) choice[m] += c;
  }
  b["hosts"] = std::count(seen.begin(), seen.end(), 1);
  b["host_resource_pairs"] = n;
  b["binary_use_pairs"] = binary;
  json mu = json::object();
  for (const auto& [m, v] : sum) mu[m] = v / n;
  b["mu_a"] = mu;
  json br = json::object();
  for (const auto& [r, ms] : by_res) {
    json o = json::object();
    for (const auto& [m, v] : ms) o[m] = v / res_n[r];
    o["pairs"] = res_n[r];
    br[r] = o;
  }
  b["mu_a_by_resource"] = br;
  if (!sweep_sum.empty()) {
    json sw = json::object();
    for (const auto& [m, v] : sweep_sum) sw[m] = v / n;
    b["upa_sweep_mu_a"] = sw;
  }
  long total_choice = 0;
  for (const auto& [m, c] : choice) total_choice += c;
  json ch = json::object();
  for (const auto& [m, c] : choice) ch[m] = static_cast<double>(c) / std::max(1L, total_choice);
  b["best_of_answered_by"] = ch;
  b["upa_vs_last4"] = Compare(sched, "upa", "last4");
  b["upa_paper_vs_last4"] = Compare(sched, "upa_paper", "last4");
  b["upa_vs_upa_paper"] = Compare(sched, "upa", "upa_paper");
  // The fitted residual coefficients of the pairs' current patterns.
  std::vector<double> phis;
  for (const Pair* p : pairs) {
    if (p->tests > 0 && !p->patterns.empty()) phis.push_back(p->patterns.residual_phi);
  }
  if (!phis.empty()) {
    std::sort(phis.begin(), phis.end());
    auto q = [&](double f) { return phis[static_cast<size_t>(f * (phis.size() - 1) + 0.5)]; };
    b["residual_phi"] = json{{"pairs_with_patterns", phis.size()},
                             {"zero", std::count(phis.begin(), phis.end(), 0.0)},
                             {"min", phis.front()},
                             {"p10", q(0.1)},
                             {"median", q(0.5)},
                             {"p90", q(0.9)},
                             {"max", phis.back()}};
  }
  json s;
  s["tests"] = sched.size();
  s["pool"] = sched.empty() ? 0 : sched.front().pool;
  json perf = json::object();
  for (const std::string& m : kSchedMethods) {
    double v = 0;
    for (const SchedTest& t : sched) v += t.perf.at(m);
    perf[m] = sched.empty() ? std::nan("") : v / sched.size();
  }
  s["mean_performance"] = perf;
  s["best_of_vs_last4"] = Compare(sched, "best_of", "last4");
  s["upa_vs_rr"] = Compare(sched, "upa", "rr");
  s["last4_vs_rr"] = Compare(sched, "last4", "rr");
  s["upa_vs_persist"] = Compare(sched, "upa", "persist");
  json by_h = json::object();
  for (int h : kSchedHours) {
    std::vector<SchedTest> sub;
    for (const SchedTest& t : sched) {
      if (t.h == h) sub.push_back(t);
    }
    by_h[std::to_string(h)] = json{{"upa_vs_last4", Compare(sub, "upa", "last4")},
                                   {"upa_paper_vs_last4", Compare(sub, "upa_paper", "last4")},
                                   {"upa_vs_upa_paper", Compare(sub, "upa", "upa_paper")},
                                   {"best_of_vs_last4", Compare(sub, "best_of", "last4")}};
  }
  s["by_h"] = by_h;
  b["scheduling"] = s;
  return b;
}

void PrintBlock(const std::string& title, const json& b) {
  std::printf("\n## %s: %d hosts, %d host-resource pairs\n\n", title.c_str(), b["hosts"].get<int>(),
              b["host_resource_pairs"].get<int>());
  std::printf("| method | mu_A | 1 - mu_A |");
  for (const auto& [r, o] : b["mu_a_by_resource"].items()) std::printf(" mu_A %s |", r.c_str());
  std::printf("\n|---|---|---|");
  for (size_t i = 0; i < b["mu_a_by_resource"].size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const std::string& m : kMatrixMethods) {
    if (!b["mu_a"].contains(m)) continue;
    // null (NaN) when no test of a pair could be drawn.
    auto cell = [](const json& v, bool complement) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) return std::string("-");
      return absl::StrFormat("%.4f", complement ? 1 - v.get<double>() : v.get<double>());
    };
    std::printf("| %s | %s | %s |", m.c_str(), cell(b["mu_a"][m], false).c_str(),
                cell(b["mu_a"][m], true).c_str());
    for (const auto& [r, o] : b["mu_a_by_resource"].items()) {
      std::printf(" %s |", o.contains(m) ? cell(o[m], false).c_str() : "-");
    }
    std::printf("\n");
  }
  if (b.contains("upa_sweep_mu_a")) {
    std::printf("\nUPA parameter sweep (mu_A):\n\n| linkage/k/normalisation | mu_A |\n|---|---|\n");
    for (const auto& [m, v] : b["upa_sweep_mu_a"].items()) {
      std::printf("| %s | %.4f |\n", m.c_str(), v.get<double>());
    }
  }
  if (b.contains("residual_phi")) {
    const json& f = b["residual_phi"];
    std::printf(
        "\nUPA residual phi over %d pairs: %d zero, min %.3f, p10 %.3f, median %.3f, p90 %.3f, "
        "max %.3f\n",
        f["pairs_with_patterns"].get<int>(), f["zero"].get<int>(), f["min"].get<double>(),
        f["p10"].get<double>(), f["median"].get<double>(), f["p90"].get<double>(),
        f["max"].get<double>());
  }
  std::printf("\nbest_of answered by:");
  for (const auto& [m, v] : b["best_of_answered_by"].items()) {
    std::printf(" %s %.1f%%", m.c_str(), 100 * v.get<double>());
  }
  const json& s = b["scheduling"];
  std::printf("\n\nScheduling (%d tests, pool %d, n = %d):\n\n", s["tests"].get<int>(),
              s["pool"].get<int>(), kChosen);
  std::printf("| method | mean performance |\n|---|---|\n");
  for (const std::string& m : kSchedMethods) {
    // null (NaN) when no scheduling test could run (too few hosts for the pool).
    const json& v = s["mean_performance"][m];
    if (v.is_number() && std::isfinite(v.get<double>())) {
      std::printf("| %s | %.4f |\n", m.c_str(), v.get<double>());
    } else {
      std::printf("| %s | - |\n", m.c_str());
    }
  }
  auto cmp = [](const char* name, const json& c) {
    auto share = [&](const char* key) {
      return c[key].is_number() ? absl::StrFormat("%.3f", c[key].get<double>()) : std::string("-");
    };
    std::printf("| %s | %s | %s | %s | %d |\n", name, share("better").c_str(),
                share("equivalent").c_str(), share("worse").c_str(), c["tests"].get<int>());
  };
  std::printf("\n| comparison | better | equivalent | worse | tests |\n|---|---|---|---|---|\n");
  cmp("upa vs last4", b["upa_vs_last4"]);
  for (int h : kSchedHours) {
    cmp(absl::StrCat("  h = ", h, " h").c_str(), s["by_h"][std::to_string(h)]["upa_vs_last4"]);
  }
  cmp("upa_paper vs last4", b["upa_paper_vs_last4"]);
  for (int h : kSchedHours) {
    cmp(absl::StrCat("  h = ", h, " h").c_str(),
        s["by_h"][std::to_string(h)]["upa_paper_vs_last4"]);
  }
  cmp("upa vs upa_paper", b["upa_vs_upa_paper"]);
  cmp("best_of vs last4", s["best_of_vs_last4"]);
  cmp("upa vs persist", s["upa_vs_persist"]);
  cmp("upa vs rr", s["upa_vs_rr"]);
  cmp("last4 vs rr", s["last4_vs_rr"]);
}

int RunUsage(int argc, char** argv) {
  Context ctx;
  ctx.args = ParseArgs(argc, argv);
  const Args& args = ctx.args;
  auto format = traces::ParseTraceFormat(args.format);
  if (!format.ok()) Usage(std::string(format.status().message()));
  traces::ImportOptions io;
  io.format = *format;
  io.max_hosts = args.max_hosts;
  const absl::Time start = absl::Now();
  std::fprintf(stderr, "%s: reading %s\n", kProgram, args.trace.c_str());
  auto imported = traces::ImportTrace(args.trace, io);
  if (!imported.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, std::string(imported.status().message()).c_str());
    return 2;
  }
  // Resample and the scheduling loop are dense over a host's and the
  // trace's span: two samples 2e10 s apart took all memory.
  if (absl::Status st = traces::CheckGridSize(*imported, usage::kBinSeconds, kUsageBinLimits,
                                              "cut the trace (usage bins are 5 minutes)");
      !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, std::string(st.message()).c_str());
    return 2;
  }
  WarnLoadAboveOne(*imported);
  // An availability matrix has one probe per period and no samples while a
  // host is down; tell it apart by the absence of memory data and an hourly
  // period when --format auto.
  bool matrix = *format == traces::TraceFormat::kAvailabilityMatrix;
  if (*format == traces::TraceFormat::kAuto && !imported->empty()) {
    bool any_mem = false;
    for (const HostTrace& t : *imported) {
      for (const HostSample& s : t.samples) any_mem = any_mem || s.has_free_mem();
      if (any_mem) break;
    }
    matrix = !any_mem && imported->front().period_seconds >= 3600;
  }
  ctx.downtime = args.downtime.empty()
                     ? (matrix ? DowntimePolicy::kFullUse : DowntimePolicy::kDiscard)
                     : *usage::ParseDowntimePolicy(args.downtime);
  ctx.args.patterns.downtime = ctx.downtime;

  usage::ResampleOptions ro;
  ro.utc_offset_seconds = args.utc_offset_seconds;
  std::vector<Host> hosts;
  for (const HostTrace& t : *imported) {
    if (t.samples.empty() && !matrix) continue;
    auto s = usage::Resample(t, ro);
    Host h;
    h.name = t.host;
    if (s.ok()) {
      h.series = std::move(*s);
    } else if (matrix) {
      h.series.utc_offset_seconds = args.utc_offset_seconds;  // never up: filled below
    } else {
      std::fprintf(stderr, "%s: skipping host %s: %s\n", kProgram, t.host.c_str(),
                   std::string(s.status().message()).c_str());
      continue;
    }
    hosts.push_back(std::move(h));
  }
  if (matrix && !hosts.empty()) {
    // Every row of a matrix covers the same probes: align all hosts on the
    // matrix's first midnight and last probe, so hours before a host's first
    // and after its last "up" are down-time too.
    const int64_t period =
        imported->front().period_seconds > 0 ? imported->front().period_seconds : 3600;
    int64_t last = io.start_unix_seconds;
    for (const HostTrace& t : *imported) {
      if (!t.samples.empty()) last = std::max(last, t.samples.back().unix_seconds);
    }
    const int64_t local0 = io.start_unix_seconds + args.utc_offset_seconds;
    const int64_t origin =
        (local0 >= 0 ? local0 / 86400 : (local0 - 86399) / 86400) * 86400 - args.utc_offset_seconds;
    const int64_t end_bin = (last + period - origin) / usage::kBinSeconds;
    for (Host& h : hosts) {
      UsageSeries aligned;
      aligned.origin_unix = origin;
      aligned.utc_offset_seconds = args.utc_offset_seconds;
      aligned.Resize(end_bin);
      if (!h.series.cpu.empty()) {
        const int64_t shift = (h.series.origin_unix - origin) / usage::kBinSeconds;
        for (int64_t b = 0; b < h.series.bins() && b + shift < end_bin; ++b) {
          aligned.cpu[b + shift] = h.series.cpu[b];
          aligned.mem[b + shift] = h.series.mem[b];
        }
      }
      h.series = std::move(aligned);
    }
  }
  std::fprintf(stderr, "%s: %zu hosts read in %.1f s; down-time %s\n", kProgram, hosts.size(),
               absl::ToDoubleSeconds(absl::Now() - start), usage::DowntimePolicyName(ctx.downtime));
  if (hosts.empty()) {
    std::fprintf(stderr, "%s: the trace has no hosts\n", kProgram);
    return 2;
  }

  // Sweep configurations (section 3): 4 linkages x k in 5, 10 x pure/variational.
  std::vector<usage::PatternOptions> sweep_opts;
  std::vector<std::string> sweep_names;
  if (args.sweep) {
    for (usage::Linkage l : {usage::Linkage::kCentroid, usage::Linkage::kWard,
                             usage::Linkage::kSingle, usage::Linkage::kComplete}) {
      for (int k : {5, 10}) {
        for (usage::Normalization n :
             {usage::Normalization::kPure, usage::Normalization::kVariational}) {
          usage::PatternOptions o = ctx.args.patterns;
          o.linkage = l;
          o.clusters = k;
          o.normalization = n;
          sweep_opts.push_back(o);
          sweep_names.push_back(
              absl::StrCat(usage::LinkageName(l), "/k", k, "/", usage::NormalizationName(n)));
        }
      }
    }
  }

  // Training: patterns on the first 60 % of days; backtest patterns a
  // selector window earlier, for the selector's replay of UPA.
  std::vector<Pair> pairs;
  for (size_t hi = 0; hi < hosts.size(); ++hi) {
    Host& h = hosts[hi];
    h.days = static_cast<int>((h.series.bins() + kBinsPerDay - 1) / kBinsPerDay);
    h.train_days = static_cast<int>(std::floor(kTrainFraction * h.days));
    h.train_end = int64_t{h.train_days} * kBinsPerDay;
    for (Resource r : {Resource::kCpu, Resource::kMemory}) {
      const std::vector<double>& s = h.series.of(r);
      int valid = 0, busy = 0;
      for (int64_t b = 0; b < std::min<int64_t>(h.train_end, s.size()); ++b) {
        if (std::isnan(s[b])) continue;
        ++valid;
        busy += s[b] > kActiveUse ? 1 : 0;
      }
      // Under full use, down-time is use too (the desktops' only "use").
      if (ctx.downtime == DowntimePolicy::kFullUse && h.series.FirstValidBin(r) >= 0) {
        valid = busy = 0;
        for (int64_t b = 0; b < std::min<int64_t>(h.train_end, s.size()); ++b) {
          ++valid;
          busy += usage::HistoryValue(s, b, ctx.downtime) > kActiveUse ? 1 : 0;
        }
      }
      if (valid == 0) continue;  // no training data for this resource
      Pair p;
      p.host = static_cast<int>(hi);
      p.resource = r;
      p.train_end = h.train_end;
      p.first_valid = h.series.FirstValidBin(r);
      p.active = busy >= kActiveShare * valid;
      p.binary_use = ctx.args.state_answers && usage::IsBinaryUse(s, h.train_end);
      const int64_t until = h.series.UnixOfBin(h.train_end);
      auto cur = usage::AnalysePatterns(h.series, r, ctx.args.patterns, until);
      if (cur.ok()) p.patterns = std::move(*cur);
      auto back = usage::AnalysePatterns(h.series, r, ctx.args.patterns,
                                         until - int64_t{ctx.selector.window_days} * 86400);
      if (back.ok()) p.backtest = std::move(*back);
      const UsagePatterns* cur_p = Usable(p.patterns);
      const UsagePatterns* back_p = Usable(p.backtest);
      const UsageSeries& series = h.series;
      auto patterns_for = [cur_p, back_p, &series](int64_t bin) -> const UsagePatterns* {
        const int64_t t = series.UnixOfBin(bin);
        if (cur_p != nullptr && cur_p->trained_until_unix <= t) return cur_p;
        if (back_p != nullptr && back_p->trained_until_unix <= t) return back_p;
        return nullptr;
      };
      p.table = usage::RecentErrorTable(
          s, ctx.downtime, h.train_end - int64_t{ctx.selector.window_days} * kBinsPerDay, s.size(),
          ctx.selector, patterns_for, p.binary_use);
      h.pair[static_cast<int>(r)] = static_cast<int>(pairs.size());
      pairs.push_back(std::move(p));
    }
  }
  std::fprintf(stderr, "%s: trained %zu host-resource pairs in %.1f s\n", kProgram, pairs.size(),
               absl::ToDoubleSeconds(absl::Now() - start));
  if (pairs.empty()) {
    // Every figure below would be empty: say why rather than print zeros.
    int longest = 0;
    for (const Host& h : hosts) longest = std::max(longest, h.days);
    std::fprintf(stderr,
                 "warning: nothing to train: no host has a resource with training data (the "
                 "first %.0f %% of each host's days, rounded down, train: a host needs samples "
                 "on 2 days or more; the longest host here covers %d day%s); every figure below "
                 "is empty ('-', null in the JSON)\n",
                 100 * kTrainFraction, longest, longest == 1 ? "" : "s");
  }

  absl::Time last_line = absl::Now();
  for (size_t i = 0; i < pairs.size(); ++i) {
    Pair& p = pairs[i];
    std::vector<std::pair<std::string, UsagePatterns>> sweep;
    for (size_t c = 0; c < sweep_opts.size(); ++c) {
      auto sp = usage::AnalysePatterns(hosts[p.host].series, p.resource, sweep_opts[c],
                                       hosts[p.host].series.UnixOfBin(p.train_end));
      sweep.emplace_back(sweep_names[c], sp.ok() ? std::move(*sp) : UsagePatterns());
    }
    RunMatrix(ctx, hosts, &p, sweep);
    // Every 20 pairs and at least every 10 s (with --tests 100000 a pair
    // takes tens of seconds).
    if ((i + 1) % 20 == 0 || i + 1 == pairs.size() ||
        absl::Now() - last_line >= absl::Seconds(10)) {
      last_line = absl::Now();
      std::fprintf(stderr, "%s: availability matrix %zu/%zu pairs (%.1f s)\n", kProgram, i + 1,
                   pairs.size(), absl::ToDoubleSeconds(absl::Now() - start));
    }
  }
  const std::vector<SchedTest> sched_all = RunScheduling(ctx, hosts, pairs, false);
  const std::vector<SchedTest> sched_active = RunScheduling(ctx, hosts, pairs, true);
  std::fprintf(stderr, "%s: scheduling %zu + %zu (active) tests (%.1f s)\n", kProgram,
               sched_all.size(), sched_active.size(), absl::ToDoubleSeconds(absl::Now() - start));
  if (!pairs.empty()) {
    size_t tested = 0;
    for (const Pair& p : pairs) tested += p.tests > 0;
    if (tested == 0) {
      std::fprintf(stderr,
                   "warning: no availability test could be drawn: the test period (the days "
                   "after the first %.0f %%) holds no stretch of known data as long as the "
                   "shortest eta (%d min); mu_A is empty ('-', null in the JSON)\n",
                   100 * kTrainFraction, usage::kEtaMinutes.front());
    }
    if (sched_all.empty()) {
      std::fprintf(stderr,
                   "warning: no scheduling test: each needs a pool of %d hosts with CPU data "
                   "over the test hour (%zu hosts here); the scheduling figures are empty ('-', "
                   "null in the JSON)\n",
                   kPoolSize, hosts.size());
    }
  }

  std::vector<const Pair*> all, active;
  for (const Pair& p : pairs) {
    all.push_back(&p);
    if (p.active) active.push_back(&p);
  }
  json out;
  out["trace"] = args.trace;
  out["format"] = matrix ? "availability-matrix" : args.format;
  out["protocol"] = {
      {"train_fraction_of_days", kTrainFraction},
      {"tests_per_cell", args.tests},
      {"alphas", {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}},
      {"eta_minutes", usage::kEtaMinutes},
      {"seed", args.seed},
      {"downtime", usage::DowntimePolicyName(ctx.downtime)},
      {"clusters", ctx.args.patterns.clusters},
      {"linkage", usage::LinkageName(ctx.args.patterns.linkage)},
      {"normalization", usage::NormalizationName(ctx.args.patterns.normalization)},
      {"upa_residual",
       ctx.args.patterns.residual_steps > 0
           ? absl::StrCat("k-step coefficients, k = 1..", ctx.args.patterns.residual_steps)
           : std::string("AR(1), phi^k")},
      {"upa_unestimated_phi", ctx.args.patterns.unestimated_residual_phi},
      {"threshold_answers",
       args.state_answers ? "state: 0/1 resources answer with the more likely state of each bin"
                          : "mean: the forecast value"},
      {"utc_offset_seconds", args.utc_offset_seconds},
      {"scheduling",
       {{"pool", kPoolSize},
        {"n", kChosen},
        {"h_hours", {2, 4, 6}},
        {"equivalence_band", kBand},
        {"resource", "cpu"}}},
      {"active", {{"use_above", kActiveUse}, {"share_of_training_samples", kActiveShare}}},
      {"selector",
       {{"window_days", ctx.selector.window_days},
        {"min_points", ctx.selector.min_points},
        {"step_bins", ctx.selector.step_bins},
        {"error",
         "fraction of wrong answers to the 9 availability tests (alpha "
         "10..90 %) of the eta matching the request's horizon, at each "
         "replay point"}}},
  };
  out["summary"] = Block(all, sched_all, hosts);
  if (!active.empty()) out["summary_active"] = Block(active, sched_active, hosts);
  if (matrix) out["summary_desktops"] = out["summary"];
  json per_host = json::array();
  for (const Pair& p : pairs) {
    const Host& h = hosts[p.host];
    json j = {{"host", h.name},
              {"resource", usage::ResourceName(p.resource)},
              {"active", p.active},
              {"days", h.days},
              {"train_days", h.train_days},
              {"objects", p.patterns.objects},
              {"residual_phi", p.patterns.residual_phi},
              {"residual_pairs", p.patterns.residual_pairs},
              {"binary_use", p.binary_use},
              {"tests", p.tests},
              {"mu_a", p.mu_a},
              {"best_of_answered_by", p.best_of_choice}};
    if (!p.sweep.empty()) j["upa_sweep_mu_a"] = p.sweep;
    per_host.push_back(j);
  }
  out["hosts"] = per_host;
  out["seconds"] = absl::ToDoubleSeconds(absl::Now() - start);

  std::printf("# sojourn-eval usage: %s (%s, down-time %s, %s linkage, k = %d, %s)\n",
              args.trace.c_str(), out["format"].get<std::string>().c_str(),
              usage::DowntimePolicyName(ctx.downtime),
              usage::LinkageName(ctx.args.patterns.linkage), ctx.args.patterns.clusters,
              usage::NormalizationName(ctx.args.patterns.normalization));
  PrintBlock(matrix ? "summary (= summary_desktops)" : "summary", out["summary"]);
  if (out.contains("summary_active")) PrintBlock("summary_active", out["summary_active"]);
  if (!args.json_out.empty()) {
    if (absl::Status st = WriteTextFile(args.json_out, JsonText(out, 2) + "\n"); !st.ok()) {
      std::fprintf(stderr, "%s: --json: %s\n", kProgram, std::string(st.message()).c_str());
      return 2;
    }
  }
  std::fprintf(stderr, "%s: done in %.1f s\n", kProgram,
               absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

EvalCommandRegistrar registrar("usage",
                               "usage forecasts (UPA, last4, persistence, best-of) on a host trace",
                               RunUsage);

}  // namespace
}  // namespace sojourn::eval
